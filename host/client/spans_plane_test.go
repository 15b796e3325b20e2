//go:build linux

package client

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// submitOnPlane sends one fill of a fresh buffer and returns its completion.
func submitOnPlane(t *testing.T, p *plane) *wire.Done {
	t.Helper()
	ctx := ctxT(t)
	a, err := p.roundTrip(ctx, &wire.Request{Kind: wire.FrameAlloc, Size: 16}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &wire.Request{Kind: wire.FrameSubmit, Commands: []wire.Command{{Op: wire.OpFill, Dst: wire.Range{Buffer: a.Buffer, Size: 16}, Value: 7}}}
	d, err := p.roundTrip(ctx, r, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPlaneShipsSpansWhenAsked pins the plugin's spans: with SpansEnv set, a
// submit's completion carries its decode, queue and run phases on the clock
// the host reads, in order and inside the host's own submit window; without
// it, none.
func TestPlaneShipsSpansWhenAsked(t *testing.T) {
	quiet := inProcessPlane(t, newMemBackend())
	if d := submitOnPlane(t, quiet); d.Spans != nil {
		t.Fatalf("spans without %s: %+v", pluginapi.SpansEnv, *d.Spans)
	}
	t.Setenv(pluginapi.SpansEnv, "1")
	p := inProcessPlane(t, newMemBackend())
	before := monoNow(t)
	d := submitOnPlane(t, p)
	after := monoNow(t)
	spans := spansFromWire(d.Spans)
	want := []pluginapi.SpanKind{pluginapi.SpanDecode, pluginapi.SpanQueue, pluginapi.SpanRun, pluginapi.SpanDevice} // memBackend reports device time
	if len(spans) != len(want) {
		t.Fatalf("spans %+v, want %v", spans, want)
	}
	last := before
	for i, s := range spans[:3] {
		if s.Kind != want[i] {
			t.Errorf("span %d is %v, want %v", i, s.Kind, want[i])
		}
		// The two processes' clock pairings may differ by the system call's
		// few microseconds.
		const slack = 50_000
		if s.Start < last-slack || s.End > after+slack || s.End < s.Start {
			t.Errorf("span %v runs %d..%d, outside the host's %d..%d or before the one before it", s.Kind, s.Start-before, s.End-before, 0, after-before)
		}
		last = s.End
	}
	if dev := spans[3]; dev.End != spans[2].End || dev.End-dev.Start != d.DeviceNanos {
		t.Errorf("device span %+v does not end with the run (%+v) or last the device's %d ns", dev, spans[2], d.DeviceNanos)
	}
}

// TestPlaneSplitsTheRunAtTheLaunchMark pins MarkLaunched: when the host
// decodes six span kinds (SpanKindsEnv), a run whose backend marked its launch
// ships SpanLaunch and SpanWait inside SpanRun, meeting at the mark; when the
// host decodes only four, the same backend ships none of them (an older host
// would refuse the completion).
func TestPlaneSplitsTheRunAtTheLaunchMark(t *testing.T) {
	t.Setenv(pluginapi.SpansEnv, "1")
	old := inProcessPlane(t, newMemBackend())
	for _, s := range spansFromWire(submitOnPlane(t, old).Spans) {
		if s.Kind == pluginapi.SpanLaunch || s.Kind == pluginapi.SpanWait {
			t.Fatalf("span %v shipped to a host that decodes four kinds", s.Kind)
		}
	}
	t.Setenv(pluginapi.SpanKindsEnv, "6")
	p := inProcessPlane(t, newMemBackend())
	spans := spansFromWire(submitOnPlane(t, p).Spans)
	var run, launch, wait pluginapi.Span
	for _, s := range spans {
		switch s.Kind {
		case pluginapi.SpanRun:
			run = s
		case pluginapi.SpanLaunch:
			launch = s
		case pluginapi.SpanWait:
			wait = s
		}
	}
	if launch.Kind == 0 || wait.Kind == 0 {
		t.Fatalf("spans %+v: no launch and wait though memBackend marks its launch", spans)
	}
	if launch.Start != run.Start || wait.End != run.End || launch.End != wait.Start || launch.End < launch.Start || wait.End < wait.Start {
		t.Errorf("launch %+v and wait %+v do not split run %+v at one mark", launch, wait, run)
	}
}

// TestPlaneRefusesHostileSpans pins the host's distrust of a plugin's spans: a
// completion with more spans than allowed, or made-up ones, closes the plane
// with a ProtocolError like any other broken completion.
func TestPlaneRefusesHostileSpans(t *testing.T) {
	cases := map[string]func(r *wire.Request) []byte{
		"too many spans": func(r *wire.Request) []byte {
			b := wire.EncodeDone(wire.FrameDispatch, &wire.Done{Seq: r.Seq, Sizes: []uint64{4}, Spans: spansToWire(sampleSpans()[:1])})
			b[len(b)-wire.SpanBytes-8] = wire.MaxSpans + 1
			return b
		},
		"unknown span kind": func(r *wire.Request) []byte {
			return wire.EncodeDone(wire.FrameDispatch, &wire.Done{Seq: r.Seq, Sizes: []uint64{4}, Spans: spansToWire([]pluginapi.Span{{Kind: 77, Start: 1, End: 2}})})
		},
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			p := liar(t, func(r *wire.Request) []byte {
				if r.Kind != wire.FrameDispatch {
					return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq}) // the staging segment's attach
				}
				return reply(r)
			})
			_, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
			var pe *ProtocolError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "span") {
				t.Fatalf("%v, want a ProtocolError about spans", err)
			}
		})
	}
	p := liar(t, func(r *wire.Request) []byte {
		if r.Kind != wire.FrameDispatch {
			return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq})
		}
		return wire.EncodeDone(wire.FrameDispatch, &wire.Done{Seq: r.Seq, Sizes: []uint64{4}, Spans: spansToWire(sampleSpans())})
	})
	res, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
	if err != nil || len(res.Spans) != len(sampleSpans()) {
		t.Fatalf("well-formed spans: %v, %+v", err, res)
	}
}

// sampleSpans is one span of each kind.
func sampleSpans() []pluginapi.Span {
	return []pluginapi.Span{
		{Kind: pluginapi.SpanDecode, Start: 100, End: 110},
		{Kind: pluginapi.SpanQueue, Start: 110, End: 120},
		{Kind: pluginapi.SpanRun, Start: 120, End: 400},
		{Kind: pluginapi.SpanDevice, Start: 200, End: 400},
	}
}

// monoNow reads the machine's monotonic clock (CLOCK_MONOTONIC), the clock of
// the plugin's spans, in nanoseconds.
func monoNow(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}
