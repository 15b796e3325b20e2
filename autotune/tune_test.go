package autotune

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// fixtureRunner runs candidates with known costs: cost gives each candidate's
// time and whether its output is right; calls counts the runs.
type fixtureRunner struct {
	cost  func(c Candidate) (time.Duration, bool, error)
	calls int
}

func (f *fixtureRunner) Run(_ context.Context, c Candidate, outputs bool) (Sample, error) {
	f.calls++
	d, right, err := f.cost(c)
	if err != nil {
		return Sample{}, err
	}
	if !outputs {
		return Sample{Time: d, Device: true}, nil
	}
	out := []byte{1}
	if !right {
		out = []byte{2}
	}
	return Sample{Time: d, Device: true, Outputs: [][]byte{out}}, nil
}

// lastRunRunner reads outputs back only when asked, counting the reads, and
// gives a wrong output on the run numbered wrongAt of each candidate (from 0).
type lastRunRunner struct {
	wrongAt     int
	runs, reads map[string]int
}

func (r *lastRunRunner) Run(_ context.Context, c Candidate, outputs bool) (Sample, error) {
	run := r.runs[c.String()]
	r.runs[c.String()]++
	if !outputs {
		return Sample{Time: time.Millisecond, Device: true}, nil
	}
	r.reads[c.String()]++
	out := []byte{1}
	if run == r.wrongAt {
		out = []byte{2}
	}
	return Sample{Time: time.Millisecond, Device: true, Outputs: [][]byte{out}}, nil
}

// TestTuneChecksTheFirstAndLastRuns: a runner is asked for the outputs of a
// candidate's first and last runs only (the timed runs between stay on the
// device), a result wrong on either is rejected, and without a check no
// outputs are asked for.
func TestTuneChecksTheFirstAndLastRuns(t *testing.T) {
	cands := Space(tunableProgram(), nil)[:3]
	cfg := Config{Warmup: 1, Runs: 5, Check: checkOne}
	for _, wrongAt := range []int{0, 5} {
		r := &lastRunRunner{wrongAt: wrongAt, runs: map[string]int{}, reads: map[string]int{}}
		res, err := Tune(context.Background(), r, cands, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range res.Trials {
			var wrong *WrongResultError
			if !errors.As(tr.Err, &wrong) {
				t.Errorf("wrong on run %d: %s counted (%v)", wrongAt, tr.Candidate, tr.Err)
			}
		}
		if _, ok := res.Winner(); ok {
			t.Errorf("wrong on run %d: a winner", wrongAt)
		}
	}
	r := &lastRunRunner{wrongAt: 3, runs: map[string]int{}, reads: map[string]int{}}
	if _, err := Tune(context.Background(), r, cands, cfg); err != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		if n, reads := r.runs[c.String()], r.reads[c.String()]; n != 6 || reads != 2 {
			t.Errorf("%s: %d runs with %d read back, want 6 and 2 (the first and the last)", c, n, reads)
		}
	}
	cfg.Check = nil
	r = &lastRunRunner{wrongAt: -1, runs: map[string]int{}, reads: map[string]int{}}
	if _, err := Tune(context.Background(), r, cands, cfg); err != nil {
		t.Fatal(err)
	}
	if len(r.reads) != 0 {
		t.Errorf("without a check the tuner asked for outputs: %v", r.reads)
	}
}

func checkOne(outputs [][]byte) error {
	if outputs[0][0] != 1 {
		return errors.New("output differs from the oracle's")
	}
	return nil
}

// tunableProgram is a 1-D program with tunables epi {1, 2, 4, 8} and
// unroll {1, 4}.
func tunableProgram() *ir.Program {
	b := ir.NewBuilder("t.tune", 64, 1, 1)
	epi := b.Tunable("epi", ir.U32, ir.LitU32(1), ir.LitU32(1), ir.LitU32(2), ir.LitU32(4), ir.LitU32(8))
	unroll := b.Tunable("unroll", ir.U32, ir.LitU32(4), ir.LitU32(1), ir.LitU32(4))
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.GlobalID(0), ir.Add(epi, unroll))
	return b.MustBuild()
}

func param(c Candidate, name string) uint32 {
	v, _ := c.Spec.Get(name)
	return v.Bits()
}

