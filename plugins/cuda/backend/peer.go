package backend

import (
	"context"
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
)

// Copies between buffers (docs/design.md, "Copies between adapters"): within
// one device a cuMemcpyDtoDAsync; between two devices cuMemcpyPeerAsync with
// peer access enabled both ways where cuDeviceCanAccessPeer allows it (NVLink,
// PCIe P2P), else staged through two page-locked host buffers, copying one
// chunk down from the source while the previous one goes up to the
// destination. The copy holds both devices' streams (taken in adapter order,
// so two copies in opposite directions cannot deadlock) and waits for its end.

var _ pluginapi.PeerCopier = (*Backend)(nil)

// stagingChunk is the size of each of the two pinned staging buffers.
const stagingChunk = 32 << 20

// peers is the backend's state of copies between devices: whether peer access
// works for each pair, and the pinned staging buffers, kept for later copies
// once allocated.
type peers struct {
	mu sync.Mutex
	// linked is, by (destination, source) adapter index, whether direct peer
	// copies are on; a pair missing has not been tried.
	linked map[[2]int]bool
	// staging holds the pinned buffers and the device whose context
	// allocated them (nil: none yet); pageable says pinning failed and Go
	// memory stands in.
	staging  [2][]byte
	stagedOn *device
	pageable bool
}

// PeerCopy copies src's bytes into dst, on one device or between two; the SDK
// has checked the ranges.
func (b *Backend) PeerCopy(ctx context.Context, dst, src pluginapi.BufferRange) error {
	b.life.RLock()
	defer b.life.RUnlock()
	rd, err := b.buffer(dst.Buffer)
	if err != nil {
		return err
	}
	rs, err := b.buffer(src.Buffer)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		r   pluginapi.BufferRange
		res *resident
	}{{dst, rd}, {src, rs}} {
		if c.r.Offset+c.r.Size > c.res.size || c.r.Offset+c.r.Size < c.r.Offset {
			return pluginapi.Rejected("cuda: bytes [%d, %d+%d) lie outside buffer %d of %d bytes. Fix: keep ranges within the buffer", c.r.Offset, c.r.Offset, c.r.Size, c.r.Buffer, c.res.size)
		}
	}
	if dst.Size != src.Size {
		return pluginapi.Rejected("cuda: a copy of %d bytes into a range of %d. Fix: give both ranges the same size", src.Size, dst.Size)
	}
	dd, sd := rd.d, rs.d
	to, from := rd.ptr+driver.DevicePtr(dst.Offset), rs.ptr+driver.DevicePtr(src.Offset)
	if dd == sd {
		if err := dd.acquire(ctx); err != nil {
			return err
		}
		defer dd.release()
		if err := dd.checkLost(); err != nil {
			return err
		}
		return dd.ctx.Do(func() error {
			err := dd.ctx.MemcpyDtoDAsync(to, from, dst.Size, dd.stream)
			if err == nil {
				err = dd.ctx.StreamSynchronize(dd.stream)
			}
			if err != nil {
				return dd.fail(fmt.Sprintf("copying %d bytes between buffers", dst.Size), err)
			}
			return nil
		})
	}
	first, second := sd, dd
	if dd.a.index < sd.a.index {
		first, second = dd, sd
	}
	if err := first.acquire(ctx); err != nil {
		return err
	}
	defer first.release()
	if err := second.acquire(ctx); err != nil {
		return err
	}
	defer second.release()
	for _, d := range []*device{dd, sd} {
		if err := d.checkLost(); err != nil {
			return err
		}
	}
	if b.peerLinked(dd, sd) {
		return dd.ctx.Do(func() error {
			err := dd.ctx.MemcpyPeerAsync(to, sd.ctx, from, dst.Size, dd.stream)
			if err == nil {
				err = dd.ctx.StreamSynchronize(dd.stream)
			}
			if err != nil {
				return dd.fail(fmt.Sprintf("copying %d bytes from adapter %d (peer access)", dst.Size, sd.a.index), err)
			}
			return nil
		})
	}
	return b.copyStaged(ctx, dd, to, sd, from, dst.Size)
}

