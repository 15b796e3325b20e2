package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// tuneSaveBatch is how many winners kiln tune puts before it saves the store.
const tuneSaveBatch = 16

// tuneTarget is one program to tune: its launch at the baseline configuration,
// how to relaunch it for a candidate, and the oracle.
type tuneTarget struct {
	name   string // the kernel name or the program file
	kernel *kernels.Kernel
	c      kernels.Case // the corpus case (kernels only)
	prog   *ir.Program
	search *ir.Program // prog with the tunables --spec fixes narrowed to that value, for the search space only
	base   host.Launch // the baseline launch; its Spec holds the non-tunable values
	check  func(outputs [][]byte) error
	flops  float64 // floating-point operations of one run, 0 when unknown
	size   int     // the corpus size (kernels only)
	// For a kernel with searched options (kernels.Option.Tune, matmul_tc's
	// tile): corpus is its name and fixed the options its record is keyed by
	// (autotune.OptionsKey); builds are the combinations of the searched
	// options that build, builds[0] the baseline's (the defaults), and
	// skipped says why the others do not. builds is nil for other targets.
	corpus  string
	fixed   ir.SpecMap
	builds  []tuneBuild
	skipped []string
}

// tuneBuild is one build of a kernel with searched options: their values, the
// kernel and program they build, and the program narrowed by --spec for the
// search space.
type tuneBuild struct {
	options ir.SpecMap
	kernel  kernels.Kernel
	prog    *ir.Program
	search  *ir.Program
}

// keyedRecord is a record to save and its key.
type keyedRecord struct {
	key autotune.Key
	rec autotune.Record
}

// build returns the build candidate c runs (nil for a target without searched
// options, which runs t.prog) and c's spec without the searched options: the
// values of the program's tunables.
func (t tuneTarget) build(c autotune.Candidate) (*tuneBuild, ir.SpecMap) {
	if t.builds == nil {
		return nil, c.Spec
	}
	var opts, rest ir.SpecMap
	for _, n := range c.Spec.Names() {
		v, _ := c.Spec.Get(n)
		if _, searched := t.builds[0].options.Get(n); searched {
			opts.Set(n, v)
		} else {
			rest.Set(n, v)
		}
	}
	want := autotune.FormatParams(opts)
	for i := range t.builds {
		if autotune.FormatParams(t.builds[i].options) == want {
			return &t.builds[i], rest
		}
	}
	return &t.builds[0], rest
}

// space is the search space of a target with searched options: each build at
// its own workgroup size and wgs (--wg), times its tunables' candidates, each
// candidate's spec carrying the build's options. The baseline (the default
// build's untuned program) comes first, the rest in a fixed shuffled order. A
// build whose own workgroup has more invocations than limit (the adapter's, or
// --max-invocations) is left out, and skipped says why.
func (t tuneTarget) space(wgs [][3]uint32, limit uint32) (space []autotune.Candidate, skipped []string) {
	var out []autotune.Candidate
	for i, b := range t.builds {
		wg := b.prog.WorkgroupSize
		if n := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2]); i > 0 && limit > 0 && n > uint64(limit) {
			skipped = append(skipped, fmt.Sprintf("%s: its workgroup of %d invocations is over the %d the adapter runs (or --max-invocations)",
				autotune.FormatParams(b.options), n, limit))
			continue
		}
		var cands []autotune.Candidate
		if b.search != nil {
			cands = autotune.Space(b.search, wgs)
		}
		if def := autotune.Space(b.prog, nil)[0]; i == 0 && (len(cands) == 0 || def.String() != cands[0].String()) {
			cands = append([]autotune.Candidate{def}, cands...)
		}
		for _, c := range cands {
			out = append(out, autotune.Candidate{WorkgroupSize: c.WorkgroupSize, Spec: mergeSpecs(c.Spec, b.options)})
		}
	}
	rest := out[1:]
	rng := rand.New(rand.NewPCG(uint64(len(out)), 0x74696c65))
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return out, skipped
}

// records are the records of winner w, whose record is rec, on adapter: one
// keyed by the program (its workgroup size and tunables), and for a kernel
// with searched options first one of those options keyed by the kernel and
// its fixed options, so that a later run builds the winning program.
func (t tuneTarget) records(rec autotune.Record, w autotune.Candidate, adapter string) []keyedRecord {
	b, params := t.build(w)
	if b == nil {
		return []keyedRecord{{autotune.KeyFor(t.prog, t.base.Spec, adapter), rec}}
	}
	orec, prec := rec, rec
	orec.Params, orec.Program = autotune.FormatParams(b.options), b.prog.Name
	prec.Params, prec.Program = autotune.FormatParams(params), b.prog.Name
	return []keyedRecord{
		{autotune.OptionsKey(t.corpus, t.fixed, adapter), orec},
		{autotune.KeyFor(b.prog, t.base.Spec, adapter), prec},
	}
}

