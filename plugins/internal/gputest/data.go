package gputest

import "github.com/kiln-dev/kiln/ir/kernels"

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
