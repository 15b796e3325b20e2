package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Backend is one adapter of one running plugin, as returned by Acquire and
// AcquirePreferred. It stays usable across plugin crashes: the next call
// relaunches the plugin, reopens the adapter and recompiles stale pipelines.
type Backend struct {
	p       *plugin
	adapter pluginapi.Adapter
}

// Name is the backend's explicit name, "id:adapter".
func (b *Backend) Name() string { return b.p.desc.ID + ":" + strconv.Itoa(b.adapter.Index) }

// ID is the backend's id.
func (b *Backend) ID() string { return b.p.desc.ID }

// Adapter describes the adapter this backend runs on.
func (b *Backend) Adapter() pluginapi.Adapter { return b.adapter }

// Description is what the plugin reported about itself.
func (b *Backend) Description() *pluginapi.Description { return cloneDescription(b.p.desc) }

// Acquisition is the measured time of the Open call that prepared the adapter.
func (b *Backend) Acquisition() time.Duration {
	b.p.mu.Lock()
	defer b.p.mu.Unlock()
	return b.p.acquisition[b.adapter.Index]
}

// open makes sure the adapter is open on the current process.
func (b *Backend) open(ctx context.Context) (time.Duration, error) {
	var took time.Duration
	err := b.call(ctx, "open", func(ctx context.Context, proc *process) error {
		var err error
		took, err = b.p.open(ctx, proc, b.adapter.Index)
		return err
	})
	return took, b.p.stats.failed(err)
}

// call runs fn on the plugin's current process (relaunching it if needed) and
// classifies its error. When the process turns out to have died before the call
// (nothing ran), it relaunches the plugin and runs fn once more.
func (b *Backend) call(ctx context.Context, op string, fn func(context.Context, *process) error) error {
	for attempt := 0; ; attempt++ {
		proc, err := b.p.current(ctx)
		if err != nil {
			return err
		}
		err = b.callOn(ctx, proc, op, fn)
		if err != errNothingRan {
			return err
		}
		if attempt > 0 {
			return b.nothingRanTwice(proc, op)
		}
	}
}

// nothingRanTwice is the error when a relaunched process was dead before the
// retried call too.
func (b *Backend) nothingRanTwice(proc *process, op string) error {
	return &CrashedError{Backend: b.Name(), Op: op, Exit: proc.exit() + "; it was already dead when the call was retried", Stderr: proc.stderr.summary()}
}

// callOn runs fn on proc and classifies its error; it returns errNothingRan
// when proc was dead before the call began.
func (b *Backend) callOn(ctx context.Context, proc *process, op string, fn func(context.Context, *process) error) error {
	began := time.Now()
	proc.begin()
	err := fn(ctx, proc)
	proc.end()
	if err != nil {
		return b.p.classify(ctx, proc, b.Name(), op, began, err)
	}
	return nil
}

// CompileOptions specialize a program at compile time.
type CompileOptions struct {
	// Spec sets parameters by name; the others keep their defaults.
	Spec ir.SpecMap
	// WorkgroupSize replaces the program's workgroup size when non-zero. When it
	// is zero, an autotune record for (program, spec, backend) supplies the size
	// for launches by Work.Invocations, whose grid follows it; a launch by
	// Work.Grid always runs with the program's own size (a record never changes
	// a grid the caller computed). See Pipeline.Tuned.
	WorkgroupSize [3]uint32
	// noStores keeps the compile away from the persistent stores (the host's
	// own probe dispatches: a health check leaves no cache entry behind).
	noStores bool
	// byGrid skips the autotune lookup: the one launch the pipeline is for
	// gives its Grid (Host.Dispatch, PGOCandidate).
	byGrid bool
}

// stores are the persistent stores pl's compiles go through; nil when none.
func (pl *Pipeline) stores() *stores {
	if pl.opts.noStores {
		return nil
	}
	return pl.backend.p.set.stores
}

