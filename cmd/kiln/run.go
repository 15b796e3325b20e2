package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// runJSON is `kiln run --json` (an array of them with --all).
type runJSON struct {
	Backend    string `json:"backend"`
	Program    string `json:"program"`
	Kernel     string `json:"kernel,omitempty"`
	Size       int    `json:"size,omitempty"`
	Verified   bool   `json:"verified"`
	MaxULP     uint64 `json:"max_ulp"`
	CompileNs  int64  `json:"compile_ns"`
	DispatchNs int64  `json:"dispatch_ns"`
	// Cache is "hit", "miss" or "off"; Selection why the backend ran it.
	Cache         string    `json:"cache,omitempty"`
	Selection     string    `json:"selection,omitempty"`
	WorkgroupSize [3]uint32 `json:"workgroup_size"`
	Tuned         bool      `json:"tuned"`
	// Params are the tunables an autotune record set ("bm=8 bn=8 tk=16").
	Params string `json:"params,omitempty"`
	// Options are the options that build the kernel's program (matmul_tc's
	// tile) an autotune record set ("tk=64 tm=256 tn=128").
	Options string `json:"options,omitempty"`
	// Failover lists the backends that failed before Backend ran the launch.
	Failover []failoverJSON `json:"failover,omitempty"`
	Outputs  []string       `json:"outputs,omitempty"`
	Error    string         `json:"error,omitempty"`
	// With --repeat: the timed runs' medians and minimums, and the
	// throughput at the median device time (the submit's without one).
	Runs        int     `json:"runs,omitempty"`
	WarmupRuns  int     `json:"warmup_runs,omitempty"`
	DeviceNs    int64   `json:"device_ns,omitempty"`
	DeviceMinNs int64   `json:"device_min_ns,omitempty"`
	SubmitNs    int64   `json:"submit_ns,omitempty"`
	SubmitMinNs int64   `json:"submit_min_ns,omitempty"`
	Gflops      float64 `json:"gflops,omitempty"`
	Gbps        float64 `json:"gbps,omitempty"`
}

// flopRate formats GFLOP/s, as TFLOP/s from 1000 up.
func flopRate(gflops float64) string {
	if gflops >= 1000 {
		return fmt.Sprintf("%.3f TFLOP/s", gflops/1000)
	}
	return fmt.Sprintf("%.3f GFLOP/s", gflops)
}

// addTiming sets j's --repeat figures.
func (j *runJSON) addTiming(t *runs.Timing) {
	j.Runs, j.WarmupRuns = t.Runs, t.WarmupRuns
	j.DeviceNs, j.DeviceMinNs = t.DeviceMedian.Nanoseconds(), t.DeviceMin.Nanoseconds()
	j.SubmitNs, j.SubmitMinNs = t.SubmitMedian.Nanoseconds(), t.SubmitMin.Nanoseconds()
	j.Gflops, j.Gbps = t.GFlops(), t.GBps()
}

// failoverJSON is one backend a run failed over from.
type failoverJSON struct {
	Backend string `json:"backend"`
	Error   string `json:"error"`
}

func toRunJSON(o *runs.Outcome, err error) runJSON {
	j := runJSON{}
	if o != nil {
		j = runJSON{
			Backend: o.Backend, Program: o.Program, Kernel: o.Kernel, Size: o.Size, Verified: o.Verified,
			MaxULP: o.MaxULP, CompileNs: o.Compile.Nanoseconds(), DispatchNs: o.Dispatch.Nanoseconds(),
			Cache: o.Cache, Selection: o.Selection, WorkgroupSize: o.WorkgroupSize, Tuned: o.Tuned,
			Params: o.Params,
		}
		for _, f := range o.Failover {
			j.Failover = append(j.Failover, failoverJSON{Backend: f.Backend, Error: f.Err.Error()})
		}
	}
	if err != nil {
		j.Error = err.Error()
	}
	return j
}

// runOptions are kiln run's flags and its PROGRAM.json argument.
type runOptions struct {
	*app
	programArg
	File             runs.FileArgs
	Kernel, Out      string
	Sizes            []string
	Seed             uint64
	Verify, All      bool
	List             bool
	Strict, Fallback bool
	Repeat           int
	Warmup           time.Duration
}

