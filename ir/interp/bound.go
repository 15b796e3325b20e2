package interp

import (
	"context"
	"fmt"
	"math"
	"unsafe"
)

// RunBound executes the kernel once over memory the caller owns, used in place,
// with the program's uniform block (4 little-endian bytes per uniform, as in
// Launch.Uniforms): bufs is indexed by binding and holds each buffer's little-endian bytes (length
// a multiple of the element size, 2 bytes for f16 and bf16 and 4 for the other
// types; exactly Count elements for a buffer with a fixed Count). Loads read
// that memory and stores write it; write buffers are not cleared first, so
// elements the kernel does not store keep their bytes. This is how a backend runs
// a dispatch over resident buffers without copying them. Read buffers may be
// bound to the same memory as others; the caller must keep the memory alive and
// unchanged by others until RunBound returns.
//
// On a big-endian machine, for memory not aligned to 4 bytes, and for f16 and
// bf16 buffers, a buffer is converted into words, and a writable one back after
// the run.
func (k *Kernel) RunBound(ctx context.Context, grid [3]uint32, uniforms []byte, bufs [][]byte) error {
	p := k.prog
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interp: program %q not run: %w", p.Name, err)
	}
	if len(bufs) != len(p.Buffers) {
		return fmt.Errorf("interp: program %q has %d buffers but %d are bound. Fix: bind one buffer per binding", p.Name, len(p.Buffers), len(bufs))
	}
	r, err := k.newRunState(grid, uniforms)
	if err != nil {
		return err
	}
	var copied []int // bindings converted into words, written back after the run
	for _, d := range p.Buffers {
		b := bufs[d.Binding]
		size := elemSize(d.Type)
		switch {
		case len(b)%size != 0:
			return fmt.Errorf("interp: program %q: buffer %q (binding %d) is bound to %d bytes, not a multiple of %d. Fix: bind whole %d-byte elements", p.Name, d.Name, d.Binding, len(b), size, size)
		case d.Count != 0 && uint64(len(b)) != uint64(d.Count)*uint64(size):
			return fmt.Errorf("interp: program %q: buffer %q (binding %d) holds exactly %d elements but is bound to %d bytes. Fix: bind %d bytes", p.Name, d.Name, d.Binding, d.Count, len(b), uint64(d.Count)*uint64(size))
		case uint64(len(b))/uint64(size) > math.MaxUint32:
			return fmt.Errorf("interp: program %q: buffer %q (binding %d) has %d elements, more than a u32 len. Fix: bind a smaller range", p.Name, d.Name, d.Binding, len(b)/size)
		}
		var words []uint32
		inPlace := false
		if size == 4 {
			words, inPlace = wordsInPlace(b)
		} else {
			words = decodeElems(b, size)
		}
		if !inPlace && d.Access.Writable() {
			copied = append(copied, int(d.Binding))
		}
		r.bind(d.Binding, words)
	}
	err = r.run(ctx)
	for _, b := range copied {
		writeElems(bufs[b], r.bufs[b], k.elemSizes[b])
	}
	return err
}

// wordsInPlace returns b as words sharing its memory when the host is
// little-endian and b is aligned, else a converted copy (and false).
func wordsInPlace(b []byte) ([]uint32, bool) {
	if len(b) == 0 {
		return nil, true
	}
	if littleEndianHost() && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
		return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), true
	}
	return copyWords(b), false
}

// writeWords stores w into b as little-endian bytes.
func writeWords(b []byte, w []uint32) {
	if littleEndianHost() {
		copy(b, wordsBytes(w))
		return
	}
	for i, v := range w {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
}
