package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// Jobs (see docs/design.md, "Vulkan"): every submit, transfer and protocol-1
// dispatch is a job, a list of ops recorded into one command buffer of a reused
// slot (command buffer, fence, timestamp queries) under the device lock, with a
// barrier only where an op touches memory an earlier op of the job wrote (or
// writes memory an earlier op read); the lock is released right after
// vkQueueSubmit and the job waits for its own fence on the calling goroutine.
// A slot keeps what its command buffer holds: a job whose ops are the same as
// that recording's (same pipelines, bound ranges, counts, uniforms, grids,
// copies and fills) submits the command buffer again without recording it.

// slot is a command buffer with its fence and two timestamp queries, reused by
// one job after another.
type slot struct {
	cb      vk.CommandBuffer
	fence   vk.Fence
	queries vk.QueryPool
	// stamps receives the two timestamps.
	stamps [2]uint64
	// rec is what cb holds.
	rec recording
}

// recording is what a slot's command buffer was last recorded with: a copy
// of the job's ops, the op its timestamps bracket, the device's set
// generation at the time, and the descriptor sets it binds. ok is false until a
// recording succeeds.
type recording struct {
	ok     bool
	gen    uint64
	timeOp int
	ops    []op
	sets   []*cachedSet
	// spans, words and bytes hold the copied ops' binds, counts and uniforms.
	spans []span
	words []uint32
	bytes []byte
}

// matches reports whether the recording is what job j would record now, at
// the device's set generation gen.
func (r *recording) matches(j *job, gen uint64) bool {
	if !r.ok || r.gen != gen || r.timeOp != j.timeOp || len(r.ops) != len(j.ops) {
		return false
	}
	for i := range r.ops {
		if !sameOp(&r.ops[i], &j.ops[i]) {
			return false
		}
	}
	return true
}

// sameOp reports whether two ops record the same commands.
func sameOp(a, b *op) bool {
	return a.kind == b.kind && a.p == b.p && a.grid == b.grid && a.src == b.src && a.dst == b.dst && a.value == b.value && a.guard == b.guard &&
		slices.Equal(a.binds, b.binds) && slices.Equal(a.counts, b.counts) && bytes.Equal(a.uniforms, b.uniforms)
}

// keep copies j's ops into the recording (the job's slices belong to its
// caller), at set generation gen.
func (r *recording) keep(j *job, gen uint64) {
	var nspans, nwords, nbytes int
	for i := range j.ops {
		nspans += len(j.ops[i].binds)
		nwords += len(j.ops[i].counts)
		nbytes += len(j.ops[i].uniforms)
	}
	r.spans = slices.Grow(r.spans[:0], nspans)
	r.words = slices.Grow(r.words[:0], nwords)
	r.bytes = slices.Grow(r.bytes[:0], nbytes)
	r.ops = append(r.ops[:0], j.ops...)
	for i := range r.ops {
		o := &r.ops[i]
		o.binds = keepTail(&r.spans, o.binds)
		o.counts = keepTail(&r.words, o.counts)
		o.uniforms = keepTail(&r.bytes, o.uniforms)
	}
	r.gen, r.timeOp, r.ok = gen, j.timeOp, true
}

// keepTail appends src to *arena (whose capacity suffices) and returns the
// appended part, nil for an empty src.
func keepTail[T any](arena *[]T, src []T) []T {
	if len(src) == 0 {
		return nil
	}
	n := len(*arena)
	*arena = append(*arena, src...)
	return (*arena)[n:len(*arena):len(*arena)]
}

// forget drops the recording (the command buffer is being recorded again).
func (r *recording) forget() {
	r.ok = false
	clear(r.ops)
	r.ops = r.ops[:0]
	clear(r.spans)
	r.spans = r.spans[:0]
	clear(r.sets)
	r.sets = r.sets[:0]
}

// maxSlotScan bounds how many free slots takeSlot compares with a job.
const maxSlotScan = 8