func (a *app) runCommand() *cobra.Command {
	cmd := command(&runOptions{app: a}, runRun, &cobra.Command{
		Use:   "run [PROGRAM.json]",
		Short: "Run a corpus kernel or a program file on a backend",
		Long: `Run a program and print its compile and dispatch times.

A corpus kernel, with random inputs:
  kiln run --kernel saxpy --size 4096 --backend cpu-ref --verify

A program file (the JSON form of docs/design.md, "The program (IR)"), inputs as raw little-endian files:
  kiln run prog.json --input x=@x.bin --input y=@y.bin --size out=4096 \
      --grid 16,1,1 --spec a=2.5 --out results/
writes results/<buffer>.bin for every output buffer. Buffers of f16 and bf16
(IR v1.2) hold 2-byte elements: --input and --out files are raw 2-byte
little-endian elements and --size and --zero count elements; --input NAME=V,V,...
gives values inline, each rounded to the buffer's type (to nearest even).
--spec also sets a corpus kernel's options, which choose its program:
  kiln run --kernel matmul_tc --spec type=f16 --size 256 --verify

Every corpus kernel on every ready backend (cpu-ref included), verified, as
one table; exits 1 if any run fails (with --backend, on that backend only):
  kiln run --all

Every read and read_write buffer of a program file needs an --input, or
--zero NAME[=COUNT] to say it runs on COUNT zero elements. Sizes that cannot
be allocated (over the backend's storage binding limit, or the memory
available) are refused before anything is allocated.

Without --backend the preferred backend runs the program; the CPU reference
(cpu-ref) is an oracle and only runs when named (--backend cpu-ref). When the
backend crashes, hangs, loses its device or is unavailable, the run goes on on
the next backend in selection order (never cpu-ref) and says which failed;
--fallback does the same for a named --backend.
--uniform NAME=VALUE sets a uniform of the program (IR v1.1), parsed by its
type; every uniform needs one. --strict first runs the program on the CPU
reference interpreter in strict mode, which fails the run with the workgroup,
invocations and statements of any shared-memory race (a missing barrier),
read of never-written shared memory or out-of-bounds shared index.
--verify runs the program on cpu-ref too and compares the outputs with the
conformance rules (integers bit-exact, floats within the bounds of docs/design.md, "Conformance kit"); for
corpus kernels the kernel's plain-Go reference is checked as well.
Compiles go through the pipeline cache (kiln cache --help); without --wg an
autotune record for the program on the backend sets the workgroup size; without
--backend the program's fresh PGO route (kiln certify) picks the backend when
that backend is healthy.

--repeat N times the kernel as a kernel benchmark does (triton's do_bench):
after the run above, its buffers are allocated on the backend that ran it and
written once, one dispatch is submitted untimed for --warmup (and on until
five in a row agree within 10%, so that a GPU has left its idle clock), then N
times, timed; it prints the median and minimum device time (the backend's
timestamps; none on cpu-ref) and submit time (host-measured, the plugin
boundary included), and TFLOP/s for corpus kernels that count their
floating-point operations, and GB/s of the bytes the buffers bind (read ones
plus written ones), both at the median device time (the submit's on a backend
without device timestamps). With --json: runs, warmup_runs, device_ns,
device_min_ns, submit_ns, submit_min_ns, gflops (corpus kernels that count
them) and gbps.

--json prints an object with backend, program, verified, max_ulp, compile_ns,
dispatch_ns, cache ("hit", "miss" or "off"), selection (why the backend ran
it: "explicit", "pgo route: ...", "preferred: ..."), workgroup_size and tuned
(an array of them with --all).`,
		Args: cobra.MaximumNArgs(1),
	}, func(o *runOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Kernel, "kernel", "", "corpus kernel to run (see --list)")
		f.BoolVar(&o.List, "list", false, "list the corpus kernels and what --size means for each")
		f.BoolVar(&o.All, "all", false, "run every corpus kernel on every ready backend (or only --backend), verified, as one table")
		f.StringArrayVar(&o.Sizes, "size", nil, "problem size N for --kernel/--all; NAME=COUNT elements of a write buffer for a program file")
		f.Uint64Var(&o.Seed, "seed", 1, "random seed for corpus inputs")
		f.StringVar(&o.File.Backend, "backend", "", "backend id or id:adapter (default: the preferred backend; cpu-ref only when named)")
		f.BoolVar(&o.Fallback, "fallback", false, "when the named --backend crashes, hangs, loses its device or is unavailable, run on the next backend in selection order (runs without --backend always do)")
		f.BoolVar(&o.Verify, "verify", false, "compare the outputs with the cpu-ref backend's")
		f.StringArrayVar(&o.File.Inputs, "input", nil, "NAME=@FILE: raw little-endian elements of buffer NAME (2 bytes for f16 and bf16), or NAME=V,V,...: values parsed by its type, rounded to f16/bf16 (program files)")
		f.StringArrayVar(&o.File.Zero, "zero", nil, "NAME[=COUNT]: run read buffer NAME on COUNT zero elements (its fixed count, or none) instead of an --input (program files)")
		f.StringArrayVar(&o.File.Spec, "spec", nil, "NAME=VALUE: set parameter NAME; for --kernel, a parameter or an option of the kernel (matmul_tc's type=bf16, see --list)")
		f.StringArrayVar(&o.File.Uniforms, "uniform", nil, "NAME=VALUE: set uniform NAME for this dispatch (program files)")
		f.BoolVar(&o.Strict, "strict", false, "check the program for shared-memory races on the reference interpreter's strict mode first")
		f.StringVar(&o.File.Grid, "grid", "", "X,Y,Z workgroups (program files)")
		f.StringVar(&o.File.Invocations, "invocations", "", "X,Y,Z invocations; the grid is their ceiling division by the workgroup size (program files)")
		f.StringVar(&o.File.WorkgroupSize, "wg", "", "X,Y,Z workgroup size override (program files)")
		f.StringVar(&o.Out, "out", "", "directory to write every output buffer to, as <buffer>.bin")
		f.IntVar(&o.Repeat, "repeat", 0, "time N more runs over buffers kept on the backend, after a warm-up, and print the median and minimum device and submit times and the throughput")
		f.DurationVar(&o.Warmup, "warmup", 300*time.Millisecond, "with --repeat: the least time of untimed runs before the timed ones")
	})
	a.traceFlag(cmd)
	return cmd
}

