package backend

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// Memory (see docs/design.md, "Vulkan"): buffers, staging copies and the scratch
// buffers of protocol-1 dispatches are spans of large blocks. A block is one
// vkAllocateMemory with one VkBuffer over all of it; a span is a range of a
// block, bound by offset. Blocks are allocated when no block has room and freed
// when empty unless the heap's empty blocks stay within its retention (an
// eighth of the device's largest memory heap, at least one block), so steady
// work allocates no memory at all, large protocol-1 dispatches included.

// spanAlign is the alignment of every span: at least any device's
// minStorageBufferOffsetAlignment and nonCoherentAtomSize (Vulkan caps both at
// 256), so a span can be bound, flushed and invalidated on its own.
const spanAlign = 256

// The block sizes of the heaps. A request larger than a block gets a block of its
// own size.
const (
	gpuBlockBytes     = 256 << 20
	cpuBlockBytes     = 64 << 20
	stagingBlockBytes = 64 << 20
)

// heap is the blocks of one memory kind: device-local, host-mapped device memory,
// host-visible staging, or imported host memory (one block per buffer, never
// suballocated).
type heap struct {
	d     *device
	name  string
	prefs []vk.MemoryPropertyFlags
	usage vk.BufferUsage
	block uint64
	// retain is how many bytes of empty blocks the heap keeps.
	retain uint64
	// host: the host maps the blocks (they must be host-visible); device-local
	// blocks are never mapped, even where the memory is host-visible.
	host bool

	mu     sync.Mutex // guards blocks and their free lists
	blocks []*block
}

// block is one allocation with its buffer.
type block struct {
	h        *heap
	buf      vk.Buffer
	mem      vk.Memory
	size     uint64
	addr     uint64 // the buffer's device address (0 without one: address.go)
	coherent bool
	mapped   []byte
	// free lists the unused extents, sorted by offset and never adjacent.
	free []extent
}

type extent struct{ off, size uint64 }

// span is size bytes of a block from off; the zero span is no memory.
type span struct {
	b         *block
	off, size uint64
}

// bytes is the span's memory as the host maps it (nil when it is not mapped).
func (s span) bytes() []byte {
	if s.b == nil || s.b.mapped == nil {
		return nil
	}
	return s.b.mapped[s.off : s.off+s.size]
}

// isMapped reports whether the host reads and writes the span in place.
func (s span) isMapped() bool { return s.b != nil && s.b.mapped != nil }

// storage is the span's first n bytes as a storage descriptor sees them.
func (s span) storage(n uint64) vk.StorageRange {
	return vk.StorageRange{Buffer: s.b.buf, Offset: s.off, Range: n}
}

// overlaps reports whether bytes [off, off+n) of s and [o, o+m) of t share memory.
func overlaps(b1 *block, off, n uint64, b2 *block, o, m uint64) bool {
	return b1 == b2 && off < o+m && o < off+n
}

// newHeap returns an empty heap of memory with the first fitting preference.
func newHeap(d *device, name string, prefs []vk.MemoryPropertyFlags, usage vk.BufferUsage, blockBytes uint64, host bool) *heap {
	var largest uint64
	for _, h := range d.a.mem.Heaps {
		largest = max(largest, h.Size)
	}
	return &heap{d: d, name: name, prefs: prefs, usage: usage, block: blockBytes, host: host, retain: max(blockBytes, largest/8)}
}

// alloc returns a span of at least size bytes (rounded up to spanAlign; its size
// field is size itself).
func (h *heap) alloc(size uint64) (span, error) {
	want := roundUp(max(size, 1), spanAlign)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.blocks {
		if off, ok := b.take(want); ok {
			return span{b: b, off: off, size: size}, nil
		}
	}
	b, err := h.newBlock(max(want, h.block))
	if err != nil {
		return span{}, err
	}
	h.blocks = append(h.blocks, b)
	off, _ := b.take(want)
	return span{b: b, off: off, size: size}, nil
}

// free returns a span to its block. A block left empty is freed when the heap's
// empty blocks would exceed its retention. Nothing may use the span any more.
func (h *heap) free(s span) {
	if s.b == nil {
		return
	}
	h.mu.Lock()
	b := s.b
	b.give(s.off, roundUp(max(s.size, 1), spanAlign))
	var drop *block
	if b.empty() {
		idle := b.size
		for _, other := range h.blocks {
			if other != b && other.empty() {
				idle += other.size
			}
		}
		if idle > h.retain {
			drop = b
		}
	}
	if drop != nil {
		for i, other := range h.blocks {
			if other == drop {
				h.blocks = append(h.blocks[:i], h.blocks[i+1:]...)
				break
			}
		}
	}
	h.mu.Unlock()
	if drop != nil {
		h.d.forgetBlock(drop)
		drop.destroy()
	}
}

// destroyAll frees every block; nothing may use them any more.
func (h *heap) destroyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.blocks {
		b.destroy()
	}
	h.blocks = nil
}

// newBlock allocates a block of size bytes.
func (h *heap) newBlock(size uint64) (*block, error) {
	d := h.d
	b := &block{h: h, size: size}
	var err error
	usage := d.blockUsage(h.usage)
	if b.buf, err = d.vk.CreateBuffer(size, usage); err != nil {
		return nil, err
	}
	req := d.vk.BufferRequirements(b.buf)
	ty, flags, ok := d.memoryType(req.TypeBits, h.prefs)
	if !ok {
		d.vk.DestroyBuffer(b.buf)
		return nil, fmt.Errorf("no %s memory type with flags %#x among types %#x. Fix: this device's memory layout is not supported; use another adapter", h.name, h.prefs[0], req.TypeBits)
	}
	if b.mem, err = d.allocateBlock(usage, req.Size, ty); err != nil {
		d.vk.DestroyBuffer(b.buf)
		return nil, err
	}
	if err = d.vk.BindBufferMemory(b.buf, b.mem); err != nil {
		b.destroy()
		return nil, err
	}
	if b.addr, err = d.blockAddress(usage, b.buf); err != nil {
		b.destroy()
		return nil, err
	}
	if h.host {
		if b.mapped, err = d.vk.MapMemory(b.mem, size); err != nil {
			b.destroy()
			return nil, err
		}
		b.coherent = flags&vk.MemoryHostCoherent != 0
	}
	b.free = []extent{{0, size}}
	return b, nil
}