// takeSlot returns a free slot: one whose recording j matches at the device's
// set generation when there is one (reported by again), else the one freed last,
// creating a slot when none is free. The device lock must be held (the command
// pool, the set generation).
func (d *device) takeSlot(j *job) (s *slot, again bool, err error) {
	d.slotMu.Lock()
	if n := len(d.slots); n > 0 {
		pick := n - 1
		for i := n - 1; i >= max(n-maxSlotScan, 0); i-- {
			if d.slots[i].rec.matches(j, d.setGen) {
				pick, again = i, true
				break
			}
		}
		s = d.slots[pick]
		d.slots = slices.Delete(d.slots, pick, pick+1)
		d.slotMu.Unlock()
		return s, again, nil
	}
	d.slotMu.Unlock()
	s = &slot{}
	if s.cb, err = d.vk.AllocateCommandBuffer(d.pool); err != nil {
		return nil, false, err
	}
	if s.fence, err = d.vk.CreateFence(); err != nil {
		d.vk.FreeCommandBuffer(d.pool, s.cb)
		return nil, false, err
	}
	if d.a.timestamps {
		if s.queries, err = d.vk.CreateTimestampPool(2); err != nil {
			d.vk.FreeCommandBuffer(d.pool, s.cb)
			d.vk.DestroyFence(s.fence)
			return nil, false, err
		}
	}
	return s, false, nil
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
	// guard is the job's loop-guard span a guarded pipeline binds after the
	// program's buffers (guard.go); the dispatch writes it.
	guard span
}

// region is bytes of a block an op reads or writes.
type region struct {
	b         *block
	off, size uint64
}

// accesses appends what the op reads and writes to reads and writes.
func (o *op) accesses(reads, writes []region) ([]region, []region) {
	switch o.kind {
	case opCopy:
		return append(reads, region{o.src.b, o.src.off, o.src.size}), append(writes, region{o.dst.b, o.dst.off, o.src.size})
	case opFill:
		return reads, append(writes, region{o.dst.b, o.dst.off, o.dst.size})
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
	if o.guard.size > 0 {
		writes = append(writes, region(o.guard))
	}
	return reads, writes
}

// job is the work of one call: its ops and what they hold until the device is
// done with them.
type job struct {
	d   *device
	ops []op
	// scratch spans are freed, pipelines read-unlocked and life read-unlocked
	// once the job is finished.
	scratch   []span
	pipelines []*pipeline
	life      *sync.RWMutex
	// residents are the buffers the ops use; each remembers the job's sequence
	// number.
	residents []*resident
	// guard is the loop guard's flag of the job's guarded dispatches, a
	// scratch span; its size is 0 when none is guarded (guard.go). guardHost
	// is where the host reads it: guard itself when mapped, else a staging
	// span.
	guard, guardHost span
	// timeOp, when non-zero, is 1 + the index of the one op the timestamps
	// bracket (a protocol-1 dispatch's, not its uploads and read-backs); zero
	// brackets them all.
	timeOp int

	s   *slot
	seq uint64
	// commands, when non-zero, is the number of commands of a submit, named in
	// its errors; handedOff is set when the job was left to finish in the
	// background.
	commands  int
	handedOff bool

	// spans and words back the ops' binds and counts; the rest is scratch
	// space for recording (see record).
	spans         []span
	words         []uint32
	reads, writes []region
	opReads, opWr []region
	ranges        []vk.StorageRange
	key, push     []byte
}

// takeSpans returns n zero spans of the job's arena.
func (j *job) takeSpans(n int) []span {
	k := len(j.spans)
	j.spans = append(j.spans, make([]span, n)...)
	return j.spans[k : k+n : k+n]
}

// takeWords returns n zero words of the job's arena.
func (j *job) takeWords(n int) []uint32 {
	k := len(j.words)
	j.words = append(j.words, make([]uint32, n)...)
	return j.words[k : k+n : k+n]
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
		return err
	}
	pluginapi.MarkLaunched(ctx) // a trace's launch ends at vkQueueSubmit, its completion wait begins
	return nil
}