// check refuses flag combinations that do not say one thing to run.
func (o *runOptions) check() error {
	modes := 0
	for _, set := range []bool{o.All, o.Kernel != "", o.Program != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return errors.New("say what to run. Fix: pass a PROGRAM.json, --kernel NAME or --all (--list shows the kernels)")
	}
	if o.All && o.Fallback {
		return errors.New("--fallback applies to one run; --all runs every kernel on every backend by name. Fix: drop --fallback, or run one --kernel or program file")
	}
	if o.Repeat < 0 || (o.Repeat > 0 && o.All) {
		return errors.New("--repeat times one run. Fix: pass --repeat N (N > 0) with --kernel or a program file, not --all")
	}
	return nil
}

// runRun is kiln run: the kernel list, every kernel (--all), or one corpus
// kernel or program file, printed as --json or lines.
func runRun(ctx context.Context, o *runOptions) error {
	if o.List {
		return o.listKernels()
	}
	if err := o.check(); err != nil {
		return err
	}
	if o.All {
		size := 0
		if len(o.Sizes) > 0 {
			n, err := strconv.Atoi(o.Sizes[0])
			if err != nil || len(o.Sizes) > 1 {
				return fmt.Errorf("--all takes one --size N, got %v. Fix: pass one integer, or none for each kernel's largest standard size", o.Sizes)
			}
			size = n
		}
		return o.runAll(ctx, size, o.Seed, o.File.Backend)
	}
	k, n, err := o.kernel()
	if err != nil {
		return err
	}
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	lim, err := limits(ctx, h, o.File.Backend, o.Verify)
	if err != nil {
		return err
	}
	var job runs.Job
	var tuned runs.TunedOptions
	if o.Kernel != "" {
		var params ir.SpecMap
		k, params, tuned, err = runs.ConfigureKernelOn(ctx, h, o.File.Backend, k, o.File.Spec)
		if err != nil {
			return err
		}
		if tuned.Ignored != nil {
			fmt.Fprintf(o.errOut, "kiln: note: ignoring %v\n", tuned.Ignored)
		}
		if err := lim.CheckKernel(k, n); err != nil {
			return err
		}
		job = runs.KernelJobWith(k, n, o.Seed, o.File.Backend, params)
	} else {
		file := o.File
		file.Path, file.Sizes, file.Limits = o.Program, o.Sizes, lim
		if job, err = runs.FileJob(file); err != nil {
			return err
		}
	}
	job.Strict = o.Strict
	job.Launch.Fallback = o.Fallback
	out, runErr := runs.Run(ctx, h, job, o.Verify)
	var verifyErr *runs.VerifyError
	if runErr != nil && !errors.As(runErr, &verifyErr) {
		return runErr
	}
	j := toRunJSON(out, runErr)
	j.Options = tuned.Options
	if o.Repeat > 0 && runErr == nil {
		t, err := runs.Repeat(ctx, h, job, out.Backend, runs.RepeatOptions{Runs: o.Repeat, Warmup: o.Warmup})
		if err != nil {
			return err
		}
		j.addTiming(t)
	}
	if o.Out != "" {
		if j.Outputs, err = runs.WriteOutputs(o.Out, job.Program, out.Outputs); err != nil {
			return err
		}
	}
	if err := o.show(j, func() { o.printRun(j, o.Verify) }); err != nil {
		return err
	}
	return runErr
}

