package backend

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

var _ pluginapi.DispatchStarter = (*Backend)(nil)

// dispatchLanes is how many streams (each with a goroutine enqueuing on it)
// a device's started v1 dispatches are spread over. Enqueuing a 1-element
// dispatch alone cost 15-26 µs of driver calls on the H200 machine (the
// launch 6 µs, each event record 2-3 µs, the upload 2.5 µs, on four lanes
// that contended in the driver); a lane takes every dispatch waiting for it as
// one batch (see enqueueBatch), so that a dispatch costs about its launch
// under load (BenchmarkLaunchCost: 4.6 µs uncontended). Launches share
// pipe.launch, and more threads in the driver slowed each other: batched,
// BenchmarkStartDispatch did 188 k dispatches/s on one lane, 150 k on two and
// 125 k on four. v1 dispatches use buffers of their own, so they need no order
// between them.
const dispatchLanes = 1

// maxBatch is the most dispatches a lane enqueues as one batch: a batch's
// first completion waits for its last launch.
const maxBatch = 32

// The memory of a batch (a slab): page-locked host memory and device memory
// of slabBytes each, every binding of the batch at a multiple of slabAlign
// (the pool's smallest size class, so kernels see the alignment they see in
// pooled buffers). A dispatch whose bindings need more goes alone, with
// buffers of the pool. A device keeps the slabs it made until it closes: one
// at most per dispatch in flight (the SDK starts at most planeDepth), so at
// most 8 MiB of page-locked and 8 MiB of device memory.
const (
	slabBytes = 128 << 10
	slabAlign = minClass
)

// laneSpin is how long an idle lane polls for its next dispatch before it
// parks: under load the next one comes within it, without a wake-up.
const laneSpin = 50 * time.Microsecond

// lane is a stream of the device for started v1 dispatches and the goroutine
// that enqueues them on it; the lanes of a device take jobs from one queue
// (pipe.jobs), so an idle lane takes what a busy one cannot.
type lane struct {
	stream driver.Stream
	done   chan struct{}
	batch  []*laneJob
}

// laneJob is one started dispatch on its way through a lane: the lane fills
// err and either bat and offs (the dispatch went in a batch, its bindings at
// offs in the batch's slab) or fin (the event after its own copies back), and
// closes enqueued.
type laneJob struct {
	b        *Backend
	p        *pipeline
	binds    []*binding
	grid     [3]uint32
	uniforms []byte
	outs     [][]byte
	need     uint64 // the bytes the bindings take in a slab; 0: too many

	enqueued chan struct{}
	bat      *batch
	offs     []uint64
	fin      driver.Event
	err      error
}

// slab is the memory of one batch: every binding's bytes packed in host, one
// upload into dev, the launches on dev, one copy back into host, then ev.
type slab struct {
	dev  driver.DevicePtr
	host []byte // page-locked (cuMemHostAlloc)
	ev   driver.Event
}

// batch is the dispatches a lane enqueued together. Its slab goes back to the
// device when the last of their completions returns (refs).
type batch struct {
	s        *slab
	recorded bool // s.ev was recorded after the batch's work
	refs     atomic.Int32
	wait     sync.Once
	werr     error // the wait for s.ev
}

// slabNeed returns the bytes binds take in a slab, or 0 when they do not fit.
func slabNeed(binds []*binding) uint64 {
	var n uint64
	for _, bd := range binds {
		n += (max(bd.Bytes(), 1) + slabAlign - 1) / slabAlign * slabAlign
		if n > slabBytes {
			return 0
		}
	}
	return n
}