// mergeSpecs returns a new map of a's entries and b's, b's winning.
func mergeSpecs(a, b ir.SpecMap) ir.SpecMap {
	var out ir.SpecMap
	for _, m := range []ir.SpecMap{a, b} {
		for _, n := range m.Names() {
			v, _ := m.Get(n)
			out.Set(n, v)
		}
	}
	return out
}

// tuneOptions are kiln tune's flags.
type tuneOptions struct {
	*app
	Targets        []string // --kernel
	Sizes          []string
	File           runs.FileArgs
	Backend        string
	Budget         time.Duration
	Seed           uint64
	Warmup, Runs   int
	DryRun         bool
	NoiseGuard     bool
	MaxInvocations uint32
	Workgroups     []string // --wg
}

func (a *app) tuneCommand() *cobra.Command {
	cmd := command(&tuneOptions{app: a}, runTune, &cobra.Command{
		Use:   "tune --kernel NAME|PROGRAM --backend ID [--budget 30s]",
		Short: "Search the workgroup size and tunables of a program on one device and record the fastest",
		Long: `Tune searches the launch configurations of a program on one backend's device:
the workgroup size, and every tunable (a parameter with candidates, such as
vector_add's epi or matmul_reg's bm, bn and tk). Each candidate is compiled
and run warmup times untimed, then --runs times timed; its time is the median,
from the device's timestamps where the backend reports them, else the host's
dispatch time. Every run's outputs are checked against the oracle (the
kernel's Go reference, or the reference interpreter for a program file)
before the candidate counts: a configuration that computes a wrong result is
never recorded.

The baseline (the program's own workgroup size and defaults) runs first; the
other candidates follow in a fixed shuffled order until --budget is spent.
The winner is saved as an autotune record keyed by the program variant and
the device fingerprint ($XDG_CONFIG_HOME/kiln/autotune.toml; "kiln autotune
list"): later compiles of the program on that device take its workgroup size.
Its tunable values are in the record's params, and the program's name is
kept with it. A noise guard keeps the default: the winner is recorded only
when its median beats the baseline's by more than the spread of their timed
runs (the baseline's min–max range plus its own); otherwise, or when the
baseline itself is the fastest, nothing is recorded and the output says the
default stands and why. --noise-guard=false records the fastest anyway.

A corpus kernel whose options build its program (matmul_tc's tile: tm, tn,
tk) is tuned over them as well: every combination that builds with the fixed
options (--spec type=bf16; the defaults otherwise) runs at its own workgroup
size (and the --wg sizes); a --spec of a searched option narrows the search
to that value. Combinations that do not build, or whose workgroup is over the
adapter's limit, are skipped with the reason on stderr; one the backend fails
to compile is rejected as any failing candidate. The winning options are
recorded per kernel, fixed options and device, and the winning program's
workgroup size under the program: a later kiln run --kernel on that backend
builds that tile unless its --spec sets one.

--kernel takes a corpus kernel (see kiln run --list; repeatable, each tuned
in turn with its own budget) or a program file, which then takes --input,
--zero, --size NAME=COUNT, --spec, --uniform and --invocations as kiln run
does (the grid follows each candidate's workgroup size). A progress bar goes
to stderr on a terminal; plain lines otherwise.`,
		Example: `  kiln tune --kernel matmul_reg --backend cuda --size 1024 --budget 2m
  kiln tune --kernel matmul_tc --spec type=bf16 --backend cuda --size 4096 --budget 2m
  kiln tune --kernel vector_add --backend vulkan:0 --size 16777216
  kiln tune --kernel prog.json --backend cpu-ref --input a=@a.bin --size out=1024 --invocations 1024`,
		Args: cobra.NoArgs,
	}, func(o *tuneOptions, f *pflag.FlagSet) {
		f.StringArrayVar(&o.Targets, "kernel", nil, "corpus kernel name, or a program JSON file, to tune (repeatable for kernels)")
		f.StringVar(&o.Backend, "backend", "", "backend id or id:adapter to tune on (required)")
		f.DurationVar(&o.Budget, "budget", 30*time.Second, "wall-clock budget per program; 0 searches every candidate")
		f.StringArrayVar(&o.Sizes, "size", nil, "problem size N for a kernel (default: its largest standard size); NAME=COUNT elements of a write buffer for a program file")
		f.Uint64Var(&o.Seed, "seed", 1, "random seed for corpus inputs")
		f.IntVar(&o.Warmup, "warmup", 1, "untimed runs per candidate")
		f.IntVar(&o.Runs, "runs", 5, "timed runs per candidate (the median counts)")
		f.BoolVar(&o.DryRun, "dry-run", false, "search and print, but record nothing")
		f.BoolVar(&o.NoiseGuard, "noise-guard", true, "record a winner only when it beats the baseline by more than the spread of their timed runs")
		f.Uint32Var(&o.MaxInvocations, "max-invocations", 0, "largest workgroup to try (default: the adapter's limit)")
		f.StringArrayVar(&o.Workgroups, "wg", nil, "X,Y,Z: a workgroup size to try (repeatable; default: sizes proposed for the program's axes; the program's own is always tried)")
		f.StringArrayVar(&o.File.Inputs, "input", nil, "NAME=@FILE: raw little-endian bytes of buffer NAME (program files)")
		f.StringArrayVar(&o.File.Zero, "zero", nil, "NAME[=COUNT]: run read buffer NAME on zeros (program files)")
		f.StringArrayVar(&o.File.Spec, "spec", nil, "NAME=VALUE: fix parameter NAME; a tunable fixed here is not searched (for a kernel, its tunables, or an option that builds it: matmul_tc's type=bf16)")
		f.StringArrayVar(&o.File.Uniforms, "uniform", nil, "NAME=VALUE: set uniform NAME (program files)")
		f.StringVar(&o.File.Invocations, "invocations", "", "X,Y,Z invocations; each candidate's grid is their ceiling division by its workgroup size (program files)")
	})
	a.traceFlag(cmd)
	return cmd
}

