package pluginapi

import (
	"context"
	"errors"
)

// Pipelined is implemented by a [ConcurrentAdapters] backend that can start an
// adapter's submits and transfers without waiting for them, the way a CUDA
// stream or a Vulkan queue takes work ahead of the device: each Start method
// checks and enqueues its work and returns a [Completion] that waits for it.
// On the data plane the SDK then keeps going with the adapter's next requests
// while the device runs the earlier ones, and one goroutine per adapter calls
// the completions in the order the work was started and answers each request
// once its completion returns. The calls' order on one adapter is the one
// [ConcurrentAdapters] gives; the backend's own queue keeps started work in
// start order, so each started call sees the effects of those before it.
//
// What the SDK guarantees a Pipelined backend:
//   - Start methods of one adapter are called one at a time, in the host's
//     order; every other call of that adapter (AllocBuffer, FreeBuffer, a
//     Submit with copies between adapters) comes only once every completion of
//     work started before it has returned, so a free never meets running work.
//   - Each Completion is called exactly once, on a goroutine of the SDK, even
//     when the host has gone (then its answer is dropped), and the memory a
//     started WriteBuffer reads or ReadBuffer fills (shared memory of the host)
//     stays the backend's until its Completion returns: a Completion returns
//     only when the device is done with it, whatever ctx says.
//   - ctx, the request's context, ends when the host cancels the request; it
//     stays usable until the Completion returns.
//
// A backend without it (or one that is not ConcurrentAdapters) gets the
// blocking methods of [Buffers] and [Submitter], as before. Tracing (the spans
// of SpansEnv) runs the blocking methods, so a span is the call's own time.
type Pipelined interface {
	// StartSubmit checks and enqueues req's commands on the adapter.
	StartSubmit(ctx context.Context, req *SubmitRequest) (Completion, error)
	// StartWrite enqueues a copy of src into the buffer at offset.
	StartWrite(ctx context.Context, buffer, offset uint64, src []byte) (Completion, error)
	// StartRead enqueues a copy of the buffer at offset into dst.
	StartRead(ctx context.Context, buffer, offset uint64, dst []byte) (Completion, error)
}

// Completion waits until started work is done and returns its outcome: a
// submit's result (a transfer's is ignored and may be nil) or the error the
// work ended with.
type Completion func() (*SubmitResult, error)

// errNoCompletion is a Start method's success without a Completion.
var errNoCompletion = errors.New("backend Start method returned no completion and no error")

// startSubmit checks req as submit does and starts it on a [Pipelined]
// backend; ok is false when it must run blocking instead (copies between
// adapters, which the SDK splits around PeerCopy).
func (d *device) startSubmit(ctx context.Context, pl Pipelined, req *SubmitRequest) (w Completion, ok bool, err error) {
	switch {
	case d.buffers == nil:
		return nil, true, errNoBuffers
	case d.submitter == nil:
		return nil, true, errNoSubmit
	}
	if _, err := adapterIndex(req.Adapter); err != nil {
		return nil, true, err
	}
	d.mu.Lock()
	err = d.table.checkCommands(req.Commands)
	cross := -1
	if err == nil {
		cross, err = d.crossAdapterLocked(req)
	}
	d.mu.Unlock()
	if err != nil {
		return nil, true, err
	}
	if cross >= 0 {
		return nil, false, nil
	}
	w, err = pl.StartSubmit(ctx, req)
	if err == nil && w == nil {
		err = errNoCompletion
	}
	return w, true, err
}

// startTransfer checks a write (or read) as write and read do and starts it on
// a [Pipelined] backend.
func (d *device) startTransfer(ctx context.Context, pl Pipelined, write bool, buffer, offset uint64, b []byte) (Completion, error) {
	if d.buffers == nil {
		return nil, errNoBuffers
	}
	what := "read"
	if write {
		what = "write"
	}
	if err := d.checkRange(what, BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(b))}); err != nil {
		return nil, err
	}
	var w Completion
	var err error
	if write {
		w, err = pl.StartWrite(ctx, buffer, offset, b)
	} else {
		w, err = pl.StartRead(ctx, buffer, offset, b)
	}
	if err == nil && w == nil {
		err = errNoCompletion
	}
	return w, err
}