func TestSpaceIsEveryCombinationBaselineFirst(t *testing.T) {
	p := tunableProgram()
	wgs := [][3]uint32{{32, 1, 1}, {64, 1, 1}, {128, 1, 1}}
	cands := Space(p, wgs)
	if len(cands) != 3*4*2 {
		t.Fatalf("%d candidates, want 24", len(cands))
	}
	if c := cands[0]; c.WorkgroupSize != p.WorkgroupSize || param(c, "epi") != 1 || param(c, "unroll") != 4 {
		t.Fatalf("first candidate %v is not the program's defaults", c)
	}
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c.String()] {
			t.Fatalf("%v appears twice", c)
		}
		seen[c.String()] = true
	}
	for _, wg := range wgs {
		for _, epi := range []uint32{1, 2, 4, 8} {
			for _, unroll := range []uint32{1, 4} {
				s := fmt.Sprintf("wg %d×1×1 epi=%d unroll=%d", wg[0], epi, unroll)
				if !seen[s] {
					t.Errorf("%s is missing", s)
				}
			}
		}
	}
	if again := Space(p, wgs); fmt.Sprint(again) != fmt.Sprint(cands) {
		t.Fatal("Space's order is not deterministic")
	}
}

func TestWorkgroupSizes(t *testing.T) {
	one := tunableProgram()
	got := WorkgroupSizes(one, 256)
	if fmt.Sprint(got) != "[[32 1 1] [64 1 1] [128 1 1] [256 1 1]]" {
		t.Errorf("1-D sizes up to 256: %v", got)
	}
	b := ir.NewBuilder("t.2d", 16, 16, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.GlobalID(0), ir.LitU32(1))
	for _, wg := range WorkgroupSizes(b.MustBuild(), 512) {
		if n := wg[0] * wg[1] * wg[2]; n > 512 || n < 64 || wg[2] != 1 || wg[1] < 4 {
			t.Errorf("2-D size %v", wg)
		}
	}
}

// The tuner picks the fastest candidate, by median, from fixture costs; a
// faster candidate whose output is wrong, or whose run fails, never wins.
func TestTunePicksTheFastestCorrectCandidate(t *testing.T) {
	p := tunableProgram()
	cands := Space(p, [][3]uint32{{32, 1, 1}, {128, 1, 1}})
	cost := func(c Candidate) (time.Duration, bool, error) {
		d := time.Duration(1000*c.WorkgroupSize[0]/param(c, "epi")+param(c, "unroll")+c.WorkgroupSize[0]) * time.Microsecond
		switch {
		case c.WorkgroupSize[0] == 32 && param(c, "epi") == 8: // the fastest, but wrong
			return d / 100, false, nil
		case c.WorkgroupSize[0] == 128 && param(c, "epi") == 8 && param(c, "unroll") == 1: // faster still, but fails
			return time.Nanosecond, true, errors.New("device lost")
		}
		return d, true, nil
	}
	r := &fixtureRunner{cost: cost}
	res, err := Tune(context.Background(), r, cands, Config{Warmup: 1, Runs: 3, Check: checkOne})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := res.Winner()
	if !ok {
		t.Fatal("no winner")
	}
	// Among the correct ones: wg 32, epi 4, unroll 1 costs 8000+1+32 µs; the
	// next, wg 64, epi 8, unroll 1, 8000+1+64; the baseline 64000+4+64.
	if w.Candidate.String() != "wg 32×1×1 epi=4 unroll=1" {
		t.Fatalf("winner %v, want wg 32×1×1 epi=4 unroll=1\n%s", w.Candidate, res.Describe())
	}
	if !w.Device || w.Median != 8033*time.Microsecond {
		t.Fatalf("winner's median %v (device %v)", w.Median, w.Device)
	}
	var wrong *WrongResultError
	rejected := 0
	for _, tr := range res.Trials {
		if tr.Err != nil {
			rejected++
		}
		if param(tr.Candidate, "epi") == 8 && tr.Candidate.WorkgroupSize[0] == 32 && !errors.As(tr.Err, &wrong) {
			t.Errorf("%v: err %v, want a WrongResultError", tr.Candidate, tr.Err)
		}
	}
	if rejected != 3 {
		t.Errorf("%d rejected, want 3 (two wrong, one failing)", rejected)
	}
	if want := float64(64068) / 8033; res.Speedup() != want {
		t.Errorf("speedup %v, want %v", res.Speedup(), want)
	}
}

