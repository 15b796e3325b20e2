package pluginapi

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// sampleRequests covers every request kind, for the round-trip test and as fuzz
// seeds.
func sampleRequests() []*request {
	return []*request{
		{kind: frameHello, seq: 1, token: []byte("0123456789abcdef0123456789abcdef"), fd: true},
		{kind: frameAttach, seq: 2, segment: 3, size: 1 << 20, fd: true},
		{kind: frameDetach, seq: 3, segment: 3},
		{kind: frameAlloc, seq: 4, adapter: 1, usage: UsageMap | UsageStorage, size: 4096, segment: 9, fd: true},
		{kind: frameAlloc, seq: 5, size: 16},
		{kind: frameFree, seq: 6, buffer: 7},
		{kind: frameWrite, seq: 7, buffer: 7, offset: 8, data: segRange{segment: 3, offset: 64, size: 16}},
		{kind: frameRead, seq: 8, buffer: 7, data: segRange{segment: 3, size: 4}},
		{kind: frameSubmit, seq: 9, adapter: 2, commands: []SubmitCommand{
			DispatchCommand{Pipeline: 5, Grid: [3]uint32{4, 2, 1}, Bindings: []BufferRange{{Buffer: 1, Size: 16}, {Buffer: 2, Offset: 4, Size: 8}}, Uniforms: []byte{1, 2, 3}},
			CopyCommand{Src: BufferRange{Buffer: 1, Size: 8}, Dst: BufferRange{Buffer: 2, Offset: 8, Size: 8}},
			FillCommand{Dst: BufferRange{Buffer: 2, Size: 16}, Value: 0xdeadbeef},
			DispatchCommand{Pipeline: 6},
		}},
		{kind: frameDispatch, seq: 10,
			dispatch: &DispatchRequest{Pipeline: 3, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{}, nil}, OutputCounts: []uint32{0, 4}, Uniforms: []byte{1, 0, 0, 0, 2}},
			inputs:   []segRange{{segment: 1, size: 16}, {}},
			outputs:  []segRange{{segment: 1, offset: 64, size: 16}},
		},
		{kind: frameCopy, seq: 11, src: BufferRange{Buffer: 7, Offset: 8, Size: 1 << 30}, dst: BufferRange{Buffer: 9, Size: 1 << 30}},
	}
}

func TestFrameRequestRoundTrip(t *testing.T) {
	for _, r := range sampleRequests() {
		b, err := encodeRequest(r)
		if err != nil {
			t.Fatalf("encode kind %d: %v", r.kind, err)
		}
		if len(b)%8 != 0 {
			t.Errorf("kind %d encodes to %d bytes, not a multiple of 8", r.kind, len(b))
		}
		got, err := decodeRequest(b)
		if err != nil {
			t.Fatalf("decode kind %d: %v", r.kind, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("kind %d round trip:\n got %+v\nwant %+v", r.kind, got, r)
		}
	}
}

func TestFrameDoneRoundTrip(t *testing.T) {
	cases := []struct {
		kind    frameKind
		outputs int
		d       *done
	}{
		{frameAlloc, 0, &done{seq: 1, buffer: 5, mapped: true}},
		{frameSubmit, 0, &done{seq: 2, hostNanos: 100, deviceNanos: 7}},
		{frameDispatch, 2, &done{seq: 3, hostNanos: 1, sizes: []uint64{16, 0}}},
		{frameFree, 0, &done{seq: 4}},
		{frameSubmit, 0, &done{seq: 5, status: statusRejected, msg: "command 0: no. Fix: yes"}},
		{frameDispatch, 3, &done{seq: 6, status: statusBadResult, msg: "2 outputs"}},
	}
	for _, c := range cases {
		got, err := decodeDone(encodeDone(c.kind, c.d), c.kind, c.outputs)
		if err != nil {
			t.Fatalf("decode %+v: %v", c.d, err)
		}
		if !reflect.DeepEqual(got, c.d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, c.d)
		}
	}
}

func TestFrameDecodersRefuse(t *testing.T) {
	good, _ := encodeRequest(sampleRequests()[8])
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	bad := map[string][]byte{
		"short header":   good[:10],
		"size too large": mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b, 1<<30); return b }),
		"size mismatch":  mutate(func(b []byte) []byte { return b[:len(b)-8] }),
		"reserved bits":  mutate(func(b []byte) []byte { b[6] = 1; return b }),
		"unknown flag":   mutate(func(b []byte) []byte { b[5] = 2; return b }),
		"fd on submit":   mutate(func(b []byte) []byte { b[5] = flagFD; return b }),
		"unknown kind":   mutate(func(b []byte) []byte { b[4] = 77; return b }),
		"huge command count": mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[frameHeaderBytes+4:], 1<<30)
			return b
		}),
	}
	for name, b := range bad {
		if _, err := decodeRequest(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	d := encodeDone(frameDispatch, &done{seq: 1, sizes: []uint64{4}})
	if _, err := decodeDone(d, frameDispatch, 2); err == nil {
		t.Error("a dispatch completion with 1 size decoded where 2 were expected")
	}
	if _, err := decodeDone(d, frameSubmit, 0); err == nil {
		t.Error("a dispatch completion decoded as a submit completion")
	}
	a := encodeDone(frameAlloc, &done{seq: 1, buffer: 0})
	if _, err := decodeDone(a, frameAlloc, 0); err == nil {
		t.Error("an alloc completion with handle 0 decoded")
	}
}

// FuzzDecodeRequest is the plugin side's decoder: any bytes either decode to a
// request that encodes back to the same bytes, or fail; never a panic or an
// allocation beyond the frame's size.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range sampleRequests() {
		b, _ := encodeRequest(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		again, err := encodeRequest(r)
		if err != nil {
			t.Fatalf("decoded request does not encode: %v", err)
		}
		if r.kind != frameDispatch && !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}

// FuzzDecodeDone is the host side's decoder of completions, for every request
// kind it waits on.
func FuzzDecodeDone(f *testing.F) {
	f.Add(encodeDone(frameAlloc, &done{seq: 1, buffer: 5, mapped: true}), uint8(frameAlloc), uint8(0))
	f.Add(encodeDone(frameSubmit, &done{seq: 2, hostNanos: 3}), uint8(frameSubmit), uint8(0))
	f.Add(encodeDone(frameDispatch, &done{seq: 3, sizes: []uint64{1, 2}}), uint8(frameDispatch), uint8(2))
	f.Add(encodeDone(frameFree, &done{seq: 4, status: statusDevice, msg: "lost"}), uint8(frameFree), uint8(0))
	f.Add(encodeDone(frameSubmit, &done{seq: 5, hostNanos: 3, spans: &[]Span{{Kind: SpanRun, Start: 1, End: 2}}}), uint8(frameSubmit), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, kind, outputs uint8) {
		d, err := decodeDone(b, frameKind(kind), int(outputs))
		if err != nil {
			return
		}
		if d.status == statusOK && frameKind(kind) == frameDispatch && len(d.sizes) != int(outputs) {
			t.Fatalf("%d sizes for %d outputs", len(d.sizes), outputs)
		}
		if !bytes.Equal(encodeDone(frameKind(kind), d), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
