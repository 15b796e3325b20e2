package backend

import (
	"context"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// benchBackend opens adapter 0 (KILN_BENCH_ADAPTER picks another), configured from
// the environment (no validation layer unless KILN_VK_VALIDATION=1), or skips.
func benchBackend(b *testing.B) (*Backend, int) {
	b.Helper()
	be := New(ConfigFromEnv())
	// The bandwidth measurement runs in the background after the first
	// Describe; let it end before timing anything.
	return be, gputest.BenchAdapter(b, be, be.measured.Wait)
}

// benchOpen is benchBackend for the shared benchmark bodies: it skips buffers of
// more than the device's maxStorageBufferRange.
func benchOpen(b *testing.B, bufBytes uint64) (pluginapi.Backend, int) {
	be, adapter := benchBackend(b)
	if bufBytes > uint64(be.adapters.List()[adapter].props.Limits.MaxStorageBufferRange) {
		b.Skipf("%d bytes exceed the device's maxStorageBufferRange", bufBytes)
	}
	return be, adapter
}

// BenchmarkVectorAdd runs kiln.vector.add.f32 and reports device bandwidth counting
// 12 bytes per element (two loads, one store).
func BenchmarkVectorAdd(b *testing.B) { gputest.VectorAdd(b, benchOpen) }

// BenchmarkMatmul runs the corpus's tiled kiln.matrix.matmul.f32 on square matrices
// and reports device GFLOP/s (2·s³ flops).
func BenchmarkMatmul(b *testing.B) { gputest.Matmul(b, benchOpen) }

// residentBuffer allocates a buffer of n words on the adapter, filled with data
// when given.
func residentBuffer(b *testing.B, be *Backend, adapter, n int, data []byte) uint64 {
	b.Helper()
	return gputest.ResidentBuffer(b, be, adapter, n, data)
}

// benchSubmit submits cmds b.N times after a warm-up (gputest.WarmUp) and
// returns the mean device and host time of one submit in nanoseconds.
func benchSubmit(b *testing.B, be *Backend, adapter int, cmds []pluginapi.SubmitCommand) (device, host float64) {
	b.Helper()
	st := gputest.Submits(b, be, &pluginapi.SubmitRequest{Adapter: adapter, Commands: cmds}, gputest.WarmUp)
	return st.MeanDevice, st.MeanHost
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
	if uint64(n)*4 > uint64(be.adapters.List()[adapter].props.Limits.MaxStorageBufferRange) && !be.adapters.List()[adapter].addresses {
		b.Skipf("%d elements exceed the device's maxStorageBufferRange", n)
	}
	k, _ := kernels.Lookup("vector_add")
	var spec ir.SpecMap
	spec.Set("epi", ir.SpecU32(epi))
	c, err := be.Compile(context.Background(), &pluginapi.CompileRequest{Adapter: adapter, Program: k.Program(), Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	perGroup := 256 * int(epi)
	cmd := pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{uint32((n + perGroup - 1) / perGroup), 1, 1},
		Bindings: gputest.VectorAddBuffers(b, be, adapter, n)}
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

// BenchmarkPipelinedSubmits is BenchmarkSubmitOneElement as the data plane
// runs it (ns/op per submit): depth=1 submits and waits for each one
// (Submit, the serial queue), depth=8 keeps eight submits started ahead of
// their completions, called in start order (StartSubmit, the pipelined queue).
func BenchmarkPipelinedSubmits(b *testing.B) {
	for _, depth := range []int{1, 8} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			be, adapter := benchBackend(b)
			ctx := context.Background()
			c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: incr()})
			if err != nil {
				b.Fatal(err)
			}
			x := residentBuffer(b, be, adapter, 1, nil)
			req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{incrCommand(c.Pipeline, x, 0, 1)}}
			if _, err := be.Submit(ctx, req); err != nil {
				b.Fatal(err)
			}
			var waits []pluginapi.Completion
			b.ResetTimer()
			for range b.N {
				if depth == 1 {
					if _, err := be.Submit(ctx, req); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if len(waits) == depth {
					if _, err := waits[0](); err != nil {
						b.Fatal(err)
					}
					waits = waits[1:]
				}
				w, err := be.StartSubmit(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				waits = append(waits, w)
			}
			for _, w := range waits {
				if _, err := w(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
