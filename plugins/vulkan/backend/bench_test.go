package backend

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// benchBackend opens adapter 0 (KILN_BENCH_ADAPTER picks another), configured from
// the environment (no validation layer unless KILN_VK_VALIDATION=1), or skips.
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
	b.Logf("adapter %d: %s, copy bandwidth %.1f GB/s (read+write)", idx, d.Adapters[idx].Name, d.Adapters[idx].Profile.MemBWGBps)
	return be, idx
}

// benchDispatch compiles p and dispatches it b.N times, returning the mean device
// time in nanoseconds.
func benchDispatch(b *testing.B, be *Backend, adapter int, p *ir.Program, spec ir.SpecMap, grid [3]uint32, inputs [][]byte, counts []uint32) float64 {
	b.Helper()
	ctx := context.Background()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p, Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Release(ctx, c.Pipeline)
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, Inputs: inputs, OutputCounts: counts}
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

// BenchmarkVectorAdd runs kiln.vector.add.f32 and reports device bandwidth counting
// 12 bytes per element (two loads, one store).
func BenchmarkVectorAdd(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 28} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			be, adapter := benchBackend(b)
			if uint64(n)*4 > uint64(be.adapters[adapter].props.Limits.MaxStorageBufferRange) {
				b.Skipf("%d elements exceed the device's maxStorageBufferRange", n)
			}
			k, _ := kernels.Lookup("vector_add")
			inputs := [][]byte{patternF32(n, 1), patternF32(n, 2), nil}
			ns := benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, [3]uint32{uint32((n + 255) / 256), 1, 1}, inputs, []uint32{0, 0, uint32(n)})
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(12*float64(n)/ns, "device-GB/s")
			}
		})
	}
}

// BenchmarkMatmul runs the corpus's tiled kiln.matrix.matmul.f32 on square matrices
// and reports device GFLOP/s (2·s³ flops).
func BenchmarkMatmul(b *testing.B) {
	for _, s := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("s=%d", s), func(b *testing.B) {
			be, adapter := benchBackend(b)
			k, _ := kernels.Lookup("matmul")
			var spec ir.SpecMap
			spec.Set("m", ir.SpecU32(uint32(s)))
			spec.Set("k", ir.SpecU32(uint32(s)))
			spec.Set("n", ir.SpecU32(uint32(s)))
			grid := [3]uint32{uint32(s+15) / 16, uint32(s+15) / 16, 1}
			inputs := [][]byte{patternF32(s*s, 3), patternF32(s*s, 4), nil}
			ns := benchDispatch(b, be, adapter, k.Program(), spec, grid, inputs, []uint32{0, 0, uint32(s * s)})
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(2*math.Pow(float64(s), 3)/ns, "device-GFLOP/s")
			}
		})
	}
}