// startLanes creates the device's lanes on first use and returns their
// queue.
func (d *device) startLanes() (chan<- *laneJob, error) {
	d.pipe.mu.Lock()
	defer d.pipe.mu.Unlock()
	if d.pipe.lanes == nil {
		n := d.pipe.nlanes
		if n <= 0 {
			n = dispatchLanes
		}
		jobs := make(chan *laneJob, 2*planeDepth)
		err := d.ctx.Do(func() error {
			for range n {
				s, err := d.ctx.StreamCreate()
				if err != nil {
					return d.fail("creating a stream for dispatches", err)
				}
				l := &lane{stream: s, done: make(chan struct{})}
				d.pipe.lanes = append(d.pipe.lanes, l)
				go d.runLane(l, jobs)
			}
			return nil
		})
		d.pipe.jobs = jobs
		if err != nil {
			return nil, err
		}
	}
	return d.pipe.jobs, nil
}

// planeDepth is the SDK's bound on a queue's requests (and on its completer's
// started jobs): the lanes' queue holds what may be started at once.
const planeDepth = 64

// runLane enqueues dispatches from jobs until it closes: each one that fits a
// slab with every other that fits and waits in jobs then (up to maxBatch) as
// one batch, any other alone.
func (d *device) runLane(l *lane, jobs <-chan *laneJob) {
	defer close(l.done)
	var next *laneJob
	for {
		j := next
		next = nil
		if j == nil {
			var ok bool
			if j, ok = laneReceive(jobs); !ok {
				return
			}
		}
		if j.need == 0 || d.pipe.noSlabs.Load() {
			d.enqueueAlone(l.stream, j)
			continue
		}
		bat, used := append(l.batch[:0], j), j.need
	gather:
		for len(bat) < maxBatch {
			select {
			case k, ok := <-jobs:
				if !ok {
					break gather
				}
				if k.need == 0 || used+k.need > slabBytes {
					next = k
					break gather
				}
				bat, used = append(bat, k), used+k.need
			default:
				break gather
			}
		}
		d.enqueueBatch(l.stream, bat, used)
		clear(bat)
		l.batch = bat[:0]
	}
}

// laneReceive returns the next job, polling for laneSpin before it parks.
func laneReceive(jobs <-chan *laneJob) (*laneJob, bool) {
	until := time.Now().Add(laneSpin)
	for time.Now().Before(until) {
		select {
		case j, ok := <-jobs:
			return j, ok
		default:
		}
		runtime.Gosched()
	}
	j, ok := <-jobs
	return j, ok
}

// stopLanes ends the lanes' goroutines, destroys their streams and frees the
// slabs; it runs inside d.ctx.Do once nothing is in flight.
func (d *device) stopLanes() {
	d.pipe.mu.Lock()
	lanes, jobs, slabs := d.pipe.lanes, d.pipe.jobs, d.pipe.slabs
	d.pipe.lanes, d.pipe.jobs, d.pipe.slabs = nil, nil, nil
	d.pipe.mu.Unlock()
	if jobs != nil {
		close(jobs)
	}
	for _, l := range lanes {
		<-l.done
		_ = d.ctx.StreamSynchronize(l.stream)
		_ = d.ctx.StreamDestroy(l.stream)
	}
	for _, s := range slabs {
		d.freeSlab(s)
	}
}

