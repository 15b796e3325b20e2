package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// Jobs (see docs/design.md, "Vulkan"): every submit, transfer and protocol-1
// dispatch is a job, a list of ops recorded into one command buffer of a reused
// slot (command buffer, fence, timestamp queries) under the device lock, with a
// barrier only where an op touches memory an earlier op of the job wrote (or
// writes memory an earlier op read); the lock is released right after
// vkQueueSubmit and the job waits for its own fence.

// slot is a command buffer with its fence and two timestamp queries, reused by
// one job after another.
type slot struct {
	cb      vk.CommandBuffer
	fence   vk.Fence
	queries vk.QueryPool
}

// takeSlot returns a free slot, creating one when none is free. The device lock
// must be held (the command pool).
func (d *device) takeSlot() (*slot, error) {
	d.slotMu.Lock()
	if n := len(d.slots); n > 0 {
		s := d.slots[n-1]
		d.slots = d.slots[:n-1]
		d.slotMu.Unlock()
		return s, nil
	}
	d.slotMu.Unlock()
	s := &slot{}
	var err error
	if s.cb, err = d.vk.AllocateCommandBuffer(d.pool); err != nil {
		return nil, err
	}
	if s.fence, err = d.vk.CreateFence(); err != nil {
		d.vk.FreeCommandBuffer(d.pool, s.cb)
		return nil, err
	}
	if d.a.timestamps {
		if s.queries, err = d.vk.CreateTimestampPool(2); err != nil {
			d.vk.FreeCommandBuffer(d.pool, s.cb)
			d.vk.DestroyFence(s.fence)
			return nil, err
		}
	}
	return s, nil
}

// putSlot makes a slot whose work is done free again.
func (d *device) putSlot(s *slot) error {
	if err := d.vk.ResetFence(s.fence); err != nil {
		return err
	}
	d.slotMu.Lock()
	d.slots = append(d.slots, s)
	d.slotMu.Unlock()
	return nil
}

// graveSlot keeps a slot that cannot be reused (its fence is in an unknown
// state) until the device is destroyed.
func (d *device) graveSlot(s *slot) {
	d.slotMu.Lock()
	d.dead = append(d.dead, s)
	d.slotMu.Unlock()
}

// destroy frees the slot's objects; the device must be idle.
func (s *slot) destroy(d *device) {
	d.vk.FreeCommandBuffer(d.pool, s.cb)
	d.vk.DestroyFence(s.fence)
	d.vk.DestroyQueryPool(s.queries)
}

// The kinds of op.
const (
	opDispatch = iota + 1
	opCopy
	opFill
)

// op is one command of a job.
type op struct {
	kind int
	// A dispatch: its pipeline, grid, bound spans (a span's size is the bytes
	// bound, 0 for an empty binding), element counts and uniform block.
	p        *pipeline
	grid     [3]uint32
	binds    []span
	counts   []uint32
	uniforms []byte
	// A copy of src.size bytes from src to dst, or a fill of dst with value.
	src, dst span
	value    uint32
}

// region is bytes of a block an op reads or writes.
type region struct {
	b         *block
	off, size uint64
}

// accesses returns what the op reads and writes.
func (o *op) accesses() (reads, writes []region) {
	switch o.kind {
	case opCopy:
		return []region{{o.src.b, o.src.off, o.src.size}}, []region{{o.dst.b, o.dst.off, o.src.size}}
	case opFill:
		return nil, []region{{o.dst.b, o.dst.off, o.dst.size}}
	}
	for i, s := range o.binds {
		if s.size == 0 {
			continue
		}
		r := region(s)
		access := o.p.prog.Buffers[i].Access
		if access.Readable() {
			reads = append(reads, r)
		}
		if access.IsOutput() {
			writes = append(writes, r)
		}
	}
	return reads, writes
}

// job is the work of one call: its ops and what they hold until the device is
// done with them.
type job struct {
	d   *device
	ops []op
	// scratch spans are freed, pipelines read-unlocked and after called once the
	// job is finished.
	scratch   []span
	pipelines []*pipeline
	after     func()
	// residents are the buffers the ops use; each remembers the job's sequence
	// number.
	residents []*resident
	// timeOp, when non-zero, is 1 + the index of the one op the timestamps
	// bracket (a protocol-1 dispatch's, not its uploads and read-backs); zero
	// brackets them all.
	timeOp int

	s   *slot
	seq uint64
}

