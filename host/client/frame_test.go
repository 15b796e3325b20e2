package client

import (
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestWireMappingRoundTrip pins the host's side of the data plane's frames
// (pluginapi's test of the same name pins the plugin's): every submit command
// and a dispatch go onto the wire as its form written out by hand here, an
// unknown command is refused, and the spans of a completion come back through
// the frame encoder and decoder as they went.
func TestWireMappingRoundTrip(t *testing.T) {
	cmds := []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []pluginapi.BufferRange{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
		pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: 1, Size: 8}, Dst: pluginapi.BufferRange{Buffer: 2, Offset: 8, Size: 8}},
		pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
		pluginapi.DispatchCommand{Pipeline: 6},
	}
	want := []wire.Command{
		{Op: wire.OpDispatch, Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []wire.Range{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
		{Op: wire.OpCopy, Src: wire.Range{Buffer: 1, Size: 8}, Dst: wire.Range{Buffer: 2, Offset: 8, Size: 8}},
		{Op: wire.OpFill, Dst: wire.Range{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
		{Op: wire.OpDispatch, Pipeline: 6},
	}
	w, err := commandsToWire(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("commands on the wire:\n got %+v\nwant %+v", w, want)
	}
	if _, err := commandsToWire([]pluginapi.SubmitCommand{nil}); err == nil {
		t.Error("an unknown command went onto the wire")
	}

	d := &pluginapi.DispatchRequest{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0}}
	wantDispatch := &wire.Dispatch{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0}}
	if got := dispatchToWire(d); !reflect.DeepEqual(got, wantDispatch) {
		t.Errorf("dispatch on the wire:\n got %+v\nwant %+v", got, wantDispatch)
	}

	spans := []pluginapi.Span{{Kind: pluginapi.SpanDecode, Start: 1, End: 2}, {Kind: pluginapi.SpanDevice, Start: 2, End: 9}}
	b := wire.EncodeDone(wire.FrameSubmit, &wire.Done{Seq: 1, Spans: spansToWire(spans)})
	done, err := wire.DecodeDone(b, wire.FrameSubmit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := spansFromWire(done.Spans); !reflect.DeepEqual(got, spans) {
		t.Errorf("spans round trip: got %+v, want %+v", got, spans)
	}
	if spansFromWire(nil) != nil {
		t.Error("no spans came back as some")
	}
}

// spansToWire maps spans onto the wire as a plugin's SDK does.
func spansToWire(spans []pluginapi.Span) *[]wire.Span {
	out := make([]wire.Span, len(spans))
	for i, s := range spans {
		out[i] = wire.Span{Kind: uint32(s.Kind), Start: s.Start, End: s.End}
	}
	return &out
}
