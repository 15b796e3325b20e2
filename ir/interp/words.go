package interp

import (
	"encoding/binary"
	"unsafe"
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
