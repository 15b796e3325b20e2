package certify

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pgo"
)

// Options say what to certify and how.
type Options struct {
	// Kernels are corpus kernel names or op ids; empty means every kernel.
	Kernels []string
	// Size is the problem size, or LargestSize.
	Size int
	// Seed draws the inputs.
	Seed uint64
	// Timed is the number of timed dispatches per backend (0: pgo.DefaultTimed).
	Timed int
	// Classes is the number of size classes per kernel (0: DefaultClasses):
	// Size, Size/16, Size/256, … while at least 1. One class records a plain
	// route, as before size classes.
	Classes int
}

// DefaultClasses is the number of size classes certify measures by default.
const DefaultClasses = 3

// classStep is the ratio of neighbouring class sizes.
const classStep = 16

// ClassSizes returns the problem sizes of n classes up to largest, log-spaced
// by classStep, ascending and distinct; sizes below 1 are dropped, so
// largest 0 gives [0] alone.
func ClassSizes(largest, n int) []int {
	out := []int{largest}
	for s := largest / classStep; len(out) < n && s >= 1; s /= classStep {
		out = append(out, s)
	}
	slices.Reverse(out)
	return out
}

// LargestSize as Options.Size certifies each kernel at its largest standard
// size.
const LargestSize = -1

// Exclusion is a backend left out of one op's certification, and why.
type Exclusion struct {
	Backend string
	Reason  string
}

// Result is one kernel's certification.
type Result struct {
	// Kernel is the corpus name, Op the program name the route is stored under.
	Kernel string
	Op     string
	// Size is the largest size measured, Sizes every class's size, ascending;
	// SizeOf maps a class's launch bytes back to its size.
	Size   int
	Sizes  []int
	SizeOf map[int64]int
	// Route is the recorded route; zero when Err is set.
	Route pgo.Route
	// Excluded are the backends whose outputs were wrong or that failed to run.
	Excluded []Exclusion
	// Err says why no route was recorded.
	Err error
}

// Progress is told after each step: done of total steps, and what ran.
type Progress func(done, total int, what string)

// Candidates returns the backends certification measures: every ready,
// dispatching adapter that is no reference oracle (routing never picks an
// oracle, so measuring one would only waste a route).
func Candidates(ctx context.Context, h *host.Host) ([]string, error) {
	rows, err := h.Survey(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rows {
		if r.Status == host.StatusReady && r.Dispatches && !r.ReferenceOracle {
			names = append(names, r.Name())
		}
	}
	if len(names) == 0 {
		dir, _ := h.PluginDir()
		return nil, fmt.Errorf("no backend to certify in %s: routes only ever name ready, dispatching backends that are not reference oracles (cpu-ref). Fix: install a GPU backend plugin (make build puts kiln-backend-vulkan in bin/plugins); `kiln doctor` shows why a backend is not ready", dir)
	}
	return names, nil
}

// Select returns the corpus kernels named (all of them when names is empty).
func Select(names []string) ([]kernels.Kernel, error) {
	if len(names) == 0 {
		return kernels.All(), nil
	}
	var out []kernels.Kernel
	for _, n := range names {
		k, ok := kernels.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("no corpus kernel %q. Fix: pick one of the names `kiln run --list` prints", n)
		}
		if !slices.ContainsFunc(out, func(o kernels.Kernel) bool { return o.Name == k.Name }) {
			out = append(out, k)
		}
	}
	return out, nil
}

