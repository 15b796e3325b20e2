package backend

import (
	"context"

	"github.com/kiln-dev/kiln/pluginapi"
)

// Data-plane segments (see docs/design.md, "Vulkan"): the backend remembers the
// segments the SDK attaches, and a device with VK_EXT_external_memory_host
// imports one as a block the first time a transfer, dispatch input or mapped
// buffer lies in it; staged transfers then copy straight from and to it, and
// mapped buffers are spans of it (no import per buffer).
var _ pluginapi.Segments = (*Backend)(nil)

// AttachSegment remembers the segment; devices import it when first used.
func (b *Backend) AttachSegment(_ context.Context, id uint64, mem []byte) error {
	b.segMu.Lock()
	defer b.segMu.Unlock()
	if b.segMem == nil {
		b.segMem = map[uint64][]byte{}
	}
	b.segMem[id] = mem
	return nil
}

// DetachSegment forgets the segment: every device that imported it waits for the
// jobs that used it and releases the import. An unknown id is ignored.
func (b *Backend) DetachSegment(_ context.Context, id uint64) error {
	b.segMu.Lock()
	defer b.segMu.Unlock()
	delete(b.segMem, id)
	b.mu.Lock()
	adapters := b.adapters.List()
	b.mu.Unlock()
	for _, a := range adapters {
		for _, d := range a.devices() {
			seg := d.segs[id]
			delete(d.segs, id)
			if seg == nil {
				continue
			}
			// The SDK unmaps the memory once this returns: wait whatever happens.
			_ = d.waitFor(context.Background(), seg.last.Load())
			d.imported.release(seg.s.b)
		}
	}
	return nil
}

// segmentOn returns segment id as imported by d, importing it on first use; ok
// is false when the segment is unknown or d cannot import it.
func (b *Backend) segmentOn(d *device, id uint64) (*resident, bool) {
	b.segMu.Lock()
	defer b.segMu.Unlock()
	return b.segmentOnLocked(d, id)
}

func (b *Backend) segmentOnLocked(d *device, id uint64) (*resident, bool) {
	if seg, ok := d.segs[id]; ok {
		return seg, seg != nil
	}
	mem, ok := b.segMem[id]
	if !ok || d.a.props.MinImportedHostPointerAlignment == 0 || d.lost.Load() {
		return nil, false
	}
	blk, err := d.importHost(mem)
	if err != nil {
		if b.cfg.Logger != nil {
			b.cfg.Logger.Debug("Vulkan cannot import a data-plane segment; transfers copy through staging memory", "adapter", d.a.index, "segment", id, "error", err)
		}
		// Do not try again for this segment on this device.
		d.noteSegment(id, nil)
		return nil, false
	}
	seg := &resident{d: d, s: span{b: blk, size: uint64(len(mem))}, size: uint64(len(mem))}
	d.noteSegment(id, seg)
	return seg, true
}

// noteSegment records d's import of segment id (nil: d cannot import it). The
// backend's segMu must be held.
func (d *device) noteSegment(id uint64, seg *resident) {
	if d.segs == nil {
		d.segs = map[uint64]*resident{}
	}
	d.segs[id] = seg
}

// segmentView returns the span of an imported segment that holds view on d, and
// the segment to mark used; ok is false when no attached segment holds it or d
// cannot import it.
func (b *Backend) segmentView(d *device, view []byte) (span, *resident, bool) {
	b.segMu.Lock()
	defer b.segMu.Unlock()
	for id, mem := range b.segMem {
		off, ok := pluginapi.ViewOffset(mem, view)
		if !ok {
			continue
		}
		seg, ok := b.segmentOnLocked(d, id)
		if !ok {
			return span{}, nil, false
		}
		return span{b: seg.s.b, off: uint64(off), size: uint64(len(view))}, seg, true
	}
	return span{}, nil, false
}
