package gputest

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// BenchAdapterEnv picks the adapter the benchmarks run on (default 0).
const BenchAdapterEnv = "KILN_BENCH_ADAPTER"

// BenchAdapter describes be and returns the adapter to benchmark (0, or
// KILN_BENCH_ADAPTER), skipping b when that adapter is not usable; be is closed
// at cleanup. settle, when not nil, runs before the adapter is logged with its
// copy bandwidth (a backend that measures it in the background waits there).
func BenchAdapter(b *testing.B, be pluginapi.Backend, settle func()) int {
	b.Helper()
	ctx := context.Background()
	d, err := be.Describe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	idx := 0
	if s := os.Getenv(BenchAdapterEnv); s != "" {
		if idx, err = strconv.Atoi(s); err != nil {
			be.Close(ctx)
			b.Fatalf("%s=%q is not an adapter index", BenchAdapterEnv, s)
		}
	}
	if idx < 0 || idx >= len(d.Adapters) || !d.Adapters[idx].Available {
		be.Close(ctx)
		b.Skipf("adapter %d is not usable: %+v", idx, d.Adapters)
	}
	b.Cleanup(func() { be.Close(ctx) })
	if settle != nil {
		settle()
		if d, err = be.Describe(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("adapter %d: %s, copy bandwidth %v GB/s (read+write)", idx, d.Adapters[idx].Name, d.Adapters[idx].Profile.MemBWGBps)
	return idx
}

// BenchOpen opens a backend for one benchmark and returns it with the adapter
// to run on, skipping b when the device cannot hold buffers of bufBytes.
type BenchOpen func(b *testing.B, bufBytes uint64) (pluginapi.Backend, int)

// Dispatches compiles p on adapter, dispatches it over l b.N times (protocol 1:
// the inputs cross on every dispatch) and returns the mean device time in
// nanoseconds.
func Dispatches(b *testing.B, be pluginapi.Backend, adapter int, p *ir.Program, l kernels.Case) float64 {
	b.Helper()
	ctx := context.Background()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p, Spec: l.Spec, WorkgroupSize: l.WorkgroupSize})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Release(ctx, c.Pipeline)
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: l.Grid, Inputs: l.Inputs, OutputCounts: l.OutputCounts, Uniforms: l.Uniforms}
	return repeat(b, func() (int64, int64, error) {
		res, err := be.Dispatch(ctx, req)
		if err != nil {
			return 0, 0, err
		}
		return res.DeviceNanos, res.HostNanos, nil
	}).MeanDevice
}

// Times are the device and host times of the timed calls of a benchmark, in
// nanoseconds.
type Times struct {
	// MeanDevice and MeanHost are the means over b.N calls.
	MeanDevice, MeanHost float64
	// BestDevice is the shortest device time of one call.
	BestDevice int64
}

// repeat resets b's timer and calls one b.N times, failing b on an error, and
// returns the times one reported.
func repeat(b *testing.B, one func() (device, host int64, err error)) Times {
	b.Helper()
	var ts Times
	b.ResetTimer()
	for range b.N {
		device, host, err := one()
		if err != nil {
			b.Fatal(err)
		}
		ts.MeanDevice += float64(device)
		ts.MeanHost += float64(host)
		if ts.BestDevice == 0 || device < ts.BestDevice {
			ts.BestDevice = device
		}
	}
	ts.MeanDevice /= float64(b.N)
	ts.MeanHost /= float64(b.N)
	return ts
}

// VectorAdd runs kiln.vector.add.f32 at 2^20 and 2^28 elements ("n=<n>"),
// dispatched with its inputs (protocol 1), and reports the kernel's mean device
// time ("device-ns/op") and device bandwidth counting 12 bytes per element, two
// loads and one store ("device-GB/s").
func VectorAdd(b *testing.B, open BenchOpen) {
	for _, n := range []int{1 << 20, 1 << 28} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			be, adapter := open(b, 4*uint64(n))
			k, _ := kernels.Lookup("vector_add")
			l := kernels.Case{Grid: [3]uint32{uint32((n + 255) / 256), 1, 1},
				Inputs: [][]byte{PatternF32(n, 1), PatternF32(n, 2), nil}, OutputCounts: []uint32{0, 0, uint32(n)}}
			ns := Dispatches(b, be, adapter, k.Program(), l)
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(12*float64(n)/ns, "device-GB/s")
			}
		})
	}
}