// check refuses flags that cannot tune anything and returns the --wg sizes.
func (o *tuneOptions) check() ([][3]uint32, error) {
	if len(o.Targets) == 0 {
		return nil, errors.New("no --kernel. Fix: pass --kernel NAME (see kiln run --list) or --kernel PROGRAM.json")
	}
	if o.Backend == "" {
		return nil, errors.New("no --backend. Fix: name the backend to tune on, such as --backend cuda or --backend vulkan:1 (kiln backends lists them)")
	}
	if o.Budget < 0 || o.Warmup < 0 || o.Runs < 1 {
		return nil, errors.New("--budget and --warmup must not be negative and --runs must be at least 1. Fix: pass --budget 30s --warmup 1 --runs 5")
	}
	var wgs [][3]uint32
	for _, w := range o.Workgroups {
		wg, err := parseWorkgroup(w)
		if err != nil {
			return nil, err
		}
		wgs = append(wgs, wg)
	}
	return wgs, nil
}

// runTune is kiln tune: it searches each target on o.Backend, records the
// winners (unless o.DryRun) and prints the report.
func runTune(ctx context.Context, o *tuneOptions) error {
	wgs, err := o.check()
	if err != nil {
		return err
	}
	path, st, err := loadAutotune()
	if err != nil {
		return err
	}
	var tts []tuneTarget
	for _, name := range o.Targets {
		t, err := newTuneTarget(name, len(o.Targets), o.Sizes, o.Seed, o.File)
		if err != nil {
			return err
		}
		tts = append(tts, t)
	}
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	b, err := h.Acquire(ctx, o.Backend)
	if err != nil {
		return err
	}
	adapter := autotune.DeviceAdapter(b.ID(), b.Live().AdapterFingerprint)
	limit := b.Adapter().Profile.MaxInvocationsPerWorkgroup
	if o.MaxInvocations > 0 && (limit == 0 || o.MaxInvocations < limit) {
		limit = o.MaxInvocations
	}
	batch := autotune.NewBatcher(st, tuneSaveBatch)
	out := tuneJSON{Store: path, Backend: b.Name(), Adapter: adapter, DryRun: o.DryRun}
	var failed []string
	for _, t := range tts {
		j, recs, err := o.tuneOne(ctx, b, t, limit, wgs, autotune.Config{Warmup: o.Warmup, Runs: o.Runs, Budget: o.Budget}, o.NoiseGuard, adapter)
		if err != nil {
			return err
		}
		for i, kr := range recs {
			if o.DryRun {
				break
			}
			if i == 0 {
				j.Key = kr.key.Hex()
			} else {
				j.ProgramKey = kr.key.Hex()
			}
			if err := batch.Put(ctx, kr.key, kr.rec); err != nil {
				return err
			}
		}
		if j.Winner == "" {
			failed = append(failed, t.name)
		}
		out.Results = append(out.Results, j)
	}
	if err := batch.Flush(ctx); err != nil {
		return err
	}
	if err := o.show(out, func() { o.printTune(out) }); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("no candidate of %s gave a correct result, nothing recorded", strings.Join(failed, ", "))}
	}
	return nil
}

