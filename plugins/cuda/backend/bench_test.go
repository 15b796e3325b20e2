package backend

import (
	"context"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// benchBackend opens adapter 0 (KILN_BENCH_ADAPTER picks another) or skips.
func benchBackend(b *testing.B) (*Backend, int) {
	b.Helper()
	be := New(ConfigFromEnv())
	return be, gputest.BenchAdapter(b, be, nil)
}

// benchOpen is benchBackend for the shared benchmark bodies.
func benchOpen(b *testing.B, _ uint64) (pluginapi.Backend, int) { return benchBackend(b) }

// BenchmarkVectorAdd runs kiln.vector.add.f32 and reports the kernel's device
// bandwidth counting 12 bytes per element (two loads, one store). The inputs cross
// from the host on every dispatch (protocol v1); the device time is the kernel's.
func BenchmarkVectorAdd(b *testing.B) { gputest.VectorAdd(b, benchOpen) }

// BenchmarkMatmul runs the corpus's tiled kiln.matrix.matmul.f32 on square
// matrices and reports device GFLOP/s (2·s³ flops).
func BenchmarkMatmul(b *testing.B) { gputest.Matmul(b, benchOpen) }

// BenchmarkSmallDispatch is one dispatch of a 1-element vector add, end to end in
// process: allocation, upload, zero fill, launch, wait, read-back, free.
func BenchmarkSmallDispatch(b *testing.B) {
	be, adapter := benchBackend(b)
	k, _ := kernels.Lookup("vector_add")
	one := kernels.F32Bytes([]float32{1})
	gputest.Dispatches(b, be, adapter, k.Program(), kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{one, one, nil}, OutputCounts: []uint32{0, 0, 1}})
}

// BenchmarkCompileMatmul compiles the corpus matmul cold (PTX through the JIT
// linker) and warm (from the blob a cold compile returned, as the host's cache
// hands it back) and reports the ratio.
func BenchmarkCompileMatmul(b *testing.B) {
	be, adapter := benchBackend(b)
	ctx := context.Background()
	k, _ := kernels.Lookup("matmul")
	p := k.Program()
	compile := func(blob []byte) (*pluginapi.CompileResult, time.Duration) {
		start := time.Now()
		c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p, CachedBlob: blob})
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Release(ctx, c.Pipeline); err != nil {
			b.Fatal(err)
		}
		return c, took
	}
	first, _ := compile(nil)
	var cold, warm time.Duration
	b.ResetTimer()
	for range b.N {
		_, c := compile(nil)
		_, w := compile(first.Blob)
		cold, warm = cold+c, warm+w
	}
	b.ReportMetric(float64(cold.Nanoseconds())/float64(b.N), "cold-ns/op")
	b.ReportMetric(float64(warm.Nanoseconds())/float64(b.N), "warm-ns/op")
	b.ReportMetric(float64(cold)/float64(max(warm, 1)), "cold/warm")
}
