package host

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopyParallelCopiesLikeCopy pins copyParallel to copy's result at sizes
// below, at and around the split, with parts that do not divide evenly and
// destinations of another length.
func TestCopyParallelCopiesLikeCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, parallelCopyBytes - 1, parallelCopyBytes, parallelCopyBytes + 4097, 3*parallelCopyBytes + 12345} {
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		for _, dstLen := range []int{size, size / 2, size + 100} {
			want := bytes.Repeat([]byte{0xEE}, dstLen)
			got := bytes.Clone(want)
			if n, m := copyParallel(got, src), copy(want, src); n != m || !bytes.Equal(got, want) {
				t.Fatalf("size %d into %d: copied %d (copy: %d), contents equal: %v", size, dstLen, n, m, bytes.Equal(got, want))
			}
		}
	}
}

// BenchmarkCopyParallel is a 256 MiB copy into fresh memory (the v1 API's
// output) with copy and with copyParallel.
func BenchmarkCopyParallel(b *testing.B) {
	src := make([]byte, 256<<20)
	for name, f := range map[string]func(dst, src []byte) int{"copy": func(d, s []byte) int { return copy(d, s) }, "parallel": copyParallel} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for range b.N {
				f(make([]byte, len(src)), src)
			}
		})
	}
}
