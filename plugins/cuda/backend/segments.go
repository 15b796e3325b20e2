package backend

import (
	"context"
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/pluginapi"
)

// Shared-memory segments (see docs/design.md, "CUDA"): the data plane's memfd
// segments hold the bytes the host moves (WriteBuffer's source, ReadBuffer's
// destination, a v1 dispatch's inputs). The SDK announces each one before any
// view of it arrives; the backend registers a segment with the driver
// (cuMemHostRegister, portable to every context) the first time a copy uses it,
// with the context of the device copying, so that copy and every later one is DMA
// straight from or into the segment, with no staging copy in the driver. A
// segment the driver refuses to register (a locked-memory limit, an old driver)
// is remembered as such, logged once, and copied through the driver's pageable
// path. DetachSegment unregisters it.

var _ pluginapi.Segments = (*Backend)(nil)

// segment is one announced segment.
type segment struct {
	mem []byte
	// tried is set once registration was attempted; d is the device whose
	// context registered it (nil when registration failed).
	tried bool
	d     *device
}

// segments is the table of announced segments.
type segments struct {
	mu sync.Mutex
	m  map[uint64]*segment
}

// AttachSegment records a segment of the data plane; registration waits for the
// first copy that uses it.
func (b *Backend) AttachSegment(_ context.Context, id uint64, mem []byte) error {
	b.segs.mu.Lock()
	defer b.segs.mu.Unlock()
	if b.segs.m == nil {
		b.segs.m = map[uint64]*segment{}
	}
	if _, ok := b.segs.m[id]; ok {
		return pluginapi.Rejected("cuda: segment %d is already attached. Fix: attach each segment once", id)
	}
	b.segs.m[id] = &segment{mem: mem}
	return nil
}

// DetachSegment unregisters a segment (when it was registered) and forgets it.
// An id it does not know (detached already, or forgotten by Close, after which
// the SDK may still detach the staging segments) is ignored.
func (b *Backend) DetachSegment(_ context.Context, id uint64) error {
	b.segs.mu.Lock()
	s, ok := b.segs.m[id]
	delete(b.segs.m, id)
	b.segs.mu.Unlock()
	if !ok || s.d == nil {
		return nil
	}
	err := s.d.ctx.Do(func() error { return s.d.ctx.HostUnregister(s.mem) })
	if err != nil {
		return fmt.Errorf("cuda: unregistering segment %d: %w", id, err)
	}
	return nil
}

// pin makes sure the segment holding host, if any, has been offered to the
// driver for registration, registering it with d's context the first time. It
// reports whether host lies in a registered segment. It must run inside
// d.ctx.Do.
func (b *Backend) pin(d *device, host []byte) bool {
	b.segs.mu.Lock()
	defer b.segs.mu.Unlock()
	for id, s := range b.segs.m {
		if _, ok := pluginapi.ViewOffset(s.mem, host); !ok {
			continue
		}
		if !s.tried {
			s.tried = true
			if err := d.ctx.HostRegister(s.mem); err != nil {
				if log := b.cfg.Logger; log != nil {
					log.Warn("CUDA could not register a shared-memory segment; copies from and to it take the driver's staged path",
						"segment", id, "bytes", len(s.mem), "error", err)
				}
			} else {
				s.d = d
			}
		}
		return s.d != nil
	}
	return false
}
