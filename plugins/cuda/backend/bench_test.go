package backend

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// benchBackend opens adapter 0 (KILN_BENCH_ADAPTER picks another) or skips.
func benchBackend(b *testing.B) (*Backend, int) {
	b.Helper()
	be := New(ConfigFromEnv())
	ctx := context.Background()
	d, err := be.Describe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	idx := 0
	if s := os.Getenv("KILN_BENCH_ADAPTER"); s != "" {
		fmt.Sscan(s, &idx)
	}
	if idx >= len(d.Adapters) || !d.Adapters[idx].Available {
		be.Close(ctx)
		b.Skipf("adapter %d is not usable: %+v", idx, d.Adapters)
	}
	b.Cleanup(func() { be.Close(ctx) })
	b.Logf("adapter %d: %s, copy bandwidth %v GB/s (read+write, quantized)", idx, d.Adapters[idx].Name, d.Adapters[idx].Profile.MemBWGBps)
	return be, idx
}

// benchDispatch compiles p and dispatches it b.N times, returning the mean device
// time in nanoseconds.
func benchDispatch(b *testing.B, be *Backend, adapter int, p *ir.Program, spec ir.SpecMap, grid [3]uint32, inputs [][]byte, counts []uint32, uniforms []byte) float64 {
	b.Helper()
	ctx := context.Background()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p, Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Release(ctx, c.Pipeline)
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, Inputs: inputs, OutputCounts: counts, Uniforms: uniforms}
	var device float64
	b.ResetTimer()
	for range b.N {
		res, err := be.Dispatch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		device += float64(res.DeviceNanos)
	}
	return device / float64(b.N)
}

// patternF32 is n f32 values in [-1, 1) that need no random generator.
func patternF32(n int, seed uint32) []byte {
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

// BenchmarkVectorAdd runs kiln.vector.add.f32 and reports the kernel's device
// bandwidth counting 12 bytes per element (two loads, one store). The inputs cross
// from the host on every dispatch (protocol v1); the device time is the kernel's.
func BenchmarkVectorAdd(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 28} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			be, adapter := benchBackend(b)
			k, _ := kernels.Lookup("vector_add")
			inputs := [][]byte{patternF32(n, 1), patternF32(n, 2), nil}
			ns := benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, [3]uint32{uint32((n + 255) / 256), 1, 1}, inputs, []uint32{0, 0, uint32(n)}, nil)
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(12*float64(n)/ns, "device-GB/s")
			}
		})
	}
}

// BenchmarkMatmul runs the corpus's tiled kiln.matrix.matmul.f32 on square
// matrices and reports device GFLOP/s (2·s³ flops).
func BenchmarkMatmul(b *testing.B) {
	for _, s := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("s=%d", s), func(b *testing.B) {
			be, adapter := benchBackend(b)
			k, _ := kernels.Lookup("matmul")
			grid := [3]uint32{uint32(s+15) / 16, uint32(s+15) / 16, 1}
			inputs := [][]byte{patternF32(s*s, 3), patternF32(s*s, 4), nil}
			uniforms := kernels.U32Bytes([]uint32{uint32(s), uint32(s), uint32(s)})
			ns := benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, grid, inputs, []uint32{0, 0, uint32(s * s)}, uniforms)
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(2*math.Pow(float64(s), 3)/ns, "device-GFLOP/s")
			}
		})
	}
}

// BenchmarkSmallDispatch is one dispatch of a 1-element vector add, end to end in
// process: allocation, upload, zero fill, launch, wait, read-back, free.
func BenchmarkSmallDispatch(b *testing.B) {
	be, adapter := benchBackend(b)
	k, _ := kernels.Lookup("vector_add")
	one := kernels.F32Bytes([]float32{1})
	benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, [3]uint32{1, 1, 1}, [][]byte{one, one, nil}, []uint32{0, 0, 1}, nil)
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