// fullBarrier orders every transfer and shader write before it with every
// transfer and shader access after it.
func fullBarrier(cb vk.CommandBuffer) {
	cb.MemoryBarrier(vk.StageComputeShader|vk.StageTransfer, vk.StageComputeShader|vk.StageTransfer,
		vk.AccessShaderWrite|vk.AccessTransferWrite,
		vk.AccessShaderRead|vk.AccessShaderWrite|vk.AccessTransferRead|vk.AccessTransferWrite)
}

// submit records the job into a slot and submits it. A job that cannot be
// submitted is finished before submit returns.
func (j *job) submit(ctx context.Context) error {
	d := j.d
	if err := d.acquire(ctx); err != nil {
		j.finish()
		return err
	}
	err := j.recordAndSubmit()
	d.release()
	if err != nil {
		j.finish()
	}
	return err
}

func (j *job) recordAndSubmit() error {
	d := j.d
	if err := d.checkLost(); err != nil {
		return err
	}
	s, err := d.takeSlot()
	if err != nil {
		return d.fail("creating a command buffer", err)
	}
	seq := d.seq + 1
	if err := j.record(s, seq); err != nil {
		// The command buffer may be left recording: the slot is not reused.
		d.graveSlot(s)
		return d.fail("recording commands", err)
	}
	if err := d.vk.Submit(s.cb, s.fence); err != nil {
		_ = d.putSlot(s)
		return d.fail("vkQueueSubmit", err)
	}
	d.seq = seq
	j.s, j.seq = s, seq
	for _, r := range j.residents {
		r.last.Store(seq)
	}
	return nil
}

// record records the job's ops between a leading barrier (ordering them after
// every earlier submission), two timestamps (around all ops, or the one op
// timeOp names) and a trailing barrier that makes their writes visible to the
// host.
func (j *job) record(s *slot, seq uint64) error {
	cb := s.cb
	if err := cb.Begin(); err != nil {
		return err
	}
	if s.queries != 0 {
		cb.ResetQueries(s.queries, 0, 2)
	}
	fullBarrier(cb)
	if s.queries != 0 && j.timeOp == 0 {
		cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 0)
	}
	var reads, writes []region
	for i := range j.ops {
		o := &j.ops[i]
		timed := s.queries != 0 && j.timeOp == i+1
		if o.kind == opDispatch && (o.grid[0] == 0 || o.grid[1] == 0 || o.grid[2] == 0) {
			if timed {
				cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 0)
				cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 1)
			}
			continue
		}
		r, w := o.accesses()
		if hazard(r, writes) || hazard(w, writes) || hazard(w, reads) {
			fullBarrier(cb)
			reads, writes = reads[:0], writes[:0]
		}
		reads, writes = append(reads, r...), append(writes, w...)
		if timed {
			cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 0)
		}
		switch o.kind {
		case opCopy:
			cb.CopyBuffer(o.src.b.buf, o.src.off, o.dst.b.buf, o.dst.off, o.src.size)
		case opFill:
			cb.FillBuffer(o.dst.b.buf, o.dst.off, o.dst.size, o.value)
		case opDispatch:
			if err := j.recordDispatch(cb, o, seq); err != nil {
				return err
			}
		}
		if timed {
			cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 1)
		}
	}
	if s.queries != 0 && j.timeOp == 0 {
		cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 1)
	}
	cb.MemoryBarrier(vk.StageComputeShader|vk.StageTransfer, vk.StageHost, vk.AccessShaderWrite|vk.AccessTransferWrite, vk.AccessHostRead)
	return cb.End()
}

// hazard reports whether any of rs overlaps any of others.
func hazard(rs, others []region) bool {
	for _, r := range rs {
		for _, o := range others {
			if overlaps(r.b, r.off, r.size, o.b, o.off, o.size) {
				return true
			}
		}
	}
	return false
}

// recordDispatch binds the op's pipeline and cached descriptor set, pushes the
// element counts and the uniform block (see docs/design.md, "Vulkan") and
// records the dispatch's launches (dispatchGrid).
func (j *job) recordDispatch(cb vk.CommandBuffer, o *op, seq uint64) error {
	d, p := j.d, o.p
	ranges := make([]vk.StorageRange, len(o.binds))
	for i, s := range o.binds {
		if s.size == 0 {
			ranges[i] = d.empty.storage(4)
		} else {
			ranges[i] = s.storage(s.size)
		}
	}
	p.addressRanges(d, ranges)
	set, err := d.descriptorSet(p, ranges, seq)
	if err != nil {
		return err
	}
	cb.BindCompute(p.pipe, p.layout, set)
	push := make([]byte, p.push)
	for i, n := range o.counts {
		binary.LittleEndian.PutUint32(push[4*i:], n)
	}
	copy(push[p.uniforms:], o.uniforms)
	p.putAddresses(push, o.binds)
	p.dispatchGrid(cb, push, o.grid)
	return nil
}

