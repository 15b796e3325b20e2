package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Binding binds bytes of a buffer to one of a program's buffers in
// Batch.Dispatch, or names the source or destination of Batch.Copy and Fill.
type Binding struct {
	Buffer *Buffer
	// Offset and Size select the bytes; Size 0 selects everything from Offset to
	// the buffer's end. A dispatch binding's element count (the program's len) is
	// its size divided by 4.
	Offset, Size int64
}

// Bind binds all of buf.
func Bind(buf *Buffer) Binding { return Binding{Buffer: buf} }

// BoundWork is one dispatch of a Batch: the grid and the buffers, bound by
// binding.
type BoundWork struct {
	// Grid is the number of workgroups per axis; Invocations, when set instead,
	// is the number of invocations per axis (the grid is its ceiling division by
	// the pipeline's workgroup size). A dispatch by Grid runs with the program's
	// workgroup size (or the compile's override), never a tuned one.
	Grid, Invocations [3]uint32
	// Bindings holds one range per program buffer, by binding. Write buffers are
	// not cleared: elements the kernel does not store keep their bytes on
	// plugins that keep buffers and are zero on the others.
	Bindings []Binding
	// Uniforms are the dispatch's uniform values, laid out as the program
	// declares them; empty for programs without uniforms.
	Uniforms []byte
}

// Batch is an ordered list of dispatches, copies and fills that [Backend.Submit]
// sends to the plugin at once and that run in order: each command sees the
// writes of the commands before it (the plugin inserts the barriers). A Batch
// only records; nothing is checked or sent until Submit. The zero value is an
// empty batch; a Batch may be submitted again.
type Batch struct {
	cmds []batchCmd
}

type cmdKind int

const (
	cmdDispatch cmdKind = iota
	cmdCopy
	cmdFill
)

type batchCmd struct {
	kind     cmdKind
	pipeline *Pipeline
	work     BoundWork
	src, dst Binding
	value    uint32
}

// Dispatch records a dispatch of pl over w.
func (bt *Batch) Dispatch(pl *Pipeline, w BoundWork) *Batch {
	w.Bindings = append([]Binding(nil), w.Bindings...)
	bt.cmds = append(bt.cmds, batchCmd{kind: cmdDispatch, pipeline: pl, work: w})
	return bt
}

// Copy records a copy of src's bytes into dst; both must have the same size (a
// Size of 0 selects the rest of each buffer) and must not overlap. One of the two
// may live on another adapter of the batch's plugin when the plugin copies
// between its adapters (pluginapi.PeerCopier, as the CUDA plugin does; for
// host-kept buffers always): the copy runs in order within the batch, and it
// sees that other adapter's work only once the caller has waited for it (there
// is no order across adapters). Between plugins, use [CopyBuffer].
func (bt *Batch) Copy(dst, src Binding) *Batch {
	bt.cmds = append(bt.cmds, batchCmd{kind: cmdCopy, src: src, dst: dst})
	return bt
}

// Fill records filling dst with the 32-bit little-endian value repeated
// (offset and size multiples of 4).
func (bt *Batch) Fill(dst Binding, value uint32) *Batch {
	bt.cmds = append(bt.cmds, batchCmd{kind: cmdFill, dst: dst, value: value})
	return bt
}

// Len is the number of recorded commands.
func (bt *Batch) Len() int { return len(bt.cmds) }

// Reset empties the batch for reuse.
func (bt *Batch) Reset() { bt.cmds = bt.cmds[:0] }

// SubmitResult is the completion of a batch.
type SubmitResult struct {
	// Backend names where it ran ("cpu-ref:0").
	Backend string
	// Commands is the number of commands run.
	Commands int
	// Submit is the host-measured time from Submit (or SubmitAsync) to the
	// completion.
	Submit time.Duration
	// PluginTime and DeviceTime are what the plugin measured (DeviceTime is zero
	// when the backend cannot time the device).
	PluginTime, DeviceTime time.Duration
}

// Pending is a batch that [Backend.SubmitAsync] sent and that may still run.
type Pending struct {
	b     *Backend
	proc  *process
	inner *client.Pending
	bufs  []*Buffer
	began time.Time
	n     int
	// result and err are final when inner is nil.
	result *SubmitResult
	err    error
	// ended brackets the batch for the hang monitor: the process counts it as
	// a call in flight until it completes.
	ended sync.Once
	// obs is set when the host has an observer (nil keeps the fast path's
	// Pending small).
	obs *pendingObs
}

