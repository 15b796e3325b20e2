package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// maxBufferBytes is the largest buffer cpu-ref allocates: 4 GiB of host memory.
const maxBufferBytes = 4 << 30

// Buffers are plain memory: the shared segment the SDK offers for a mapped
// buffer (so the host fills and reads it in place), else memory of the plugin's
// own. Dispatches run the interpreter directly on that memory; nothing is copied
// in or out. See docs/design.md, "cpu-ref".
var (
	_ pluginapi.Buffers   = (*Backend)(nil)
	_ pluginapi.Submitter = (*Backend)(nil)
)

// AllocBuffer keeps the buffer in req.Shared when it is offered (the buffer is
// then Mapped), else in a new zeroed slice.
func (b *Backend) AllocBuffer(_ context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	if err := checkAdapter(req.Adapter); err != nil {
		return nil, err
	}
	if req.Size > maxBufferBytes {
		return nil, pluginapi.Rejected("cpu-ref allocates buffers of at most %d bytes, not %d. Fix: split the data into smaller buffers", maxBufferBytes, req.Size)
	}
	mem, mapped := req.Shared, req.Shared != nil
	if !mapped {
		mem = make([]byte, req.Size)
	}
	return &pluginapi.AllocResult{Buffer: b.buffers.Add(mem), Mapped: mapped}, nil
}

// FreeBuffer forgets a buffer.
func (b *Backend) FreeBuffer(_ context.Context, buffer uint64) error {
	if _, ok := b.buffers.Remove(buffer); !ok {
		return pluginapi.Rejected("cpu-ref has no buffer %d. Fix: free each buffer once", buffer)
	}
	return nil
}

// memory returns the range r of its buffer; the SDK has checked that it fits.
func (b *Backend) memory(r pluginapi.BufferRange) ([]byte, error) {
	mem, ok := b.buffers.Get(r.Buffer)
	if !ok || r.Offset+r.Size > uint64(len(mem)) || r.Offset+r.Size < r.Offset {
		return nil, pluginapi.Rejected("cpu-ref has no buffer %d with bytes [%d, %d+%d). Fix: allocate it first", r.Buffer, r.Offset, r.Offset, r.Size)
	}
	return mem[r.Offset : r.Offset+r.Size : r.Offset+r.Size], nil
}

// WriteBuffer copies src into the buffer.
func (b *Backend) WriteBuffer(_ context.Context, buffer, offset uint64, src []byte) error {
	mem, err := b.memory(pluginapi.BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(src))})
	if err != nil {
		return err
	}
	copy(mem, src)
	return nil
}

// ReadBuffer copies the buffer into dst.
func (b *Backend) ReadBuffer(_ context.Context, buffer, offset uint64, dst []byte) error {
	mem, err := b.memory(pluginapi.BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(dst))})
	if err != nil {
		return err
	}
	copy(dst, mem)
	return nil
}

// Submit runs the commands in order: each dispatch runs the interpreter over its
// bound ranges in place, so it sees every earlier command's writes. A failing
// command ends the batch with its error (a RejectedError for a launch the
// interpreter refuses, or the context's error).
func (b *Backend) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	if err := checkAdapter(req.Adapter); err != nil {
		return nil, err
	}
	start := time.Now()
	for i, c := range req.Commands {
		if err := b.run(ctx, c); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return nil, err
			}
			var rej *pluginapi.RejectedError
			if errors.As(err, &rej) {
				return nil, pluginapi.Rejected("command %d: %w", i, rej.Err)
			}
			return nil, pluginapi.Rejected("command %d: %w", i, err)
		}
	}
	return &pluginapi.SubmitResult{HostNanos: max(time.Since(start).Nanoseconds(), 1)}, nil
}

func (b *Backend) run(ctx context.Context, c pluginapi.SubmitCommand) error {
	switch c := c.(type) {
	case pluginapi.DispatchCommand:
		k, err := b.kernel(c.Pipeline)
		if err != nil {
			return err
		}
		bufs := make([][]byte, len(c.Bindings))
		for i, r := range c.Bindings {
			if bufs[i], err = b.memory(r); err != nil {
				return err
			}
		}
		return k.RunBound(ctx, c.Grid, c.Uniforms, bufs)
	case pluginapi.CopyCommand:
		src, err := b.memory(c.Src)
		if err != nil {
			return err
		}
		dst, err := b.memory(c.Dst)
		if err != nil {
			return err
		}
		copy(dst, src)
		return nil
	case pluginapi.FillCommand:
		dst, err := b.memory(c.Dst)
		if err != nil {
			return err
		}
		fill(dst, c.Value)
		return nil
	}
	return pluginapi.Rejected("cpu-ref does not know command %T. Fix: send dispatch, copy or fill commands", c)
}

// fill repeats the little-endian value over dst (a whole number of words).
func fill(dst []byte, value uint32) {
	if len(dst) < 4 {
		return
	}
	binary.LittleEndian.PutUint32(dst, value)
	for n := 4; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
}