func (j *job) recordAndSubmit() error {
	d := j.d
	if err := d.checkLost(); err != nil {
		return err
	}
	s, again, err := d.takeSlot(j)
	if err != nil {
		return d.fail("creating a command buffer", err)
	}
	seq := d.seq + 1
	if again {
		// The command buffer holds these very commands: submit it again, and
		// note that the job binds its descriptor sets.
		for _, cs := range s.rec.sets {
			cs.used = seq
		}
	} else {
		s.rec.forget()
		if err := j.record(s, seq); err != nil {
			// The command buffer may be left recording: the slot is not reused.
			d.graveSlot(s)
			return d.fail("recording commands", err)
		}
		s.rec.keep(j, d.setGen)
	}
	if s.queries != 0 && d.a.hostReset && !d.vk.ResetQueriesOnHost(s.queries, 0, 2) {
		_ = d.putSlot(s)
		return d.fail("resetting timestamp queries", errors.New("the driver lacks vkResetQueryPool although the device has hostQueryReset"))
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
// host. The timestamps' queries are reset by a recorded command, or, on a
// device with hostQueryReset, on the host before each submission
// (recordAndSubmit): a command buffer without the reset costs the GPU about
// 5 µs less (see docs/design.md, "Vulkan").
func (j *job) record(s *slot, seq uint64) error {
	cb := s.cb
	if err := cb.Begin(); err != nil {
		return err
	}
	if s.queries != 0 && !j.d.a.hostReset {
		cb.ResetQueries(s.queries, 0, 2)
	}
	fullBarrier(cb)
	if s.queries != 0 && j.timeOp == 0 {
		cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 0)
	}
	reads, writes := j.reads[:0], j.writes[:0]
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
		r, w := o.accesses(j.opReads[:0], j.opWr[:0])
		j.opReads, j.opWr = r, w
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
			if err := j.recordDispatch(s, o, seq); err != nil {
				return err
			}
		}
		if timed {
			cb.WriteTimestamp(vk.StageBottomOfPipe, s.queries, 1)
		}
	}
	j.reads, j.writes = reads, writes
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