// newTuneTarget resolves --kernel name: a corpus kernel, else a program file.
func newTuneTarget(name string, count int, sizes []string, seed uint64, file runs.FileArgs) (tuneTarget, error) {
	if k, ok := kernels.Lookup(name); ok {
		// Options (matmul_tc's type=bf16) build the kernel; the other --spec
		// values fix its tunables.
		var opts ir.SpecMap
		var fixed []string
		for _, kv := range file.Spec {
			on, value, _ := strings.Cut(kv, "=")
			v, isOption, err := k.ParseOption(on, value)
			switch {
			case err != nil:
				return tuneTarget{}, fmt.Errorf("--spec %s: %w", kv, err)
			case isOption:
				opts.Set(on, v)
			default:
				fixed = append(fixed, kv)
			}
		}
		// A kernel with searched options (matmul_tc's tile) is tuned from
		// its defaults, with the fixed options --spec sets; --spec of a
		// searched option narrows the search to that value.
		corpus, fixedOpts, tunedDefaults := k, k.FixedOptions(opts), k.TunedOptions()
		build := opts
		if tunedDefaults.Len() > 0 {
			build = mergeSpecs(fixedOpts, tunedDefaults)
		}
		k, _, err := k.Configure(build)
		if err != nil {
			return tuneTarget{}, err
		}
		if k.Invocations == nil {
			return tuneTarget{}, fmt.Errorf("kernel %s computes a result that depends on its launch geometry, so it cannot be tuned. Fix: tune vector_add, matmul or matmul_reg, or a program file", k.Name)
		}
		size := slices.Max(k.Sizes)
		if len(sizes) > 1 {
			return tuneTarget{}, errors.New("several --size values for a kernel. Fix: pass one --size N")
		}
		if len(sizes) == 1 {
			n, err := strconv.Atoi(sizes[0])
			if err != nil || n < 0 {
				return tuneTarget{}, fmt.Errorf("--size %q is not a problem size. Fix: pass --size N with N ≥ 0", sizes[0])
			}
			size = n
		}
		if err := (runs.Limits{MemAvailable: runs.AvailableMemory()}).CheckKernel(k, size); err != nil {
			return tuneTarget{}, err
		}
		c := k.NewCase(rand.New(rand.NewPCG(seed, uint64(size))), size)
		prog := k.Program()
		search, err := narrowed(prog, fixed)
		if err != nil {
			return tuneTarget{}, err
		}
		want := k.Reference(c)
		t := tuneTarget{name: k.Name, kernel: &k, c: c, prog: prog, search: search, size: size,
			base:  host.Launch{CompileOptions: host.CompileOptions{Spec: c.Spec}},
			check: func(got [][]byte) error { return k.Check(got, want) },
		}
		if k.Flops != nil {
			t.flops = k.Flops(c)
		}
		if tunedDefaults.Len() > 0 {
			if err := t.addBuilds(corpus, opts, fixed); err != nil {
				return tuneTarget{}, err
			}
		}
		return t, nil
	}
	if count > 1 {
		return tuneTarget{}, fmt.Errorf("%q is not a corpus kernel, and only corpus kernels can be tuned together. Fix: tune a program file on its own", name)
	}
	if _, err := os.Stat(name); err != nil {
		return tuneTarget{}, fmt.Errorf("%q is neither a corpus kernel nor a program file. Fix: pass a name from kiln run --list or the path of a JSON program", name)
	}
	if file.Invocations == "" {
		return tuneTarget{}, errors.New("a program file needs --invocations. Fix: pass --invocations X,Y,Z, so each candidate's grid follows its workgroup size")
	}
	file.Path, file.Sizes, file.Limits = name, sizes, runs.Limits{MemAvailable: runs.AvailableMemory()}
	job, err := runs.FileJob(file)
	if err != nil {
		return tuneTarget{}, err
	}
	// A tunable the launch sets with --spec is not searched.
	p := *job.Program
	p.Params = slices.Clone(p.Params)
	for i, d := range p.Params {
		if _, set := job.Launch.Spec.Get(d.Name); set {
			p.Params[i].Candidates = nil
		}
	}
	inv := job.Launch.Invocations
	launch := interp.Launch{Grid: ir.GridFor(inv, p.WorkgroupSize), Inputs: job.Launch.Inputs, OutputCounts: job.Launch.OutputCounts, Uniforms: job.Launch.Uniforms}
	want, err := interp.Run(context.Background(), &p, interp.Options{Spec: job.Launch.Spec}, launch)
	if err != nil {
		return tuneTarget{}, fmt.Errorf("the reference interpreter cannot run %s: %w", name, err)
	}
	oracle := func(q *ir.Program) ([][]byte, error) {
		if q == &p {
			return want, nil
		}
		return interp.Run(context.Background(), q, interp.Options{Spec: job.Launch.Spec}, launch)
	}
	job.Launch.Backend = ""
	return tuneTarget{name: name, prog: &p, search: &p, base: job.Launch,
		check: func(got [][]byte) error { _, err := verify.Outputs(&p, got, oracle); return err },
	}, nil
}