// pendingObs is what an observer needs of a resident submit: when it was
// sent, its first dispatch's program, and reported, which reports its
// completion once.
type pendingObs struct {
	sent     time.Time
	program  string
	reported sync.Once
}

// end takes the batch off the process's calls in flight.
func (pd *Pending) end() { pd.ended.Do(pd.proc.end) }

// Wait returns the batch's result once it has run. If ctx ends first, the batch
// is cancelled (the plugin stops it where it can) and Wait returns an error. Wait
// may be called more than once.
func (pd *Pending) Wait(ctx context.Context) (*SubmitResult, error) {
	if pd.inner == nil {
		return pd.result, pd.err
	}
	var waitFrom time.Time
	if pd.obs != nil {
		waitFrom = time.Now()
	}
	res, raw, err := pd.wait(ctx)
	err = pd.b.p.stats.failed(err)
	if pd.obs != nil {
		pd.obs.reported.Do(func() { pd.report(ctx, pd.b.p.set.obs, waitFrom, res, raw, err) })
	}
	return res, err
}

// report writes a resident submit to the trace and the hook once it ended.
func (pd *Pending) report(ctx context.Context, o *observer, waitFrom time.Time, res *SubmitResult, raw *pluginapi.SubmitResult, err error) {
	if o.tr != nil && err == nil {
		end := pd.began.Add(res.Submit)
		o.tr.roundTrip(pd.b, pd.proc, "submit", pd.began, pd.obs.sent, waitFrom, end, pd.inner.Spans(), raw.DeviceNanos, trace.Int("commands", int64(pd.n)), trace.String("program", pd.obs.program))
	}
	o.submitted(ctx, pd.b, pd.obs.program, pd.n, pd.began, res, err)
}

// wait returns the result and the plugin's.
func (pd *Pending) wait(ctx context.Context) (*SubmitResult, *pluginapi.SubmitResult, error) {
	res, err := pd.inner.Wait(ctx)
	if pd.inner.Ready() {
		pd.end()
	}
	pd.b.p.v2.forget(pd)
	if err != nil {
		if he := pd.b.hostError(pd.proc, "submit", err); he != nil {
			pd.b.p.badResult(pd.proc, he)
			return nil, nil, he
		}
		err = pd.b.p.classify(ctx, pd.proc, pd.b.Name(), "submit", pd.began, err)
		return nil, nil, crashed(err, pd.bufs...)
	}
	took := time.Since(pd.began)
	if err := checkTimes(pd.b.Name(), "submit", res.HostNanos, res.DeviceNanos, took); err != nil {
		pd.b.p.badResult(pd.proc, err)
		return nil, nil, err
	}
	pd.b.p.healthy()
	return &SubmitResult{
		Backend: pd.b.Name(), Commands: pd.n, Submit: took,
		PluginTime: time.Duration(res.HostNanos), DeviceTime: time.Duration(res.DeviceNanos),
	}, res, nil
}

// forget drops pd and every finished submit from the pending list.
func (v *v2state) forget(pd *Pending) {
	v.mu.Lock()
	defer v.mu.Unlock()
	kept := v.pending[:0]
	for _, o := range v.pending {
		switch {
		case o.inner.Ready():
			o.end()
		case o != pd:
			kept = append(kept, o)
		}
	}
	clear(v.pending[len(kept):])
	v.pending = kept
}

// drain waits for the plugin's submits that may still run.
func (b *Backend) drain(ctx context.Context) error {
	b.p.v2.mu.Lock()
	pending := append([]*Pending(nil), b.p.v2.pending...)
	b.p.v2.mu.Unlock()
	for _, pd := range pending {
		// WaitReady: the caller's deadline must not cancel another's submit.
		if err := pd.inner.WaitReady(ctx); err != nil {
			return waitError(ctx, b.Name(), "earlier submits")
		}
		b.p.v2.forget(pd)
	}
	return nil
}

// Submit sends the batch and waits for it: [Backend.SubmitAsync], then
// [Pending.Wait].
func (b *Backend) Submit(ctx context.Context, bt *Batch) (*SubmitResult, error) {
	pd, err := b.SubmitAsync(ctx, bt)
	if err != nil {
		return nil, err
	}
	return pd.Wait(ctx)
}

