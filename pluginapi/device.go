package pluginapi

import (
	"context"
	"errors"
	"sync"
	"time"
)

// device is the plugin side's SDK for protocol 2: the backend's optional
// interfaces, found once with type assertions, and the table of live buffers that
// every request is checked against before the backend sees it. The gRPC service
// and the data plane both go through it.
type device struct {
	impl      Backend
	buffers   Buffers
	submitter Submitter
	artifacts Artifacts
	health    HealthChecker
	segments  Segments

	mu    sync.Mutex
	table bufferTable
}

func newDevice(impl Backend) *device {
	d := &device{impl: impl, table: bufferTable{}}
	d.buffers, _ = impl.(Buffers)
	d.submitter, _ = impl.(Submitter)
	d.artifacts, _ = impl.(Artifacts)
	d.health, _ = impl.(HealthChecker)
	d.segments, _ = impl.(Segments)
	return d
}

func (d *device) caps() Capabilities {
	return Capabilities{
		Buffers:   d.buffers != nil,
		Submit:    d.buffers != nil && d.submitter != nil,
		Artifacts: d.artifacts != nil,
		Health:    d.health != nil,
	}
}

var (
	errNoBuffers   = &UnimplementedError{Interface: "pluginapi.Buffers"}
	errNoSubmit    = &UnimplementedError{Interface: "pluginapi.Submitter"}
	errNoArtifacts = &UnimplementedError{Interface: "pluginapi.Artifacts"}
	errNoHealth    = &UnimplementedError{Interface: "pluginapi.HealthChecker"}
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
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := d.submitter.Submit(ctx, req)
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

// dispatch runs Backend.Dispatch, filling in the host time when the backend
// leaves it zero.
func (d *device) dispatch(ctx context.Context, req *DispatchRequest) (*DispatchResult, error) {
	start := time.Now()
	res, err := d.impl.Dispatch(ctx, req)
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