// addBuilds makes t, whose kernel is corpus built with its searched options at
// their defaults, a target of corpus's option space with the options opts sets
// (autotune records of it are keyed by its fixed options); fixed are the
// --spec values of its programs' tunables. The baseline's build is builds[0],
// searched only when opts keeps the defaults in the space.
func (t *tuneTarget) addBuilds(corpus kernels.Kernel, opts ir.SpecMap, fixed []string) error {
	defaults := autotune.FormatParams(corpus.TunedOptions())
	t.corpus, t.fixed = corpus.Name, corpus.FixedOptions(opts)
	t.builds = []tuneBuild{{options: corpus.TunedOptions(), kernel: *t.kernel, prog: t.prog}}
	choices, skipped := corpus.OptionSpace(opts)
	for _, err := range skipped {
		t.skipped = append(t.skipped, err.Error())
	}
	for _, ch := range choices {
		if autotune.FormatParams(ch.Options) == defaults {
			t.builds[0].search = t.search
			continue
		}
		p := ch.Kernel.Program()
		search, err := narrowed(p, fixed)
		if err != nil {
			return err
		}
		t.builds = append(t.builds, tuneBuild{options: ch.Options, kernel: ch.Kernel, prog: p, search: search})
	}
	return nil
}

// narrowed returns a copy of p in which each tunable that specs (NAME=VALUE)
// fixes has that value as its default and only candidate, for the search
// space; p itself keys the record and compiles. Only tunables can be fixed.
func narrowed(p *ir.Program, specs []string) (*ir.Program, error) {
	q := *p
	q.Params = slices.Clone(p.Params)
	for _, kv := range specs {
		name, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(q.Params, func(d ir.ParamDecl) bool { return d.Name == name })
		if i < 0 || len(q.Params[i].Candidates) == 0 {
			var names []string
			for _, d := range p.Tunables() {
				names = append(names, d.Name)
			}
			return nil, fmt.Errorf("--spec %s: %s has no tunable %q. Fix: fix one of its tunables: %s", kv, p.Name, name, strings.Join(names, ", "))
		}
		v, err := autotune.ParseParams(p, kv)
		if err != nil {
			return nil, fmt.Errorf("--spec %s: %w. Fix: write NAME=VALUE with a value of the parameter's type", kv, err)
		}
		sv, _ := v.Get(name)
		l, _ := sv.Literal()
		q.Params[i].Default, q.Params[i].Candidates = l, []ir.Literal{l}
	}
	return &q, nil
}

// parseWorkgroup reads --wg X[,Y[,Z]] (missing axes are 1).
func parseWorkgroup(s string) ([3]uint32, error) {
	out := [3]uint32{1, 1, 1}
	parts := strings.Split(s, ",")
	if len(parts) > 3 {
		return out, fmt.Errorf("--wg %q has more than 3 axes. Fix: write X,Y,Z", s)
	}
	total := uint64(1)
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil || v == 0 {
			return out, fmt.Errorf("--wg %q: axis %d is not a positive count. Fix: write X,Y,Z with positive integers", s, i)
		}
		out[i] = uint32(v)
		total *= v
	}
	if total > ir.MaxInvocations {
		return out, fmt.Errorf("--wg %q has %d invocations, over %d. Fix: pass a smaller workgroup", s, total, ir.MaxInvocations)
	}
	return out, nil
}

// hostRunner runs candidates of one target on one backend, compiling each
// configuration once. The dispatch's buffers are allocated and their inputs
// written on the first run and bound by every candidate's runs (the inputs do
// not change with the candidate), so a timed run moves no data; a run whose
// outputs the tuner checks first refills its write buffers with outputSentinel
// and rewrites its read_write ones, and reads the outputs back after.
type hostRunner struct {
	b   *host.Backend
	t   tuneTarget
	pl  *host.Pipeline
	cur string // the configuration pl was compiled for
	// bufs are the dispatch's buffers by binding; inputs the data the read and
	// read_write ones were written with.
	bufs   []*host.Buffer
	inputs [][]byte
}

// outputSentinel fills a write buffer before a checked run, so that elements
// the candidate fails to store cannot pass for an earlier run's results.
const outputSentinel = 0x7fbadbad

