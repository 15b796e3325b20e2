package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// sampleRequests covers every request kind, for the round-trip test and as fuzz
// seeds.
func sampleRequests() []*Request {
	return []*Request{
		{Kind: FrameHello, Seq: 1, Token: []byte("0123456789abcdef0123456789abcdef"), FD: true},
		{Kind: FrameAttach, Seq: 2, Segment: 3, Size: 1 << 20, FD: true},
		{Kind: FrameDetach, Seq: 3, Segment: 3},
		{Kind: FrameAlloc, Seq: 4, Adapter: 1, Usage: 9 /* pluginapi.UsageMap | UsageStorage */, Size: 4096, Segment: 9, FD: true},
		{Kind: FrameAlloc, Seq: 5, Size: 16},
		{Kind: FrameFree, Seq: 6, Buffer: 7},
		{Kind: FrameWrite, Seq: 7, Buffer: 7, Offset: 8, Data: SegRange{Segment: 3, Offset: 64, Size: 16}},
		{Kind: FrameRead, Seq: 8, Buffer: 7, Data: SegRange{Segment: 3, Size: 4}},
		{Kind: FrameSubmit, Seq: 9, Adapter: 2, Commands: []Command{
			{Op: OpDispatch, Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []Range{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
			{Op: OpCopy, Src: Range{Buffer: 1, Size: 8}, Dst: Range{Buffer: 2, Offset: 8, Size: 8}},
			{Op: OpFill, Dst: Range{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
			{Op: OpDispatch, Pipeline: 6},
		}},
		{Kind: FrameDispatch, Seq: 10,
			Dispatch: &Dispatch{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0, 2}},
			Inputs:   []SegRange{{Segment: 1, Size: 16}, {}},
			Outputs:  []SegRange{{Segment: 1, Offset: 64, Size: 16}},
		},
		{Kind: FrameCopy, Seq: 11, Src: Range{Buffer: 7, Offset: 8, Size: 1 << 30}, Dst: Range{Buffer: 9, Size: 1 << 30}},
	}
}

func TestFrameRequestRoundTrip(t *testing.T) {
	for _, r := range sampleRequests() {
		b, err := EncodeRequest(r)
		if err != nil {
			t.Fatalf("encode kind %d: %v", r.Kind, err)
		}
		if len(b)%8 != 0 {
			t.Errorf("kind %d encodes to %d bytes, not a multiple of 8", r.Kind, len(b))
		}
		got, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("decode kind %d: %v", r.Kind, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("kind %d round trip:\n got %+v\nwant %+v", r.Kind, got, r)
		}
	}
}

func TestFrameDoneRoundTrip(t *testing.T) {
	cases := []struct {
		kind    FrameKind
		outputs int
		d       *Done
	}{
		{FrameAlloc, 0, &Done{Seq: 1, Buffer: 5, Mapped: true}},
		{FrameSubmit, 0, &Done{Seq: 2, HostNanos: 100, DeviceNanos: 7}},
		{FrameDispatch, 2, &Done{Seq: 3, HostNanos: 1, Sizes: []uint64{16, 0}}},
		{FrameFree, 0, &Done{Seq: 4}},
		{FrameSubmit, 0, &Done{Seq: 5, Status: StatusRejected, Msg: "command 0: no. Fix: yes"}},
		{FrameDispatch, 3, &Done{Seq: 6, Status: StatusBadResult, Msg: "2 outputs"}},
	}
	for _, c := range cases {
		got, err := DecodeDone(EncodeDone(c.kind, c.d), c.kind, c.outputs)
		if err != nil {
			t.Fatalf("decode %+v: %v", c.d, err)
		}
		if !reflect.DeepEqual(got, c.d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, c.d)
		}
	}
}

func TestFrameDecodersRefuse(t *testing.T) {
	good, _ := EncodeRequest(sampleRequests()[8])
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	bad := map[string][]byte{
		"short header":   good[:10],
		"size too large": mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 1<<30); return b }),
		"size mismatch":  mutate(func(b []byte) []byte { return b[:len(b)-8] }),
		"reserved bits":  mutate(func(b []byte) []byte { b[6] = 1; return b }),
		"unknown flag":   mutate(func(b []byte) []byte { b[5] = 2; return b }),
		"fd on submit":   mutate(func(b []byte) []byte { b[5] = FlagFD; return b }),
		"unknown kind":   mutate(func(b []byte) []byte { b[4] = 77; return b }),
		"huge command count": mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[FrameHeaderBytes+4:], 1<<30)
			return b
		}),
	}
	for name, b := range bad {
		if _, err := DecodeRequest(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	d := EncodeDone(FrameDispatch, &Done{Seq: 1, Sizes: []uint64{4}})
	if _, err := DecodeDone(d, FrameDispatch, 2); err == nil {
		t.Error("a dispatch completion with 1 size decoded where 2 were expected")
	}
	if _, err := DecodeDone(d, FrameSubmit, 0); err == nil {
		t.Error("a dispatch completion decoded as a submit completion")
	}
	a := EncodeDone(FrameAlloc, &Done{Seq: 1, Buffer: 0})
	if _, err := DecodeDone(a, FrameAlloc, 0); err == nil {
		t.Error("an alloc completion with handle 0 decoded")
	}
}

// FuzzDecodeRequest is the plugin side's decoder: any bytes either decode to a
// request that encodes back to the same bytes, or fail; never a panic or an
// allocation beyond the frame's size.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range sampleRequests() {
		b, _ := EncodeRequest(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		again, err := EncodeRequest(r)
		if err != nil {
			t.Fatalf("decoded request does not encode: %v", err)
		}
		if r.Kind != FrameDispatch && !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}

// FuzzDecodeDone is the host side's decoder of completions, for every request
// kind it waits on.
func FuzzDecodeDone(f *testing.F) {
	f.Add(EncodeDone(FrameAlloc, &Done{Seq: 1, Buffer: 5, Mapped: true}), uint8(FrameAlloc), uint8(0))
	f.Add(EncodeDone(FrameSubmit, &Done{Seq: 2, HostNanos: 3}), uint8(FrameSubmit), uint8(0))
	f.Add(EncodeDone(FrameDispatch, &Done{Seq: 3, Sizes: []uint64{1, 2}}), uint8(FrameDispatch), uint8(2))
	f.Add(EncodeDone(FrameFree, &Done{Seq: 4, Status: StatusDevice, Msg: "lost"}), uint8(FrameFree), uint8(0))
	f.Add(EncodeDone(FrameSubmit, &Done{Seq: 5, HostNanos: 3, Spans: &[]Span{{Kind: spanRun, Start: 1, End: 2}}}), uint8(FrameSubmit), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, kind, outputs uint8) {
		d, err := DecodeDone(b, FrameKind(kind), int(outputs))
		if err != nil {
			return
		}
		if d.Status == StatusOK && FrameKind(kind) == FrameDispatch && len(d.Sizes) != int(outputs) {
			t.Fatalf("%d sizes for %d outputs", len(d.Sizes), outputs)
		}
		if !bytes.Equal(EncodeDone(FrameKind(kind), d), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