// A wrong result is caught on any run, not only the first: a candidate whose
// third run goes wrong does not count.
func TestTuneChecksEveryRun(t *testing.T) {
	p := tunableProgram()
	runs := map[string]int{}
	cost := func(c Candidate) (time.Duration, bool, error) {
		runs[c.String()]++
		if param(c, "epi") == 2 {
			return time.Microsecond, runs[c.String()] < 3, nil
		}
		return time.Millisecond, true, nil
	}
	res, err := Tune(context.Background(), &fixtureRunner{cost: cost}, Space(p, nil), Config{Warmup: 1, Runs: 5, Check: checkOne})
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := res.Winner(); param(w.Candidate, "epi") == 2 {
		t.Fatalf("a candidate that went wrong on its third run won: %s", res.Describe())
	}
}

func TestTuneMedianNotMean(t *testing.T) {
	p := tunableProgram()
	n := 0
	cost := func(c Candidate) (time.Duration, bool, error) {
		n++
		if param(c, "epi") == 2 && n%4 == 0 {
			return time.Second, true, nil // one outlier among its runs
		}
		if param(c, "epi") == 2 {
			return time.Microsecond, true, nil
		}
		return time.Millisecond, true, nil
	}
	res, _ := Tune(context.Background(), &fixtureRunner{cost: cost}, Space(p, nil), Config{Warmup: 1, Runs: 3, Check: checkOne})
	if w, _ := res.Winner(); param(w.Candidate, "epi") != 2 || w.Median != time.Microsecond {
		t.Fatalf("winner %v at %v; the median must ignore one outlier", w.Candidate, w.Median)
	}
}

func TestTuneBudgetSkipsTheRestButRunsTheBaseline(t *testing.T) {
	p := tunableProgram()
	cands := Space(p, nil)
	clock := time.Unix(0, 0)
	r := &fixtureRunner{cost: func(Candidate) (time.Duration, bool, error) {
		clock = clock.Add(time.Second)
		return time.Millisecond, true, nil
	}}
	// Each candidate takes 2 s of fake clock (1 warm-up + 1 timed run).
	res, err := Tune(context.Background(), r, cands, Config{Warmup: 1, Runs: 1, Budget: 5 * time.Second, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	ok, _, skipped := res.Counted()
	if ok != 3 || skipped != len(cands)-3 || r.calls != 6 {
		t.Fatalf("%d measured, %d skipped, %d runs; want 3 measured within a 5 s budget", ok, skipped, r.calls)
	}
	res, _ = Tune(context.Background(), r, cands, Config{Budget: time.Nanosecond, Now: func() time.Time { return clock }})
	if !res.Trials[0].OK() {
		t.Fatal("the baseline must run whatever the budget")
	}
}

func TestTuneStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &fixtureRunner{cost: func(Candidate) (time.Duration, bool, error) {
		cancel()
		return 0, false, context.Canceled
	}}
	if _, err := Tune(ctx, r, Space(tunableProgram(), nil), Config{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := Tune(context.Background(), r, nil, Config{}); !errors.Is(err, ErrNoCandidates) {
		t.Fatalf("empty space: %v", err)
	}
}

func TestParamsRoundTrip(t *testing.T) {
	p := tunableProgram()
	for _, c := range Space(p, nil) {
		s := FormatParams(c.Spec)
		back, err := ParseParams(p, s)
		if err != nil || FormatParams(back) != s || back.CacheHash() != c.Spec.CacheHash() {
			t.Fatalf("%q: %v, back %q", s, err, FormatParams(back))
		}
	}
	for _, bad := range []string{"epi", "epi=", "unroll=1 epi=2", "epi=1 epi=2", "1x=2", "epi=1  unroll=2", "epi=a=b"} {
		if err := checkParams(bad); err == nil {
			t.Errorf("checkParams(%q) accepted it", bad)
		}
	}
	for in, want := range map[string]string{"nope=1": "no parameter", "epi=-1": "not a u32"} {
		if _, err := ParseParams(p, in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseParams(%q) = %v, want %q", in, err, want)
		}
	}
}

func TestBatcherSavesPerBatch(t *testing.T) {
	path := storePath(t)
	st := load(t, path)
	b := NewBatcher(st, 10)
	ctx := context.Background()
	for i := range 25 {
		if err := b.Put(ctx, NewKey(sampleSpec(uint64(i)), "vulkan/fp"), Record{WorkgroupSize: [3]uint32{64, 1, 1}, Params: "epi=2"}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Saves() != 2 {
		t.Fatalf("%d saves after 25 puts in batches of 10, want 2", b.Saves())
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Saves() != 3 {
		t.Fatalf("%d saves after Flush, want 3", b.Saves())
	}
	if again := load(t, path); again.Len() != 25 {
		t.Fatalf("%d records on disk, want 25", again.Len())
	}
}
