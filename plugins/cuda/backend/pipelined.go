package backend

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
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
	// one, nlanes of them, dispatchLanes when 0; see lanes.go), jobs their
	// shared queue.
	lanes  []*lane
	nlanes int
	jobs   chan *laneJob
	// slabs are the batches' memory ready for reuse; noSlabs is set when the
	// driver cannot allocate page-locked memory for them.
	slabs   []*slab
	noSlabs atomic.Bool
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

// popLocked takes the last element of *list under mu, if there is one: the
// reuse lists of started work (events, slabs).
func popLocked[T any](mu *sync.Mutex, list *[]T) (T, bool) {
	mu.Lock()
	defer mu.Unlock()
	var zero T
	n := len(*list)
	if n == 0 {
		return zero, false
	}
	v := (*list)[n-1]
	*list = (*list)[:n-1]
	return v, true
}

// event returns an event for started work, reusing one when it can. It must
// run inside d.ctx.Do.
func (d *device) event() (driver.Event, error) {
	if e, ok := popLocked(&d.pipe.mu, &d.pipe.events); ok {
		return e, nil
	}
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
