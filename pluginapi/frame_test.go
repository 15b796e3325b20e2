package pluginapi

import (
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
)

// TestWireMappingRoundTrip pins the SDK's side of the data plane's frames:
// every submit command, a dispatch and the spans come back from the wire as
// they went, through the encoder and decoder both planes use, and an unknown
// command is refused.
func TestWireMappingRoundTrip(t *testing.T) {
	cmds := []SubmitCommand{
		DispatchCommand{Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []BufferRange{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
		CopyCommand{Src: BufferRange{Buffer: 1, Size: 8}, Dst: BufferRange{Buffer: 2, Offset: 8, Size: 8}},
		FillCommand{Dst: BufferRange{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
		DispatchCommand{Pipeline: 6},
	}
	w, err := commandsToWire(cmds)
	if err != nil {
		t.Fatal(err)
	}
	b, err := wire.EncodeRequest(&wire.Request{Kind: wire.FrameSubmit, Seq: 1, Commands: w})
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := commandsFromWire(r.Commands); !reflect.DeepEqual(got, cmds) {
		t.Errorf("commands round trip:\n got %+v\nwant %+v", got, cmds)
	}
	if _, err := commandsToWire([]SubmitCommand{nil}); err == nil {
		t.Error("an unknown command went onto the wire")
	}

	d := &DispatchRequest{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0}}
	if got := dispatchFromWire(dispatchToWire(d)); !reflect.DeepEqual(got, d) {
		t.Errorf("dispatch round trip:\n got %+v\nwant %+v", got, d)
	}

	spans := []Span{{Kind: SpanDecode, Start: 1, End: 2}, {Kind: SpanDevice, Start: 2, End: 9}}
	b = wire.EncodeDone(wire.FrameSubmit, &wire.Done{Seq: 1, Spans: spansToWire(spans)})
	done, err := wire.DecodeDone(b, wire.FrameSubmit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := deref(spansFromWire(done.Spans)); !reflect.DeepEqual(got, spans) {
		t.Errorf("spans round trip: got %+v, want %+v", got, spans)
	}
	if spansFromWire(nil) != nil {
		t.Error("no spans came back as some")
	}
	if int(SpanWait) != wire.SpanKinds {
		t.Errorf("the SDK names %d span kinds, the wire takes %d", SpanWait, wire.SpanKinds)
	}
}