// kernel looks up --kernel and reads its --size; the zero kernel without one.
func (o *runOptions) kernel() (kernels.Kernel, int, error) {
	if o.Kernel == "" {
		return kernels.Kernel{}, 0, nil
	}
	k, ok := kernels.Lookup(o.Kernel)
	if !ok {
		return k, 0, fmt.Errorf("no corpus kernel %q. Fix: pick one of the names `kiln run --list` prints", o.Kernel)
	}
	if len(o.Sizes) != 1 {
		return k, 0, fmt.Errorf("--kernel needs one --size N, got %v. Fix: pass --size 4096 (what size means is in `kiln run --list`)", o.Sizes)
	}
	n, err := strconv.Atoi(o.Sizes[0])
	if err != nil || n < 0 {
		return k, 0, fmt.Errorf("--size %q is not a non-negative integer. Fix: pass --size 4096", o.Sizes[0])
	}
	if len(o.File.Uniforms) > 0 {
		return k, 0, errors.New("--uniform sets uniforms of a program file. Fix: corpus kernels choose their own; drop --uniform")
	}
	return k, n, nil
}

func (a *app) printRun(j runJSON, verify bool) {
	what := j.Program
	if j.Kernel != "" {
		what = fmt.Sprintf("%s (%s), size %d", j.Kernel, j.Program, j.Size)
	}
	fmt.Fprintf(a.out, "%s on %s (%s)\n", what, j.Backend, j.Selection)
	for _, f := range j.Failover {
		fmt.Fprintf(a.out, "  failed    on %s: %s\n", f.Backend, f.Error)
	}
	fmt.Fprintf(a.out, "  compile   %v (pipeline cache %s)\n  dispatch  %v\n", time.Duration(j.CompileNs), j.Cache, time.Duration(j.DispatchNs))
	tuned := ""
	if j.Tuned {
		tuned = " (autotune record)"
	}
	if j.Params != "" {
		tuned = " (autotune record, " + j.Params + ")"
	}
	if j.Options != "" {
		fmt.Fprintf(a.out, "  options   %s (autotune record)\n", j.Options)
	}
	fmt.Fprintf(a.out, "  workgroup %d,%d,%d%s\n", j.WorkgroupSize[0], j.WorkgroupSize[1], j.WorkgroupSize[2], tuned)
	switch {
	case !verify:
	case j.Verified:
		fmt.Fprintf(a.out, "  verified  against %s (max %d ULP)\n", runs.Reference, j.MaxULP)
	default:
		fmt.Fprintf(a.out, "  verify    FAILED: %s\n", j.Error)
	}
	for _, p := range j.Outputs {
		fmt.Fprintf(a.out, "  wrote     %s\n", p)
	}
	if j.Runs > 0 {
		d := func(ns int64) string { return time.Duration(ns).Round(100 * time.Nanosecond).String() }
		device := "not timed (the backend has no device timestamps)"
		if j.DeviceNs > 0 {
			device = fmt.Sprintf("median %s, min %s", d(j.DeviceNs), d(j.DeviceMinNs))
		}
		fmt.Fprintf(a.out, "  repeat    %d runs after %d warm-up runs\n  device    %s\n  submit    median %s, min %s\n", j.Runs, j.WarmupRuns, device, d(j.SubmitNs), d(j.SubmitMinNs))
		if j.Gflops > 0 {
			fmt.Fprintf(a.out, "  compute   %s\n", flopRate(j.Gflops))
		}
		if j.Gbps > 0 {
			fmt.Fprintf(a.out, "  memory    %.2f GB/s\n", j.Gbps)
		}
	}
}

