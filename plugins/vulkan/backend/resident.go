package backend

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// Protocol 2 (see docs/design.md, "Vulkan"): buffers are spans of the device's
// heaps until freed, and a submit records all its commands into one command
// buffer, with barriers only between commands that depend on each other.
var (
	_ pluginapi.Buffers       = (*Backend)(nil)
	_ pluginapi.Submitter     = (*Backend)(nil)
	_ pluginapi.HealthChecker = (*Backend)(nil)
)

// stagingChunk bounds the staging memory one transfer step of a discrete device
// uses.
const stagingChunk = 32 << 20

// resident is a buffer of protocol 2.
type resident struct {
	d    *device
	s    span
	size uint64
	// last is the sequence number of the last job that used the buffer.
	last atomic.Uint64
	// inSegment: the buffer is a span of an imported data-plane segment, which
	// DetachSegment releases.
	inSegment bool
}

// AllocBuffer takes req.Size bytes (rounded up to whole 4-byte words, at least
// one) from the adapter's heap and zeroes them. Where the device maps its memory
// directly (integrated GPUs, CPU devices) and can import host memory
// (VK_EXT_external_memory_host), the shared memory the SDK offers
// (req.Shared) becomes the buffer itself, zeroed and reported Mapped: the host
// then reads and writes it in place. On discrete GPUs it is not used (a shader
// reading host memory over the bus would be slower than the copies).
func (b *Backend) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vulkan: alloc: %w", err)
	}
	_, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		return nil, err
	}
	if seg, ok := b.segmentOn(d, req.SharedSegment); ok && req.Shared != nil && d.direct.Load() {
		s := span{b: seg.s.b, off: req.SharedOffset, size: req.Size}
		clear(req.Shared)
		if err := s.flush(); err != nil {
			return nil, d.fail("zeroing a new buffer", err)
		}
		return b.keep(&resident{d: d, s: s, size: req.Size, inSegment: true}, true)
	}
	if req.Shared != nil && d.direct.Load() && d.a.props.MinImportedHostPointerAlignment > 0 {
		if r, err := b.importShared(d, req); err == nil {
			return r, nil
		} else if b.cfg.Logger != nil {
			b.cfg.Logger.Debug("Vulkan cannot import the shared memory; the buffer is not mapped", "error", err)
		}
	}
	n := max((req.Size+3)&^3, 4)
	s, err := d.heapFor().alloc(n)
	if err != nil {
		return nil, d.fail(fmt.Sprintf("allocating a buffer of %d bytes", req.Size), err)
	}
	r := &resident{d: d, s: s, size: req.Size}
	if s.isMapped() {
		clear(s.bytes())
		if err := s.flush(); err != nil {
			s.b.h.free(s)
			return nil, d.fail("zeroing a new buffer", err)
		}
	} else {
		j := &job{d: d, ops: []op{{kind: opFill, dst: s}}}
		if _, err := j.run(ctx, "zeroing a new buffer"); err != nil {
			// An abandoned fill still runs: the span is freed after it.
			b.freeLater(d, s, j.seq)
			return nil, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		s.b.h.free(s)
		return nil, errClosed
	}
	return &pluginapi.AllocResult{Buffer: b.buffers.Add(r)}, nil
}

// importShared makes req.Shared a Mapped buffer.
func (b *Backend) importShared(d *device, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	blk, err := d.importHost(req.Shared)
	if err != nil {
		return nil, err
	}
	s := span{b: blk, size: req.Size}
	clear(req.Shared)
	if err := s.flush(); err != nil {
		d.imported.release(blk)
		return nil, d.fail("zeroing a new buffer", err)
	}
	res, err := b.keep(&resident{d: d, s: s, size: req.Size}, true)
	if err != nil {
		d.imported.release(blk)
	}
	return res, err
}

// keep registers a new buffer and returns its handle.
func (b *Backend) keep(r *resident, mapped bool) (*pluginapi.AllocResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		return nil, errClosed
	}
	return &pluginapi.AllocResult{Buffer: b.buffers.Add(r), Mapped: mapped}, nil
}

// buffer returns a live buffer.
func (b *Backend) buffer(handle uint64) (*resident, error) {
	return gpukit.Buffer(ID, &b.buffers, handle)
}

