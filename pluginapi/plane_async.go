package pluginapi

import (
	"context"
	"errors"
	"time"
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

// DispatchStarter is implemented by a [ConcurrentAdapters] backend that can
// start a [Backend.Dispatch] without waiting for it: its inputs uploaded, the
// launch and its outputs' copies back enqueued on the pipeline's adapter, the
// way [Pipelined] starts a submit. On the data plane the SDK then sends each
// dispatch of a pipeline it compiled to the queue of the pipeline's adapter,
// where it is started in the host's order with that adapter's other calls,
// and the adapter's completer calls its completion (so a v1 dispatch started
// while an earlier one is on the device no longer waits for it); the host,
// seeing [Capabilities.PipelinedDispatch], sends small v1 dispatches as one
// such request instead of a write, a submit and a read. Without it (or
// without a data plane, or when the host asked for spans) Dispatch runs
// blocking as before.
//
// The SDK has run [CheckLaunch] on req, and gives StartDispatch the same
// guarantees as a Start method of Pipelined: one call of an adapter at a
// time, each DispatchCompletion called exactly once on a goroutine of the
// SDK, and req's input views (shared memory of the host) and outputs stay the
// backend's until its completion returns.
type DispatchStarter interface {
	// StartDispatch checks and enqueues req. outputs are the memory the host
	// reads the outputs from, one per output binding in binding order, each
	// as long as the host expects that output to be: a backend may copy an
	// output into its outputs[i] on the device (DMA into shared memory) and
	// return outputs[i][:n] as the result's Outputs[i], which the SDK then
	// does not copy; any other slice it returns is copied there.
	StartDispatch(ctx context.Context, req *DispatchRequest, outputs [][]byte) (DispatchCompletion, error)
}

// DispatchCompletion waits until a started dispatch is done and returns its
// result, as Backend.Dispatch would, or the error it ended with.
type DispatchCompletion func() (*DispatchResult, error)

// errNoDispatchCompletion is StartDispatch's success without a completion.
var errNoDispatchCompletion = errors.New("backend StartDispatch returned no completion and no error")

// startDispatch runs the SDK's launch checks on req as dispatch does (through
// the Checked layer) and starts it on a [DispatchStarter] backend; the
// completion fills in the host time when the backend leaves it zero.
func (d *device) startDispatch(ctx context.Context, ds DispatchStarter, req *DispatchRequest, outputs [][]byte) (DispatchCompletion, error) {
	start := time.Now()
	if c, ok := d.checked.(*checked); ok {
		if err := c.checkLaunch(req); err != nil {
			return nil, err
		}
	}
	w, err := ds.StartDispatch(ctx, req, outputs)
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, errNoDispatchCompletion
	}
	return func() (*DispatchResult, error) {
		res, err := w()
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, errors.New("backend DispatchCompletion returned no result and no error")
		}
		out := *res
		if out.HostNanos == 0 {
			out.HostNanos = max(time.Since(start).Nanoseconds(), 1)
		}
		return &out, nil
	}, nil
}

// pipelineAdapter returns the adapter a pipeline the SDK saw compiled was
// compiled on.
func (d *device) pipelineAdapter(pipeline uint64) (int, bool) {
	c, ok := d.checked.(*checked)
	if !ok {
		return 0, false
	}
	return c.adapterOf(pipeline)
}