// SubmitAsync checks the batch against its pipelines and buffers, sends it and
// returns without waiting, so the caller can prepare the next batch meanwhile;
// batches run in the order they were submitted. On a plugin that keeps buffers
// the whole batch is one message and one completion. On any other plugin the
// host runs it here, one inline dispatch per dispatch command, before
// SubmitAsync returns.
//
// A problem with the batch is a [*LaunchError] or [*BufferError] before anything
// is sent; a buffer of a plugin process that died is a [*LostBufferError].
func (b *Backend) SubmitAsync(ctx context.Context, bt *Batch) (*Pending, error) {
	pd, err := b.submitAsync(ctx, bt)
	err = b.p.stats.failed(err)
	if o := b.p.set.obs; o != nil && (err != nil || pd.inner == nil) {
		// Refused, or run here at once: nothing is left for Wait to report.
		var res *SubmitResult
		if pd != nil {
			res = pd.result
		}
		o.submitted(ctx, b, firstProgram(bt), bt.Len(), time.Now(), res, err)
	}
	return pd, err
}

// firstProgram names the program of bt's first dispatch ("" without one).
func firstProgram(bt *Batch) string {
	if bt == nil {
		return ""
	}
	for _, c := range bt.cmds {
		if c.kind == cmdDispatch && c.pipeline != nil {
			return c.pipeline.prog.Name
		}
	}
	return ""
}

func (b *Backend) submitAsync(ctx context.Context, bt *Batch) (*Pending, error) {
	began := time.Now()
	if bt == nil || len(bt.cmds) == 0 {
		return &Pending{b: b, result: &SubmitResult{Backend: b.Name()}}, nil
	}
	plan, err := b.planBatch(bt)
	if err != nil {
		return nil, err
	}
	proc, err := b.batchProcess(ctx, plan)
	if err != nil {
		return nil, err
	}
	if plan.across != nil && plan.resident && !b.p.capsOf(proc).PeerCopy {
		return nil, &BufferError{Buffer: plan.across.Name(), Detail: fmt.Sprintf("command %d (copy) reaches a buffer of %s, another adapter than the batch's %s, and the plugin does not copy between its adapters (no pluginapi.PeerCopier). Fix: copy with host.CopyBuffer", plan.acrossCmd, plan.across.backend.Name(), b.Name())}
	}
	if plan.resident {
		return b.submitResident(ctx, proc, plan, began)
	}
	res, err := b.submitHosted(ctx, proc, plan)
	if err != nil {
		return nil, err
	}
	res.Submit = time.Since(began)
	return &Pending{b: b, result: res}, nil
}

// batchPlan is a checked batch: every range resolved.
type batchPlan struct {
	cmds     []plannedCmd
	bufs     []*Buffer // every buffer the batch uses, once
	resident bool      // the buffers live in the plugin
	proc     *process  // their process (resident only)
	// across is the first buffer of a copy that lives on another adapter of
	// the plugin than the batch's, and acrossCmd that copy's index; nil when
	// every buffer is the batch adapter's.
	across    *Buffer
	acrossCmd int
}

type plannedCmd struct {
	batchCmd
	grid     [3]uint32
	bindings []span  // dispatch
	src, dst span    // copy, fill
	sizes    []int64 // dispatch: bytes per binding
}

// span is a checked range of a buffer, with the buffer's state at check time.
type span struct {
	buf          *Buffer
	offset, size int64
	handle       uint64
	mem          []byte
}

func (s span) rng() pluginapi.BufferRange {
	return pluginapi.BufferRange{Buffer: s.handle, Offset: uint64(s.offset), Size: uint64(s.size)}
}

// resolve checks a binding: the buffer belongs to this backend (or, for the
// copy command cmd when cmd >= 0, to any adapter of its plugin), is not freed
// and holds the range (its offset and size multiples of align). what describes the
// binding for an error; it is called only then, so that a submit of small
// dispatches formats nothing.
func (b *Backend) resolve(what func() string, bd Binding, align int64, plan *batchPlan, cmd int) (span, error) {
	bf := bd.Buffer
	if bf == nil {
		return span{}, &BufferError{Buffer: "<nil>", Detail: what() + " has no buffer. Fix: bind a buffer from Alloc"}
	}
	if bf.backend.p != b.p || (cmd < 0 && bf.backend.adapter.Index != b.adapter.Index) {
		fix := "allocate it on the backend that runs the batch"
		if cmd >= 0 {
			fix += ", or copy between backends with host.CopyBuffer"
		}
		return span{}, &BufferError{Buffer: bf.Name(), Detail: fmt.Sprintf("%s: it belongs to backend %s, not %s. Fix: %s", what(), bf.backend.Name(), b.Name(), fix)}
	}
	if bf.backend.adapter.Index != b.adapter.Index && plan.across == nil {
		plan.across, plan.acrossCmd = bf, cmd
	}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	if bf.freed {
		return span{}, &BufferError{Buffer: bf.Name(), Detail: what() + ": it was freed. Fix: allocate a new buffer"}
	}
	size := bd.Size
	if size == 0 {
		size = bf.size - bd.Offset
	}
	if err := bf.checkRange(bd.Offset, size); err != nil {
		return span{}, err
	}
	if bd.Offset%align != 0 || size%align != 0 {
		return span{}, &BufferError{Buffer: bf.Name(), Detail: fmt.Sprintf("%s: range [%d, %d+%d) is not aligned to %d-byte elements. Fix: use offsets and sizes that are multiples of %d", what(), bd.Offset, bd.Offset, size, align, align)}
	}
	if !slices.Contains(plan.bufs, bf) {
		plan.bufs = append(plan.bufs, bf)
	}
	return span{buf: bf, offset: bd.Offset, size: size, handle: bf.handle, mem: bf.mem}, nil
}

