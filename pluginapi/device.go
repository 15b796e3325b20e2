package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// device is the plugin side's SDK for protocol 2: the backend's optional
// interfaces, found once with type assertions, and the table of live buffers that
// every request is checked against before the backend sees it. The gRPC service
// and the data plane both go through it.
type device struct {
	impl Backend
	// checked is impl behind the SDK's checks (Checked), shared with the
	// Backend service so that it knows every pipeline; the data plane's
	// dispatches go through it.
	checked   Backend
	buffers   Buffers
	submitter Submitter
	artifacts Artifacts
	health    HealthChecker
	segments  Segments
	peer      PeerCopier

	mu    sync.Mutex
	table bufferTable
	// adapters is the adapter each live buffer was allocated on.
	adapters map[uint64]int
}

func newDevice(impl Backend) *device {
	d := &device{impl: impl, checked: Checked(impl), table: bufferTable{}, adapters: map[uint64]int{}}
	d.buffers, _ = impl.(Buffers)
	d.submitter, _ = impl.(Submitter)
	d.artifacts, _ = impl.(Artifacts)
	d.health, _ = impl.(HealthChecker)
	d.segments, _ = impl.(Segments)
	d.peer, _ = impl.(PeerCopier)
	return d
}

func (d *device) caps() Capabilities {
	return Capabilities{
		Buffers:   d.buffers != nil,
		Submit:    d.buffers != nil && d.submitter != nil,
		Artifacts: d.artifacts != nil,
		Health:    d.health != nil,
		PeerCopy:  d.buffers != nil && d.peer != nil,

		ConcurrentAdapters: concurrentAdapters(d.impl),
		PipelinedDispatch:  pipelinedDispatch(d.impl),
		Spans:              shipsSpans,
	}
}

var (
	errNoBuffers   = &UnimplementedError{Interface: "pluginapi.Buffers"}
	errNoSubmit    = &UnimplementedError{Interface: "pluginapi.Submitter"}
	errNoArtifacts = &UnimplementedError{Interface: "pluginapi.Artifacts"}
	errNoHealth    = &UnimplementedError{Interface: "pluginapi.HealthChecker"}
	errNoPeerCopy  = &UnimplementedError{Interface: "pluginapi.PeerCopier"}
)

// alloc checks the request, asks the backend and records the buffer.
func (d *device) alloc(ctx context.Context, req *AllocRequest) (*AllocResult, error) {
	if d.buffers == nil {
		return nil, errNoBuffers
	}
	if req.Size > MaxBufferBytes {
		return nil, Rejected("buffer of %d bytes is larger than the %d bytes a binding can address. Fix: split the data into smaller buffers", req.Size, uint64(MaxBufferBytes))
	}
	if req.Usage&^usageMask != 0 {
		return nil, Rejected("buffer usage %s has unknown bits. Fix: use the pluginapi.Usage constants", req.Usage)
	}
	if _, err := adapterIndex(req.Adapter); err != nil {
		return nil, err
	}
	res, err := d.buffers.AllocBuffer(ctx, req)
	if err != nil {
		return nil, err
	}
	switch {
	case res == nil || res.Buffer == 0:
		return nil, DeviceFailed("backend AllocBuffer returned no buffer handle and no error")
	case res.Mapped && req.Shared == nil:
		return nil, DeviceFailed("backend AllocBuffer reported buffer %d as mapped, but no shared memory was offered", res.Buffer)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, live := d.table[res.Buffer]; live {
		return nil, DeviceFailed("backend AllocBuffer returned handle %d, which is already a live buffer", res.Buffer)
	}
	d.table[res.Buffer] = req.Size
	d.adapters[res.Buffer] = req.Adapter
	return res, nil
}

// free frees a known buffer.
func (d *device) free(ctx context.Context, buffer uint64) error {
	if d.buffers == nil {
		return errNoBuffers
	}
	d.mu.Lock()
	_, ok := d.table[buffer]
	d.mu.Unlock()
	if !ok {
		return Rejected("free of buffer %d, which does not exist (never allocated, or freed). Fix: free each buffer once", buffer)
	}
	if err := d.buffers.FreeBuffer(ctx, buffer); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.table, buffer)
	delete(d.adapters, buffer)
	d.mu.Unlock()
	return nil
}

// checkRange checks one range against the table.
func (d *device) checkRange(what string, r BufferRange) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.table.checkRange(what, r, 1)
}

func (d *device) write(ctx context.Context, buffer, offset uint64, src []byte) error {
	if d.buffers == nil {
		return errNoBuffers
	}
	if err := d.checkRange("write", BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(src))}); err != nil {
		return err
	}
	return d.buffers.WriteBuffer(ctx, buffer, offset, src)
}

func (d *device) read(ctx context.Context, buffer, offset uint64, dst []byte) error {
	if d.buffers == nil {
		return errNoBuffers
	}
	if err := d.checkRange("read", BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(dst))}); err != nil {
		return err
	}
	return d.buffers.ReadBuffer(ctx, buffer, offset, dst)
}