// FreeBuffer returns the buffer's memory to its heap once no job uses it. When
// ctx ends first the memory is kept (never freed under running work).
func (b *Backend) FreeBuffer(ctx context.Context, handle uint64) error {
	b.life.RLock()
	defer b.life.RUnlock()
	r, err := gpukit.FreeBuffer(ID, &b.buffers, handle)
	if err != nil {
		return err
	}
	if r.s.b.h == r.d.imported {
		// The caller may unmap the memory once this returns: wait for the jobs
		// that use it whatever ctx says.
		ctx = context.WithoutCancel(ctx)
	}
	if err := r.d.waitFor(ctx, r.last.Load()); err != nil && !r.d.lost.Load() {
		return err
	}
	if r.inSegment {
		return nil
	}
	if h := r.s.b.h; h == r.d.imported {
		h.release(r.s.b)
	} else {
		h.free(r.s)
	}
	return nil
}

// WriteBuffer copies src into the buffer at offset, after every job that used
// the buffer: in place where the buffer is mapped, else through staging memory.
func (b *Backend) WriteBuffer(ctx context.Context, handle, offset uint64, src []byte) error {
	return b.transfer(ctx, handle, offset, src, true)
}

// ReadBuffer copies the buffer at offset into dst, after every job that used the
// buffer.
func (b *Backend) ReadBuffer(ctx context.Context, handle, offset uint64, dst []byte) error {
	return b.transfer(ctx, handle, offset, dst, false)
}

func (b *Backend) transfer(ctx context.Context, handle, offset uint64, host []byte, write bool) error {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	r, err := b.transferTarget(handle, offset, host)
	if err != nil || len(host) == 0 {
		return err
	}
	d := r.d
	if r.s.isMapped() {
		if err := d.waitFor(ctx, r.last.Load()); err != nil {
			return err
		}
		return copyMapped(r, handle, offset, host, write)
	}
	if seg, segRes, ok := b.segmentView(d, host); ok {
		// The bytes are in an imported segment: the device copies them itself.
		j, err := segmentCopy(ctx, r, seg, segRes, offset, write)
		if err != nil {
			return err
		}
		if _, err := j.await(ctx, fmt.Sprintf("copying %d bytes of buffer %d", len(host), handle)); err != nil {
			return err
		}
		return segmentCopied(d, seg, write)
	}
	if write {
		return b.writeStaged(ctx, r, handle, offset, host)
	}
	return b.readStaged(ctx, r, handle, offset, host)
}

// transferTarget returns the buffer a transfer of host's bytes at offset
// copies to or from, after checking the range and the device.
func (b *Backend) transferTarget(handle, offset uint64, host []byte) (*resident, error) {
	r, err := b.buffer(handle)
	if err != nil {
		return nil, err
	}
	end := offset + uint64(len(host))
	if end > r.size || end < offset {
		return nil, pluginapi.Rejected("vulkan: bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", offset, offset, len(host), handle, r.size)
	}
	if err := r.d.checkLost(); err != nil {
		return nil, err
	}
	return r, nil
}

// copyMapped copies between host and a mapped buffer in place; no job may use
// the buffer.
func copyMapped(r *resident, handle, offset uint64, host []byte, write bool) error {
	mem := r.s.bytes()[offset : offset+uint64(len(host))]
	var err error
	if write {
		copy(mem, host)
		err = r.s.flush()
	} else if err = r.s.invalidate(); err == nil {
		copy(host, mem)
	}
	if err != nil {
		return r.d.fail(fmt.Sprintf("copying %d bytes of buffer %d", len(host), handle), err)
	}
	return nil
}

// segmentCopy submits the job that copies seg, host bytes in an imported
// segment (segRes), into the buffer at offset, or the buffer into seg. A job
// that cannot be submitted is finished.
func segmentCopy(ctx context.Context, r *resident, seg span, segRes *resident, offset uint64, write bool) (*job, error) {
	d := r.d
	at := span{b: r.s.b, off: r.s.off + offset, size: seg.size}
	if write {
		if err := seg.flush(); err != nil {
			return nil, d.fail("writing a data-plane segment", err)
		}
	}
	j := &job{d: d, residents: []*resident{r, segRes}, ops: []op{{kind: opCopy, src: seg, dst: at}}}
	if !write {
		j.ops[0] = op{kind: opCopy, src: at, dst: seg}
	}
	return j, j.submit(ctx)
}

// segmentCopied ends a segment copy whose job is done: a read's bytes become
// visible to the host.
func segmentCopied(d *device, seg span, write bool) error {
	if write {
		return nil
	}
	if err := seg.invalidate(); err != nil {
		return d.fail("reading a data-plane segment", err)
	}
	return nil
}