// Matmul runs the corpus's tiled kiln.matrix.matmul.f32 on square matrices of
// side 256, 1024 and 4096 ("s=<s>"; m, n and k are uniforms, one pipeline for
// every shape) and reports the mean device time ("device-ns/op") and device
// GFLOP/s, 2·s³ flops ("device-GFLOP/s").
func Matmul(b *testing.B, open BenchOpen) {
	for _, s := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("s=%d", s), func(b *testing.B) {
			be, adapter := open(b, 4*uint64(s*s))
			k, _ := kernels.Lookup("matmul")
			l := kernels.Case{Grid: [3]uint32{uint32(s+15) / 16, uint32(s+15) / 16, 1},
				Inputs: [][]byte{PatternF32(s*s, 3), PatternF32(s*s, 4), nil}, OutputCounts: []uint32{0, 0, uint32(s * s)},
				Uniforms: kernels.U32Bytes([]uint32{uint32(s), uint32(s), uint32(s)})}
			ns := Dispatches(b, be, adapter, k.Program(), l)
			b.ReportMetric(ns, "device-ns/op")
			if ns > 0 {
				b.ReportMetric(2*math.Pow(float64(s), 3)/ns, "device-GFLOP/s")
			}
		})
	}
}

// Resident is a backend with protocol 2's resident buffers and submits.
type Resident interface {
	pluginapi.Backend
	pluginapi.Buffers
	pluginapi.Submitter
}

// ResidentBuffer allocates a buffer of n words on adapter, filled with data when
// given (zero otherwise), and frees it at cleanup.
func ResidentBuffer(b testing.TB, be Resident, adapter, n int, data []byte) uint64 {
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

// VectorAddBuffers allocates the three resident buffers of a vector add of n
// f32 elements on adapter, a and b filled with [PatternF32] (seeds 1 and 2), and
// returns their bindings.
func VectorAddBuffers(b testing.TB, be Resident, adapter, n int) []pluginapi.BufferRange {
	var bufs []pluginapi.BufferRange
	for _, data := range [][]byte{PatternF32(n, 1), PatternF32(n, 2), nil} {
		bufs = append(bufs, pluginapi.BufferRange{Buffer: ResidentBuffer(b, be, adapter, n, data), Size: 4 * uint64(n)})
	}
	return bufs
}

// WarmUp is how long [Submits] keeps a GPU busy back to back before timing: an
// idle GPU runs at its lowest clock (345 MHz on an H200) and needs sustained
// work to climb back.
const WarmUp = 300 * time.Millisecond

// Submits submits req b.N times and returns its times; with warm > 0 it first
// submits req back to back for that long, untimed.
func Submits(b *testing.B, be Resident, req *pluginapi.SubmitRequest, warm time.Duration) Times {
	b.Helper()
	ctx := context.Background()
	for began := time.Now(); time.Since(began) < warm; {
		if _, err := be.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	return repeat(b, func() (int64, int64, error) {
		res, err := be.Submit(ctx, req)
		if err != nil {
			return 0, 0, err
		}
		return res.DeviceNanos, res.HostNanos, nil
	})
}

// SubmitMedian submits req 100 times untimed, then b.N times one by one, and
// reports the median wall time of a submit as median-ns.
func SubmitMedian(b *testing.B, s pluginapi.Submitter, req *pluginapi.SubmitRequest) {
	b.Helper()
	ctx := context.Background()
	for range 100 {
		if _, err := s.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := s.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "median-ns")
}
