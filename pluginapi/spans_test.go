package pluginapi

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

func ptr(s []Span) *[]Span { return &s }

func sampleSpans() []Span {
	return []Span{
		{Kind: SpanDecode, Start: 100, End: 110},
		{Kind: SpanQueue, Start: 110, End: 120},
		{Kind: SpanRun, Start: 120, End: 400},
		{Kind: SpanDevice, Start: 200, End: 400},
	}
}

// TestFrameDoneSpansRoundTrip pins the spans trailer: a submit's and a
// dispatch's completion carry the plugin's spans to the host unchanged.
func TestFrameDoneSpansRoundTrip(t *testing.T) {
	for _, c := range []struct {
		kind    frameKind
		outputs int
		d       *done
	}{
		{frameSubmit, 0, &done{seq: 2, hostNanos: 100, deviceNanos: 7, spans: ptr(sampleSpans())}},
		{frameDispatch, 1, &done{seq: 3, hostNanos: 1, sizes: []uint64{16}, spans: ptr(sampleSpans()[:1])}},
	} {
		b := encodeDone(c.kind, c.d)
		if b[5] != flagSpans {
			t.Fatalf("flags %#x, want the spans flag", b[5])
		}
		got, err := decodeDone(b, c.kind, c.outputs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, c.d)
		}
	}
}

// TestFrameDoneSpansAreBounded pins what a plugin cannot make the host keep: no
// more than maxSpans spans, only known kinds, no backwards or unset times, no
// spans on completions of other requests, and never a request with the flag.
func TestFrameDoneSpansAreBounded(t *testing.T) {
	many := make([]Span, 3*maxSpans)
	for i := range many {
		many[i] = Span{Kind: SpanRun, Start: int64(i + 1), End: int64(i + 2)}
	}
	if d, err := decodeDone(encodeDone(frameSubmit, &done{seq: 1, spans: ptr(many)}), frameSubmit, 0); err != nil || len(deref(d.spans)) != maxSpans {
		t.Fatalf("the encoder kept %d spans (%v), want %d", len(deref(d.spans)), err, maxSpans)
	}
	withCount := func(n uint32) []byte {
		b := encodeDone(frameSubmit, &done{seq: 1, spans: ptr(sampleSpans()[:1])})
		binary.LittleEndian.PutUint32(b[len(b)-spanBytes-8:], n)
		return b
	}
	bad := map[string][]byte{
		"more spans than allowed":  withCount(maxSpans + 1),
		"a count beyond the frame": withCount(1 << 31),
		"no spans under the flag":  withCount(0)[:len(withCount(0))-spanBytes],
		"unknown kind":             encodeDone(frameSubmit, &done{seq: 1, spans: ptr([]Span{{Kind: 9, Start: 1, End: 2}})}),
		"ends before it starts":    encodeDone(frameSubmit, &done{seq: 1, spans: ptr([]Span{{Kind: SpanRun, Start: 5, End: 2}})}),
		"starts at zero":           encodeDone(frameSubmit, &done{seq: 1, spans: ptr([]Span{{Kind: SpanRun, Start: 0, End: 2}})}),
		"negative start":           encodeDone(frameSubmit, &done{seq: 1, spans: ptr([]Span{{Kind: SpanRun, Start: -5, End: 2}})}),
	}
	for name, b := range bad {
		if _, err := decodeDone(b, frameSubmit, 0); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	onAlloc := encodeDone(frameSubmit, &done{seq: 1, spans: ptr(sampleSpans())})
	if _, err := decodeDone(onAlloc, frameFree, 0); err == nil || !strings.Contains(err.Error(), "spans") {
		t.Errorf("spans on a free's completion: %v", err)
	}
	req, err := encodeRequest(&request{kind: frameFree, seq: 1, buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	req[5] = flagSpans
	if _, err := decodeRequest(req); err == nil {
		t.Error("a request with the spans flag decoded")
	}
	if maxDoneBytes-spansBytes < len(encodeDone(frameDispatch, &done{seq: 1, sizes: make([]uint64, maxBindings), msg: strings.Repeat("x", maxMessageBytes)})) {
		t.Error("the spans trailer does not fit maxDoneBytes beside the largest completion")
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
		if len(spans) == 0 || len(spans) > maxSpans {
			t.Fatalf("%d spans", len(spans))
		}
		for _, s := range spans {
			if s.Start <= 0 || s.End < s.Start || s.Kind.String() == "" {
				t.Fatalf("span %+v", s)
			}
		}
	})
}
