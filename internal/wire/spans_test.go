package wire

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func ptr(s []Span) *[]Span { return &s }

func deref(s *[]Span) []Span {
	if s == nil {
		return nil
	}
	return *s
}

// The span kinds, as pluginapi names them (SpanDecode, …).
const (
	spanDecode = iota + 1
	spanQueue
	spanRun
	spanDevice
)

func sampleSpans() []Span {
	return []Span{
		{Kind: spanDecode, Start: 100, End: 110},
		{Kind: spanQueue, Start: 110, End: 120},
		{Kind: spanRun, Start: 120, End: 400},
		{Kind: spanDevice, Start: 200, End: 400},
	}
}

// TestFrameDoneSpansRoundTrip pins the spans trailer: a submit's and a
// dispatch's completion carry the plugin's spans to the host unchanged.
func TestFrameDoneSpansRoundTrip(t *testing.T) {
	for _, c := range []struct {
		kind    FrameKind
		outputs int
		d       *Done
	}{
		{FrameSubmit, 0, &Done{Seq: 2, HostNanos: 100, DeviceNanos: 7, Spans: ptr(sampleSpans())}},
		{FrameDispatch, 1, &Done{Seq: 3, HostNanos: 1, Sizes: []uint64{16}, Spans: ptr(sampleSpans()[:1])}},
	} {
		b := EncodeDone(c.kind, c.d)
		if b[5] != FlagSpans {
			t.Fatalf("flags %#x, want the spans flag", b[5])
		}
		got, err := DecodeDone(b, c.kind, c.outputs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, c.d)
		}
	}
}

// TestFrameDoneSpansAreBounded pins what a plugin cannot make the host keep: no
// more than MaxSpans spans, only known kinds, no backwards or unset times, no
// spans on completions of other requests, and never a request with the flag.
func TestFrameDoneSpansAreBounded(t *testing.T) {
	many := make([]Span, 3*MaxSpans)
	for i := range many {
		many[i] = Span{Kind: spanRun, Start: int64(i + 1), End: int64(i + 2)}
	}
	if d, err := DecodeDone(EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr(many)}), FrameSubmit, 0); err != nil || len(deref(d.Spans)) != MaxSpans {
		t.Fatalf("the encoder kept %d spans (%v), want %d", len(deref(d.Spans)), err, MaxSpans)
	}
	withCount := func(n uint32) []byte {
		b := EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr(sampleSpans()[:1])})
		binary.LittleEndian.PutUint32(b[len(b)-SpanBytes-8:], n)
		return b
	}
	bad := map[string][]byte{
		"more spans than allowed":  withCount(MaxSpans + 1),
		"a count beyond the frame": withCount(1 << 31),
		"no spans under the flag":  withCount(0)[:len(withCount(0))-SpanBytes],
		"unknown kind":             EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr([]Span{{Kind: 9, Start: 1, End: 2}})}),
		"ends before it starts":    EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr([]Span{{Kind: spanRun, Start: 5, End: 2}})}),
		"starts at zero":           EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr([]Span{{Kind: spanRun, Start: 0, End: 2}})}),
		"negative start":           EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr([]Span{{Kind: spanRun, Start: -5, End: 2}})}),
	}
	for name, b := range bad {
		if _, err := DecodeDone(b, FrameSubmit, 0); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	onAlloc := EncodeDone(FrameSubmit, &Done{Seq: 1, Spans: ptr(sampleSpans())})
	if _, err := DecodeDone(onAlloc, FrameFree, 0); err == nil || !strings.Contains(err.Error(), "spans") {
		t.Errorf("spans on a free's completion: %v", err)
	}
	req, err := EncodeRequest(&Request{Kind: FrameFree, Seq: 1, Buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	req[5] = FlagSpans
	if _, err := DecodeRequest(req); err == nil {
		t.Error("a request with the spans flag decoded")
	}
	if MaxDoneBytes-SpansBytes < len(EncodeDone(FrameDispatch, &Done{Seq: 1, Sizes: make([]uint64, MaxBindings), Msg: strings.Repeat("x", MaxMessageBytes)})) {
		t.Error("the spans trailer does not fit MaxDoneBytes beside the largest completion")
	}
}

// FuzzDecodeSpans is the host's decoder of a spans trailer.
func FuzzDecodeSpans(f *testing.F) {
	e := &enc{}
	encodeSpans(e, sampleSpans())
	f.Add(e.b)
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &dec{b: b}
		spans, err := decodeSpans(d)
		if err != nil {
			return
		}
		if len(spans) == 0 || len(spans) > MaxSpans {
			t.Fatalf("%d spans", len(spans))
		}
		for _, s := range spans {
			if s.Start <= 0 || s.End < s.Start || s.Kind < spanDecode || s.Kind > spanDevice {
				t.Fatalf("span %+v", s)
			}
		}
	})
}
