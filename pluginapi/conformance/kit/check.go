package kit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Options tune Check (and conformance.Run). The zero value runs every corpus
// kernel at its own sizes on adapter 0.
type Options struct {
	// Adapter is the adapter to run on.
	Adapter int
	// Kernels names the corpus kernels to run (Name or OpID); empty runs all.
	Kernels []string
	// Sizes replaces every kernel's own problem sizes when set.
	Sizes []int
	// Seed seeds the random inputs; the same seed gives the same inputs.
	Seed uint64
	// Timeout bounds each compile and each dispatch; zero means two minutes.
	Timeout time.Duration
	// MaxSize, when set, skips the corpus sizes above it; conformance.Run sets
	// 4096 under go test -short.
	MaxSize int
}

const defaultTimeout = 2 * time.Minute

// T is what the kit needs of a test: the methods of *testing.T it calls, with
// Run taking a func of T. Check runs the kit on any T, so that a program can
// run it without package testing (`kiln conformance` runs it on an installed
// plugin over the wire); conformance.Run hands it a *testing.T.
//
// As with *testing.T, Fatalf and Skipf end the (sub)test: they must not return
// (*testing.T calls runtime.Goexit, so an implementation runs each subtest on
// a goroutine of its own and does the same); Errorf marks it failed and goes
// on; Cleanup functions run when the (sub)test and its subtests have ended,
// last added first; Run runs f as the named subtest, waits for it and reports
// whether it passed (or was skipped).
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(f func())
	Run(name string, f func(t T)) bool
}

// Check checks b against the CPU reference interpreter, in-process, on t, one
// subtest per part, table and case:
//
//   - "describe": the description is usable (an id, adapters indexed 0..n-1,
//     unavailable adapters explain themselves with a "Fix:", the "ir.v1" feature);
//   - "contract": dispatching a pipeline that was never compiled, or one that was
//     released, fails with an error instead of running or crashing, and a cached
//     blob the backend cannot use is ignored;
//   - "semantics": the semantics tables, one subtest per table and case
//     ("semantics/cast/f32.i32"): small programs that exercise every rule of
//     docs/design.md, "The program (IR)", on its edge values (operators and casts,
//     also on literal operands; memory and bounds; control flow; atomics;
//     uniforms; subgroups), compared with the reference by verify.Outputs;
//   - one subtest per corpus kernel and size ("vector_add/size=257"): compile,
//     dispatch on random inputs, and verify.Outputs against the reference; when
//     Compile returns a blob, compiling again from that blob must give the same
//     results.
//
// The reference runs in strict mode. A program that runs with any subgroup size
// passes when its outputs match the reference at one of the sizes its workgroup
// allows. A program using subgroups that the backend rejects at compile
// (pluginapi.RejectedError) is skipped with the reason, unless the adapter's
// profile claims what it needs (supports_subgroup_ops, has_subgroup_shuffle for
// shuffles and broadcasts, subgroup_size for a required size): then the rejection
// fails. A backend that does not dispatch is checked by "describe" only. Check
// calls b through pluginapi.Checked, as Serve does.
func Check(t T, b pluginapi.Backend, opts Options) {
	t.Helper()
	// The kit calls the backend as Serve does: behind the SDK's checks, which
	// the backend may rely on (docs/design.md, "Checks in one place").
	b = pluginapi.Checked(b)
	ctx := context.Background()
	desc, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("conformance: Describe: %v", err)
	}
	if desc == nil {
		t.Fatalf("conformance: Describe returned no description and no error")
	}
	t.Run("describe", func(t T) { checkDescription(t, desc) })
	if !desc.Dispatches {
		t.Logf("conformance: backend %q does not dispatch; only its description was checked", desc.ID)
		return
	}
	if opts.Adapter < 0 || opts.Adapter >= len(desc.Adapters) {
		t.Fatalf("conformance: backend %q has %d adapters, Options.Adapter is %d", desc.ID, len(desc.Adapters), opts.Adapter)
	}
	if a := desc.Adapters[opts.Adapter]; !a.Available {
		t.Skipf("conformance: adapter %d (%s) of backend %q is unavailable: %s", a.Index, a.Name, desc.ID, a.Reason)
	}
	if err := b.Open(ctx, opts.Adapter); err != nil {
		t.Fatalf("conformance: Open(%d): %v", opts.Adapter, err)
	}
	ks, err := selectKernels(opts.Kernels)
	if err != nil || len(ks) == 0 {
		t.Fatalf("conformance: no kernels to run: %v", err)
	}
	r := &runner{b: b, opts: opts, profile: desc.Adapters[opts.Adapter].Profile}
	if r.opts.Timeout <= 0 {
		r.opts.Timeout = defaultTimeout
	}
	// The contract is about handles, so it uses one plain kernel whatever
	// Options.Kernels selects.
	plain, _ := kernels.Lookup("vector_add")
	t.Run("contract", func(t T) { r.contract(t, plain) })
	t.Run("semantics", r.semantics)
	for _, k := range ks {
		t.Run(k.Name, func(t T) {
			for _, size := range r.sizes(k) {
				t.Run(fmt.Sprintf("size=%d", size), func(t T) { r.kernelCase(t, k, size) })
			}
		})
	}
}

