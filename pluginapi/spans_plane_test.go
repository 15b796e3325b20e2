//go:build linux

package pluginapi

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// submitOnPlane sends one fill of a fresh buffer and returns its completion.
func submitOnPlane(t *testing.T, p *plane) *done {
	t.Helper()
	ctx := ctxT(t)
	a, err := p.roundTrip(ctx, &request{kind: frameAlloc, size: 16}, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &request{kind: frameSubmit, commands: []SubmitCommand{FillCommand{Dst: BufferRange{Buffer: a.buffer, Size: 16}, Value: 7}}}
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
	_, quiet := planePair(t)
	if d := submitOnPlane(t, quiet); d.spans != nil {
		t.Fatalf("spans without %s: %+v", SpansEnv, *d.spans)
	}
	t.Setenv(SpansEnv, "1")
	_, p := planePair(t)
	clock := newMonoClock()
	before := clock.now()
	d := submitOnPlane(t, p)
	after := clock.now()
	spans := deref(d.spans)
	want := []SpanKind{SpanDecode, SpanQueue, SpanRun, SpanDevice} // memBackend reports device time
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
	if dev := spans[3]; dev.End != spans[2].End || dev.End-dev.Start != d.deviceNanos {
		t.Errorf("device span %+v does not end with the run (%+v) or last the device's %d ns", dev, spans[2], d.deviceNanos)
	}
}

// TestPlaneRefusesHostileSpans pins the host's distrust of a plugin's spans: a
// completion with more spans than allowed, or made-up ones, closes the plane
// with a ProtocolError like any other broken completion.
func TestPlaneRefusesHostileSpans(t *testing.T) {
	cases := map[string]func(r *request) []byte{
		"too many spans": func(r *request) []byte {
			b := encodeDone(frameDispatch, &done{seq: r.seq, sizes: []uint64{4}, spans: ptr(sampleSpans()[:1])})
			b[len(b)-spanBytes-8] = maxSpans + 1
			return b
		},
		"unknown span kind": func(r *request) []byte {
			return encodeDone(frameDispatch, &done{seq: r.seq, sizes: []uint64{4}, spans: ptr([]Span{{Kind: 77, Start: 1, End: 2}})})
		},
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			p := liar(t, func(r *request) []byte {
				if r.kind != frameDispatch {
					return encodeDone(r.kind, &done{seq: r.seq}) // the staging segment's attach
				}
				return reply(r)
			})
			_, err := dispatchOnPlane(ctxT(t), p, &DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
			var pe *ProtocolError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "span") {
				t.Fatalf("%v, want a ProtocolError about spans", err)
			}
		})
	}
	p := liar(t, func(r *request) []byte {
		if r.kind != frameDispatch {
			return encodeDone(r.kind, &done{seq: r.seq})
		}
		return encodeDone(frameDispatch, &done{seq: r.seq, sizes: []uint64{4}, spans: ptr(sampleSpans())})
	})
	res, err := dispatchOnPlane(ctxT(t), p, &DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
	if err != nil || len(res.Spans()) != len(sampleSpans()) {
		t.Fatalf("well-formed spans: %v, %+v", err, res)
	}
}

// BenchmarkSpansOnCompletion is the data plane's part of tracing one submit:
// the plugin's clock readings and spans, the trailer's encoding, and the
// host's decoding of the completion.
func BenchmarkSpansOnCompletion(b *testing.B) {
	timer := &spanTimer{clock: newMonoClock()}
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for range b.N {
		js := jobSpans{read: timer.clock.now()}
		js.decoded = timer.clock.now()
		began := timer.clock.now()
		spans := timer.spans(js, began, timer.clock.now(), 100)
		frame := encodeDone(frameSubmit, &done{seq: 1, hostNanos: 5, deviceNanos: 100, spans: &spans})
		if _, err := decodeDone(frame, frameSubmit, 0); err != nil {
			b.Fatal(err)
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