// planBatch checks every command before anything is sent.
func (b *Backend) planBatch(bt *Batch) (*batchPlan, error) {
	plan := &batchPlan{cmds: make([]plannedCmd, 0, len(bt.cmds))}
	for i, c := range bt.cmds {
		pc := plannedCmd{batchCmd: c}
		var err error
		switch c.kind {
		case cmdDispatch:
			err = b.planDispatch(i, &pc, plan)
		case cmdCopy:
			what := fmt.Sprintf("command %d (copy)", i)
			if pc.src, err = b.resolve(func() string { return what + " source" }, c.src, 1, plan, i); err != nil {
				break
			}
			if pc.dst, err = b.resolve(func() string { return what + " destination" }, c.dst, 1, plan, i); err != nil {
				break
			}
			switch {
			case pc.src.size != pc.dst.size:
				err = &BufferError{Buffer: pc.dst.buf.Name(), Detail: fmt.Sprintf("%s: copies %d bytes into a range of %d. Fix: give both the same size", what, pc.src.size, pc.dst.size)}
			case pc.src.buf == pc.dst.buf && pc.src.offset < pc.dst.offset+pc.dst.size && pc.dst.offset < pc.src.offset+pc.src.size:
				err = &BufferError{Buffer: pc.dst.buf.Name(), Detail: what + ": source and destination overlap. Fix: copy through a second buffer"}
			}
		case cmdFill:
			pc.dst, err = b.resolve(func() string { return fmt.Sprintf("command %d (fill)", i) }, c.dst, pluginapi.ElementBytes, plan, -1)
		}
		if err != nil {
			return nil, err
		}
		plan.cmds = append(plan.cmds, pc)
	}
	return plan, nil
}

func (b *Backend) planDispatch(i int, pc *plannedCmd, plan *batchPlan) error {
	pl, w := pc.pipeline, pc.work
	if pl == nil || pl.backend.p != b.p || pl.backend.adapter.Index != b.adapter.Index {
		return &LaunchError{Program: "<pipeline>", Detail: fmt.Sprintf("command %d: the pipeline was not compiled on %s. Fix: compile it with this backend's Compile", i, b.Name())}
	}
	// A launch by Grid runs with the program's workgroup size even when an
	// autotune record tuned pl (see Pipeline.Tuned).
	pl = pl.forLaunch(w.Invocations)
	pc.pipeline = pl
	prog := pl.prog
	bad := func(format string, args ...any) error {
		return &LaunchError{Program: prog.Name, Detail: fmt.Sprintf("command %d: ", i) + fmt.Sprintf(format, args...)}
	}
	if len(w.Bindings) != len(prog.Buffers) {
		return bad("%d bindings for %d buffers. Fix: bind one range per program buffer, by binding", len(w.Bindings), len(prog.Buffers))
	}
	if err := ir.CheckUniforms(prog, w.Uniforms); err != nil {
		return bad("%v", err)
	}
	pc.grid = w.Grid
	if w.Invocations != [3]uint32{} {
		if w.Grid != [3]uint32{} {
			return bad("both Grid %v and Invocations %v are set. Fix: set one of them", w.Grid, w.Invocations)
		}
		pc.grid = ir.GridFor(w.Invocations, pl.WorkgroupSize())
	}
	pc.bindings = make([]span, len(w.Bindings))
	pc.sizes = make([]int64, len(w.Bindings))
	for _, d := range prog.Buffers {
		describe := func() string {
			return fmt.Sprintf("command %d (dispatch of %s), binding %d (%s)", i, prog.Name, d.Binding, d.Name)
		}
		// A binding holds whole elements of its buffer's type: 4 bytes, or 2
		// for f16 and bf16 (IR v1.2).
		size := int64(d.Type.Size())
		s, err := b.resolve(describe, w.Bindings[d.Binding], size, plan, -1)
		if err != nil {
			return err
		}
		if d.Count > 0 && s.size != int64(d.Count)*size {
			return bad("buffer %s (binding %d) has a fixed count of %d elements but is bound to %d bytes. Fix: bind exactly %d bytes", d.Name, d.Binding, d.Count, s.size, int64(d.Count)*size)
		}
		if s.size/size > 1<<32-1 {
			return bad("buffer %s (binding %d) is bound to %d bytes, more than a u32 len counts. Fix: bind a smaller range", d.Name, d.Binding, s.size)
		}
		pc.bindings[d.Binding], pc.sizes[d.Binding] = s, s.size
	}
	return nil
}