// writeStaged copies host into the buffer at offset through staging chunks,
// filling the next chunk while the device copies the one before.
func (b *Backend) writeStaged(ctx context.Context, r *resident, handle, offset uint64, host []byte) error {
	d := r.d
	what := fmt.Sprintf("writing %d bytes of buffer %d", len(host), handle)
	var prev *job
	// settle waits for the previous chunk's copy; a later chunk that was
	// submitted finishes in the background when that wait fails.
	settle := func(next *job) error {
		if prev == nil {
			return nil
		}
		_, err := prev.await(ctx, what)
		if err != nil && next != nil {
			go func() {
				_, _ = next.await(context.Background(), what)
			}()
		}
		prev = next
		return err
	}
	for done := uint64(0); done < uint64(len(host)); done += stagingChunk {
		n := min(uint64(len(host))-done, stagingChunk)
		st, err := d.staging.alloc(n)
		if err != nil {
			_ = settle(nil)
			return d.fail("allocating staging memory", err)
		}
		copy(st.bytes(), host[done:done+n])
		if err := st.flush(); err != nil {
			d.staging.free(st)
			_ = settle(nil)
			return d.fail("writing staging memory", err)
		}
		at := span{b: r.s.b, off: r.s.off + offset + done, size: n}
		j := &job{d: d, residents: []*resident{r}, scratch: []span{st}, ops: []op{{kind: opCopy, src: st, dst: at}}}
		if err := j.submit(ctx); err != nil {
			_ = settle(nil)
			return err
		}
		if prev == nil {
			prev = j
			continue
		}
		if err := settle(j); err != nil {
			return err
		}
	}
	return settle(nil)
}

// readStaged copies the buffer at offset into host through staging chunks, one
// copy job each.
func (b *Backend) readStaged(ctx context.Context, r *resident, handle, offset uint64, host []byte) error {
	d := r.d
	for done := uint64(0); done < uint64(len(host)); done += stagingChunk {
		n := min(uint64(len(host))-done, stagingChunk)
		st, err := d.staging.alloc(n)
		if err != nil {
			return d.fail("allocating staging memory", err)
		}
		at := span{b: r.s.b, off: r.s.off + offset + done, size: n}
		// The staging span outlives the job: it is read below.
		j := &job{d: d, residents: []*resident{r}, ops: []op{{kind: opCopy, src: at, dst: st}}}
		if _, err := j.run(ctx, fmt.Sprintf("reading %d bytes of buffer %d", n, handle)); err != nil {
			b.freeLater(d, st, j.seq)
			return err
		}
		err = st.invalidate()
		if err == nil {
			copy(host[done:done+n], st.bytes())
		}
		d.staging.free(st)
		if err != nil {
			return d.fail("reading staging memory", err)
		}
	}
	return nil
}

// freeLater frees a span once job seq has finished (after an abandoned read).
func (b *Backend) freeLater(d *device, s span, seq uint64) {
	if seq == 0 {
		s.b.h.free(s)
		return
	}
	go func() {
		if err := d.waitFor(context.Background(), seq); err == nil {
			s.b.h.free(s)
		}
	}()
}

// Submit records the commands into one command buffer in order — dispatches with
// their cached descriptor sets and pushed counts and uniforms, copies with
// vkCmdCopyBuffer, fills with vkCmdFillBuffer — with a barrier before each
// command that touches memory an earlier one wrote (or writes memory an earlier
// one read), submits it once and waits for its fence, all on the calling
// goroutine. A submit of the same commands over the same ranges as one before
// submits that one's command buffer again, unrecorded, and a warm submit
// allocates nothing but its result (see docs/design.md, "Vulkan"). When the
// caller's context ends first, the commands finish in the background.
func (b *Backend) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	start := time.Now()
	j, d, err := b.submitPrepared(req)
	if err != nil {
		return nil, err
	}
	ns, err := j.run(ctx, "submit")
	b.noteValidation()
	d.recycle(j)
	if err != nil {
		return nil, err
	}
	return &pluginapi.SubmitResult{HostNanos: max(time.Since(start).Nanoseconds(), 1), DeviceNanos: ns}, nil
}