func checkDescription(t T, d *pluginapi.Description) {
	if d.ID == "" {
		t.Errorf("the description has no ID")
	}
	hasIR := false
	for _, f := range d.Features {
		hasIR = hasIR || f == "ir.v1"
	}
	if !hasIR {
		t.Errorf("features %q lack \"ir.v1\"", d.Features)
	}
	if d.Dispatches && len(d.Adapters) == 0 {
		t.Errorf("the backend dispatches but has no adapters")
	}
	for i, a := range d.Adapters {
		if a.Index != i {
			t.Errorf("adapter %d (%s) has index %d; adapters are indexed 0..n-1 in order", i, a.Name, a.Index)
		}
		if !a.Available && !strings.Contains(a.Reason, "Fix:") {
			t.Errorf("adapter %d (%s) is unavailable with reason %q, which does not end with a \"Fix: …\" sentence", i, a.Name, a.Reason)
		}
	}
}

// selectKernels returns the named corpus kernels, or all of them.
func selectKernels(names []string) ([]kernels.Kernel, error) {
	if len(names) == 0 {
		return kernels.All(), nil
	}
	var out []kernels.Kernel
	for _, n := range names {
		k, ok := kernels.Lookup(n)
		if !ok {
			var known []string
			for _, k := range kernels.All() {
				known = append(known, k.Name)
			}
			return nil, fmt.Errorf("conformance: no corpus kernel %q. Fix: use one of %v", n, known)
		}
		out = append(out, k)
	}
	return out, nil
}

type runner struct {
	b       pluginapi.Backend
	opts    Options
	profile pluginapi.DeviceProfile // of the adapter under test
}

func (r *runner) sizes(k kernels.Kernel) []int {
	sizes := k.Sizes
	if len(r.opts.Sizes) > 0 {
		sizes = r.opts.Sizes
	}
	if r.opts.MaxSize <= 0 {
		return sizes
	}
	var out []int
	for _, s := range sizes {
		if s <= r.opts.MaxSize {
			out = append(out, s)
		}
	}
	return out
}

// newCase draws the inputs of kernel k at size, reproducibly from the seed.
func (r *runner) newCase(k kernels.Kernel, size int) kernels.Case {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", k.Name, size)
	return k.NewCase(rand.New(rand.NewPCG(r.opts.Seed, h.Sum64())), size)
}

// launch is one dispatch the kit makes: a corpus case or a table's launch (its
// uniform block in Case.Uniforms), with the subgroup size the reference emulates
// (0: the program's, else interp.DefaultSubgroupSize or the largest that fits).
type launch struct {
	kernels.Case
	subgroup uint32
	// outOfBounds marks a launch that indexes shared arrays out of bounds on
	// purpose (docs/design.md defines it: 0, nothing stored), which strict mode
	// would report.
	outOfBounds bool
}