// Pipeline is a program compiled on one backend. If the plugin is relaunched,
// the next Dispatch compiles it again on the new process.
type Pipeline struct {
	backend *Backend
	prog    *ir.Program
	// opts hold the effective workgroup size: the caller's, a tuned one, or zero
	// for the program's.
	opts  CompileOptions
	tuned bool
	key   cache.Key
	// grid is the pipeline that launches by Grid run when an autotune record
	// chose pl's workgroup size: the program compiled with its own size,
	// compiled on first use; nil when pl is untuned (it runs them itself).
	grid *Pipeline

	mu       sync.Mutex
	proc     *process
	handle   uint64
	released bool
	// compileTime is the host-measured duration of the last compile, including
	// the pipeline cache's read and write; cacheStatus is its CacheHit,
	// CacheMiss or CacheOff.
	compileTime time.Duration
	cacheStatus string
}

// Program returns the pipeline's copy of the compiled program.
func (pl *Pipeline) Program() *ir.Program { return pl.prog }

// CompileTime returns how long the last compile took, as the host measured it
// (the pipeline cache's read and write included).
func (pl *Pipeline) CompileTime() time.Duration {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.compileTime
}

// CacheStatus returns the pipeline cache's part in the last compile: CacheHit,
// CacheMiss or CacheOff.
func (pl *Pipeline) CacheStatus() string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.cacheStatus
}

// WorkgroupSize returns the workgroup size the pipeline was compiled for: the
// size launches by Invocations run with. Launches by Grid run with it too
// unless an autotune record chose it (Tuned); they then run with the program's
// own size.
func (pl *Pipeline) WorkgroupSize() [3]uint32 {
	if pl.opts.WorkgroupSize != ([3]uint32{}) {
		return pl.opts.WorkgroupSize
	}
	return pl.prog.WorkgroupSize
}

// Tuned reports whether an autotune record chose the workgroup size. A record
// changes only what it cannot make wrong: launches by Work.Invocations (or
// BoundWork.Invocations), whose grid is recomputed from the tuned size. A
// launch by Grid was sized by its caller for the program's workgroup size, so
// it runs with that size, on a pipeline the host compiles for it, and its
// Result says Tuned false.
func (pl *Pipeline) Tuned() bool { return pl.tuned }

// forLaunch returns the pipeline a launch runs on: pl, or for a launch by
// Grid (invocations zero) of a tuned pipeline, its untuned sibling.
func (pl *Pipeline) forLaunch(invocations [3]uint32) *Pipeline {
	if pl.grid != nil && invocations == ([3]uint32{}) {
		return pl.grid
	}
	return pl
}