// submitPrepared takes the backend's life lock for reading and returns a job on
// req's adapter with req's commands checked and recorded (Submit and
// StartSubmit run it); on an error the lock is released and the job recycled.
func (b *Backend) submitPrepared(req *pluginapi.SubmitRequest) (*job, *device, error) {
	b.life.RLock()
	_, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		b.life.RUnlock()
		return nil, nil, err
	}
	j := d.submitJob()
	j.life, j.commands = &b.life, len(req.Commands)
	if err := b.prepare(j, req.Commands); err != nil {
		j.finish()
		d.recycle(j)
		return nil, nil, err
	}
	return j, d, nil
}

// maxFreeJobs bounds the submit jobs a device keeps for reuse: as many as
// the SDK lets a pipelined adapter start ahead of its completions (its queue's
// depth), so a steady stream of started submits reuses its jobs too.
const maxFreeJobs = 64

// submitJob returns an empty job on d, reusing an earlier submit's with its
// slices.
func (d *device) submitJob() *job {
	d.jobMu.Lock()
	defer d.jobMu.Unlock()
	if n := len(d.jobs); n > 0 {
		j := d.jobs[n-1]
		d.jobs[n-1] = nil
		d.jobs = d.jobs[:n-1]
		return j
	}
	return &job{d: d}
}

// recycle keeps a finished submit job for the next submit, unless it was left
// to finish in the background. Its slices keep their capacity; what they
// point to is cleared.
func (d *device) recycle(j *job) {
	if j.handedOff {
		return
	}
	clear(j.ops)
	clear(j.residents)
	clear(j.spans)
	clear(j.reads)
	clear(j.writes)
	clear(j.opReads)
	clear(j.opWr)
	*j = job{d: d, ops: j.ops[:0], residents: j.residents[:0], pipelines: j.pipelines[:0], scratch: j.scratch[:0],
		spans: j.spans[:0], words: j.words[:0], reads: j.reads[:0], writes: j.writes[:0], opReads: j.opReads[:0], opWr: j.opWr[:0],
		ranges: j.ranges[:0], key: j.key[:0], push: j.push[:0]}
	d.jobMu.Lock()
	if len(d.jobs) < maxFreeJobs {
		d.jobs = append(d.jobs, j)
	}
	d.jobMu.Unlock()
}

// prepare checks every command against the pipelines and buffers of the job's
// device and turns it into ops; the pipelines stay read-locked until the job is
// finished.
func (b *Backend) prepare(j *job, cmds []pluginapi.SubmitCommand) error {
	d := j.d
	for i, c := range cmds {
		fail := func(err error) error { return pluginapi.Rejected("vulkan: command %d: %w", i, err) }
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			p, ok := b.pipelines.GetHeld(c.Pipeline, (*pipeline).hold)
			if ok {
				j.pipelines = append(j.pipelines, p)
			}
			if !ok {
				return fail(fmt.Errorf("no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", c.Pipeline))
			}
			if p.d != d {
				return fail(fmt.Errorf("pipeline %d was compiled for adapter %d's device, not the one the batch runs on. Fix: compile it on the adapter the batch runs on (again after a lost device)", c.Pipeline, p.d.a.index))
			}
			if err := b.prepareDispatch(j, p, c); err != nil {
				return fail(err)
			}
		case pluginapi.CopyCommand:
			src, err := b.rangeOf(j, c.Src)
			if err != nil {
				return fail(err)
			}
			dst, err := b.rangeOf(j, c.Dst)
			if err != nil {
				return fail(err)
			}
			if src.size > 0 {
				j.ops = append(j.ops, op{kind: opCopy, src: src, dst: dst})
			}
		case pluginapi.FillCommand:
			dst, err := b.rangeOf(j, c.Dst)
			if err != nil {
				return fail(err)
			}
			if dst.size%4 != 0 || dst.off%4 != 0 {
				return fail(fmt.Errorf("fill range [%d, %d+%d) is not whole 4-byte words. Fix: fill whole elements", c.Dst.Offset, c.Dst.Offset, c.Dst.Size))
			}
			if dst.size > 0 {
				j.ops = append(j.ops, op{kind: opFill, dst: dst, value: c.Value})
			}
		default:
			return fail(fmt.Errorf("unknown command %T. Fix: send dispatch, copy or fill commands", c))
		}
	}
	j.guardReadBack()
	return nil
}

