package autotune

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// Candidate is one configuration a tuner tries: a workgroup size and a value
// for each of the program's tunables.
type Candidate struct {
	// WorkgroupSize is the launch's workgroup size; never zero in a search
	// space from Space.
	WorkgroupSize [3]uint32
	// Spec holds one value per tunable.
	Spec ir.SpecMap
}

// String is "wg 16×16×1 bm=4 tk=16".
func (c Candidate) String() string {
	s := fmt.Sprintf("wg %d×%d×%d", c.WorkgroupSize[0], c.WorkgroupSize[1], c.WorkgroupSize[2])
	if p := FormatParams(c.Spec); p != "" {
		s += " " + p
	}
	return s
}

// Record is the autotune record of c, dated at.
func (c Candidate) Record(at string) Record {
	return Record{WorkgroupSize: c.WorkgroupSize, Params: FormatParams(c.Spec), RecordedAt: at}
}

// Sample is what one run of a candidate gave.
type Sample struct {
	// Time is the run's device time when the backend reports one, else the
	// host-measured dispatch time.
	Time time.Duration
	// Device reports whether Time is a device timestamp.
	Device bool
	// Outputs are the run's output buffers, in output order, for the oracle.
	Outputs [][]byte
}

// Runner runs candidates: compile (as often as it likes) and dispatch once.
// A tuner calls it from one goroutine. With outputs set the Sample carries the
// run's outputs for the oracle; without, the runner may leave them where they
// are (Sample.Outputs nil), which spares a timed run the read-back.
type Runner interface {
	Run(ctx context.Context, c Candidate, outputs bool) (Sample, error)
}

// Config says how Tune measures.
type Config struct {
	// Warmup is the number of untimed runs before the timed ones; their
	// outputs are checked too. Zero means 1.
	Warmup int
	// Runs is the number of timed runs; the candidate's time is their median.
	// Zero means 5.
	Runs int
	// Budget bounds the search's wall-clock time: once it is spent, the
	// candidates not yet started are skipped. Zero means no bound. The first
	// candidate, the baseline, always runs.
	Budget time.Duration
	// Check compares a run's outputs with the oracle's: those of a candidate's
	// first run and of its last, the runs a runner is asked to read back; a
	// candidate counts only when both pass. Nil accepts everything (and asks
	// for no outputs).
	Check func(outputs [][]byte) error
	// Progress, when set, is called before each candidate with the number done
	// and the total.
	Progress func(done, total int, c Candidate)
	// Now is the clock for the budget; nil is time.Now.
	Now func() time.Time
}

// Trial is one candidate's outcome.
type Trial struct {
	Candidate Candidate
	// Median is the median time of the timed runs (zero unless OK).
	Median time.Duration
	// Min and Max are the fastest and the slowest timed run (zero unless OK):
	// their difference is the spread NoiseGuard weighs a difference by.
	Min, Max time.Duration
	// Device reports whether the times are device timestamps.
	Device bool
	// Err is why the candidate does not count: a run failed, or a
	// *WrongResultError. Nil when it counts or was skipped.
	Err error
	// Skipped: the budget was spent before the candidate started.
	Skipped bool
}

// OK reports whether the trial counts: it ran and every output passed.
func (t Trial) OK() bool { return !t.Skipped && t.Err == nil }

// WrongResultError is a candidate whose outputs the oracle rejected.
type WrongResultError struct {
	Candidate Candidate
	Err       error
}

func (e *WrongResultError) Error() string {
	return fmt.Sprintf("%s: wrong result: %v", e.Candidate, e.Err)
}

func (e *WrongResultError) Unwrap() error { return e.Err }

// Result is a search's outcome.
type Result struct {
	// Trials are in search order; Trials[0] is the baseline.
	Trials []Trial
	// Best indexes the fastest trial that counts, -1 when none does.
	Best int
}

// Winner returns the fastest trial that counts.
func (r *Result) Winner() (Trial, bool) {
	if r.Best < 0 {
		return Trial{}, false
	}
	return r.Trials[r.Best], true
}

// Speedup is the baseline's median over the winner's, 0 when either did not
// count.
func (r *Result) Speedup() float64 {
	w, ok := r.Winner()
	if !ok || !r.Trials[0].OK() || w.Median <= 0 {
		return 0
	}
	return float64(r.Trials[0].Median) / float64(w.Median)
}

