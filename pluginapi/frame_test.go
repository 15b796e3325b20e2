package pluginapi

import (
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
)

// wireCommands is a submit's commands and, written out by hand, the wire's
// form of them.
func wireCommands() ([]SubmitCommand, []wire.Command) {
	return []SubmitCommand{
			DispatchCommand{Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []BufferRange{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
			CopyCommand{Src: BufferRange{Buffer: 1, Size: 8}, Dst: BufferRange{Buffer: 2, Offset: 8, Size: 8}},
			FillCommand{Dst: BufferRange{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
			DispatchCommand{Pipeline: 6},
		}, []wire.Command{
			{Op: wire.OpDispatch, Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []wire.Range{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
			{Op: wire.OpCopy, Src: wire.Range{Buffer: 1, Size: 8}, Dst: wire.Range{Buffer: 2, Offset: 8, Size: 8}},
			{Op: wire.OpFill, Dst: wire.Range{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
			{Op: wire.OpDispatch, Pipeline: 6},
		}
}

// TestWireMappingRoundTrip pins the plugin's side of the data plane's frames
// (host/client's test of the same name pins the host's): every submit command,
// a dispatch and the spans come back from the wire's form, through the frame
// encoder and decoder, as the SDK's types.
func TestWireMappingRoundTrip(t *testing.T) {
	cmds, w := wireCommands()
	b, err := wire.EncodeRequest(&wire.Request{Kind: wire.FrameSubmit, Seq: 1, Commands: w})
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := commandsFromWire(r.Commands); !reflect.DeepEqual(got, cmds) {
		t.Errorf("commands from the wire:\n got %+v\nwant %+v", got, cmds)
	}

	d := &wire.Dispatch{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0}}
	want := &DispatchRequest{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0}}
	if got := dispatchFromWire(d); !reflect.DeepEqual(got, want) {
		t.Errorf("dispatch from the wire:\n got %+v\nwant %+v", got, want)
	}

	spans := []Span{{Kind: SpanDecode, Start: 1, End: 2}, {Kind: SpanDevice, Start: 2, End: 9}}
	b = wire.EncodeDone(wire.FrameSubmit, &wire.Done{Seq: 1, Spans: spansToWire(spans)})
	done, err := wire.DecodeDone(b, wire.FrameSubmit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wantWire := []wire.Span{{Kind: uint32(SpanDecode), Start: 1, End: 2}, {Kind: uint32(SpanDevice), Start: 2, End: 9}}; done.Spans == nil || !reflect.DeepEqual(*done.Spans, wantWire) {
		t.Errorf("spans on the wire: got %+v, want %+v", done.Spans, wantWire)
	}
	if int(SpanWait) != wire.SpanKinds {
		t.Errorf("the SDK names %d span kinds, the wire takes %d", SpanWait, wire.SpanKinds)
	}
}