// rangeOf returns the memory of a range of a buffer of the job's device.
func (b *Backend) rangeOf(j *job, r pluginapi.BufferRange) (span, error) {
	res, err := b.buffer(r.Buffer)
	if err != nil {
		return span{}, err
	}
	if res.d != j.d {
		return span{}, fmt.Errorf("buffer %d lives on adapter %d's device, not the one the batch runs on. Fix: allocate it on the adapter the batch runs on (again after a lost device)", r.Buffer, res.d.a.index)
	}
	end := r.Offset + r.Size
	if end > res.size || end < r.Offset {
		return span{}, fmt.Errorf("bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", r.Offset, r.Offset, r.Size, r.Buffer, res.size)
	}
	j.residents = append(j.residents, res)
	return span{b: res.s.b, off: res.s.off + r.Offset, size: r.Size}, nil
}

// prepareDispatch checks a dispatch against its program (one range per buffer, a
// fixed count's size, the uniform block, the grid, the device's binding limits)
// and adds its ops. A binding whose offset the device cannot bind
// (minStorageBufferOffsetAlignment), or that exceeds maxStorageBufferRange in a
// block without a device address (address.go), runs on an aligned scratch copy
// of its range, copied in before and, for an output, back after.
func (b *Backend) prepareDispatch(j *job, p *pipeline, c pluginapi.DispatchCommand) error {
	prog := p.prog
	if len(c.Bindings) != len(prog.Buffers) {
		return fmt.Errorf("program %q has %d buffers but the dispatch binds %d. Fix: bind one range per buffer", prog.Name, len(prog.Buffers), len(c.Bindings))
	}
	if err := ir.CheckUniforms(prog, c.Uniforms); err != nil {
		return err
	}
	if err := p.checkGrid(c.Grid); err != nil {
		return err
	}
	d := j.d
	align := max(d.a.props.Limits.MinStorageBufferOffsetAlignment, 4)
	maxBytes := d.a.bindingLimit()
	o := op{kind: opDispatch, p: p, grid: c.Grid, uniforms: c.Uniforms,
		binds: j.takeSpans(len(c.Bindings)), counts: j.takeWords(len(c.Bindings))}
	var before, after []op
	for i, r := range c.Bindings {
		decl := prog.Buffers[i]
		size := uint64(decl.Type.Size())
		if r.Size%size != 0 || r.Size/size > math.MaxUint32 {
			return fmt.Errorf("buffer %q is bound to %d bytes, not a whole number of at most 2^32-1 elements. Fix: bind whole %d-byte %s elements", decl.Name, r.Size, size, decl.Type)
		}
		if decl.Count != 0 && r.Size != size*uint64(decl.Count) {
			return fmt.Errorf("buffer %q holds exactly %d elements but is bound to %d bytes. Fix: bind %d bytes", decl.Name, decl.Count, r.Size, size*uint64(decl.Count))
		}
		if r.Size > maxBytes {
			return fmt.Errorf("buffer %q is bound to %d bytes, more than adapter %d binds (maxStorageBufferRange %d, no buffer device addresses). Fix: bind at most %d elements per binding", decl.Name, r.Size, d.a.index, maxBytes, maxBytes/size)
		}
		s, err := b.rangeOf(j, r)
		if err != nil {
			return err
		}
		o.counts[i] = uint32(r.Size / size)
		if s.size > 0 && (s.off%align != 0 || !d.reachable(s)) {
			scratch, err := d.heapFor().alloc(s.size)
			if err != nil {
				return d.fail("allocating an aligned copy of a binding", err)
			}
			j.scratch = append(j.scratch, scratch)
			before = append(before, op{kind: opCopy, src: s, dst: scratch})
			if decl.Access.IsOutput() {
				after = append(after, op{kind: opCopy, src: scratch, dst: s})
			}
			s = scratch
		}
		o.binds[i] = s
	}
	var err error
	if o.p, err = p.forCounts(o.counts); err != nil {
		return err
	}
	if err := j.guardFor(&o); err != nil {
		return err
	}
	j.ops = append(j.ops, before...)
	j.ops = append(j.ops, o)
	j.ops = append(j.ops, after...)
	return nil
}

// Health reports the first opened adapter whose device was lost, or nil.
func (b *Backend) Health(ctx context.Context) error {
	b.mu.Lock()
	adapters, err := b.adapters.Live()
	b.mu.Unlock()
	if err != nil {
		return err
	}
	return gpukit.FirstLost(ctx, adapters, func(a *adapter) error {
		if d := a.current(); d != nil {
			return d.checkLost()
		}
		return nil
	})
}