// StartDispatch starts a v1 dispatch on the pipeline's adapter and returns at
// once: one of the device's lanes enqueues it on its stream. A small one goes
// in a batch with the others waiting then (see enqueueBatch); a larger one
// gets buffers of the device's pool, its inputs uploaded from the host's
// staged memory, write buffers zeroed, the launch and each output's copy back
// straight into the host's memory for it (DMA into the data plane's
// registered segment), then an event. The completion waits for the work,
// returns the memory it used and the outputs in place. It reports no device
// time: reading an event pair's time cost the completer about 6 µs a
// dispatch.
func (b *Backend) StartDispatch(ctx context.Context, req *pluginapi.DispatchRequest, outputs [][]byte) (pluginapi.DispatchCompletion, error) {
	start := time.Now()
	b.life.RLock()
	p, err := gpukit.DispatchPipeline(ID, &b.pipelines, req.Pipeline, (*pipeline).hold)
	if err != nil {
		b.life.RUnlock()
		return nil, err
	}
	let := func() {
		p.use.RUnlock()
		b.life.RUnlock()
	}
	binds, err := p.bindings(req)
	if err == nil {
		err = p.checkGridDimensions(req.Grid)
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("cuda: program %q not dispatched: %w", p.prog.Name, ctx.Err())
	}
	if err != nil {
		let()
		return nil, err
	}
	if req.Grid[0] == 0 || req.Grid[1] == 0 || req.Grid[2] == 0 {
		let()
		outs := gpukit.UnchangedOutputs(binds)
		return func() (*pluginapi.DispatchResult, error) {
			return &pluginapi.DispatchResult{Outputs: outs, HostNanos: max(time.Since(start).Nanoseconds(), 1)}, nil
		}, nil
	}
	d := p.d
	if err := d.beginWork(ctx); err != nil {
		let()
		return nil, err
	}
	jobs, err := d.startLanes()
	if err == nil {
		err = d.checkLost()
	}
	if err != nil {
		d.endWork()
		let()
		return nil, err
	}
	j := &laneJob{b: b, p: p, binds: binds, grid: req.Grid, uniforms: req.Uniforms, outs: outputViews(binds, outputs), need: slabNeed(binds), enqueued: make(chan struct{})}
	jobs <- j
	pluginapi.MarkLaunched(ctx)
	return func() (*pluginapi.DispatchResult, error) {
		<-j.enqueued
		err := j.finish(d)
		d.endWork(j.fin)
		let()
		if err != nil {
			return nil, err
		}
		return &pluginapi.DispatchResult{Outputs: j.outs, HostNanos: max(time.Since(start).Nanoseconds(), 1)}, nil
	}, nil
}

// finish waits until the device is done with the job's memory, whatever
// failed, copies a batched job's outputs out of its slab and gives the memory
// back; it returns the job's error.
func (j *laneJob) finish(d *device) error {
	err := j.err
	if bat := j.bat; bat != nil {
		if werr := d.awaitBatch(bat); werr != nil && err == nil {
			err = d.fail(fmt.Sprintf("running program %q", j.p.prog.Name), werr)
		}
		if err == nil {
			k := 0
			for i, bd := range j.binds {
				if bd.Decl.Access.IsOutput() {
					copy(j.outs[k], bat.s.host[j.offs[i]:])
					k++
				}
			}
		}
		if bat.refs.Add(-1) == 0 {
			d.giveSlab(bat.s)
		}
		return err
	}
	if err == nil {
		if err = d.await(j.fin); err != nil {
			err = d.fail(fmt.Sprintf("running program %q", j.p.prog.Name), err)
		}
	}
	_ = d.ctx.Do(func() error {
		d.pipe.mu.Lock()
		d.free(bufferList(j.binds)...)
		d.pipe.mu.Unlock()
		return nil
	})
	return err
}

// awaitBatch waits once per batch for its event (the batch's first completion
// waits, the others find it done).
func (d *device) awaitBatch(bat *batch) error {
	bat.wait.Do(func() {
		if bat.recorded {
			bat.werr = d.await(bat.s.ev)
		}
	})
	return bat.werr
}

// enqueueAlone enqueues j alone on stream s (enqueueDispatch) and closes its
// enqueued.
func (d *device) enqueueAlone(s driver.Stream, j *laneJob) {
	j.err = d.ctx.Do(func() error { return d.enqueueDispatch(s, j) })
	close(j.enqueued)
}

// enqueueBatch enqueues jobs on stream s as one batch in a slab: each
// binding's bytes (the input, or zeros) packed in the slab's host memory, one
// upload, each job's launch (parameters set and launched under pipe.launch,
// as enqueueDispatch does), one copy back of the outputs' span and the slab's
// event. A launch that fails fails its job; any other failure fails every job
// of the batch, after waiting for what was enqueued. When no slab can be
// had, each job goes alone. It closes every job's enqueued.
func (d *device) enqueueBatch(s driver.Stream, jobs []*laneJob, used uint64) {
	bat := &batch{}
	bat.refs.Store(int32(len(jobs)))
	ran := false
	err := d.ctx.Do(func() error {
		ran = true
		err := d.enqueueBatchOn(s, jobs, used, bat)
		if err != nil {
			_ = d.ctx.StreamSynchronize(s)
		}
		return err
	})
	if ran && bat.s == nil {
		// No slab (no page-locked or device memory for one): the pool's
		// buffers still serve.
		for _, j := range jobs {
			d.enqueueAlone(s, j)
		}
		return
	}
	for _, j := range jobs {
		if err != nil {
			j.err = err
		}
		if bat.s != nil {
			j.bat = bat
		}
		close(j.enqueued)
	}
}