func (r *hostRunner) Run(ctx context.Context, c autotune.Candidate, outputs bool) (autotune.Sample, error) {
	prog, kernel := r.t.prog, r.t.kernel
	build, params := r.t.build(c)
	if build != nil {
		prog, kernel = build.prog, &build.kernel
	}
	merged := mergeSpecs(r.t.base.Spec, params)
	if r.pl == nil || r.cur != c.String() {
		if err := r.releasePipeline(ctx); err != nil {
			return autotune.Sample{}, err
		}
		pl, err := r.b.Compile(ctx, prog, host.CompileOptions{Spec: merged, WorkgroupSize: c.WorkgroupSize})
		if err != nil {
			return autotune.Sample{}, err
		}
		r.pl, r.cur = pl, c.String()
	}
	w := r.t.base.Work
	if kernel != nil {
		kc, _ := kernel.Retune(r.t.c, c.WorkgroupSize, merged)
		w = host.Work{Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms}
	}
	if r.bufs == nil {
		if err := r.allocate(ctx, w); err != nil {
			return autotune.Sample{}, err
		}
	}
	if outputs {
		if err := r.reset(ctx); err != nil {
			return autotune.Sample{}, err
		}
	}
	bound := host.BoundWork{Grid: w.Grid, Invocations: w.Invocations, Uniforms: w.Uniforms, Bindings: make([]host.Binding, len(r.bufs))}
	for i, bf := range r.bufs {
		bound.Bindings[i] = host.Bind(bf)
	}
	var batch host.Batch
	batch.Dispatch(r.pl, bound)
	began := time.Now()
	res, err := r.b.Submit(ctx, &batch)
	took := time.Since(began)
	if err != nil {
		return autotune.Sample{}, err
	}
	sample := autotune.Sample{Time: took}
	if res.DeviceTime > 0 {
		sample = autotune.Sample{Time: res.DeviceTime, Device: true}
	}
	if outputs {
		for _, binding := range r.t.prog.Outputs() {
			bf := r.bufs[binding]
			out := make([]byte, bf.Size())
			if err := bf.Read(ctx, 0, out); err != nil {
				return autotune.Sample{}, err
			}
			sample.Outputs = append(sample.Outputs, out)
		}
	}
	return sample, nil
}