// reference runs the launch on the CPU reference interpreter, in strict mode
// unless it indexes shared memory out of bounds on purpose: a program that races
// on shared memory is a kit or corpus bug, not a result.
func (r *runner) reference(ctx context.Context, p *ir.Program, c launch) ([][]byte, error) {
	return interp.Run(ctx, p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec, SubgroupSize: c.subgroup, Strict: !c.outOfBounds},
		interp.Launch{Grid: c.Grid, Inputs: clone(c.Inputs), OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
}

// compile compiles p for the case on the backend and releases the pipeline when
// the test ends.
func (r *runner) compile(t T, p *ir.Program, c launch, blob []byte) *pluginapi.CompileResult {
	t.Helper()
	res, err := r.tryCompile(p, c, blob)
	if err != nil {
		t.Fatalf("Compile %s: %v", p.Name, err)
	}
	if res == nil {
		t.Fatalf("Compile %s returned no result and no error", p.Name)
	}
	r.releaseAtEnd(t, res.Pipeline)
	return res
}

// tryCompile compiles p for the launch on the backend.
func (r *runner) tryCompile(p *ir.Program, c launch, blob []byte) (*pluginapi.CompileResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	res, err := r.b.Compile(ctx, &pluginapi.CompileRequest{
		Adapter: r.opts.Adapter, Program: p, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize, CachedBlob: blob,
	})
	if err == nil && res == nil {
		err = errors.New("the backend's Compile returned no result and no error")
	}
	return res, err
}

// releaseAtEnd releases a pipeline when the test ends.
func (r *runner) releaseAtEnd(t T, pipeline uint64) {
	t.Cleanup(func() {
		if err := r.b.Release(context.Background(), pipeline); err != nil {
			t.Errorf("Release(%d): %v", pipeline, err)
		}
	})
}

// dispatch runs the launch on a compiled pipeline.
func (r *runner) dispatch(pipeline uint64, c launch) (*pluginapi.DispatchResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	res, err := r.b.Dispatch(ctx, &pluginapi.DispatchRequest{
		Pipeline: pipeline, Grid: c.Grid, Inputs: clone(c.Inputs), OutputCounts: c.OutputCounts, Uniforms: c.Uniforms,
	})
	if err == nil && res == nil {
		err = errors.New("the backend's Dispatch returned no result and no error")
	}
	return res, err
}

func (r *runner) kernelCase(t T, k kernels.Kernel, size int) {
	p := k.Program()
	c := launch{Case: r.newCase(k, size)}
	exp := r.expect(p, c, false)
	if _, err := exp.refs[0](p); err != nil {
		t.Fatalf("CPU reference failed on %s at size %d (a corpus or interpreter bug): %v", k.Name, size, err)
	}
	comp := r.compileOrSkip(t, p, c, nil)
	r.check(t, p, c, comp.Pipeline, exp)
	if comp.Blob != nil {
		cached := r.compile(t, p, c, comp.Blob)
		r.check(t, p, c, cached.Pipeline, exp)
	}
}

// check dispatches the launch and verifies the outputs against the expectation:
// the reference's outputs, and those of the program's variants when they differ.
func (r *runner) check(t T, p *ir.Program, c launch, pipeline uint64, exp expectation) {
	t.Helper()
	res, err := r.dispatch(pipeline, c)
	if err != nil {
		t.Fatalf("Dispatch %s: %v", p.Name, err)
	}
	if res.HostNanos < 0 || res.DeviceNanos < 0 {
		t.Errorf("negative times: host %dns, device %dns", res.HostNanos, res.DeviceNanos)
	}
	if err := exp.verify(res.Outputs); err != nil {
		t.Errorf("%v", err)
	}
}

// contract checks how the backend treats handles it does not know and a cached
// blob it cannot use, on kernel k at a small size.
func (r *runner) contract(t T, k kernels.Kernel) {
	p := k.Program()
	c := launch{Case: r.newCase(k, 7)}
	exp := r.expect(p, c, false)
	if _, err := exp.refs[0](p); err != nil {
		t.Fatalf("CPU reference failed on %s: %v", k.Name, err)
	}
	t.Run("unknown pipeline", func(t T) {
		// Compile first, so a backend that ignores the handle is caught too.
		comp := r.compile(t, p, c, nil)
		if _, err := r.dispatch(comp.Pipeline^0xDEAD_BEEF_0000_0000, c); err == nil {
			t.Errorf("Dispatch on a pipeline that was never compiled succeeded")
		}
	})
	t.Run("released pipeline", func(t T) {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
		defer cancel()
		res, err := r.b.Compile(ctx, &pluginapi.CompileRequest{Adapter: r.opts.Adapter, Program: p, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize})
		if err != nil {
			t.Fatalf("Compile %s: %v", p.Name, err)
		}
		if err := r.b.Release(ctx, res.Pipeline); err != nil {
			t.Fatalf("Release(%d): %v", res.Pipeline, err)
		}
		if _, err := r.dispatch(res.Pipeline, c); err == nil {
			t.Errorf("Dispatch on a released pipeline succeeded")
		}
	})
	t.Run("unusable cached blob", func(t T) {
		comp := r.compile(t, p, c, []byte("kiln conformance: not a blob any backend produced"))
		r.check(t, p, c, comp.Pipeline, exp)
	})
}

func clone(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		if b != nil {
			out[i] = append([]byte{}, b...)
		}
	}
	return out
}
