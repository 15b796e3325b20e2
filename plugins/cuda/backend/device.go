package backend

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
)

// spinFor is how long wait polls an event before it blocks in the driver: long
// enough for a small dispatch to finish without a thread hand-off.
const spinFor = 200 * time.Microsecond

// device is an opened adapter: its retained primary context, one stream and the
// two events that time a dispatch on it.
type device struct {
	a          *adapter
	ctx        *driver.Context
	stream     driver.Stream
	start, end driver.Event
	// sem serializes the use of the stream and events: one dispatch at a time. It
	// is a channel so a caller can stop waiting when its context ends.
	sem chan struct{}
	// waiting counts the callers of acquire waiting for sem.
	waiting atomic.Int32
	lost    atomic.Bool
	// pool and scratch are guarded by sem.
	pool    pool
	scratch submitScratch
	// pipe is the work started on the data plane (see pipelined.go).
	pipe pipe
}

// newDevice retains a's primary context and creates the stream and events.
func newDevice(a *adapter) (*device, error) {
	c, err := a.dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	d := &device{a: a, ctx: c, sem: make(chan struct{}, 1), pool: pool{limit: poolLimit(a.lim.totalMem)}}
	err = c.Do(func() error {
		var err error
		if d.stream, err = c.StreamCreate(); err != nil {
			return err
		}
		if d.start, err = c.EventCreate(); err != nil {
			return err
		}
		d.end, err = c.EventCreate()
		return err
	})
	if err != nil {
		d.destroyObjects()
		return nil, err
	}
	return d, nil
}

// destroyObjects destroys the events and the stream that exist and releases the
// context; errors are ignored, the objects go either way.
func (d *device) destroyObjects() {
	_ = d.ctx.Do(func() error {
		if d.stream != 0 {
			_ = d.ctx.StreamSynchronize(d.stream)
		}
		d.drain()
		d.destroyEvents()
		for _, e := range []driver.Event{d.start, d.end} {
			if e != 0 {
				_ = d.ctx.EventDestroy(e)
			}
		}
		if d.stream != 0 {
			_ = d.ctx.StreamDestroy(d.stream)
		}
		return nil
	})
	_ = d.ctx.Release()
}

// destroy waits until no dispatch uses the device (an abandoned one included) and
// releases it.
func (d *device) destroy() {
	d.sem <- struct{}{}
	d.destroyObjects()
}

// acquire takes the device's stream for one dispatch, or fails when ctx ends
// first (a dispatch that ran past its caller's deadline may still hold it).
func (d *device) acquire(ctx context.Context) error {
	select {
	case d.sem <- struct{}{}:
		return nil
	default:
	}
	d.waiting.Add(1) // started work stops joining in (see beginWork)
	defer d.waiting.Add(-1)
	select {
	case d.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cuda adapter %d (%s) is busy with earlier work: %w", d.a.index, d.a.info.Name, ctx.Err())
	}
}

// release gives the stream back.
func (d *device) release() { <-d.sem }

// cudaFailure turns a driver failure of op on adapter a into a DeviceError,
// marking the device d (nil while opening) lost when the context is unusable.
func cudaFailure(a *adapter, d *device, op string, err error) error {
	if driver.IsSticky(err) {
		if d != nil {
			d.lost.Store(true)
		}
		return pluginapi.DeviceFailed("cuda adapter %d (%s): the context failed during %s: %w. Fix: check the system log (dmesg, Xid errors) and the program; restart the plugin to get a new context", a.index, a.info.Name, op, err)
	}
	if driver.IsOutOfMemory(err) {
		return pluginapi.DeviceFailed("cuda adapter %d (%s): %s ran out of device memory: %w. Fix: use smaller buffers or free memory on the device", a.index, a.info.Name, op, err)
	}
	return pluginapi.DeviceFailed("cuda adapter %d (%s): %s failed: %w", a.index, a.info.Name, op, err)
}

// fail is cudaFailure on this device.
func (d *device) fail(op string, err error) error { return cudaFailure(d.a, d, op, err) }

// checkLost fails when the context failed earlier.
func (d *device) checkLost() error {
	if d.lost.Load() {
		return pluginapi.DeviceFailed("cuda adapter %d (%s): the context failed earlier. Fix: restart the plugin to get a new context", d.a.index, d.a.info.Name)
	}
	return nil
}

// abandonedError is a wait that ended because the caller's context did while the
// device was still working; done delivers the work's end.
type abandonedError struct {
	err  error
	done <-chan error
}

func (e *abandonedError) Error() string { return "stopped waiting for the device: " + e.err.Error() }
func (e *abandonedError) Unwrap() error { return e.err }

