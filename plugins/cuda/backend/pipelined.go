package backend

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// The data plane starts an adapter's submits and transfers without waiting
// for them (pluginapi.Pipelined): each is enqueued on the adapter's stream with
// an event recorded after it, and its completion waits on that event, on the
// SDK's completer goroutine, while the adapter's queue enqueues the next
// ones. See docs/design.md, "Ordering on the data plane".
var _ pluginapi.Pipelined = (*Backend)(nil)

// pipe is the started work of a device. Started work holds the device's
// stream (sem) from the first start until the last completion returns, so
// every other use of the stream (a blocking call, a free, Close) still finds it
// idle once it holds it; starts while work is in flight add to it. Only the
// adapter's queue starts work, one call at a time.
type pipe struct {
	mu       sync.Mutex
	inflight int            // started and not yet completed
	events   []driver.Event // recorded events ready for reuse
	// lanes are the streams of started v1 dispatches (created on the first
	// one), next the lane the next one goes to.
	lanes []*lane
	next  int
	// launch is held while kernel parameters are set and launched by a lane
	// or a started submit: they share each pipeline's parameter block.
	launch sync.Mutex
}

// beginWork takes the stream for one more piece of started work: it joins the
// work in flight, or acquires sem when nothing is in flight (waiting while
// another call holds it) or when another call waits for sem, so that a steady
// stream of started work cannot starve a blocking call (a peer copy, a
// probe): that call gets the stream when the work in flight is done, and the
// next start waits for it.
func (d *device) beginWork(ctx context.Context) error {
	d.pipe.mu.Lock()
	if d.pipe.inflight > 0 && d.waiting.Load() == 0 {
		d.pipe.inflight++
		d.pipe.mu.Unlock()
		return nil
	}
	d.pipe.mu.Unlock()
	// Only this adapter's queue starts work, so nothing starts meanwhile;
	// sem is free once the work in flight is done (and the callers that
	// waited before had their turn).
	if err := d.acquire(ctx); err != nil {
		return err
	}
	d.pipe.mu.Lock()
	d.pipe.inflight++
	d.pipe.mu.Unlock()
	return nil
}

// endWork gives back what beginWork took, and the events of the work.
func (d *device) endWork(events ...driver.Event) {
	d.pipe.mu.Lock()
	defer d.pipe.mu.Unlock()
	for _, e := range events {
		if e != 0 {
			d.pipe.events = append(d.pipe.events, e)
		}
	}
	d.pipe.inflight--
	if d.pipe.inflight == 0 {
		d.release()
	}
}

// event returns an event for started work, reusing one when it can. It must
// run inside d.ctx.Do.
func (d *device) event() (driver.Event, error) {
	d.pipe.mu.Lock()
	if n := len(d.pipe.events); n > 0 {
		e := d.pipe.events[n-1]
		d.pipe.events = d.pipe.events[:n-1]
		d.pipe.mu.Unlock()
		return e, nil
	}
	d.pipe.mu.Unlock()
	e, err := d.ctx.EventCreate()
	if err != nil {
		return 0, d.fail("creating an event", err)
	}
	return e, nil
}

// destroyEvents stops the dispatch lanes and destroys the reusable events; it
// runs inside d.ctx.Do once nothing is in flight.
func (d *device) destroyEvents() {
	d.stopLanes()
	d.pipe.mu.Lock()
	events := d.pipe.events
	d.pipe.events = nil
	d.pipe.mu.Unlock()
	for _, e := range events {
		_ = d.ctx.EventDestroy(e)
	}
}

// await waits for the work recorded before ev (polling it for spinFor first)
// whatever any context says: the memory the work uses stays in use until
// then.
func (d *device) await(ev driver.Event) error {
	return d.wait(context.Background(), ev)
}

