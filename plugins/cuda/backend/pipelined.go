package backend

import (
	"context"
	"fmt"
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

// destroyEvents destroys the reusable events; it runs inside d.ctx.Do once
// nothing is in flight.
func (d *device) destroyEvents() {
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
		if err := d.enqueue(s, first, last); err != nil {
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

// StartDispatch enqueues a v1 dispatch on the pipeline's adapter as Dispatch
// runs it (buffers of the device's pool, inputs uploaded, write buffers
// zeroed, the launch between two events of its own) and each output's copy
// back straight into the host's memory for it (outputs: DMA into the data
// plane's registered segment), and returns a completion that waits for the
// last event, gives the buffers back to the pool and returns the outputs in
// place. The adapter's queue goes on with its next requests meanwhile.
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
	// first and last time the launch; fin follows the copies back.
	var first, last, fin driver.Event
	// done gives the buffers back (inside d.ctx.Do) and the stream.
	done := func() {
		d.pipe.mu.Lock()
		d.free(bufferList(binds)...)
		d.pipe.mu.Unlock()
		d.endWork(first, last, fin)
		let()
	}
	if err := d.checkLost(); err != nil {
		d.endWork()
		let()
		return nil, err
	}
	outs := outputViews(binds, outputs)
	err = d.ctx.Do(func() error {
		if err := d.allocPiped(p, binds); err != nil {
			return err
		}
		var err error
		if first, err = d.event(); err != nil {
			return err
		}
		if last, err = d.event(); err != nil {
			return err
		}
		if fin, err = d.event(); err != nil {
			return err
		}
		c := d.ctx
		for _, bd := range binds {
			switch {
			case bd.Decl.Access == ir.Write:
				err = c.MemsetD32Async(bd.dev.ptr, 0, (bd.Bytes()+3)/4, d.stream)
			case bd.ReadsInput():
				b.pin(d, bd.Input)
				err = c.MemcpyHtoDAsync(bd.dev.ptr, bd.Input, d.stream)
			}
			if err != nil {
				return d.fail(fmt.Sprintf("uploading buffer %q", bd.Decl.Name), err)
			}
		}
		p.setArgs(binds, req.Uniforms)
		if err := c.EventRecord(first, d.stream); err != nil {
			return d.fail("recording the start event", err)
		}
		if err := c.Launch(p.fn, req.Grid, p.mod.WorkgroupSize, p.mod.DynamicSharedBytes, d.stream, p.args); err != nil {
			return d.fail(fmt.Sprintf("launching program %q", p.prog.Name), err)
		}
		if err := c.EventRecord(last, d.stream); err != nil {
			return d.fail("recording the end event", err)
		}
		k := 0
		for _, bd := range binds {
			if !bd.Decl.Access.IsOutput() {
				continue
			}
			b.pin(d, outs[k])
			if err := c.MemcpyDtoHAsync(outs[k], bd.dev.ptr, d.stream); err != nil {
				return d.fail(fmt.Sprintf("reading buffer %q back", bd.Decl.Name), err)
			}
			k++
		}
		if err := c.EventRecord(fin, d.stream); err != nil {
			return d.fail("recording the event after the outputs", err)
		}
		return nil
	})
	if err != nil {
		_ = d.ctx.Do(func() error {
			_ = d.ctx.StreamSynchronize(d.stream)
			done()
			return nil
		})
		return nil, err
	}
	pluginapi.MarkLaunched(ctx)
	return func() (*pluginapi.DispatchResult, error) {
		waitErr := d.await(fin)
		res := &pluginapi.DispatchResult{Outputs: outs}
		err := d.ctx.Do(func() error {
			defer done()
			if waitErr != nil {
				return d.fail(fmt.Sprintf("running program %q", p.prog.Name), waitErr)
			}
			ms, err := d.ctx.EventElapsed(first, last)
			if err != nil {
				return d.fail("reading the timing events", err)
			}
			res.DeviceNanos = int64(float64(ms) * 1e6)
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.HostNanos = max(time.Since(start).Nanoseconds(), 1)
		return res, nil
	}, nil
}

// allocPiped takes the dispatch's device buffers from the pool. Started work
// shares the stream (and so the pool) between the adapter's queue, which
// starts it, and the completer, which gives buffers back: pipe.mu guards the
// pool meanwhile. It must run inside d.ctx.Do with the work begun.
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
