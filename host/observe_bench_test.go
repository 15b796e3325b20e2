package host

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pluginapi"
)

// BenchmarkSubmitTracing is the 1-element resident submit of
// BenchmarkSubmitRoundTrip on two hosts in one run: "off" without a trace or
// a hook (the fast path: its allocations must not grow), "on" writing a
// trace (to io.Discard: the cost is the host's and the plugin's timing and
// the events' encoding, not a disk).
func BenchmarkSubmitTracing(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"off", "on"} {
		h, be := benchCPURef(ctx, b, func(opts *Options) {
			if mode == "on" {
				opts.Trace = io.Discard
			}
		})
		_, batch := benchSaxpy(ctx, b, be)
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for range b.N {
				if _, err := be.Submit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "host-cpu-ns/op")
		})
		h.Close()
	}
}

// BenchmarkTraceRoundTrip is the host's part of tracing one submit: its two
// slices, the plugin's three spans, the device span and the flow, encoded
// into the trace (to io.Discard).
func BenchmarkTraceRoundTrip(b *testing.B) {
	tr := newTracer(io.Discard, nil)
	be := &Backend{p: &plugin{path: "/plugins/kiln-backend-cpuref", desc: &pluginapi.Description{ID: "cpu-ref"}}, adapter: pluginapi.Adapter{Name: "CPU"}}
	proc := &process{pid: 4242}
	b.ReportAllocs()
	cpu := processCPU()
	for range b.N {
		began := time.Now()
		at := tr.clock.At(began)
		spans := []pluginapi.Span{
			{Kind: pluginapi.SpanDecode, Start: at + 1000, End: at + 1500},
			{Kind: pluginapi.SpanQueue, Start: at + 1500, End: at + 2000},
			{Kind: pluginapi.SpanRun, Start: at + 2000, End: at + 9000},
			{Kind: pluginapi.SpanDevice, Start: at + 3000, End: at + 9000},
		}
		tr.roundTrip(be, proc, "submit", began, began.Add(time.Microsecond), began.Add(2*time.Microsecond), began.Add(10*time.Microsecond), spans, 6000, trace.Int("commands", 1), trace.String("program", "bench.saxpy.f32"))
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, in nanoseconds: on a
// loaded machine it tells what a benchmark costs where wall time cannot.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