// copyPeer checks both ranges against the table (equal sizes, no overlap
// within one buffer) and runs the backend's PeerCopy.
func (d *device) copyPeer(ctx context.Context, dst, src BufferRange) error {
	if d.buffers == nil || d.peer == nil {
		return errNoPeerCopy
	}
	d.mu.Lock()
	err := d.table.checkCopy("peer copy", dst, src)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	return d.peer.PeerCopy(ctx, dst, src)
}

// crossAdapterLocked returns the index of the first copy of req with a range on
// another adapter than req's (-1: none), or a RejectedError when there is one
// and the backend has no PeerCopier. d.mu is held.
func (d *device) crossAdapterLocked(req *SubmitRequest) (int, error) {
	first := -1
	for i, c := range req.Commands {
		cp, ok := c.(CopyCommand)
		if !ok || (d.adapters[cp.Src.Buffer] == req.Adapter && d.adapters[cp.Dst.Buffer] == req.Adapter) {
			continue
		}
		if d.peer == nil {
			return -1, Rejected("command %d copies between adapters %d and %d, and the backend does not implement pluginapi.PeerCopier. Fix: copy with the host's CopyBuffer instead", i, d.adapters[cp.Src.Buffer], d.adapters[cp.Dst.Buffer])
		}
		if first < 0 {
			first = i
		}
	}
	return first, nil
}

// submitAcross runs a batch with copies between adapters, the first at index
// from: the commands between such copies go to the backend's Submit as batches
// of their own, each copy to PeerCopy, in order. The device times add up.
func (d *device) submitAcross(ctx context.Context, req *SubmitRequest, from int) (*SubmitResult, error) {
	var total SubmitResult
	run := func(cmds []SubmitCommand) error {
		if len(cmds) == 0 {
			return nil
		}
		res, err := d.submitter.Submit(ctx, &SubmitRequest{Adapter: req.Adapter, Commands: cmds})
		if err != nil {
			return err
		}
		if res == nil {
			return errors.New("backend Submit returned no result and no error")
		}
		total.DeviceNanos += res.DeviceNanos
		return nil
	}
	start := 0
	for i := from; i < len(req.Commands); i++ {
		cp, ok := req.Commands[i].(CopyCommand)
		if !ok {
			continue
		}
		d.mu.Lock()
		across := d.adapters[cp.Src.Buffer] != req.Adapter || d.adapters[cp.Dst.Buffer] != req.Adapter
		d.mu.Unlock()
		if !across {
			continue
		}
		if err := run(req.Commands[start:i]); err != nil {
			return nil, err
		}
		if err := d.peer.PeerCopy(ctx, cp.Dst, cp.Src); err != nil {
			return nil, fmt.Errorf("command %d (copy between adapters): %w", i, err)
		}
		start = i + 1
	}
	if err := run(req.Commands[start:]); err != nil {
		return nil, err
	}
	return &total, nil
}

// submit checks every command's ranges and runs the batch.
func (d *device) submit(ctx context.Context, req *SubmitRequest) (*SubmitResult, error) {
	switch {
	case d.buffers == nil:
		return nil, errNoBuffers
	case d.submitter == nil:
		return nil, errNoSubmit
	}
	if _, err := adapterIndex(req.Adapter); err != nil {
		return nil, err
	}
	d.mu.Lock()
	err := d.table.checkCommands(req.Commands)
	cross := -1
	if err == nil {
		cross, err = d.crossAdapterLocked(req)
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var res *SubmitResult
	if cross < 0 {
		res, err = d.submitter.Submit(ctx, req)
	} else {
		res, err = d.submitAcross(ctx, req, cross)
	}
	elapsed := time.Since(start).Nanoseconds()
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("backend Submit returned no result and no error")
	}
	out := *res
	if out.HostNanos == 0 {
		out.HostNanos = max(elapsed, 1)
	}
	return &out, nil
}

func (d *device) artifact(ctx context.Context, req *ArtifactRequest) (*Artifact, error) {
	if d.artifacts == nil {
		return nil, errNoArtifacts
	}
	a, err := d.artifacts.Artifact(ctx, req)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, errors.New("backend Artifact returned no artifact and no error")
	}
	return a, nil
}

func (d *device) checkHealth(ctx context.Context) error {
	if d.health == nil {
		return errNoHealth
	}
	return d.health.Health(ctx)
}

// dispatch runs Backend.Dispatch through the SDK's checks, filling in the host
// time when the backend leaves it zero.
func (d *device) dispatch(ctx context.Context, req *DispatchRequest) (*DispatchResult, error) {
	start := time.Now()
	res, err := d.checked.Dispatch(ctx, req)
	elapsed := time.Since(start).Nanoseconds()
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("backend Dispatch returned no result and no error")
	}
	out := *res
	if out.HostNanos == 0 {
		out.HostNanos = max(elapsed, 1)
	}
	return &out, nil
}

// attachSegment tells a backend with [Segments] about a newly mapped segment.
func (d *device) attachSegment(ctx context.Context, id uint64, mem []byte) error {
	if d.segments == nil {
		return nil
	}
	return d.segments.AttachSegment(ctx, id, mem)
}

// detachSegment tells a backend with [Segments] that a segment is about to be
// unmapped.
func (d *device) detachSegment(ctx context.Context, id uint64) error {
	if d.segments == nil {
		return nil
	}
	return d.segments.DetachSegment(ctx, id)
}