// poll polls ev for spinFor (or until ctx ends) and reports whether the work
// recorded before it is done. It must run inside d.ctx.Do.
func (d *device) poll(ctx context.Context, ev driver.Event) (bool, error) {
	var until time.Time
	for {
		ok, err := d.ctx.EventQuery(ev)
		if err != nil || ok {
			return ok, err
		}
		now := time.Now()
		if until.IsZero() {
			until = now.Add(spinFor)
		}
		if ctx.Err() != nil || now.After(until) {
			return false, nil
		}
	}
}

// wait returns when the work recorded before ev is done. It polls the event for
// spinFor, then blocks (see block).
func (d *device) wait(ctx context.Context, ev driver.Event) error {
	var finished bool
	err := d.ctx.Do(func() error {
		var err error
		finished, err = d.poll(ctx, ev)
		return err
	})
	if err != nil || finished {
		return err
	}
	return d.block(ctx, ev)
}

// block waits for the work recorded before ev in cuEventSynchronize on another
// goroutine; when ctx ends first it returns an *abandonedError, and nothing the
// work uses may be freed before its done channel delivers.
func (d *device) block(ctx context.Context, ev driver.Event) error {
	done := make(chan error, 1)
	go func() { done <- d.ctx.Do(func() error { return d.ctx.EventSynchronize(ev) }) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return &abandonedError{err: ctx.Err(), done: done}
	}
}

// buffer is one device allocation of a size class (see sizeClass).
type buffer struct {
	ptr   driver.DevicePtr
	class uint64
}

// The size classes: powers of two from minClass (an empty buffer still gets a
// valid address, and small buffers share one class) up to bigClass, then
// multiples of bigStep, so a large buffer wastes at most 2 MiB.
const (
	minClass = 256
	bigClass = 64 << 20
	bigStep  = 2 << 20
)

// sizeClass rounds a buffer's byte size up to the allocation size it gets.
func sizeClass(bytes uint64) uint64 {
	if bytes > bigClass {
		return (bytes + bigStep - 1) / bigStep * bigStep
	}
	c := uint64(minClass)
	for c < bytes {
		c <<= 1
	}
	return c
}

// pool keeps the allocations of finished dispatches for later ones, by size
// class, so repeated dispatches of similar sizes allocate and free nothing
// (cuMemAlloc and cuMemFree cost tens of microseconds, and cuMemFree waits for the
// device). It holds at most limit bytes; the device's stream must be held to use
// it.
type pool struct {
	free  map[uint64][]driver.DevicePtr
	bytes uint64
	limit uint64
}

// poolLimit is how much device memory a device's pool may hold: an eighth of the
// memory, at most 4 GiB.
func poolLimit(totalMem uint64) uint64 { return min(totalMem/8, 4<<30) }

// alloc returns a buffer of at least bytes bytes, from the pool when it has one of
// the size class. When the device is out of memory, the pool is emptied and the
// allocation tried once more. It must run inside d.ctx.Do with the stream held.
func (d *device) alloc(bytes uint64) (*buffer, error) {
	class := sizeClass(bytes)
	if list := d.pool.free[class]; len(list) > 0 {
		ptr := list[len(list)-1]
		d.pool.free[class] = list[:len(list)-1]
		d.pool.bytes -= class
		return &buffer{ptr: ptr, class: class}, nil
	}
	p, err := d.ctx.MemAlloc(class)
	if driver.IsOutOfMemory(err) && d.pool.bytes > 0 {
		d.drain()
		p, err = d.ctx.MemAlloc(class)
	}
	if err != nil {
		return nil, err
	}
	return &buffer{ptr: p, class: class}, nil
}

// free returns buffers to the pool, or frees them when the pool is full. It must
// run inside d.ctx.Do with the stream held, after the work that used them.
func (d *device) free(bufs ...*buffer) {
	for _, b := range bufs {
		if b == nil {
			continue
		}
		if d.pool.bytes+b.class > d.pool.limit {
			_ = d.ctx.MemFree(b.ptr)
			continue
		}
		if d.pool.free == nil {
			d.pool.free = map[uint64][]driver.DevicePtr{}
		}
		d.pool.free[b.class] = append(d.pool.free[b.class], b.ptr)
		d.pool.bytes += b.class
	}
}

// drain frees every pooled allocation; it must run inside d.ctx.Do.
func (d *device) drain() {
	for class, list := range d.pool.free {
		for _, p := range list {
			_ = d.ctx.MemFree(p)
		}
		delete(d.pool.free, class)
	}
	d.pool.bytes = 0
}

// isAbandoned returns the abandoned wait err is or wraps.
func isAbandoned(err error) (*abandonedError, bool) {
	var a *abandonedError
	ok := errors.As(err, &a)
	return a, ok
}
