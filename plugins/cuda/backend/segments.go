package backend

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

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
	id  uint64
	mem []byte
	// tried is set once registration was attempted; d is the device whose
	// context registered it (nil when registration failed).
	tried bool
	d     *device
}

// segments is the table of announced segments, and the same segments by
// address (byAddr, sorted by the start of their memory) so that a copy finds
// the segment of its view by a binary search: the data plane keeps up to 128
// small staging segments attached, and a scan of all of them cost every
// transfer a few microseconds.
type segments struct {
	mu     sync.Mutex
	m      map[uint64]*segment
	byAddr []*segment
}

// base is the address of the first byte of b.
func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// find returns the attached segment holding view, or nil; mu is held. An entry
// of byAddr that the table no longer holds (Close empties the table) is no
// segment.
func (t *segments) find(view []byte) *segment {
	if len(view) == 0 {
		return nil
	}
	at := base(view)
	i, _ := slices.BinarySearchFunc(t.byAddr, at, func(s *segment, at uintptr) int { return cmpAddr(base(s.mem), at) })
	// byAddr[i] starts at view when the search found it; else byAddr[i-1] is
	// the last segment starting before view.
	for _, j := range []int{i, i - 1} {
		if j < 0 || j >= len(t.byAddr) {
			continue
		}
		s := t.byAddr[j]
		if _, ok := pluginapi.ViewOffset(s.mem, view); ok && t.m[s.id] == s {
			return s
		}
	}
	return nil
}

// add records s in byAddr; mu is held.
func (t *segments) add(s *segment) {
	i, _ := slices.BinarySearchFunc(t.byAddr, base(s.mem), func(e *segment, at uintptr) int {
		return cmpAddr(base(e.mem), at)
	})
	t.byAddr = slices.Insert(t.byAddr, i, s)
}

// remove forgets s in byAddr; mu is held.
func (t *segments) remove(s *segment) {
	if i := slices.Index(t.byAddr, s); i >= 0 {
		t.byAddr = slices.Delete(t.byAddr, i, i+1)
	}
}

func cmpAddr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	seg := &segment{id: id, mem: mem}
	b.segs.m[id] = seg
	b.segs.add(seg)
	return nil
}

// DetachSegment unregisters a segment (when it was registered) and forgets it.
// An id it does not know (detached already, or forgotten by Close, after which
// the SDK may still detach the staging segments) is ignored.
func (b *Backend) DetachSegment(_ context.Context, id uint64) error {
	b.segs.mu.Lock()
	s, ok := b.segs.m[id]
	delete(b.segs.m, id)
	if ok {
		b.segs.remove(s)
	}
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
	s := b.segs.find(host)
	if s == nil {
		return false
	}
	if !s.tried {
		s.tried = true
		if err := d.ctx.HostRegister(s.mem); err != nil {
			if log := b.cfg.Logger; log != nil {
				log.Warn("CUDA could not register a shared-memory segment; copies from and to it take the driver's staged path",
					"segment", s.id, "bytes", len(s.mem), "error", err)
			}
		} else {
			s.d = d
		}
	}
	return s.d != nil
}