// peerLinked reports whether copies from sd into dd go directly between the
// devices, enabling peer access both ways the first time the pair is asked
// about. The answer is logged once per pair.
func (b *Backend) peerLinked(dd, sd *device) bool {
	b.peer.mu.Lock()
	defer b.peer.mu.Unlock()
	key := [2]int{dd.a.index, sd.a.index}
	if linked, ok := b.peer.linked[key]; ok {
		return linked
	}
	why := ""
	can, err := dd.a.dev.CanAccessPeer(sd.a.dev)
	if err == nil && can {
		err = dd.ctx.Do(func() error { return dd.ctx.EnablePeerAccess(sd.ctx) })
	} else if err == nil {
		why = "cuDeviceCanAccessPeer says no"
	}
	if err == nil && can {
		// The other way too, as the copy back will want it; its failure only
		// concerns that direction, which asks again.
		if back, berr := sd.a.dev.CanAccessPeer(dd.a.dev); berr == nil && back {
			_ = sd.ctx.Do(func() error { return sd.ctx.EnablePeerAccess(dd.ctx) })
		}
	}
	if err != nil {
		why = err.Error()
	}
	linked := why == ""
	if b.peer.linked == nil {
		b.peer.linked = map[[2]int]bool{}
	}
	b.peer.linked[key] = linked
	if log := b.cfg.Logger; log != nil {
		if linked {
			log.Info("CUDA copies between adapters go directly (peer access)", "from", sd.a.index, "to", dd.a.index)
		} else {
			log.Info("CUDA copies between adapters are staged through pinned host memory", "from", sd.a.index, "to", dd.a.index, "reason", why)
		}
	}
	return linked
}

// copyStaged copies n bytes from sd's from into dd's to through the pinned
// staging buffers, chunk i coming down from sd while chunk i-1 goes up to dd.
// Both devices' streams are held by the caller.
func (b *Backend) copyStaged(ctx context.Context, dd *device, to driver.DevicePtr, sd *device, from driver.DevicePtr, n uint64) error {
	b.peer.mu.Lock()
	defer b.peer.mu.Unlock()
	bufs := b.stagingBuffers(sd)
	fail := func(d *device, err error) error {
		return d.fail(fmt.Sprintf("copying %d bytes from adapter %d to adapter %d through host memory", n, sd.a.index, dd.a.index), err)
	}
	for i, at := 0, uint64(0); at < n; i, at = i+1, at+stagingChunk {
		buf := bufs[i%2][:min(stagingChunk, n-at)]
		if err := sd.ctx.Do(func() error { return sd.ctx.MemcpyDtoHAsync(buf, from+driver.DevicePtr(at), sd.stream) }); err != nil {
			return fail(sd, err)
		}
		// The upload of the previous chunk (from the other buffer) runs
		// meanwhile; the buffer filled now was last read two chunks ago,
		// and that upload ended in the previous round.
		if err := dd.ctx.Do(func() error { return dd.ctx.StreamSynchronize(dd.stream) }); err != nil {
			return fail(dd, err)
		}
		if err := sd.ctx.Do(func() error { return sd.ctx.StreamSynchronize(sd.stream) }); err != nil {
			return fail(sd, err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cuda: copy between adapters stopped after %d of %d bytes: %w", at, n, err)
		}
		if err := dd.ctx.Do(func() error { return dd.ctx.MemcpyHtoDAsync(to+driver.DevicePtr(at), buf, dd.stream) }); err != nil {
			return fail(dd, err)
		}
	}
	if err := dd.ctx.Do(func() error { return dd.ctx.StreamSynchronize(dd.stream) }); err != nil {
		return fail(dd, err)
	}
	return nil
}

// stagingBuffers returns the two staging buffers, allocating them pinned with
// d's context the first time (Go memory when pinning fails: the driver then
// stages each copy itself). It runs with b.peer.mu held.
func (b *Backend) stagingBuffers(d *device) [2][]byte {
	if b.peer.staging[0] != nil {
		return b.peer.staging
	}
	err := d.ctx.Do(func() error {
		for i := range b.peer.staging {
			mem, err := d.ctx.MemHostAlloc(stagingChunk)
			if err != nil {
				return err
			}
			b.peer.staging[i] = mem
		}
		return nil
	})
	if err == nil {
		b.peer.stagedOn = d
		return b.peer.staging
	}
	_ = d.ctx.Do(func() error {
		for i, mem := range b.peer.staging {
			if mem != nil {
				_ = d.ctx.MemFreeHost(mem)
			}
			b.peer.staging[i] = nil
		}
		return nil
	})
	if log := b.cfg.Logger; log != nil {
		log.Warn("CUDA could not allocate pinned staging memory for copies between adapters; they go through pageable memory", "error", err)
	}
	b.peer.pageable = true
	for i := range b.peer.staging {
		b.peer.staging[i] = make([]byte, stagingChunk)
	}
	return b.peer.staging
}

// closePeers frees the pinned staging buffers; it runs in Close, before the
// devices are released.
func (b *Backend) closePeers() {
	b.peer.mu.Lock()
	defer b.peer.mu.Unlock()
	if d := b.peer.stagedOn; d != nil && !b.peer.pageable {
		_ = d.ctx.Do(func() error {
			for _, mem := range b.peer.staging {
				_ = d.ctx.MemFreeHost(mem)
			}
			return nil
		})
	}
	b.peer.staging, b.peer.stagedOn, b.peer.pageable = [2][]byte{}, nil, false
	b.peer.linked = nil
}