// recordDispatch binds the op's pipeline and cached descriptor set (noted in
// the slot's recording), pushes the element counts and the uniform block (see
// docs/design.md, "Vulkan") and records the dispatch's launches (dispatchGrid).
func (j *job) recordDispatch(s *slot, o *op, seq uint64) error {
	d, p, cb := j.d, o.p, s.cb
	ranges := slices.Grow(j.ranges[:0], len(o.binds))[:len(o.binds)]
	j.ranges = ranges
	for i, s := range o.binds {
		if s.size == 0 {
			ranges[i] = d.empty.storage(4)
		} else {
			ranges[i] = s.storage(s.size)
		}
	}
	p.addressRanges(d, ranges)
	if p.guard {
		ranges = append(ranges, o.guard.storage(spirv.GuardBytes))
	}
	j.ranges = ranges
	j.key = setKey(j.key[:0], ranges)
	cs, err := d.descriptorSet(p, ranges, j.key, seq)
	if err != nil {
		return err
	}
	s.rec.sets = append(s.rec.sets, cs)
	cb.BindCompute(p.pipe, p.layout, cs.set)
	push := slices.Grow(j.push[:0], int(p.push))[:p.push]
	j.push = push
	clear(push)
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

// spinWait is how long a job polls its fence (vkGetFenceStatus, yielding to
// other goroutines between polls) before blocking in vkWaitForFences: a short
// job is then seen done as soon as it is, without the wake-up latency of a
// blocking wait. CPU devices (lavapipe) do not poll: the host's cores run their
// work.
const spinWait = 200 * time.Microsecond

// wait polls the job's fence for the device's spin time when poll is set (a
// caller waits for the answer; a job finishing in the background does not
// poll), then waits for it in slices, giving up when ctx ends (with an error
// wrapping errAbandoned and ctx's cause; the job is then still running).
func (j *job) wait(ctx context.Context, poll bool) error {
	d := j.d
	if spin := time.Duration(d.spin.Load()); poll && spin > 0 {
		var until time.Time
		for !d.loseNext.Load() {
			done, err := d.fenceSignaled(j.s.fence)
			if err != nil {
				return err
			}
			if done {
				d.finished(j.seq)
				return nil
			}
			now := time.Now()
			if until.IsZero() {
				until = now.Add(spin)
			}
			if ctx.Err() != nil || now.After(until) {
				break
			}
			runtime.Gosched()
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

// waitFence waits on a fence; the loseNext hook makes it fail as a lost device,
// and while the hold hook holds a channel the fence reads as unsignalled until
// the channel is closed.
func (d *device) waitFence(f vk.Fence, timeout time.Duration) (bool, error) {
	if d.loseNext.CompareAndSwap(true, false) {
		return false, &vk.Error{Call: "vkWaitForFences", Result: vk.ErrDeviceLost}
	}
	if h := d.hold.Load(); h != nil {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-*h:
		case <-t.C:
			return false, nil
		}
	}
	return d.vk.WaitFence(f, timeout)
}

// fenceSignaled polls a fence; under the hold hook it reads as unsignalled.
func (d *device) fenceSignaled(f vk.Fence) (bool, error) {
	if h := d.hold.Load(); h != nil {
		select {
		case <-*h:
		default:
			return false, nil
		}
	}
	return d.vk.FenceSignaled(f)
}

// deviceNanos reads the job's two timestamps: the device time of its ops.
func (j *job) deviceNanos() (int64, error) {
	if j.s == nil || j.s.queries == 0 {
		return 0, nil
	}
	ts := j.s.stamps[:]
	if err := j.d.vk.QueryResultsInto(j.s.queries, ts); err != nil {
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
	clear(j.scratch)
	j.scratch = j.scratch[:0]
	for _, p := range j.pipelines {
		p.use.RUnlock()
	}
	clear(j.pipelines)
	j.pipelines = j.pipelines[:0]
	if j.life != nil {
		j.life.RUnlock()
		j.life = nil
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

// await is run for a submitted job. When ctx ends first, the job is left to
// finish in the background.
func (j *job) await(ctx context.Context, what string) (int64, error) {
	return j.settle(ctx, what, true)
}

// complete is await for a started job (pipelined.go): when ctx ends first it
// keeps waiting for the device, without polling, and only then returns ctx's
// error, so that nothing the job uses is given back while the device may
// still use it.
func (j *job) complete(ctx context.Context, what string) (int64, error) {
	return j.settle(ctx, what, false)
}

// settle waits for a submitted job and finishes it, returning its device time
// or the error it ended with; handOff says whether a job whose ctx ended first
// finishes in the background (await) or here (complete).
func (j *job) settle(ctx context.Context, what string, handOff bool) (int64, error) {
	d := j.d
	err := j.wait(ctx, true)
	if err != nil && j.commands > 0 {
		what = fmt.Sprintf("%s of %d commands", what, j.commands)
	}
	if errors.Is(err, errAbandoned) {
		rest := func() {
			if err := j.wait(context.Background(), false); err != nil {
				_ = d.vk.WaitIdle()
				_ = d.fail(what, err)
			}
			j.finish()
		}
		if handOff {
			j.handedOff = true
			go rest()
		} else {
			rest()
		}
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
	if err != nil {
		j.finish()
		return 0, d.fail("reading timestamps", err)
	}
	err = j.checkGuard(what)
	j.finish()
	if err != nil {
		return 0, err
	}
	return ns, nil
}