// batchProcess decides where the batch runs: in the process its buffers live in
// (they must all be alive there), or, for host-kept buffers, on the current
// process.
func (b *Backend) batchProcess(ctx context.Context, plan *batchPlan) (*process, error) {
	var lost []string
	var proc *process
	hosted := 0
	for _, bf := range plan.bufs {
		bf.mu.Lock()
		p := bf.proc
		bf.mu.Unlock()
		switch {
		case p == nil:
			hosted++
		case !b.p.holds(p):
			lost = append(lost, bf.Name())
		default:
			proc = p
		}
	}
	if len(lost) > 0 {
		return nil, &LostBufferError{Backend: b.Name(), Buffers: lost}
	}
	if hosted > 0 && proc != nil {
		return nil, &BufferError{Buffer: plan.bufs[0].Name(), Detail: "the batch mixes buffers the plugin keeps with buffers the host keeps (the plugin was replaced meanwhile). Fix: allocate all of a batch's buffers anew"}
	}
	if proc != nil {
		plan.resident, plan.proc = true, proc
		return proc, nil
	}
	cur, err := b.p.current(ctx)
	if err != nil {
		return nil, err
	}
	if hosted == 0 && b.p.capsOf(cur).Resident() {
		plan.resident, plan.proc = true, cur
	}
	return cur, nil
}

// pipelineOn returns pl's handle on proc, compiling it there when needed. A
// relaunch between the check and the compile loses the batch's buffers.
func (b *Backend) pipelineOn(ctx context.Context, pl *Pipeline, proc *process, plan *batchPlan) (uint64, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.released {
		return 0, &LaunchError{Program: pl.prog.Name, Detail: "pipeline was released. Fix: compile the program again"}
	}
	got, handle, _, err := pl.compileLocked(ctx)
	if err != nil {
		return 0, err
	}
	if plan.resident && got != proc {
		var names []string
		for _, bf := range plan.bufs {
			names = append(names, bf.Name())
		}
		return 0, &LostBufferError{Backend: b.Name(), Buffers: names}
	}
	return handle, nil
}

// submitResident sends the batch as one submit to the plugin that keeps its
// buffers.
func (b *Backend) submitResident(ctx context.Context, proc *process, plan *batchPlan, began time.Time) (*Pending, error) {
	cmds := make([]pluginapi.SubmitCommand, len(plan.cmds))
	for i, c := range plan.cmds {
		switch c.kind {
		case cmdDispatch:
			handle, err := b.pipelineOn(ctx, c.pipeline, proc, plan)
			if err != nil {
				return nil, err
			}
			d := pluginapi.DispatchCommand{Pipeline: handle, Grid: c.grid, Bindings: make([]pluginapi.BufferRange, len(c.bindings)), Uniforms: c.work.Uniforms}
			for j, s := range c.bindings {
				d.Bindings[j] = s.rng()
			}
			cmds[i] = d
		case cmdCopy:
			cmds[i] = pluginapi.CopyCommand{Src: c.src.rng(), Dst: c.dst.rng()}
		case cmdFill:
			cmds[i] = pluginapi.FillCommand{Dst: c.dst.rng(), Value: c.value}
		}
	}
	var inner *client.Pending
	err := b.callConn(ctx, proc, "submit", "submit", func(ctx context.Context, conn *client.Conn) error {
		var err error
		inner, err = conn.SubmitAsync(ctx, &pluginapi.SubmitRequest{Adapter: b.adapter.Index, Commands: cmds})
		return err
	})
	if err == errNothingRan && len(plan.bufs) == 0 {
		return nil, b.nothingRanTwice(proc, "submit")
	}
	if err != nil {
		b.p.badResult(proc, err)
		return nil, crashed(err, plan.bufs...)
	}
	pd := &Pending{b: b, proc: proc, inner: inner, bufs: plan.bufs, began: began, n: len(cmds)}
	if b.p.set.obs != nil {
		pd.obs = &pendingObs{sent: time.Now()}
		for _, c := range plan.cmds {
			if c.kind == cmdDispatch {
				pd.obs.program = c.pipeline.prog.Name
				break
			}
		}
	}
	proc.begin()
	v := &b.p.v2
	v.mu.Lock()
	v.pending = append(v.pending, pd)
	v.mu.Unlock()
	return pd, nil
}

