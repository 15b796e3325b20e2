package gputest

import (
	"encoding/binary"

	"github.com/kiln-dev/kiln/ir/kernels"
)

// Words encodes ws as little-endian buffer data.
func Words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// WordsOf decodes little-endian buffer data; a trailing partial word is ignored.
func WordsOf(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// U32s returns f(0), ..., f(n-1).
func U32s(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// PatternF32 is n f32 values in [-1, 1), the same for the same seed, that need no
// random generator (an xorshift of the seed).
func PatternF32(n int, seed uint32) []byte {
	out := make([]float32, n)
	x := seed | 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = float32(x>>8)/(1<<23) - 1
	}
	return kernels.F32Bytes(out)
}
