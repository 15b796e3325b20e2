package interp

import (
	"encoding/binary"
	"unsafe"

	"github.com/kiln-dev/kiln/ir"
)

// Buffers are little-endian words. On a little-endian host a byte slice and a word
// slice share one layout, so read inputs are used in place (they are never written)
// and outputs are returned without a copy; elsewhere the words are converted.

func littleEndianHost() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// bytesWords returns b as words, sharing its memory when the host is little-endian
// and b is 4-byte aligned, else as a converted copy. The result must not be written.
func bytesWords(b []byte) []uint32 {
	w, _ := wordsInPlace(b)
	return w
}

// copyWords decodes b into new words.
func copyWords(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	if littleEndianHost() {
		copy(wordsBytes(w), b)
		return w
	}
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// wordsBytes returns w as little-endian bytes, sharing its memory when the host is
// little-endian. An empty w gives an empty, non-nil slice.
func wordsBytes(w []uint32) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	if littleEndianHost() {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*4)
	}
	b := make([]byte, 4*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// IR v1.2's 16-bit types (f16, bf16) take 2 little-endian bytes per element in a
// buffer, but the interpreter holds every element in a word of its own, its 16
// bits in the low half (the form registers hold them in): loads, stores, len and
// strict mode's shadow then work per element as for 32-bit types. Such a buffer
// is always a converted copy.

// elemSize is the bytes one element of t takes in a buffer.
func elemSize(t ir.Type) int { return int(t.Size()) }

// decodeElems decodes b, little-endian elements of size bytes each, into new words.
func decodeElems(b []byte, size int) []uint32 {
	if size == 4 {
		return copyWords(b)
	}
	w := make([]uint32, len(b)/2)
	for i := range w {
		w[i] = uint32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return w
}

// encodeElems returns w as little-endian elements of size bytes each, sharing
// w's memory where wordsBytes does.
func encodeElems(w []uint32, size int) []byte {
	if size == 4 {
		return wordsBytes(w)
	}
	b := make([]byte, 2*len(w))
	for i, v := range w {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}

// writeElems stores w into b as little-endian elements of size bytes each.
func writeElems(b []byte, w []uint32, size int) {
	if size == 4 {
		writeWords(b, w)
		return
	}
	for i, v := range w {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
}