// Run certifies each kernel on the backends named at each of its size classes
// (ClassSizes): every backend first runs the kernel once per size and is
// checked against the kernel's Go reference (a backend with wrong outputs at
// any size must never win a route), then pgo.Table.CertifyClasses times the
// ones that passed at every size and records the fastest of each class in
// table. Run does not save the table.
func Run(ctx context.Context, h *host.Host, table *pgo.Table, backends []string, ks []kernels.Kernel, opts Options, progress Progress) ([]Result, error) {
	timers := map[string]*host.PGOCandidate{}
	defer func() {
		for _, t := range timers {
			t.Close(context.WithoutCancel(ctx))
		}
	}()
	for _, name := range backends {
		b, err := h.Acquire(ctx, name)
		if err != nil {
			return nil, err
		}
		timers[name] = host.NewPGOCandidate(b)
	}
	classes := opts.Classes
	if classes <= 0 {
		classes = DefaultClasses
	}
	type plan struct {
		k     kernels.Kernel
		sizes []int
	}
	var plans []plan
	total, done := 0, 0
	for _, k := range ks {
		n := max(opts.Size, 0)
		if opts.Size == LargestSize && len(k.Sizes) > 0 {
			n = slices.Max(k.Sizes)
		}
		p := plan{k, ClassSizes(n, classes)}
		plans = append(plans, p)
		total += len(p.sizes)*len(backends) + 1
	}
	step := func(what string) {
		done++
		if progress != nil {
			progress(done, total, what)
		}
	}
	var results []Result
	for _, pl := range plans {
		k := pl.k
		r := Result{Kernel: k.Name, Op: k.OpID, Size: pl.sizes[len(pl.sizes)-1], Sizes: pl.sizes, SizeOf: map[int64]int{}}
		wrong := map[string]bool{}
		var points []pgo.Point
		for _, n := range pl.sizes {
			job := runs.KernelJob(k, n, opts.Seed, "")
			r.Op = job.Program.Name
			want := k.Reference(job.Case)
			for _, name := range backends {
				l := job.Launch
				l.Backend = name
				res, err := h.Dispatch(ctx, job.Program, l)
				if err == nil {
					err = k.Check(res.Outputs, want)
				}
				if err != nil && !wrong[name] {
					wrong[name] = true
					r.Excluded = append(r.Excluded, Exclusion{Backend: name, Reason: fmt.Sprintf("size %d: %v", n, err)})
				}
				step(fmt.Sprintf("%s size %d on %s", k.Name, n, name))
				if ctx.Err() != nil {
					return results, ctx.Err()
				}
			}
			// Timings use the program's own workgroup size, so an autotune
			// record cannot change the launch the grid was computed for.
			wg := job.Case.WorkgroupSize
			if wg == ([3]uint32{}) {
				wg = job.Program.WorkgroupSize
			}
			pt := pgo.Point{Inputs: job.Case.Inputs, Launch: pgo.Launch{
				Grid: job.Case.Grid, OutputCounts: job.Case.OutputCounts, Spec: job.Case.Spec, WorkgroupSize: wg,
				Uniforms: job.Case.Uniforms,
			}}
			points = append(points, pt)
			r.SizeOf[pt.Bytes()] = n
		}
		var passed []pgo.Candidate
		for _, name := range backends {
			if !wrong[name] {
				passed = append(passed, timers[name])
			}
		}
		if len(passed) == 0 {
			r.Err = fmt.Errorf("no backend produced the right outputs for %s at sizes %v, so no route was recorded. Fix: see why each backend was excluded, and report wrong outputs to the backend's author", k.Name, pl.sizes)
		} else {
			r.Route, r.Err = table.CertifyClasses(ctx, r.Op, k.Program(), points, pgo.Config{Timed: opts.Timed}, passed)
		}
		step(fmt.Sprintf("%s timed", k.Name))
		results = append(results, r)
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}
	return results, nil
}

// Failed reports whether any kernel got no route.
func Failed(results []Result) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return r.Err != nil })
}

// LoadTable loads the table at path for certification. A table of a newer
// schema, or one that cannot be read, is an error: certification never
// overwrites it. A malformed table gives a fresh table and, as malformed, the
// load error; the caller fills the fresh table with Run and saves it with
// pgo.Table.SaveRegenerating, which replaces the file only when it is still
// malformed once the save holds its lock, and otherwise merges into it.
func LoadTable(path string) (table *pgo.Table, malformed, err error) {
	t, err := pgo.Load(path)
	if err == nil {
		return t, nil, nil
	}
	var bad *pgo.MalformedError
	if errors.As(err, &bad) {
		return pgo.New(path), err, nil
	}
	return nil, nil, err
}
