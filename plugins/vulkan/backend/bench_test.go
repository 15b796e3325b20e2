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
	// The bandwidth measurement runs in the background after the first
	// Describe; let it end before timing anything.
	be.measured.Wait()
	if d, err = be.Describe(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("adapter %d: %s, copy bandwidth %.1f GB/s (read+write)", idx, d.Adapters[idx].Name, d.Adapters[idx].Profile.MemBWGBps)
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
			ns := benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, [3]uint32{uint32((n + 255) / 256), 1, 1}, inputs, []uint32{0, 0, uint32(n)}, nil)
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
			// m, n and k are uniforms (one pipeline for every shape).
			uniforms := kernels.U32Bytes([]uint32{uint32(s), uint32(s), uint32(s)})
			grid := [3]uint32{uint32(s+15) / 16, uint32(s+15) / 16, 1}
			inputs := [][]byte{patternF32(s*s, 3), patternF32(s*s, 4), nil}
			ns := benchDispatch(b, be, adapter, k.Program(), ir.SpecMap{}, grid, inputs, []uint32{0, 0, uint32(s * s)}, uniforms)
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(2*math.Pow(float64(s), 3)/ns, "device-GFLOP/s")
			}
		})
	}
}

// residentBuffer allocates a buffer of n words on the adapter, filled with data
// when given.
func residentBuffer(b *testing.B, be *Backend, adapter, n int, data []byte) uint64 {
	b.Helper()
	ctx := context.Background()
	a, err := be.AllocBuffer(ctx, &pluginapi.AllocRequest{Adapter: adapter, Size: 4 * uint64(n)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.FreeBuffer(ctx, a.Buffer) })
	if data != nil {
		if err := be.WriteBuffer(ctx, a.Buffer, 0, data); err != nil {
			b.Fatal(err)
		}
	}
	return a.Buffer
}

// benchSubmit submits cmds b.N times and returns the mean device and host time
// of one submit in nanoseconds.
func benchSubmit(b *testing.B, be *Backend, adapter int, cmds []pluginapi.SubmitCommand) (device, host float64) {
	b.Helper()
	ctx := context.Background()
	req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: cmds}
	// Warm up back to back for a moment first: an idle GPU runs at its lowest
	// clock (345 MHz on an H200) and needs sustained work to climb back.
	for began := time.Now(); time.Since(began) < 300*time.Millisecond; {
		if _, err := be.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		res, err := be.Submit(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		device += float64(res.DeviceNanos)
		host += float64(res.HostNanos)
	}
	return device / float64(b.N), host / float64(b.N)
}

// BenchmarkSubmitOneElement submits one dispatch over a resident 1-element
// buffer: the end-to-end cost of a small dispatch (ns/op).
func BenchmarkSubmitOneElement(b *testing.B) {
	be, adapter := benchBackend(b)
	c, err := be.Compile(context.Background(), &pluginapi.CompileRequest{Adapter: adapter, Program: incr()})
	if err != nil {
		b.Fatal(err)
	}
	x := residentBuffer(b, be, adapter, 1, nil)
	device, _ := benchSubmit(b, be, adapter, []pluginapi.SubmitCommand{incrCommand(c.Pipeline, x, 0, 1)})
	b.ReportMetric(device, "device-ns/op")
}

// BenchmarkVectorAddResident runs kiln.vector.add.f32 over resident buffers and
// reports device bandwidth from the submit's timestamps, counting 12 bytes per
// element (two loads, one store).
func BenchmarkVectorAddResident(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 28} {
		for _, epi := range []uint32{1, 4} {
			b.Run(fmt.Sprintf("n=%d/epi=%d", n, epi), func(b *testing.B) { vectorAddResident(b, n, epi) })
		}
	}
}

// vectorAddResident is BenchmarkVectorAddResident at n elements, epi per
// invocation.
func vectorAddResident(b *testing.B, n int, epi uint32) {
	be, adapter := benchBackend(b)
	if uint64(n)*4 > uint64(be.adapters[adapter].props.Limits.MaxStorageBufferRange) && !be.adapters[adapter].addresses {
		b.Skipf("%d elements exceed the device's maxStorageBufferRange", n)
	}
	k, _ := kernels.Lookup("vector_add")
	var spec ir.SpecMap
	spec.Set("epi", ir.SpecU32(epi))
	c, err := be.Compile(context.Background(), &pluginapi.CompileRequest{Adapter: adapter, Program: k.Program(), Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	size := 4 * uint64(n)
	bufs := []uint64{residentBuffer(b, be, adapter, n, patternF32(n, 1)), residentBuffer(b, be, adapter, n, patternF32(n, 2)), residentBuffer(b, be, adapter, n, nil)}
	perGroup := 256 * int(epi)
	cmd := pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{uint32((n + perGroup - 1) / perGroup), 1, 1}}
	for _, h := range bufs {
		cmd.Bindings = append(cmd.Bindings, pluginapi.BufferRange{Buffer: h, Size: size})
	}
	device, _ := benchSubmit(b, be, adapter, []pluginapi.SubmitCommand{cmd})
	b.ReportMetric(device, "device-ns/op")
	if device > 0 {
		b.ReportMetric(12*float64(n)/device, "device-GB/s")
	}
}

// BenchmarkDependentDispatches submits 100 dispatches that each increment the
// result of the one before (2^20 elements) in one submit, and reports its host
// time against the sum of the device times of the same 100 dispatches submitted
// one by one ("x-of-sum": the bound is 2).
func BenchmarkDependentDispatches(b *testing.B) {
	const n, steps = 1 << 20, 100
	be, adapter := benchBackend(b)
	c, err := be.Compile(context.Background(), &pluginapi.CompileRequest{Adapter: adapter, Program: incr()})
	if err != nil {
		b.Fatal(err)
	}
	x := residentBuffer(b, be, adapter, n, nil)
	one := incrCommand(c.Pipeline, x, 0, n)
	var sum float64
	for range steps {
		res, err := be.Submit(context.Background(), &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{one}})
		if err != nil {
			b.Fatal(err)
		}
		sum += float64(res.DeviceNanos)
	}
	cmds := make([]pluginapi.SubmitCommand, steps)
	for i := range cmds {
		cmds[i] = one
	}
	device, host := benchSubmit(b, be, adapter, cmds)
	b.ReportMetric(device, "device-ns/op")
	b.ReportMetric(sum, "sum-device-ns")
	if sum > 0 {
		b.ReportMetric(host/sum, "x-of-sum")
	}
}

// BenchmarkStartAndDescribe starts Vulkan and describes the adapters, as a new
// plugin process does before its first answer (the bandwidth is measured later,
// in the background, and is left out here).
func BenchmarkStartAndDescribe(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		cfg := ConfigFromEnv()
		cfg.NoBandwidth = true
		be := New(cfg)
		if _, err := be.Describe(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		be.Close(ctx)
		b.StartTimer()
	}
}
