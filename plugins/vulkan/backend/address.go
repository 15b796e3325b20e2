package backend

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// Bindings beyond maxStorageBufferRange (see docs/design.md, "Grids and buffers
// of any size"). On a device with bufferDeviceAddress every storage block is
// created with a device address; a dispatch that binds more than
// maxStorageBufferRange bytes to a binding runs a variant of its pipeline that
// reaches those bindings through addresses in the push constants
// (spirv.Target.BufferAddresses), built on first use and kept with the
// pipeline. Every other dispatch runs the pipeline as compiled, on descriptors.

// addressing is what a pipeline needs to build its address variants.
type addressing struct {
	wg   [3]uint32
	spec ir.SpecMap

	mu       sync.Mutex
	variants map[uint64]*pipeline // by spirv.Target.BufferAddresses
}

// bindingLimit is the most bytes one binding may have on the adapter: the u32
// element count's limit with buffer device addresses, maxStorageBufferRange
// without.
func (a *adapter) bindingLimit() uint64 {
	if a.addresses {
		return 4 * math.MaxUint32
	}
	return uint64(a.props.Limits.MaxStorageBufferRange)
}

// blockUsage is the usage of a heap's blocks: with device addresses on a device
// that has them, for storage blocks.
func (d *device) blockUsage(usage vk.BufferUsage) vk.BufferUsage {
	if d.a.addresses && usage&vk.UsageStorage != 0 {
		return usage | vk.UsageDeviceAddress
	}
	return usage
}

// allocateBlock allocates a block's memory, addressable when its usage asks.
func (d *device) allocateBlock(usage vk.BufferUsage, size uint64, typeIndex uint32) (vk.Memory, error) {
	if usage&vk.UsageDeviceAddress != 0 {
		return d.vk.AllocateAddressableMemory(size, typeIndex)
	}
	return d.vk.AllocateMemory(size, typeIndex)
}

// blockAddress returns the device address of a block's buffer (bound to its
// memory), 0 for a block without one.
func (d *device) blockAddress(usage vk.BufferUsage, buf vk.Buffer) (uint64, error) {
	if usage&vk.UsageDeviceAddress == 0 {
		return 0, nil
	}
	addr := d.vk.BufferAddress(buf)
	if addr == 0 {
		return 0, fmt.Errorf("vkGetBufferDeviceAddress returned 0 for a storage block. Fix: report this driver; run with smaller buffers meanwhile")
	}
	return addr, nil
}

// reachable reports whether a dispatch can bind s in place: within
// maxStorageBufferRange, or in a block with a device address (imported host
// memory has none, so a large binding there runs on a scratch copy).
func (d *device) reachable(s span) bool {
	return s.size <= uint64(d.a.props.Limits.MaxStorageBufferRange) || s.b.addr != 0
}

// forCounts returns the pipeline a dispatch with these element counts runs: p
// itself, or, when a binding has more bytes than maxStorageBufferRange, p's
// variant that reaches those bindings through device addresses.
func (p *pipeline) forCounts(counts []uint32) (*pipeline, error) {
	limit := uint64(p.d.a.props.Limits.MaxStorageBufferRange)
	var mask uint64
	for i, n := range counts {
		if 4*uint64(n) > limit {
			mask |= 1 << i
		}
	}
	if mask == 0 {
		return p, nil
	}
	if !p.d.a.addresses || p.addr == nil {
		return nil, pluginapi.Rejected("vulkan: program %q binds more than adapter %d's maxStorageBufferRange of %d bytes and the device has no buffer device addresses. Fix: bind at most %d elements per binding",
			p.prog.Name, p.d.a.index, limit, limit/4)
	}
	return p.variant(mask)
}

// variant returns p's pipeline with the bindings of mask reached through device
// addresses, building it on first use.
func (p *pipeline) variant(mask uint64) (*pipeline, error) {
	ad := p.addr
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if v, ok := ad.variants[mask]; ok {
		return v, nil
	}
	a := p.d.a
	t := a.targetFor(ad.wg, ad.spec)
	t.BufferAddresses = mask
	m, err := spirv.EmitFor(p.prog, t)
	if err != nil {
		return nil, pluginapi.Rejected("vulkan: adapter %d (%s): %w", a.index, a.info.Name, err)
	}
	if lim := a.props.Limits.MaxPushConstantsSize; m.PushConstantBytes > lim {
		return nil, pluginapi.Rejected("vulkan: program %q needs %d bytes of push constants to reach its large bindings through device addresses, but adapter %d allows %d. Fix: use fewer buffers and uniforms, or bind at most %d bytes per binding",
			p.prog.Name, m.PushConstantBytes, a.index, lim, a.props.Limits.MaxStorageBufferRange)
	}
	if m.Grid == spirv.GridPhysical && p.gridMode != spirv.GridPhysical {
		return nil, pluginapi.Rejected("vulkan: program %q has no room left in adapter %d's %d bytes of push constants for the grid words next to the device addresses of its large bindings. Fix: use fewer buffers and uniforms",
			p.prog.Name, a.index, a.props.Limits.MaxPushConstantsSize)
	}
	v := &pipeline{d: p.d, prog: p.prog, wg: p.wg, push: m.PushConstantBytes, uniforms: m.UniformOffset,
		grid: m.GridOffset, gridMode: m.Grid, sg: p.sg, guard: m.LoopGuard, addresses: m.AddressOffsets}
	if _, err := v.build(m, nil); err != nil {
		return nil, err
	}
	if ad.variants == nil {
		ad.variants = map[uint64]*pipeline{}
	}
	ad.variants[mask] = v
	return v, nil
}

// destroyVariants destroys p's address variants.
func (p *pipeline) destroyVariants() {
	if p.addr == nil {
		return
	}
	p.addr.mu.Lock()
	defer p.addr.mu.Unlock()
	for mask, v := range p.addr.variants {
		v.destroy()
		delete(p.addr.variants, mask)
	}
}

// addressRanges replaces the descriptor ranges of the bindings p reaches
// through device addresses by the empty span: the module does not use those
// descriptors, and their ranges would exceed maxStorageBufferRange.
func (p *pipeline) addressRanges(d *device, ranges []vk.StorageRange) {
	for b := range p.addresses {
		ranges[b] = d.empty.storage(4)
	}
}

// putAddresses writes the device address of each addressed binding's span
// into push.
func (p *pipeline) putAddresses(push []byte, binds []span) {
	for b, off := range p.addresses {
		s := binds[b]
		binary.LittleEndian.PutUint64(push[off:], s.b.addr+s.off)
	}
}
