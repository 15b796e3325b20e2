package runs

import (
	"context"
	"errors"
	"fmt"
	"github.com/kiln-dev/kiln/autotune"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// Reference is the backend every run is verified against.
const Reference = "cpu-ref"

// Job is one dispatch to run.
type Job struct {
	// Program is what runs.
	Program *ir.Program
	// Launch says where and on what; an empty Launch.Backend means the preferred one.
	Launch host.Launch
	// Kernel and Case are set for corpus kernels: the kernel's Go reference is
	// then checked too.
	Kernel *kernels.Kernel
	Case   kernels.Case
	// Strict runs the program on the in-process oracle in strict mode first; a
	// shared-memory hazard it reports fails the run before any backend runs it.
	Strict bool
}

// KernelJob draws a random case of size for the corpus kernel k.
func KernelJob(k kernels.Kernel, size int, seed uint64, backend string) Job {
	return KernelJobWith(k, size, seed, backend, ir.SpecMap{})
}

// KernelJobWith is KernelJob with k's program's parameters set to spec, over
// the case's own values; a kernel that sizes its launch by its parameters
// (Kernel.Invocations) is relaunched for them.
func KernelJobWith(k kernels.Kernel, size int, seed uint64, backend string, spec ir.SpecMap) Job {
	c := k.NewCase(rand.New(rand.NewPCG(seed, uint64(size))), size)
	if spec.Len() > 0 {
		merged := c.Spec
		for _, name := range spec.Names() {
			v, _ := spec.Get(name)
			merged.Set(name, v)
		}
		c.Spec = merged
		if retuned, ok := k.Retune(c, c.WorkgroupSize, merged); ok {
			c = retuned
		}
	}
	w := host.Work{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms}
	if c.Invocations != ([3]uint32{}) {
		// The grid follows the workgroup size an autotune record may choose.
		w.Grid, w.Invocations = [3]uint32{}, c.Invocations
	}
	return Job{
		Program: k.Program(),
		Kernel:  &k,
		Case:    c,
		Launch: host.Launch{
			Backend:        backend,
			CompileOptions: host.CompileOptions{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize},
			Work:           w,
		},
	}
}

// ConfigureKernel applies `kiln run --kernel`'s --spec NAME=VALUE flags to the
// corpus kernel k: a NAME that is one of k's options (Kernel.Options, such as
// matmul_tc's type=bf16) builds the kernel for that value; any other NAME is a
// parameter of the built kernel's program, parsed by its type. It returns the
// kernel as built and the parameters' values, for KernelJobWith.
func ConfigureKernel(k kernels.Kernel, kvs []string) (kernels.Kernel, ir.SpecMap, error) {
	opts, params, err := splitSpecs(k, kvs)
	if err != nil {
		return kernels.Kernel{}, ir.SpecMap{}, err
	}
	return configure(k, kvs, opts, params)
}

// splitSpecs sorts --spec NAME=VALUE flags into k's options, parsed, and the
// rest (its program's parameters), left as flags.
func splitSpecs(k kernels.Kernel, kvs []string) (ir.SpecMap, []string, error) {
	var opts ir.SpecMap
	var params []string
	for _, kv := range kvs {
		name, value, err := pair("--spec", kv)
		if err != nil {
			return ir.SpecMap{}, nil, err
		}
		v, isOption, err := k.ParseOption(name, value)
		switch {
		case err != nil:
			return ir.SpecMap{}, nil, fmt.Errorf("--spec %s: %w", kv, err)
		case isOption:
			opts.Set(name, v)
		default:
			params = append(params, kv)
		}
	}
	return opts, params, nil
}

// TunedOptions is what ConfigureKernelOn took from an autotune record.
type TunedOptions struct {
	// Options are the searched options the record set ("tk=64 tm=256
	// tn=128"), empty when none did.
	Options string
	// Ignored says why a record was there but not applied (it does not fit
	// the kernel: stale or edited), nil otherwise.
	Ignored error
}

// ConfigureKernelOn is ConfigureKernel for a run on the named backend: when k
// has options kiln tune searches (matmul_tc's tile: tm, tn, tk) and kvs sets
// none of them, the values kiln tune recorded for k with its fixed options
// (type=bf16) on that backend's device build it. An explicit --spec of any
// searched option wins: the record is then not applied (its tile was measured
// as a whole). Without a backend, or a record, the defaults build it.
func ConfigureKernelOn(ctx context.Context, h *host.Host, backend string, k kernels.Kernel, kvs []string) (kernels.Kernel, ir.SpecMap, TunedOptions, error) {
	opts, params, err := splitSpecs(k, kvs)
	if err != nil {
		return kernels.Kernel{}, ir.SpecMap{}, TunedOptions{}, err
	}
	var tuned TunedOptions
	searched := k.TunedOptions()
	explicit := false
	for _, n := range searched.Names() {
		if _, set := opts.Get(n); set {
			explicit = true
		}
	}
	if backend != "" && searched.Len() > 0 && !explicit {
		// A backend that cannot be acquired has no record to apply; the
		// dispatch reports it (or fails over, with --fallback).
		if b, err := h.Acquire(ctx, backend); err == nil {
			var vals ir.SpecMap
			vals, tuned = tunedOptions(b, k, opts, backend)
			for _, n := range vals.Names() {
				v, _ := vals.Get(n)
				opts.Set(n, v)
			}
		}
	}
	built, spec, err := configure(k, kvs, opts, params)
	return built, spec, tuned, err
}

// tunedOptions returns the values of k's searched options that b's record of k
// with the fixed options opts sets holds, when there is one that fits k.
func tunedOptions(b *host.Backend, k kernels.Kernel, opts ir.SpecMap, backend string) (ir.SpecMap, TunedOptions) {
	rec, ok := b.TunedOptions(k.Name, k.FixedOptions(opts))
	if !ok {
		return ir.SpecMap{}, TunedOptions{}
	}
	vals, err := k.ParseTunedOptions(opts, rec)
	if err != nil {
		return ir.SpecMap{}, TunedOptions{Ignored: fmt.Errorf("the autotune record of %s's options on %s (%q): %w. Fix: run kiln tune --kernel %s again, or kiln autotune forget --kernel %s",
			k.Name, backend, rec, err, k.Name, k.Name)}
	}
	return vals, TunedOptions{Options: autotune.FormatParams(vals)}
}

// configure builds k for opts and parses params, its program's parameters;
// kvs are the flags, for the message.
func configure(k kernels.Kernel, kvs []string, opts ir.SpecMap, params []string) (kernels.Kernel, ir.SpecMap, error) {
	built, _, err := k.Configure(opts)
	if err != nil {
		return kernels.Kernel{}, ir.SpecMap{}, fmt.Errorf("--spec %s: %w", strings.Join(kvs, " --spec "), err)
	}
	spec, err := ParseSpec(built.Program(), params)
	if err != nil {
		return kernels.Kernel{}, ir.SpecMap{}, err
	}
	return built, spec, nil
}

// Outcome is what a run did.
type Outcome struct {
	// Backend is where it ran ("cpu-ref:0"); Program the program's name.
	Backend string
	Program string
	// Kernel and Size are set for corpus kernels.
	Kernel string
	Size   int
	// Outputs are the program's outputs in binding order.
	Outputs [][]byte
	// Compile and Dispatch are the host-measured times.
	Compile, Dispatch time.Duration
	// Cache is the pipeline cache's part in the compile (host.CacheHit,
	// CacheMiss or CacheOff); Selection why the backend was chosen.
	Cache, Selection string
	// WorkgroupSize is the size it ran with; Tuned: an autotune record chose it.
	WorkgroupSize [3]uint32
	Tuned         bool
	// Failover lists the backends that failed the launch before Backend ran it.
	Failover []host.Attempt
	// Params are the tunables an autotune record set (NAME=VALUE, as the
	// record holds them), empty when none did.
	Params string
	// Verified is set when verification ran and passed; MaxULP is the largest
	// float difference met, in units in the last place.
	Verified bool
	MaxULP   uint64
}

// VerifyError says the outputs differ from the reference.
type VerifyError struct {
	Backend, Program string
	Err              error
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("%s on %s does not match the reference: %v", e.Program, e.Backend, e.Err)
}

func (e *VerifyError) Unwrap() error { return e.Err }

// applyTuning applies the whole autotune record of a corpus kernel on a named
// backend — its tunables as well as its workgroup size — when the kernel can
// size its launch for them (Kernel.Invocations) and the run sets neither: the
// case is relaunched for the tuned configuration. It returns the tunables it
// set, as autotune.FormatParams writes them ("" when it set none).
func applyTuning(ctx context.Context, h *host.Host, j Job) (Job, string, error) {
	l := j.Launch
	if j.Kernel == nil || j.Kernel.Invocations == nil || l.Backend == "" || l.WorkgroupSize != ([3]uint32{}) {
		return j, "", nil
	}
	b, err := h.Acquire(ctx, l.Backend)
	if err != nil {
		return j, "", err
	}
	tu, ok := b.Tuning(j.Program, l.Spec)
	if !ok || tu.Params.Len() == 0 {
		return j, "", nil
	}
	params := autotune.FormatParams(tu.Params)
	spec := tu.Params
	for _, name := range l.Spec.Names() {
		v, _ := l.Spec.Get(name)
		spec.Set(name, v)
	}
	c, ok := j.Kernel.Retune(j.Case, tu.WorkgroupSize, spec)
	if !ok {
		return j, "", nil
	}
	j.Case = c
	j.Launch.Spec, j.Launch.WorkgroupSize = spec, tu.WorkgroupSize
	j.Launch.Grid, j.Launch.Invocations = [3]uint32{}, c.Invocations
	return j, params, nil
}

// Run dispatches j and, with check, verifies the outputs. A verification failure
// returns the outcome together with a *VerifyError.
func Run(ctx context.Context, h *host.Host, j Job, check bool) (*Outcome, error) {
	if j.Strict {
		if err := CheckStrict(ctx, j); err != nil {
			return nil, err
		}
	}
	j, params, err := applyTuning(ctx, h, j)
	if err != nil {
		return nil, err
	}
	res, err := h.Dispatch(ctx, j.Program, j.Launch)
	if err != nil {
		return nil, err
	}
	o := &Outcome{
		Backend: res.Backend, Program: j.Program.Name, Outputs: res.Outputs,
		Compile: res.Compile, Dispatch: res.Dispatch,
		Cache: res.Cache, Selection: res.Selection, WorkgroupSize: res.WorkgroupSize, Tuned: res.Tuned,
		Failover: res.Failover,
	}
	o.Tuned, o.Params = o.Tuned || params != "", params
	if j.Kernel != nil {
		o.Kernel, o.Size = j.Kernel.Name, j.Case.Size
	}
	if !check {
		return o, nil
	}
	fail := func(err error) (*Outcome, error) {
		return o, &VerifyError{Backend: o.Backend, Program: o.Program, Err: err}
	}
	launch := j.Launch
	launch.Backend = Reference
	var refErr error
	reference := func(p *ir.Program) ([][]byte, error) {
		r, err := h.Dispatch(ctx, p, launch)
		if err != nil {
			refErr = err
			return nil, err
		}
		return r.Outputs, nil
	}
	report, err := verify.Outputs(j.Program, res.Outputs, reference)
	if refErr != nil {
		return o, fmt.Errorf("verifying %s: running it on the reference %s: %w", o.Program, Reference, refErr)
	}
	if err != nil {
		return fail(err)
	}
	o.MaxULP = report.MaxULP
	if j.Kernel != nil {
		if err := j.Kernel.Check(res.Outputs, j.Kernel.Reference(j.Case)); err != nil {
			return fail(fmt.Errorf("against the kernel's Go reference: %w", err))
		}
	}
	o.Verified = true
	return o, nil
}

// Row is one line of All's table: an outcome or the error of one run.
type Row struct {
	Kernel  string
	Backend string
	Size    int
	Outcome *Outcome
	Err     error
	// Unsupported is set when a backend other than the reference rejected the
	// kernel (a feature it lacks); that is reported but is not a failure.
	Unsupported bool
}

// All runs every corpus kernel on every ready, dispatching backend (reference
// oracles included, named explicitly), verified; with backend set, on that
// backend only ("vulkan" or "vulkan:1"). size 0 means each kernel's largest
// standard size. Every kernel's size is checked against limits before anything
// runs. It fails when no backend is ready or a size does not fit. progress,
// when not nil, is told before each run: done of total runs, and what runs.
func All(ctx context.Context, h *host.Host, size int, seed uint64, backend string, limits Limits, progress func(done, total int, what string)) ([]Row, error) {
	sizeOf := func(k kernels.Kernel) int {
		if size == 0 && len(k.Sizes) > 0 {
			return slices.Max(k.Sizes)
		}
		return size
	}
	for _, k := range kernels.All() {
		if err := limits.CheckKernel(k, sizeOf(k)); err != nil {
			return nil, err
		}
	}
	var names []string
	if backend != "" {
		b, err := h.Acquire(ctx, backend)
		if err != nil {
			return nil, err
		}
		names = append(names, b.Name())
	} else {
		backends, err := h.Survey(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range backends {
			if b.Status == host.StatusReady && b.Dispatches {
				names = append(names, b.Name())
			}
		}
	}
	if len(names) == 0 {
		dir, _ := h.PluginDir()
		return nil, fmt.Errorf("no ready backend in %s. Fix: run make build (it installs bin/plugins), and `kiln doctor` to see what is wrong", dir)
	}
	var rows []Row
	total := len(kernels.All()) * len(names)
	for _, k := range kernels.All() {
		n := sizeOf(k)
		for _, b := range names {
			if progress != nil {
				progress(len(rows), total, k.Name+" on "+b)
			}
			o, err := Run(ctx, h, KernelJob(k, n, seed, b), true)
			var rejected *host.RejectedError
			unsupported := o == nil && errors.As(err, &rejected) && !strings.HasPrefix(b, Reference+":")
			rows = append(rows, Row{Kernel: k.Name, Backend: b, Size: n, Outcome: o, Err: err, Unsupported: unsupported})
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
		}
	}
	return rows, nil
}

// Failed reports whether any row failed (an unsupported kernel is no failure).
func Failed(rows []Row) bool {
	return slices.ContainsFunc(rows, func(r Row) bool { return r.Err != nil && !r.Unsupported })
}