// errAbandoned marks a wait that ended because the context did while the device
// was still working.
var errAbandoned = errors.New("abandoned")

// spinWait is how long a job polls its fence before blocking on it: a short job
// is then seen done as soon as it is, without the wake-up latency of a blocking
// wait. CPU devices (lavapipe) do not spin: the host's cores run their work.
const spinWait = 50 * time.Microsecond

// wait polls the job's fence for spinWait, then waits for it in slices, giving
// up when ctx ends (with an error wrapping errAbandoned and ctx's cause; the job
// is then still running).
func (j *job) wait(ctx context.Context) error {
	d := j.d
	spin := spinWait
	if d.a.props.Type == vk.DeviceTypeCPU {
		spin = 0
	}
	for start := time.Now(); time.Since(start) < spin && !d.loseNext.Load(); {
		done, err := d.vk.FenceSignaled(j.s.fence)
		if err != nil {
			return err
		}
		if done {
			d.finished(j.seq)
			return nil
		}
	}
	for {
		timeout := fenceSlice
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, max(time.Until(dl), 0))
		}
		done, err := d.waitFence(j.s.fence, timeout)
		if err != nil {
			return err
		}
		if done {
			d.finished(j.seq)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errAbandoned, context.Cause(ctx))
		}
	}
}

// waitFence waits on a fence; the loseNext hook makes it fail as a lost device.
func (d *device) waitFence(f vk.Fence, timeout time.Duration) (bool, error) {
	if d.loseNext.CompareAndSwap(true, false) {
		return false, &vk.Error{Call: "vkWaitForFences", Result: vk.ErrDeviceLost}
	}
	return d.vk.WaitFence(f, timeout)
}

// deviceNanos reads the job's two timestamps: the device time of its ops.
func (j *job) deviceNanos() (int64, error) {
	if j.s == nil || j.s.queries == 0 {
		return 0, nil
	}
	ts, err := j.d.vk.QueryResults(j.s.queries, 2)
	if err != nil {
		return 0, err
	}
	mask := uint64(math.MaxUint64)
	if bits := j.d.a.validBits; bits < 64 {
		mask = 1<<bits - 1
	}
	return int64(float64((ts[1]-ts[0])&mask) * float64(j.d.a.props.Limits.TimestampPeriod)), nil
}

// finish lets go of everything the job holds; the device must be done with it.
func (j *job) finish() {
	d := j.d
	if j.s != nil {
		if d.lost.Load() || d.putSlot(j.s) != nil {
			d.graveSlot(j.s)
		}
		j.s = nil
	}
	for _, s := range j.scratch {
		s.b.h.free(s)
	}
	j.scratch = nil
	for _, p := range j.pipelines {
		p.use.RUnlock()
	}
	j.pipelines = nil
	if j.after != nil {
		j.after()
		j.after = nil
	}
}

// run submits the job and waits for it, returning its device time. When ctx ends
// first the job finishes in the background and run returns ctx's error; in every
// case the job is finished (now or later) and j.after called.
func (j *job) run(ctx context.Context, what string) (int64, error) {
	if err := j.submit(ctx); err != nil {
		return 0, err
	}
	return j.await(ctx, what)
}

// await is run for a submitted job.
func (j *job) await(ctx context.Context, what string) (int64, error) {
	d := j.d
	err := j.wait(ctx)
	if errors.Is(err, errAbandoned) {
		go func() {
			if err := j.wait(context.Background()); err != nil {
				_ = d.vk.WaitIdle()
				_ = d.fail(what, err)
			}
			j.finish()
		}()
		return 0, fmt.Errorf("vulkan: %s: stopped waiting for the device: %w", what, context.Cause(ctx))
	}
	if err != nil {
		// The work may still run (or the device is lost); nothing it uses may be
		// freed before the device is idle.
		_ = d.vk.WaitIdle()
		err = d.fail(what, err)
		j.finish()
		return 0, err
	}
	ns, err := j.deviceNanos()
	j.finish()
	if err != nil {
		return 0, d.fail("reading timestamps", err)
	}
	return ns, nil
}