// Counted returns how many trials counted, failed and were skipped.
func (r *Result) Counted() (ok, failed, skipped int) {
	for _, t := range r.Trials {
		switch {
		case t.Skipped:
			skipped++
		case t.Err != nil:
			failed++
		default:
			ok++
		}
	}
	return ok, failed, skipped
}

// ErrNoCandidates is Tune's error for an empty search space.
var ErrNoCandidates = errors.New("no candidates to tune. Fix: give the search at least the program's own configuration")

// Tune runs each candidate in order with r: Warmup untimed runs, then Runs
// timed ones, the first and the last run's outputs checked by cfg.Check, and
// takes the median time. The winner is the fastest candidate whose runs all passed (ties go to
// the earlier one, so the baseline wins a tie). A candidate that fails or
// gives a wrong result is recorded and never wins; only ctx ending stops the
// search early with an error, besides the budget.
func Tune(ctx context.Context, r Runner, cands []Candidate, cfg Config) (*Result, error) {
	if len(cands) == 0 {
		return nil, ErrNoCandidates
	}
	warmup, runs := cfg.Warmup, cfg.Runs
	if warmup <= 0 {
		warmup = 1
	}
	if runs <= 0 {
		runs = 5
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	res := &Result{Best: -1}
	for i, c := range cands {
		if i > 0 && cfg.Budget > 0 && now().Sub(start) >= cfg.Budget {
			res.Trials = append(res.Trials, Trial{Candidate: c, Skipped: true})
			continue
		}
		if cfg.Progress != nil {
			cfg.Progress(i, len(cands), c)
		}
		t := measure(ctx, r, c, warmup, runs, cfg.Check)
		if ctx.Err() != nil {
			return res, fmt.Errorf("tuning stopped after %d of %d candidates: %w", i, len(cands), ctx.Err())
		}
		res.Trials = append(res.Trials, t)
		if t.OK() && (res.Best < 0 || t.Median < res.Trials[res.Best].Median) {
			res.Best = i
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(len(cands), len(cands), Candidate{})
	}
	return res, nil
}

// measure runs one candidate.
func measure(ctx context.Context, r Runner, c Candidate, warmup, runs int, check func([][]byte) error) Trial {
	t := Trial{Candidate: c}
	times := make([]time.Duration, 0, runs)
	device := true
	for i := 0; i < warmup+runs; i++ {
		checked := check != nil && (i == 0 || i == warmup+runs-1)
		s, err := r.Run(ctx, c, checked)
		if err != nil {
			t.Err = fmt.Errorf("%s: %w", c, err)
			return t
		}
		if checked {
			if err := check(s.Outputs); err != nil {
				t.Err = &WrongResultError{Candidate: c, Err: err}
				return t
			}
		}
		if i >= warmup {
			times = append(times, s.Time)
			device = device && s.Device
		}
	}
	slices.Sort(times)
	t.Median = times[len(times)/2]
	if len(times)%2 == 0 {
		t.Median = (times[len(times)/2-1] + times[len(times)/2]) / 2
	}
	t.Min, t.Max = times[0], times[len(times)-1]
	t.Device = device
	return t
}

// Spread is the difference between the trial's slowest and fastest timed run.
func (t Trial) Spread() time.Duration { return t.Max - t.Min }

// NoiseGuard tells whether the winner beats the baseline by more than noise,
// and so is worth recording: its median must be below the baseline's by more
// than the spread of their timed runs, the baseline's min–max range plus the
// winner's, or its slowest run must be faster than the baseline's fastest by
// more than its own range. (One range alone is not enough: the fastest of
// many candidates that differ only by noise has a median below the
// baseline's by about one range.)
// When it is not, the default configuration stands, and why says so: the
// baseline was the fastest, or the winner's lead is within the spread. A
// baseline that did not count (it failed or gave a wrong result) loses to any
// winner. With one timed run per candidate there is no spread, and any lead
// counts. Without a winner it returns false and why is empty.
func (r *Result) NoiseGuard() (beats bool, why string) {
	w, ok := r.Winner()
	if !ok {
		return false, ""
	}
	base := r.Trials[0]
	switch {
	case !base.OK():
		return true, ""
	case r.Best == 0:
		return false, fmt.Sprintf("the baseline (%s, %v) was the fastest candidate", base.Candidate, base.Median)
	}
	lead := base.Median - w.Median
	noise := base.Spread() + w.Spread()
	// A gap between the two ranges wider than the winner's own spread also
	// counts: the baseline's slow outliers (a preempted run) then cannot veto
	// a winner every run of which is far ahead of every baseline run.
	gap := base.Min - w.Max
	if lead <= noise && gap <= w.Spread() {
		return false, fmt.Sprintf("the fastest candidate, %s, leads the baseline (%s) by %v (%v against %v, %.2f×), within the spread of their timed runs (%v): the difference is noise",
			w.Candidate, base.Candidate, lead, w.Median, base.Median, r.Speedup(), noise)
	}
	return true, ""
}

// Space is the search space of p: every workgroup size in wgs times every
// combination of p's tunables' candidates. The first candidate is the
// baseline — the program's own workgroup size with every tunable at its
// default — and the rest follow in a fixed pseudo-random order, so a budget
// that stops the search early has sampled the whole space rather than one
// corner of it. Sizes in wgs equal to the program's are not repeated.
func Space(p *ir.Program, wgs [][3]uint32) []Candidate {
	sizes := [][3]uint32{p.WorkgroupSize}
	for _, wg := range wgs {
		if !slices.Contains(sizes, wg) {
			sizes = append(sizes, wg)
		}
	}
	specs := []ir.SpecMap{{}}
	for _, d := range p.Tunables() {
		values := []ir.Literal{d.Default}
		for _, c := range d.Candidates {
			if c.Bits != d.Default.Bits {
				values = append(values, c)
			}
		}
		var next []ir.SpecMap
		for _, s := range specs {
			for _, l := range values {
				next = append(next, withValue(s, d.Name, l))
			}
		}
		specs = next
	}
	var out []Candidate
	for _, wg := range sizes {
		for _, s := range specs {
			out = append(out, Candidate{WorkgroupSize: wg, Spec: s})
		}
	}
	rest := out[1:]
	rng := rand.New(rand.NewPCG(uint64(len(out)), 0x6b696c6e))
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return out
}

// withValue returns a copy of s with name set to l.
func withValue(s ir.SpecMap, name string, l ir.Literal) ir.SpecMap {
	var m ir.SpecMap
	for _, n := range s.Names() {
		v, _ := s.Get(n)
		m.Set(n, v)
	}
	var v ir.SpecValue
	switch l.Type {
	case ir.U32:
		v = ir.SpecU32(l.Bits)
	case ir.I32:
		v = ir.SpecI32(l.I32())
	case ir.F32:
		v = ir.SpecF32(l.F32())
	default:
		v = ir.SpecBool(l.Bool())
	}
	m.Set(name, v)
	return m
}

// WorkgroupSizes proposes workgroup sizes for p of at most maxInvocations
// invocations (0: ir.MaxInvocations) on the axes p uses (those of its own size
// above 1): powers of two from 32 to 1024 for a one-axis program, and x×y with
// x, y powers of two from 4 to 64 and at least 64 invocations for a two-axis
// one. A program using the third axis gets its own size only.
func WorkgroupSizes(p *ir.Program, maxInvocations uint32) [][3]uint32 {
	if maxInvocations == 0 || maxInvocations > ir.MaxInvocations {
		maxInvocations = ir.MaxInvocations
	}
	wg := p.WorkgroupSize
	var out [][3]uint32
	switch {
	case wg[2] > 1:
		return [][3]uint32{wg}
	case wg[1] > 1:
		for y := uint32(4); y <= 64; y *= 2 {
			for x := uint32(4); x <= 64; x *= 2 {
				if x*y >= 64 && x*y <= maxInvocations {
					out = append(out, [3]uint32{x, y, 1})
				}
			}
		}
	default:
		for x := uint32(32); x <= maxInvocations; x *= 2 {
			out = append(out, [3]uint32{x, 1, 1})
		}
	}
	return out
}

// Describe is a one-line summary of a result: how many candidates counted,
// failed and were skipped, the winner and its speedup over the baseline.
func (r *Result) Describe() string {
	ok, failed, skipped := r.Counted()
	var b strings.Builder
	fmt.Fprintf(&b, "%d candidates: %d measured, %d rejected, %d skipped by the budget", len(r.Trials), ok, failed, skipped)
	if w, found := r.Winner(); found {
		fmt.Fprintf(&b, "; winner %s at %v", w.Candidate, w.Median)
		if s := r.Speedup(); s > 0 {
			fmt.Fprintf(&b, ", %.2f× the baseline", s)
		}
	}
	return b.String()
}
