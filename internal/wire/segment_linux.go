//go:build linux

package wire

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Segment is one memfd mapping of the data plane.
type Segment struct {
	ID  uint32
	Mem []byte
	// orphaned: the peer is gone and mem now maps private anonymous memory, so
	// that views still held by callers stay valid until they are released.
	Orphaned bool
}

// CreateSegment makes a memfd of size bytes, rounded up to whole pages, and maps
// it; the caller sends fd to the plugin and closes it.
func CreateSegment(id uint32, size uint64) (*Segment, int, error) {
	return createNamed(SegmentName, id, size)
}

// createNamed is CreateSegment with the memfd's name.
func createNamed(name string, id uint32, size uint64) (*Segment, int, error) {
	if size == 0 || size > math.MaxInt-pageBytes() {
		return nil, -1, fmt.Errorf("shared segment of %d bytes", size)
	}
	size = pageUp(size)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("size a %d-byte shared segment: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("map a %d-byte shared segment: %w", size, err)
	}
	return &Segment{ID: id, Mem: mem}, fd, nil
}

// MapSegment maps a received memfd of at least size bytes and closes it: the
// whole pages size spans when the memfd has them (the host rounds every segment
// up to pages), else size bytes. The memfd must be at least as large as the
// mapping, so no access through it can fault.
func MapSegment(id uint32, fd int, size uint64) (*Segment, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat shared segment %d: %w", id, err)
	}
	if size == 0 || size > math.MaxInt-pageBytes() || st.Size < 0 || uint64(st.Size) < size {
		return nil, fmt.Errorf("shared segment %d has %d bytes, %d announced", id, st.Size, size)
	}
	if whole := pageUp(size); uint64(st.Size) >= whole {
		size = whole
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map shared segment %d (%d bytes): %w", id, size, err)
	}
	return &Segment{ID: id, Mem: mem}, nil
}

// Orphan replaces the shared mapping with private zero pages at the same address:
// the memfd's memory is released, and a view a caller still holds reads zeros
// instead of faulting.
func (s *Segment) Orphan() {
	if s.Orphaned || s.Mem == nil {
		return
	}
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(s.Mem)), uintptr(len(s.Mem)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	if err != nil {
		// Keeping the shared mapping is safe, only wasteful: the memory is
		// released when the segment is unmapped.
		return
	}
	s.Orphaned = true
}

// Unmap releases the mapping; the segment must not be used afterwards.
func (s *Segment) Unmap() {
	if s.Mem == nil {
		return
	}
	_ = unix.Munmap(s.Mem) // fails only for a mapping unix.Mmap did not make
	s.Mem = nil
}

// View returns r's bytes in the segment, or false when r lies outside it.
func (s *Segment) View(offset, size uint64) ([]byte, bool) {
	end := offset + size
	if end < offset || end > uint64(len(s.Mem)) {
		return nil, false
	}
	return s.Mem[offset:end:end], true
}

// pageBytes is the system's page size.
func pageBytes() uint64 { return uint64(unix.Getpagesize()) }

// pageUp rounds n up to a whole number of pages.
func pageUp(n uint64) uint64 {
	p := pageBytes()
	return (n + p - 1) / p * p
}