// StartSubmit enqueues the commands as Submit does, between two events of its
// own, and returns a completion that waits for the second and reads the device
// time.
func (b *Backend) StartSubmit(ctx context.Context, req *pluginapi.SubmitRequest) (pluginapi.Completion, error) {
	start := time.Now()
	b.life.RLock()
	_, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		b.life.RUnlock()
		return nil, err
	}
	if err := d.beginWork(ctx); err != nil {
		b.life.RUnlock()
		return nil, err
	}
	s := &submitScratch{}
	var first, last driver.Event
	done := func() {
		s.unlock()
		d.endWork(first, last)
		b.life.RUnlock()
	}
	if err := b.prepare(d, req.Commands, s); err != nil {
		done()
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		done()
		return nil, err
	}
	err = d.ctx.Do(func() error {
		var err error
		if first, err = d.event(); err != nil {
			return err
		}
		if last, err = d.event(); err != nil {
			return err
		}
		for _, l := range s.launches {
			if l.safe {
				if err := l.p.loadSafe(); err != nil {
					return err
				}
			}
		}
		d.pipe.launch.Lock()
		err = d.enqueue(s, first, last)
		d.pipe.launch.Unlock()
		if err != nil {
			_ = d.ctx.StreamSynchronize(d.stream)
			return err
		}
		return nil
	})
	if err != nil {
		done()
		return nil, err
	}
	pluginapi.MarkLaunched(ctx)
	return func() (*pluginapi.SubmitResult, error) {
		defer done()
		if err := d.await(last); err != nil {
			return nil, d.fail(fmt.Sprintf("running a submit of %d commands", len(req.Commands)), err)
		}
		var ms float32
		err := d.ctx.Do(func() error {
			var err error
			if ms, err = d.ctx.EventElapsed(first, last); err != nil {
				return d.fail("reading the timing events", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return &pluginapi.SubmitResult{HostNanos: max(time.Since(start).Nanoseconds(), 1), DeviceNanos: int64(float64(ms) * 1e6)}, nil
	}, nil
}

// StartWrite enqueues a copy of src into the buffer at offset (DMA from a
// registered shared-memory segment) and an event after it.
func (b *Backend) StartWrite(ctx context.Context, handle, offset uint64, src []byte) (pluginapi.Completion, error) {
	return b.startTransfer(ctx, handle, offset, src, true)
}

// StartRead enqueues a copy of the buffer at offset into dst and an event after
// it.
func (b *Backend) StartRead(ctx context.Context, handle, offset uint64, dst []byte) (pluginapi.Completion, error) {
	return b.startTransfer(ctx, handle, offset, dst, false)
}

func (b *Backend) startTransfer(ctx context.Context, handle, offset uint64, host []byte, write bool) (pluginapi.Completion, error) {
	b.life.RLock()
	r, err := b.buffer(handle)
	if err != nil {
		b.life.RUnlock()
		return nil, err
	}
	if offset+uint64(len(host)) > r.size || offset+uint64(len(host)) < offset {
		b.life.RUnlock()
		return nil, pluginapi.Rejected("cuda: bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", offset, offset, len(host), handle, r.size)
	}
	d := r.d
	if err := d.beginWork(ctx); err != nil {
		b.life.RUnlock()
		return nil, err
	}
	var ev driver.Event
	done := func() {
		d.endWork(ev)
		b.life.RUnlock()
	}
	if err := d.checkLost(); err != nil {
		done()
		return nil, err
	}
	err = d.ctx.Do(func() error {
		b.pin(d, host)
		var err error
		if ev, err = d.event(); err != nil {
			return err
		}
		dev := r.ptr + driver.DevicePtr(offset)
		if write {
			err = d.ctx.MemcpyHtoDAsync(dev, host, d.stream)
		} else {
			err = d.ctx.MemcpyDtoHAsync(host, dev, d.stream)
		}
		if err == nil {
			err = d.ctx.EventRecord(ev, d.stream)
		}
		if err != nil {
			_ = d.ctx.StreamSynchronize(d.stream)
			return d.fail(fmt.Sprintf("copying %d bytes of buffer %d", len(host), handle), err)
		}
		return nil
	})
	if err != nil {
		done()
		return nil, err
	}
	return func() (*pluginapi.SubmitResult, error) {
		defer done()
		if err := d.await(ev); err != nil {
			return nil, d.fail(fmt.Sprintf("copying %d bytes of buffer %d", len(host), handle), err)
		}
		return nil, nil
	}, nil
}

var _ pluginapi.DispatchStarter = (*Backend)(nil)

// dispatchLanes is how many streams (each with a goroutine enqueuing on it)
// a device's started v1 dispatches are spread over. Enqueuing a 1-element
// dispatch cost about 17 µs of driver calls on the H200 machine
// (BenchmarkStartDispatch's profile: the launch 6 µs, each event record 2-3
// µs, the upload 2.5 µs), on one thread: with the adapter's queue enqueuing
// them itself the load test stayed near 45 k dispatches/s. v1 dispatches use
// buffers of their own, so they need no order between them.
const dispatchLanes = 4

// laneSpin is how long an idle lane polls for its next dispatch before it
// parks: under load the next one comes within it, without a wake-up.
const laneSpin = 50 * time.Microsecond

// lane is a stream of the device for started v1 dispatches and the goroutine
// that enqueues them on it.
type lane struct {
	stream driver.Stream
	jobs   chan *laneJob
	done   chan struct{}
}

// laneJob is one started dispatch on its way through a lane: the lane fills
// err and fin (the event after the copies back) and closes enqueued.
type laneJob struct {
	b        *Backend
	p        *pipeline
	binds    []*binding
	grid     [3]uint32
	uniforms []byte
	outs     [][]byte

	enqueued chan struct{}
	fin      driver.Event
	err      error
}

// laneFor returns the next lane of the device, round robin, creating the lanes
// on first use. Only the adapter's queue starts work, so one call at a time.
func (d *device) laneFor() (*lane, error) {
	d.pipe.mu.Lock()
	defer d.pipe.mu.Unlock()
	if d.pipe.lanes == nil {
		err := d.ctx.Do(func() error {
			for range dispatchLanes {
				s, err := d.ctx.StreamCreate()
				if err != nil {
					return d.fail("creating a stream for dispatches", err)
				}
				l := &lane{stream: s, jobs: make(chan *laneJob, 2*planeDepth), done: make(chan struct{})}
				d.pipe.lanes = append(d.pipe.lanes, l)
				go d.runLane(l)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	l := d.pipe.lanes[d.pipe.next%len(d.pipe.lanes)]
	d.pipe.next++
	return l, nil
}

// planeDepth is the SDK's bound on a queue's requests (and on its completer's
// started jobs): a lane's channel holds what may be started at once.
const planeDepth = 64

// runLane enqueues the lane's dispatches until its channel closes.
func (d *device) runLane(l *lane) {
	defer close(l.done)
	for {
		j, ok := laneReceive(l.jobs)
		if !ok {
			return
		}
		j.err = d.ctx.Do(func() error { return d.enqueueDispatch(l.stream, j) })
		close(j.enqueued)
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

// stopLanes ends the lanes' goroutines and destroys their streams; it runs
// inside d.ctx.Do once nothing is in flight.
func (d *device) stopLanes() {
	d.pipe.mu.Lock()
	lanes := d.pipe.lanes
	d.pipe.lanes = nil
	d.pipe.mu.Unlock()
	for _, l := range lanes {
		close(l.jobs)
		<-l.done
		_ = d.ctx.StreamSynchronize(l.stream)
		_ = d.ctx.StreamDestroy(l.stream)
	}
}

// StartDispatch starts a v1 dispatch on the pipeline's adapter and returns at
// once: one of the device's lanes enqueues on its stream what Dispatch runs
// (buffers of the device's pool, the inputs uploaded from the host's staged
// memory, write buffers zeroed, the launch) and each output's copy back
// straight into the host's memory for it (outputs: DMA into the data plane's
// registered segment), then an event. The completion waits for that event,
// gives the buffers back to the pool and returns the outputs in place. It
// reports no device time: reading an event pair's time cost the completer
// about 6 µs a dispatch.
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
	l, err := d.laneFor()
	if err == nil {
		err = d.checkLost()
	}
	if err != nil {
		d.endWork()
		let()
		return nil, err
	}
	j := &laneJob{b: b, p: p, binds: binds, grid: req.Grid, uniforms: req.Uniforms, outs: outputViews(binds, outputs), enqueued: make(chan struct{})}
	l.jobs <- j
	pluginapi.MarkLaunched(ctx)
	return func() (*pluginapi.DispatchResult, error) {
		<-j.enqueued
		err := j.err
		if err == nil {
			if err = d.await(j.fin); err != nil {
				err = d.fail(fmt.Sprintf("running program %q", p.prog.Name), err)
			}
		}
		_ = d.ctx.Do(func() error {
			d.pipe.mu.Lock()
			d.free(bufferList(binds)...)
			d.pipe.mu.Unlock()
			return nil
		})
		d.endWork(j.fin)
		let()
		if err != nil {
			return nil, err
		}
		return &pluginapi.DispatchResult{Outputs: j.outs, HostNanos: max(time.Since(start).Nanoseconds(), 1)}, nil
	}, nil
}

// enqueueDispatch enqueues a started dispatch on stream s: its buffers from the
// pool, the uploads and zero fills, the launch (its parameters set and
// launched under pipe.launch, since every lane and the adapter's queue use the
// pipeline's one parameter block), the copies back and the event j.fin. After
// a failure it waits for what was enqueued. It runs inside d.ctx.Do.
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