// destroy frees the block's memory and buffer.
func (b *block) destroy() {
	d := b.h.d
	d.vk.DestroyBuffer(b.buf)
	d.vk.FreeMemory(b.mem)
	b.mapped = nil
}

// take finds room for n bytes (first fit) and removes it from the free list.
func (b *block) take(n uint64) (uint64, bool) {
	for i, e := range b.free {
		if e.size < n {
			continue
		}
		if e.size == n {
			b.free = append(b.free[:i], b.free[i+1:]...)
		} else {
			b.free[i] = extent{e.off + n, e.size - n}
		}
		return e.off, true
	}
	return 0, false
}

// give returns bytes [off, off+n) to the free list, merging neighbours.
func (b *block) give(off, n uint64) {
	i := sort.Search(len(b.free), func(i int) bool { return b.free[i].off > off })
	b.free = append(b.free, extent{})
	copy(b.free[i+1:], b.free[i:])
	b.free[i] = extent{off, n}
	if i+1 < len(b.free) && b.free[i].off+b.free[i].size == b.free[i+1].off {
		b.free[i].size += b.free[i+1].size
		b.free = append(b.free[:i+1], b.free[i+2:]...)
	}
	if i > 0 && b.free[i-1].off+b.free[i-1].size == b.free[i].off {
		b.free[i-1].size += b.free[i].size
		b.free = append(b.free[:i], b.free[i+1:]...)
	}
}

// empty reports whether no span of the block is in use.
func (b *block) empty() bool { return len(b.free) == 1 && b.free[0].size == b.size }

// flush makes host writes to the span visible to the device (non-coherent
// memory only).
func (s span) flush() error {
	if s.b.coherent {
		return nil
	}
	off, n := s.atoms()
	return s.b.h.d.vk.FlushMemory(s.b.mem, off, n)
}

// invalidate makes device writes to the span visible to the host (non-coherent
// memory only).
func (s span) invalidate() error {
	if s.b.coherent {
		return nil
	}
	off, n := s.atoms()
	return s.b.h.d.vk.InvalidateMemory(s.b.mem, off, n)
}

// atoms is the span widened to whole non-coherent atoms (spanAlign covers every
// device's): its offset rounded down and its end rounded up, or the rest of the
// allocation where that would reach its end.
func (s span) atoms() (off, size uint64) {
	off = s.off / spanAlign * spanAlign
	end := roundUp(s.off+max(s.size, 1), spanAlign)
	if end >= s.b.size {
		return off, vk.WholeSize
	}
	return off, end - off
}

func roundUp(n, align uint64) uint64 { return (n + align - 1) / align * align }

// pageBytes is the granule of the host's mappings: memory past the end of a
// mapped range, up to the next multiple of it, is still mapped.
const pageBytes = 4096

// importHost makes host memory a block of the imported heap
// (VK_EXT_external_memory_host), which the host keeps mapping at mem: the
// device reads and writes mem itself. It fails where the device cannot import
// or mem is not aligned as the device needs.
func (d *device) importHost(mem []byte) (*block, error) {
	align := d.a.props.MinImportedHostPointerAlignment
	if align == 0 || len(mem) == 0 {
		return nil, errors.New("the device has no VK_EXT_external_memory_host")
	}
	ptr := unsafe.Pointer(unsafe.SliceData(mem))
	size := roundUp(uint64(len(mem)), align)
	if uintptr(ptr)%uintptr(align) != 0 || size > roundUp(uint64(len(mem)), pageBytes) {
		return nil, fmt.Errorf("host memory at %p of %d bytes is not aligned to the device's %d bytes", ptr, len(mem), align)
	}
	h := d.imported
	bits, err := d.vk.HostMemoryTypes(ptr)
	if err != nil {
		return nil, err
	}
	b := &block{h: h, size: size, mapped: mem}
	if b.buf, err = d.vk.CreateHostBuffer(size, h.usage); err != nil {
		return nil, err
	}
	req := d.vk.BufferRequirements(b.buf)
	ty, flags, ok := d.memoryType(bits&req.TypeBits, h.prefs)
	if !ok {
		d.vk.DestroyBuffer(b.buf)
		return nil, fmt.Errorf("no host-visible memory type among %#x can import host memory", bits&req.TypeBits)
	}
	if b.mem, err = d.vk.ImportHostMemory(ptr, size, ty); err != nil {
		d.vk.DestroyBuffer(b.buf)
		return nil, err
	}
	if err := d.vk.BindBufferMemory(b.buf, b.mem); err != nil {
		b.destroy()
		return nil, err
	}
	b.coherent = flags&vk.MemoryHostCoherent != 0
	h.mu.Lock()
	h.blocks = append(h.blocks, b)
	h.mu.Unlock()
	return b, nil
}

// release frees an imported block; nothing may use it any more.
func (h *heap) release(b *block) {
	h.mu.Lock()
	for i, other := range h.blocks {
		if other == b {
			h.blocks = append(h.blocks[:i], h.blocks[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	h.d.forgetBlock(b)
	b.destroy()
}