// submitHosted runs the batch on the host's buffers: copies and fills here, each
// dispatch as one inline dispatch whose outputs are copied back into their
// ranges.
func (b *Backend) submitHosted(ctx context.Context, proc *process, plan *batchPlan) (*SubmitResult, error) {
	res := &SubmitResult{Backend: b.Name(), Commands: len(plan.cmds)}
	for _, c := range plan.cmds {
		switch c.kind {
		case cmdCopy:
			copy(c.dst.mem[c.dst.offset:c.dst.offset+c.dst.size], c.src.mem[c.src.offset:c.src.offset+c.src.size])
		case cmdFill:
			d := c.dst.mem[c.dst.offset : c.dst.offset+c.dst.size]
			for i := 0; i < len(d); i += 4 {
				binary.LittleEndian.PutUint32(d[i:], c.value)
			}
		case cmdDispatch:
			r, err := b.dispatchHosted(ctx, c)
			if err != nil {
				return nil, err
			}
			res.PluginTime += time.Duration(r.HostNanos)
			res.DeviceTime += time.Duration(r.DeviceNanos)
		}
	}
	return res, nil
}

// dispatchHosted runs one dispatch of host-kept buffers inline.
func (b *Backend) dispatchHosted(ctx context.Context, c plannedCmd) (*pluginapi.DispatchResult, error) {
	pl := c.pipeline
	prog := pl.prog
	req := &pluginapi.DispatchRequest{Grid: c.grid, Inputs: make([][]byte, len(c.bindings)), OutputCounts: make([]uint32, len(c.bindings)), Uniforms: c.work.Uniforms}
	var sizes []int
	for _, d := range prog.Buffers {
		s := c.bindings[d.Binding]
		if d.Access.Readable() {
			req.Inputs[d.Binding] = s.mem[s.offset : s.offset+s.size]
		} else {
			req.OutputCounts[d.Binding] = uint32(s.size / int64(d.Type.Size()))
		}
	}
	for _, bi := range prog.Outputs() {
		sizes = append(sizes, int(c.bindings[bi].size))
	}
	limit := client.ResponseOverhead
	for _, n := range sizes {
		limit += n + client.PerBufferOverhead
	}
	var res *pluginapi.DispatchResult
	for attempt := 0; ; attempt++ {
		pl.mu.Lock()
		if pl.released {
			pl.mu.Unlock()
			return nil, &LaunchError{Program: prog.Name, Detail: "pipeline was released. Fix: compile the program again"}
		}
		proc, handle, _, err := pl.compileLocked(ctx)
		pl.mu.Unlock()
		if err != nil {
			return nil, err
		}
		req.Pipeline = handle
		began := time.Now()
		var spans []pluginapi.Span
		res, spans, err = b.dispatchOn(ctx, proc, pl, req, sizes, limit)
		if err == errNothingRan {
			if attempt > 0 {
				return nil, b.nothingRanTwice(proc, "dispatch")
			}
			continue
		}
		took := time.Since(began)
		if err == nil {
			err = checkResult(b.Name(), prog, sizes, res, took)
		}
		if err != nil {
			b.p.badResult(proc, err)
			return nil, err
		}
		if tr := b.p.set.obs.tracer(); tr != nil {
			end := began.Add(took)
			tr.roundTrip(b, proc, "dispatch", began, end, end, end, spans, res.DeviceNanos, trace.String("program", prog.Name))
		}
		break
	}
	for i, bi := range prog.Outputs() {
		s := c.bindings[bi]
		copy(s.mem[s.offset:s.offset+s.size], res.Outputs[i])
	}
	return res, nil
}