func (d *device) enqueueBatchOn(s driver.Stream, jobs []*laneJob, used uint64, bat *batch) error {
	c := d.ctx
	sl, err := d.takeSlab()
	if err != nil {
		return err
	}
	bat.s = sl
	off, lo, hi := uint64(0), uint64(slabBytes), uint64(0)
	for _, j := range jobs {
		j.offs = j.offs[:0]
		for _, bd := range j.binds {
			n := bd.Bytes()
			mem := sl.host[off : off+n]
			k := 0
			if bd.ReadsInput() {
				k = copy(mem, bd.Input)
			}
			clear(mem[k:])
			if bd.Decl.Access.IsOutput() {
				lo, hi = min(lo, off), max(hi, off+n)
			}
			bd.dev = &buffer{ptr: sl.dev + driver.DevicePtr(off)}
			j.offs = append(j.offs, off)
			off += (max(n, 1) + slabAlign - 1) / slabAlign * slabAlign
		}
	}
	if err := c.MemcpyHtoDAsync(sl.dev, sl.host[:used], s); err != nil {
		return d.fail(fmt.Sprintf("uploading the buffers of %d dispatches", len(jobs)), err)
	}
	d.pipe.launch.Lock()
	for _, j := range jobs {
		p := j.p
		p.setArgs(j.binds, j.uniforms)
		if err := c.Launch(p.fn, j.grid, p.mod.WorkgroupSize, p.mod.DynamicSharedBytes, s, p.args); err != nil {
			j.err = d.fail(fmt.Sprintf("launching program %q", p.prog.Name), err)
		}
	}
	d.pipe.launch.Unlock()
	if lo < hi {
		if err := c.MemcpyDtoHAsync(sl.host[lo:hi], sl.dev+driver.DevicePtr(lo), s); err != nil {
			return d.fail(fmt.Sprintf("reading the outputs of %d dispatches back", len(jobs)), err)
		}
	}
	if err := c.EventRecord(sl.ev, s); err != nil {
		return d.fail("recording the event after the outputs", err)
	}
	bat.recorded = true
	return nil
}

// takeSlab returns a slab ready for reuse or a new one. A driver that cannot
// allocate page-locked memory sets pipe.noSlabs: every later dispatch goes
// alone. It runs inside d.ctx.Do.
func (d *device) takeSlab() (*slab, error) {
	if s, ok := popLocked(&d.pipe.mu, &d.pipe.slabs); ok {
		return s, nil
	}
	s := &slab{}
	var err error
	if s.host, err = d.ctx.MemHostAlloc(slabBytes); err != nil {
		var missing *driver.SymbolMissingError
		if errors.As(err, &missing) {
			d.pipe.noSlabs.Store(true)
		}
		return nil, d.fail("allocating page-locked memory for dispatches", err)
	}
	d.pipe.mu.Lock()
	buf, err := d.alloc(slabBytes)
	d.pipe.mu.Unlock()
	if err == nil {
		s.dev = buf.ptr
		s.ev, err = d.ctx.EventCreateUntimed()
	}
	if err != nil {
		d.freeSlab(s)
		return nil, d.fail("allocating memory for dispatches", err)
	}
	return s, nil
}

// giveSlab keeps a slab whose batch is done for the next one.
func (d *device) giveSlab(s *slab) {
	d.pipe.mu.Lock()
	d.pipe.slabs = append(d.pipe.slabs, s)
	d.pipe.mu.Unlock()
}