// allocate makes a buffer per binding of the program, sized and written from
// w: a read or read_write buffer holds its input, a write buffer its output
// count of elements (or its fixed count).
func (r *hostRunner) allocate(ctx context.Context, w host.Work) error {
	prog := r.t.prog
	r.bufs, r.inputs = make([]*host.Buffer, len(prog.Buffers)), make([][]byte, len(prog.Buffers))
	for _, d := range prog.Buffers {
		var size int64
		switch {
		case d.Access != ir.Write && int(d.Binding) < len(w.Inputs):
			r.inputs[d.Binding] = w.Inputs[d.Binding]
			size = int64(len(w.Inputs[d.Binding]))
		case d.Count > 0:
			size = int64(d.Count) * int64(d.Type.Size())
		case int(d.Binding) < len(w.OutputCounts):
			size = int64(w.OutputCounts[d.Binding]) * int64(d.Type.Size())
		}
		bf, err := r.b.Alloc(ctx, size, 0)
		if err != nil {
			return err
		}
		r.bufs[d.Binding] = bf
		if in := r.inputs[d.Binding]; len(in) > 0 {
			if err := bf.Write(ctx, 0, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// reset prepares a checked run: write buffers filled with outputSentinel,
// read_write buffers holding their inputs again (earlier runs changed them).
func (r *hostRunner) reset(ctx context.Context) error {
	var batch host.Batch
	for _, d := range r.t.prog.Buffers {
		bf := r.bufs[d.Binding]
		switch {
		case bf.Size() == 0:
		case d.Access == ir.Write:
			batch.Fill(host.Bind(bf), outputSentinel)
		case d.Access == ir.ReadWrite:
			if err := bf.Write(ctx, 0, r.inputs[d.Binding]); err != nil {
				return err
			}
		}
	}
	if batch.Len() == 0 {
		return nil
	}
	_, err := r.b.Submit(ctx, &batch)
	return err
}

func (r *hostRunner) releasePipeline(ctx context.Context) error {
	if r.pl == nil {
		return nil
	}
	pl := r.pl
	r.pl, r.cur = nil, ""
	return r.b.Release(ctx, pl)
}

// release lets go of the pipeline and the buffers.
func (r *hostRunner) release(ctx context.Context) error {
	err := r.releasePipeline(ctx)
	for _, bf := range r.bufs {
		if bf == nil {
			continue
		}
		if ferr := bf.Free(ctx); err == nil {
			err = ferr
		}
	}
	r.bufs, r.inputs = nil, nil
	return err
}

// tuneOne searches t's space on b and returns its report and the winner's
// record (see tuneReport).
func (a *app) tuneOne(ctx context.Context, b *host.Backend, t tuneTarget, limit uint32, wgs [][3]uint32, cfg autotune.Config, guard bool, adapter string) (tuneResultJSON, []keyedRecord, error) {
	var space []autotune.Candidate
	if t.builds != nil {
		// Each build of the searched options at its own workgroup size (and
		// --wg's): the tile's shape sets the size its code is written for.
		var skipped []string
		space, skipped = t.space(wgs, limit)
		t.skipped = append(slices.Clip(t.skipped), skipped...)
	} else {
		if wgs == nil {
			wgs = autotune.WorkgroupSizes(t.prog, limit)
		}
		space = autotune.Space(t.search, wgs)
		// The baseline is always the untuned program, even when --spec narrows
		// the search away from its defaults.
		if def := autotune.Space(t.prog, nil)[0]; def.String() != space[0].String() {
			space = append([]autotune.Candidate{def}, space...)
		}
	}
	for _, why := range t.skipped {
		fmt.Fprintf(a.errOut, "tune %s: skipped a build: %v\n", t.name, why)
	}
	r := &hostRunner{b: b, t: t}
	cfg.Check = t.check
	p := newTuneProgress(a.errOut, t.name)
	cfg.Progress = p.update
	res, err := autotune.Tune(ctx, r, space, cfg)
	p.finish()
	if rerr := r.release(ctx); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return tuneResultJSON{}, nil, err
	}
	j, rec := tuneReport(t, res, guard, time.Now())
	j.SkippedBuilds = t.skipped
	if rec == nil {
		return j, nil, nil
	}
	w, _ := res.Winner()
	return j, t.records(*rec, w.Candidate, adapter), nil
}

// tuneReport is the report of t's search and the record to save: the
// winner's, carrying the program's name, dated now; nil when no candidate
// counted (j.Winner is empty) or, with guard, when the default stands
// (j.DefaultStands says why: the baseline was the fastest, or the winner's
// lead is within the spread of the timed runs, autotune.Result.NoiseGuard).
func tuneReport(t tuneTarget, res *autotune.Result, guard bool, now time.Time) (tuneResultJSON, *autotune.Record) {
	j := tuneResultJSON{Target: t.name, Program: t.prog.Name, Size: t.size, Candidates: len(res.Trials), Speedup: res.Speedup()}
	if t.kernel == nil {
		j.Size = 0
	}
	j.Measured, j.Rejected, j.Skipped = res.Counted()
	for i, tr := range res.Trials {
		if tr.Skipped {
			continue
		}
		row := tuneTrialJSON{Candidate: tr.Candidate.String(), WorkgroupSize: tr.Candidate.WorkgroupSize, Params: autotune.FormatParams(tr.Candidate.Spec),
			MedianNs: tr.Median.Nanoseconds(), MinNs: tr.Min.Nanoseconds(), MaxNs: tr.Max.Nanoseconds(),
			DeviceTime: tr.Device, Baseline: i == 0, Winner: i == res.Best}
		if tr.Err != nil {
			row.Error = tr.Err.Error()
		} else if t.flops > 0 && tr.Median > 0 {
			row.GFlops = t.flops / tr.Median.Seconds() / 1e9
		}
		j.Trials = append(j.Trials, row)
	}
	slices.SortStableFunc(j.Trials, func(x, y tuneTrialJSON) int {
		switch {
		case (x.Error == "") != (y.Error == ""):
			if x.Error == "" {
				return -1
			}
			return 1
		case x.MedianNs < y.MedianNs:
			return -1
		case x.MedianNs > y.MedianNs:
			return 1
		}
		return 0
	})
	w, ok := res.Winner()
	if !ok {
		return j, nil
	}
	j.Winner = w.Candidate.String()
	if beats, why := res.NoiseGuard(); guard && !beats {
		j.DefaultStands = why
		return j, nil
	}
	rec := w.Candidate.Record(now.UTC().Format(time.RFC3339))
	rec.Program = t.prog.Name
	return j, &rec
}

type tuneJSON struct {
	Store   string           `json:"store"`
	Backend string           `json:"backend"`
	Adapter string           `json:"adapter"`
	DryRun  bool             `json:"dry_run"`
	Results []tuneResultJSON `json:"results"`
}

type tuneResultJSON struct {
	Target     string  `json:"target"`
	Program    string  `json:"program"`
	Size       int     `json:"size,omitempty"`
	Candidates int     `json:"candidates"`
	Measured   int     `json:"measured"`
	Rejected   int     `json:"rejected"`
	Skipped    int     `json:"skipped"`
	Winner     string  `json:"winner,omitempty"`
	Speedup    float64 `json:"speedup_over_baseline"`
	// DefaultStands is why the winner was not recorded although it counted:
	// the noise guard kept the default configuration.
	DefaultStands string `json:"default_stands,omitempty"`
	// Key is the record's key; for a kernel with searched options (matmul_tc's
	// tile) the key of the options' record, and ProgramKey that of the winning
	// program's (its workgroup size and tunables).
	Key        string `json:"key,omitempty"`
	ProgramKey string `json:"program_key,omitempty"`
	// SkippedBuilds say why combinations of the searched options were not
	// tried (they do not build).
	SkippedBuilds []string        `json:"skipped_builds,omitempty"`
	Trials        []tuneTrialJSON `json:"trials"`
}

type tuneTrialJSON struct {
	Candidate     string    `json:"candidate"`
	WorkgroupSize [3]uint32 `json:"workgroup_size"`
	Params        string    `json:"params"`
	MedianNs      int64     `json:"median_ns"`
	MinNs         int64     `json:"min_ns"`
	MaxNs         int64     `json:"max_ns"`
	DeviceTime    bool      `json:"device_time"`
	GFlops        float64   `json:"gflops,omitempty"`
	Baseline      bool      `json:"baseline,omitempty"`
	Winner        bool      `json:"winner,omitempty"`
	Error         string    `json:"error,omitempty"`
}

// tuneTableRows is how many measured candidates the table shows, fastest first
// (the baseline is shown too when it is slower).
const tuneTableRows = 10

func (a *app) printTune(j tuneJSON) {
	for i, r := range j.Results {
		if i > 0 {
			fmt.Fprintln(a.out)
		}
		what := r.Target
		if r.Size > 0 || r.Program != r.Target {
			what = fmt.Sprintf("%s (%s)", r.Target, r.Program)
		}
		if r.Size > 0 {
			what += fmt.Sprintf(", size %d", r.Size)
		}
		fmt.Fprintf(a.out, "%s on %s (%s): %d candidates, %d measured, %d rejected, %d skipped by the budget\n",
			what, j.Backend, j.Adapter, r.Candidates, r.Measured, r.Rejected, r.Skipped)
		tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RANK\tCANDIDATE\tMEDIAN\tSPREAD\tTIMER\tGFLOP/S\tVS BASELINE\t")
		var base int64
		for _, t := range r.Trials {
			if t.Baseline && t.Error == "" {
				base = t.MedianNs
			}
		}
		for rank, t := range r.Trials {
			if t.Error != "" || (rank >= tuneTableRows && !t.Baseline) {
				continue
			}
			timer, gf, vs := "host", "-", "-"
			if t.DeviceTime {
				timer = "device"
			}
			if t.GFlops > 0 {
				gf = fmt.Sprintf("%.1f", t.GFlops)
			}
			if base > 0 && t.MedianNs > 0 {
				vs = fmt.Sprintf("%.2f×", float64(base)/float64(t.MedianNs))
			}
			mark := ""
			switch {
			case t.Winner:
				mark = "winner"
			case t.Baseline:
				mark = "baseline"
			}
			fmt.Fprintf(tw, "%d\t%s\t%v\t%v\t%s\t%s\t%s\t%s\n", rank+1, t.Candidate, time.Duration(t.MedianNs), time.Duration(t.MaxNs-t.MinNs), timer, gf, vs, mark)
		}
		tw.Flush()
		shown := 0
		for _, t := range r.Trials {
			if t.Error != "" {
				if shown < 3 {
					fmt.Fprintf(a.out, "  rejected %s\n", t.Error)
				}
				shown++
			}
		}
		if shown > 3 {
			fmt.Fprintf(a.out, "  … and %d more rejected (--json lists them)\n", shown-3)
		}
		switch {
		case r.Winner == "":
			fmt.Fprintln(a.out, "no candidate gave a correct result; nothing recorded")
		case r.DefaultStands != "":
			fmt.Fprintf(a.out, "the default stands, nothing recorded: %s (a spread is a candidate's slowest timed run minus its fastest, so one slow run widens it: tune on a quieter machine, or pass --noise-guard=false to record the fastest anyway)\n", r.DefaultStands)
		case j.DryRun:
			fmt.Fprintf(a.out, "winner %s, %.2f× the baseline (dry run: not recorded)\n", r.Winner, r.Speedup)
		default:
			fmt.Fprintf(a.out, "recorded %s, %.2f× the baseline, as %s@%s in %s\n", r.Winner, r.Speedup, r.Key, j.Adapter, j.Store)
		}
	}
}

// tuneProgress reports a search's progress on stderr: a bar redrawn in place on
// a terminal, one plain line per candidate otherwise.
type tuneProgress struct {
	bar   *progressBar
	plain io.Writer
	what  string
}

func newTuneProgress(w io.Writer, what string) *tuneProgress {
	if isTerminal(w) {
		return &tuneProgress{bar: newProgressBar(w), what: what}
	}
	return &tuneProgress{plain: w, what: what}
}

func (p *tuneProgress) update(done, total int, c autotune.Candidate) {
	switch {
	case p.bar != nil:
		p.bar.update(done, total, p.what+" "+c.String())
	case done < total:
		fmt.Fprintf(p.plain, "tune %s: %d/%d %s\n", p.what, done+1, total, c)
	}
}

func (p *tuneProgress) finish() {
	if p.bar != nil {
		p.bar.finish()
	}
}