// Compile validates prog and compiles it on the backend, through the host's
// pipeline cache: the blob cached under the pipeline's key (see cache.Key) goes
// with the compile request, and the blob the plugin returns is stored. Without
// a workgroup-size override, an autotune record for the program on this backend
// sets the size for launches by Invocations (see Pipeline.Tuned).
func (b *Backend) Compile(ctx context.Context, prog *ir.Program, opts CompileOptions) (*Pipeline, error) {
	if prog == nil {
		return nil, &LaunchError{Program: "<nil>", Detail: "no program. Fix: pass the *ir.Program to compile"}
	}
	if err := ir.Validate(prog); err != nil {
		return nil, fmt.Errorf("program %q is invalid: %w", prog.Name, err)
	}
	// The pipeline keeps its own copy: a relaunch recompiles it, and the caller
	// may change prog meanwhile.
	encoded, err := ir.Encode(prog)
	if err != nil {
		return nil, fmt.Errorf("program %q cannot be encoded: %w", prog.Name, err)
	}
	own, err := ir.Decode(encoded)
	if err != nil {
		return nil, fmt.Errorf("program %q does not survive its encoding: %w", prog.Name, err)
	}
	var spec ir.SpecMap
	for _, name := range opts.Spec.Names() {
		v, _ := opts.Spec.Get(name)
		spec.Set(name, v)
	}
	opts.Spec = spec
	pl := &Pipeline{backend: b, prog: own, opts: opts}
	if opts.WorkgroupSize == ([3]uint32{}) && !opts.byGrid {
		pl.opts.WorkgroupSize, pl.tuned = pl.stores().tunedSize(b.p.log, b, own, spec)
	}
	if pl.key, err = pipelineKey(b, own, spec, pl.WorkgroupSize()); err != nil {
		return nil, fmt.Errorf("program %q: %w", prog.Name, err)
	}
	if pl.tuned {
		pl.grid = &Pipeline{backend: b, prog: own, opts: opts}
		if pl.grid.key, err = pipelineKey(b, own, spec, own.WorkgroupSize); err != nil {
			return nil, fmt.Errorf("program %q: %w", prog.Name, err)
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if _, _, _, err := pl.compileLocked(ctx); err != nil {
		return nil, b.p.stats.failed(err)
	}
	return pl, nil
}

// compileLocked compiles the pipeline on the plugin's current process unless it is
// already compiled there. It returns that process, the handle, and the compile
// time (zero when nothing was compiled). A process found dead before the
// compile is replaced and the compile runs once more.
func (pl *Pipeline) compileLocked(ctx context.Context) (*process, uint64, time.Duration, error) {
	for attempt := 0; ; attempt++ {
		proc, handle, took, err := pl.compileOnce(ctx)
		if err != errNothingRan {
			return proc, handle, took, err
		}
		if attempt > 0 {
			return nil, 0, 0, pl.backend.nothingRanTwice(proc, "compile")
		}
	}
}

// compileOnce is one attempt of compileLocked; on errNothingRan it returns the
// dead process.
func (pl *Pipeline) compileOnce(ctx context.Context) (*process, uint64, time.Duration, error) {
	b := pl.backend
	proc, err := b.p.current(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	if proc == pl.proc {
		return proc, pl.handle, 0, nil
	}
	var handle uint64
	st := pl.stores()
	began := time.Now()
	cached, status := st.readBlob(b.p.log, pl.key)
	var blob []byte
	err = b.callOn(ctx, proc, "compile", func(ctx context.Context, proc *process) error {
		if _, err := b.p.open(ctx, proc, b.adapter.Index); err != nil {
			return err
		}
		res, err := proc.backend.Compile(client.WithReceiveLimit(ctx, compileLimit), &pluginapi.CompileRequest{
			Adapter: b.adapter.Index, Program: pl.prog, Spec: pl.opts.Spec, WorkgroupSize: pl.opts.WorkgroupSize,
			CachedBlob: cached,
		})
		if err != nil {
			return err
		}
		handle, blob = res.Pipeline, res.Blob
		return nil
	})
	if err == errNothingRan {
		return proc, 0, 0, err
	}
	if o := b.p.set.obs; o != nil {
		o.compiled(ctx, b, pl.prog.Name, status, began, err)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	st.storeBlob(b.p.log, pl.key, cached, blob)
	pl.proc, pl.handle, pl.compileTime, pl.cacheStatus = proc, handle, time.Since(began), status
	b.p.stats.compiled(status)
	b.p.log.Debug("compiled", "program", pl.prog.Name, "backend", b.Name(), "cache", status, "took", pl.compileTime)
	return proc, handle, pl.compileTime, nil
}

// compileLimit bounds a compile response: the largest blob the pipeline cache
// keeps (a larger one would not be stored anyway) and the message around it.
const compileLimit = cache.MaxEntryBytes + client.ResponseOverhead

// Work is what one dispatch runs on: the grid and the buffers.
type Work struct {
	// Grid is the number of workgroups per axis; 0 on an axis runs nothing.
	Grid [3]uint32
	// Invocations, when set instead of Grid, is the number of invocations per
	// axis; the grid is its ceiling division by the workgroup size.
	Invocations [3]uint32
	// Inputs are by binding: little-endian bytes for read and read_write
	// buffers, nil for write buffers.
	Inputs [][]byte
	// Named are inputs by the program's buffer names, made with Input
	// (host.Input("x", xs)): typed, so the launch checks each against its
	// buffer's element type. A buffer takes its input by name or by binding,
	// not both.
	Named []NamedInput
	// OutputCounts are by binding: element counts of write buffers without a
	// fixed count.
	OutputCounts []uint32
	// Uniforms is the program's uniform block (IR v1.1): 4 little-endian bytes
	// per uniform, in declaration order; ir.EncodeUniforms packs it from values
	// by name. Empty for a program without uniforms.
	Uniforms []byte
}

// Result is the outcome of a dispatch.
type Result struct {
	// Outputs are every write and read_write buffer, in binding order.
	Outputs [][]byte
	// Backend names where it ran ("cpu-ref:0").
	Backend string
	// Compile is the host-measured compile time (zero when the pipeline was
	// already compiled on the running process).
	Compile time.Duration
	// Dispatch is the host-measured round trip of the dispatch.
	Dispatch time.Duration
	// PluginTime and DeviceTime are what the plugin measured (DeviceTime is zero
	// when the backend cannot time the device).
	PluginTime time.Duration
	DeviceTime time.Duration
	// Selection says why Backend ran it (Host.Dispatch only): SelectedExplicitly
	// ("explicit"), "pgo route: fastest of N, median X µs", "preferred: " and
	// why no PGO route was followed, or "fallback: " and which backend failed.
	Selection string
	// Failover lists the backends Host.Dispatch tried before Backend, with
	// why each failed; empty when the first one ran the launch.
	Failover []Attempt
	// Cache is the pipeline cache's part in the pipeline's last compile:
	// CacheHit, CacheMiss or CacheOff.
	Cache string
	// WorkgroupSize is the size the pipeline ran with; Tuned reports whether an
	// autotune record chose it (never for a launch by Grid).
	WorkgroupSize [3]uint32
	Tuned         bool
	// prog is the program that ran, for Output and OutputAs.
	prog *ir.Program
}

// Dispatch runs pl with w. The plugin's outputs are checked against the program
// and the launch: a wrong number of outputs or a wrong size is a BadResultError,
// and a response larger than the outputs the launch makes is refused from its
// announced length, before it is received. When the plugin turns out to have
// died before the dispatch was sent (nothing ran), the host relaunches it,
// recompiles the pipeline and dispatches once more; only work lost to a crash
// is a CrashedError. A launch by w.Grid runs with the program's workgroup size
// (or the compile's override) even when an autotune record tuned pl; only a
// launch by w.Invocations follows the record (see Pipeline.Tuned).
func (b *Backend) Dispatch(ctx context.Context, pl *Pipeline, w Work) (*Result, error) {
	o := b.p.set.obs
	var began time.Time
	if o != nil {
		began = time.Now()
	}
	res, err := b.dispatch(ctx, pl, w)
	err = b.p.stats.failed(err)
	if o != nil {
		o.dispatched(ctx, b, pl, began, res, err)
	}
	return res, err
}

func (b *Backend) dispatch(ctx context.Context, pl *Pipeline, w Work) (*Result, error) {
	if pl == nil || pl.backend.p != b.p || pl.backend.adapter.Index != b.adapter.Index {
		return nil, &LaunchError{Program: "<pipeline>", Detail: fmt.Sprintf("pipeline was not compiled on %s. Fix: compile it with this backend's Compile", b.Name())}
	}
	pl = pl.forLaunch(w.Invocations)
	req, sizes, err := plan(pl.prog, pl.opts.WorkgroupSize, w)
	if err != nil {
		return nil, err
	}
	if err := checkBindingSizes(b, pl.prog, req, sizes); err != nil {
		return nil, err
	}
	limit, in, want := client.ResponseOverhead, 0, 0
	for _, n := range sizes {
		limit += n + client.PerBufferOverhead
		want += n
	}
	for _, data := range req.Inputs {
		in += len(data)
	}
	for attempt := 0; ; attempt++ {
		pl.mu.Lock()
		if pl.released {
			pl.mu.Unlock()
			return nil, &LaunchError{Program: pl.prog.Name, Detail: "pipeline was released. Fix: compile the program again"}
		}
		proc, handle, compileTime, err := pl.compileLocked(ctx)
		cacheStatus := pl.cacheStatus
		pl.mu.Unlock()
		if err != nil {
			return nil, err
		}
		req.Pipeline = handle
		began := time.Now()
		res, spans, err := b.dispatchOn(ctx, proc, pl, req, sizes, limit)
		if err == errNothingRan {
			if attempt > 0 {
				return nil, b.nothingRanTwice(proc, "dispatch")
			}
			continue
		}
		took := time.Since(began)
		name := b.Name()
		if err == nil {
			err = checkResult(name, pl.prog, sizes, res, took)
		}
		if err != nil {
			b.p.launchFailed(proc, pl, w, in+want, err)
			return nil, err
		}
		if tr := b.p.set.obs.tracer(); tr != nil {
			end := began.Add(took)
			tr.roundTrip(b, proc, "dispatch", began, end, end, end, spans, res.DeviceNanos, trace.String("program", pl.prog.Name))
		}
		out := 0
		for _, o := range res.Outputs {
			out += len(o)
		}
		b.p.stats.dispatched(took, in, out)
		b.p.healthy()
		return &Result{
			Outputs: res.Outputs, Backend: name, Compile: compileTime, Dispatch: took,
			PluginTime: time.Duration(res.HostNanos), DeviceTime: time.Duration(res.DeviceNanos),
			Cache: cacheStatus, WorkgroupSize: pl.WorkgroupSize(), Tuned: pl.tuned, prog: pl.prog,
		}, nil
	}
}

// checkBindingSizes refuses a launch with a buffer larger than the adapter's
// storage binding limit, before anything reaches the plugin.
func checkBindingSizes(b *Backend, prog *ir.Program, req *pluginapi.DispatchRequest, outSizes []int) error {
	max := b.adapter.Profile.MaxStorageBufferBindingSize
	if max == 0 {
		return nil
	}
	sizes := make([]uint64, len(prog.Buffers))
	for i, in := range req.Inputs {
		sizes[i] = uint64(len(in))
	}
	for i, binding := range prog.Outputs() {
		sizes[binding] = uint64(outSizes[i])
	}
	for _, d := range prog.Buffers {
		if n := sizes[d.Binding]; n > max {
			return &LaunchError{Program: prog.Name, Detail: fmt.Sprintf("buffer %s (binding %d) is %d bytes, over %s's storage binding limit of %d bytes. Fix: split the work into smaller dispatches", d.Name, d.Binding, n, b.Name(), max)}
		}
	}
	return nil
}

// Release frees the pipeline on the plugin (with the untuned one launches by
// Grid ran on, if any). Dispatching it afterwards fails.
func (b *Backend) Release(ctx context.Context, pl *Pipeline) error {
	if pl == nil {
		return nil
	}
	err := b.release(ctx, pl)
	if pl.grid != nil {
		err = errors.Join(err, b.release(ctx, pl.grid))
	}
	return err
}

func (b *Backend) release(ctx context.Context, pl *Pipeline) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.released {
		return nil
	}
	pl.released = true
	proc := pl.proc
	pl.proc = nil
	if proc == nil || b.p.running() != proc {
		return nil // the process it was compiled on is gone, and the pipeline with it
	}
	err := b.callOn(ctx, proc, "release", func(ctx context.Context, p *process) error {
		return p.backend.Release(client.WithReceiveLimit(ctx, smallLimit), pl.handle)
	})
	if err == errNothingRan {
		return nil // the process it was compiled on was gone, and the pipeline with it
	}
	return err
}