// freeSlab frees what of s exists; it runs inside d.ctx.Do.
func (d *device) freeSlab(s *slab) {
	if s.ev != 0 {
		_ = d.ctx.EventDestroy(s.ev)
	}
	if s.dev != 0 {
		_ = d.ctx.MemFree(s.dev)
	}
	_ = d.ctx.MemFreeHost(s.host)
}

// enqueueDispatch enqueues a started dispatch alone on stream s: its buffers
// from the pool, the uploads and zero fills, the launch (its parameters set
// and launched under pipe.launch, since every lane and the adapter's queue use
// the pipeline's one parameter block), the copies back and the event j.fin.
// After a failure it waits for what was enqueued. It runs inside d.ctx.Do.
func (d *device) enqueueDispatch(s driver.Stream, j *laneJob) error {
	err := d.enqueueDispatchOn(s, j)
	if err != nil {
		_ = d.ctx.StreamSynchronize(s)
	}
	return err
}

func (d *device) enqueueDispatchOn(s driver.Stream, j *laneJob) error {
	p, c := j.p, d.ctx
	if err := d.allocPiped(p, j.binds); err != nil {
		return err
	}
	var err error
	if j.fin, err = d.event(); err != nil {
		return err
	}
	for _, bd := range j.binds {
		switch {
		case bd.Decl.Access == ir.Write:
			err = c.MemsetD32Async(bd.dev.ptr, 0, (bd.Bytes()+3)/4, s)
		case bd.ReadsInput():
			j.b.pin(d, bd.Input)
			err = c.MemcpyHtoDAsync(bd.dev.ptr, bd.Input, s)
		}
		if err != nil {
			return d.fail(fmt.Sprintf("uploading buffer %q", bd.Decl.Name), err)
		}
	}
	d.pipe.launch.Lock()
	p.setArgs(j.binds, j.uniforms)
	err = c.Launch(p.fn, j.grid, p.mod.WorkgroupSize, p.mod.DynamicSharedBytes, s, p.args)
	d.pipe.launch.Unlock()
	if err != nil {
		return d.fail(fmt.Sprintf("launching program %q", p.prog.Name), err)
	}
	k := 0
	for _, bd := range j.binds {
		if !bd.Decl.Access.IsOutput() {
			continue
		}
		j.b.pin(d, j.outs[k])
		if err := c.MemcpyDtoHAsync(j.outs[k], bd.dev.ptr, s); err != nil {
			return d.fail(fmt.Sprintf("reading buffer %q back", bd.Decl.Name), err)
		}
		k++
	}
	if err := c.EventRecord(j.fin, s); err != nil {
		return d.fail("recording the event after the outputs", err)
	}
	return nil
}

// allocPiped takes the dispatch's device buffers from the pool. Started work
// shares the pool between the lanes, which take buffers, and the completer,
// which gives them back: pipe.mu guards it meanwhile. It must run inside
// d.ctx.Do with the work begun.
func (d *device) allocPiped(p *pipeline, binds []*binding) error {
	d.pipe.mu.Lock()
	defer d.pipe.mu.Unlock()
	for _, bd := range binds {
		var err error
		if bd.dev, err = d.alloc(bd.Bytes()); err != nil {
			return d.fail(fmt.Sprintf("allocating buffer %q of program %q", bd.Decl.Name, p.prog.Name), err)
		}
	}
	return nil
}

// outputViews returns where each output of a started dispatch is copied back:
// the host's memory for it (outputs, by output binding) when it has room for
// the whole output, else memory of its own (the SDK reports the true size and
// the host refuses it).
func outputViews(binds []*binding, outputs [][]byte) [][]byte {
	var outs [][]byte
	for _, bd := range binds {
		if !bd.Decl.Access.IsOutput() {
			continue
		}
		k, n := len(outs), bd.Bytes()
		if k < len(outputs) && uint64(len(outputs[k])) >= n {
			outs = append(outs, outputs[k][:n:n])
		} else {
			outs = append(outs, make([]byte, n))
		}
	}
	return outs
}