func (a *app) listKernels() error {
	if a.json {
		// optionJSON is a kernel option (--spec NAME=VALUE builds the kernel).
		type optionJSON struct {
			Name       string   `json:"name"`
			Doc        string   `json:"doc"`
			Default    string   `json:"default"`
			Candidates []string `json:"candidates"`
		}
		type kernelJSON struct {
			Name    string       `json:"name"`
			OpID    string       `json:"op_id"`
			Doc     string       `json:"doc"`
			Sizes   []int        `json:"sizes"`
			Options []optionJSON `json:"options,omitempty"`
		}
		var out []kernelJSON
		for _, k := range kernels.All() {
			j := kernelJSON{Name: k.Name, OpID: k.OpID, Doc: k.Doc, Sizes: k.Sizes}
			for _, o := range k.Options {
				oj := optionJSON{Name: o.Name, Doc: o.Doc, Default: kernels.OptionString(o.Default)}
				for _, c := range o.Candidates {
					oj.Candidates = append(oj.Candidates, kernels.OptionString(c))
				}
				j.Options = append(j.Options, oj)
			}
			out = append(out, j)
		}
		return a.printJSON(out)
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tOP ID\tWHAT (and what --size means)")
	for _, k := range kernels.All() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Name, k.OpID, k.Doc)
	}
	return tw.Flush()
}

func (a *app) runAll(ctx context.Context, size int, seed uint64, backend string) error {
	h, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	rows, err := a.runCorpus(ctx, h, size, seed, backend)
	if err != nil {
		return err
	}
	out := make([]runJSON, len(rows))
	for i, r := range rows {
		out[i] = toRunJSON(r.Outcome, r.Err)
		out[i].Kernel, out[i].Size, out[i].Backend = r.Kernel, r.Size, r.Backend
		if r.Outcome != nil {
			out[i].Backend = r.Outcome.Backend
		}
	}
	if err := a.render(out, func() error { return a.printTable(rows) }); err != nil {
		return err
	}
	if runs.Failed(rows) {
		return &exitError{code: 1, err: errors.New("some runs failed (see the table). Fix: the failing backend's output differs from the reference; report it with the kernel, size and seed")}
	}
	return nil
}

// runCorpus runs every corpus kernel at size on every ready backend (or
// only backend), verified, with a progress bar: kiln run --all and kiln stats.
func (a *app) runCorpus(ctx context.Context, h *host.Host, size int, seed uint64, backend string) ([]runs.Row, error) {
	lim, err := limits(ctx, h, backend, false)
	if err != nil {
		return nil, err
	}
	bar := a.progressBar()
	rows, err := runs.All(ctx, h, size, seed, backend, lim, bar.update)
	bar.finish()
	return rows, err
}

func (a *app) printTable(rows []runs.Row) error {
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tSIZE\tBACKEND\tCOMPILE\tDISPATCH\tVERIFIED\tMAX ULP")
	var failures []string
	for _, r := range rows {
		if r.Outcome == nil {
			verdict := "FAILED"
			if r.Unsupported {
				verdict = "unsupported"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t-\t-\t%s\t-\n", r.Kernel, r.Size, r.Backend, verdict)
		} else {
			verified := "yes"
			if !r.Outcome.Verified {
				verified = "FAILED"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%v\t%s\t%d\n", r.Kernel, r.Size, r.Outcome.Backend,
				r.Outcome.Compile.Round(time.Microsecond), r.Outcome.Dispatch.Round(time.Microsecond), verified, r.Outcome.MaxULP)
		}
		if r.Err != nil {
			failures = append(failures, fmt.Sprintf("%s on %s: %v", r.Kernel, r.Backend, r.Err))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range failures {
		fmt.Fprintln(a.out, "\n"+f)
	}
	return nil
}
