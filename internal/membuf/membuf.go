package membuf

import (
	"context"
	"sync"

	"github.com/kiln-dev/kiln/pluginapi"
)

// Buffers implements pluginapi.Buffers in memory: a buffer is the shared
// memory the host offered for it (then reported mapped), else a new slice.
// The zero value holds no buffers and is ready to use.
type Buffers struct {
	mu   sync.Mutex
	last uint64
	bufs map[uint64][]byte
}

// AllocBuffer adopts req.Shared when the host offers it, else makes the
// buffer's memory; handles count up from 1.
func (b *Buffers) AllocBuffer(_ context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	mem, mapped := req.Shared, req.Shared != nil
	if !mapped {
		mem = make([]byte, req.Size)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bufs == nil {
		b.bufs = map[uint64][]byte{}
	}
	b.last++
	b.bufs[b.last] = mem
	return &pluginapi.AllocResult{Buffer: b.last, Mapped: mapped}, nil
}

// FreeBuffer forgets the buffer.
func (b *Buffers) FreeBuffer(_ context.Context, buffer uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.bufs, buffer)
	return nil
}

// WriteBuffer copies src into the buffer at offset.
func (b *Buffers) WriteBuffer(_ context.Context, buffer, offset uint64, src []byte) error {
	copy(b.Range(pluginapi.BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(src))}), src)
	return nil
}

// ReadBuffer fills dst from the buffer at offset.
func (b *Buffers) ReadBuffer(_ context.Context, buffer, offset uint64, dst []byte) error {
	copy(dst, b.Range(pluginapi.BufferRange{Buffer: buffer, Offset: offset, Size: uint64(len(dst))}))
	return nil
}

// Range returns the memory of r, a range the SDK checked.
func (b *Buffers) Range(r pluginapi.BufferRange) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bufs[r.Buffer][r.Offset : r.Offset+r.Size]
}
