package autotune

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// noiseRunner times every candidate as base plus uniform noise in
// [-jitter, +jitter): the candidates do not differ, only the runs do. A
// candidate fast names takes half of base instead.
type noiseRunner struct {
	rng          *rand.Rand
	base, jitter time.Duration
	fast         string
}

func (r *noiseRunner) Run(_ context.Context, c Candidate, outputs bool) (Sample, error) {
	d := r.base
	if c.String() == r.fast {
		d /= 2
	}
	d += time.Duration(r.rng.Int64N(int64(2*r.jitter))) - r.jitter
	s := Sample{Time: d, Device: true}
	if outputs {
		s.Outputs = [][]byte{{1}}
	}
	return s, nil
}

// noiseSpace is tunableProgram's search space over four workgroup sizes: 32
// candidates, so pure noise gives one of them a lower median than the
// baseline's almost every time.
func noiseSpace() []Candidate {
	return Space(tunableProgram(), [][3]uint32{{32, 1, 1}, {128, 1, 1}, {256, 1, 1}})
}

// TestNoiseGuardRefusesAWinnerOfPureNoise: when every candidate takes the same
// time up to ±10% of noise, the fastest median beats the baseline's only by
// noise, and the guard keeps the default, saying why; over many searches it
// never lets one through.
func TestNoiseGuardRefusesAWinnerOfPureNoise(t *testing.T) {
	cands := noiseSpace()
	fastestNotBaseline := 0
	for seed := range uint64(50) {
		r := &noiseRunner{rng: rand.New(rand.NewPCG(seed, 7)), base: time.Millisecond, jitter: 100 * time.Microsecond}
		res, err := Tune(context.Background(), r, cands, Config{Warmup: 1, Runs: 5, Check: checkOne})
		if err != nil {
			t.Fatal(err)
		}
		if res.Best != 0 {
			fastestNotBaseline++
		}
		beats, why := res.NoiseGuard()
		if beats {
			w, _ := res.Winner()
			t.Fatalf("seed %d: pure noise passed the guard: %s at %v (runs %v..%v) against the baseline's %v (%v..%v)",
				seed, w.Candidate, w.Median, w.Min, w.Max, res.Trials[0].Median, res.Trials[0].Min, res.Trials[0].Max)
		}
		if why == "" || !strings.Contains(why, "baseline") {
			t.Fatalf("seed %d: the guard kept the default without saying why: %q", seed, why)
		}
	}
	// The guard is what kept the default: noise alone crowned another
	// candidate in most searches.
	if fastestNotBaseline < 40 {
		t.Fatalf("only %d of 50 noisy searches had a fastest candidate other than the baseline", fastestNotBaseline)
	}
}

// TestNoiseGuardPassesAClearWinner: a candidate twice as fast as the others,
// under the same noise, passes the guard every time.
func TestNoiseGuardPassesAClearWinner(t *testing.T) {
	cands := noiseSpace()
	fast := cands[len(cands)/2].String()
	for seed := range uint64(50) {
		r := &noiseRunner{rng: rand.New(rand.NewPCG(seed, 7)), base: time.Millisecond, jitter: 100 * time.Microsecond, fast: fast}
		res, err := Tune(context.Background(), r, cands, Config{Warmup: 1, Runs: 5, Check: checkOne})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := res.Winner()
		beats, why := res.NoiseGuard()
		if !beats || why != "" || w.Candidate.String() != fast {
			t.Fatalf("seed %d: winner %s, guard %v %q; want %s through the guard", seed, w.Candidate, beats, why, fast)
		}
	}
}

// The baseline as the fastest keeps the default; a baseline that gave a
// wrong result loses to any winner; with one timed run there is no spread and
// any lead counts; without a winner there is nothing to guard.
func TestNoiseGuardEdges(t *testing.T) {
	cands := Space(tunableProgram(), nil)[:3]
	base := cands[0].String()
	run := func(runs int, cost func(c Candidate) (time.Duration, bool, error)) *Result {
		t.Helper()
		res, err := Tune(context.Background(), &fixtureRunner{cost: cost}, cands, Config{Runs: runs, Check: checkOne})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run(5, func(c Candidate) (time.Duration, bool, error) {
		if c.String() == base {
			return time.Millisecond, true, nil
		}
		return 2 * time.Millisecond, true, nil
	})
	if beats, why := res.NoiseGuard(); beats || !strings.Contains(why, "the baseline") || !strings.Contains(why, "was the fastest") {
		t.Errorf("baseline fastest: guard %v %q", beats, why)
	}
	res = run(5, func(c Candidate) (time.Duration, bool, error) {
		return 2 * time.Millisecond, c.String() != base, nil
	})
	if beats, why := res.NoiseGuard(); !beats || why != "" {
		t.Errorf("wrong baseline: guard %v %q", beats, why)
	}
	res = run(1, func(c Candidate) (time.Duration, bool, error) {
		if c.String() == base {
			return time.Millisecond + time.Nanosecond, true, nil
		}
		return time.Millisecond, true, nil
	})
	if beats, why := res.NoiseGuard(); !beats || why != "" {
		t.Errorf("one timed run, a 1 ns lead: guard %v %q", beats, why)
	}
	res = run(5, func(Candidate) (time.Duration, bool, error) { return time.Millisecond, false, nil })
	if beats, why := res.NoiseGuard(); beats || why != "" {
		t.Errorf("no winner: guard %v %q", beats, why)
	}
}

// TestNoiseGuardSurvivesASlowBaselineRun: one preempted baseline run widens
// the baseline's range past the winner's lead, but every run of the winner is
// far ahead of every baseline run, so the winner is recorded; the same
// winner with a run that overlaps the baseline's is not.
func TestNoiseGuardSurvivesASlowBaselineRun(t *testing.T) {
	cands := Space(tunableProgram(), nil)[:2]
	base := cands[0].String()
	guard := func(winnerSlowest time.Duration) (bool, string) {
		t.Helper()
		runs := map[string]int{}
		r := &fixtureRunner{cost: func(c Candidate) (time.Duration, bool, error) {
			i := runs[c.String()]
			runs[c.String()]++
			if c.String() == base {
				if i == 3 {
					return 18 * time.Millisecond, true, nil // the preempted run
				}
				return 2800*time.Microsecond + time.Duration(i)*10*time.Microsecond, true, nil
			}
			if i == 3 {
				return winnerSlowest, true, nil
			}
			return 48 * time.Microsecond, true, nil
		}}
		res, err := Tune(context.Background(), r, cands, Config{Warmup: 1, Runs: 5, Check: checkOne})
		if err != nil {
			t.Fatal(err)
		}
		return res.NoiseGuard()
	}
	if beats, why := guard(50 * time.Microsecond); !beats || why != "" {
		t.Errorf("a winner 58x ahead in every run, against a baseline with one 18 ms run: guard %v %q", beats, why)
	}
	if beats, why := guard(3 * time.Millisecond); beats || why == "" {
		t.Errorf("a winner whose slowest run overlaps the baseline's: guard %v %q", beats, why)
	}
}
