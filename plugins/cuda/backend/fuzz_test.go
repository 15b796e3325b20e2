package backend

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// FuzzUsableBlob feeds arbitrary cached blobs to the header check: it never panics
// and returns a cubin only from a blob whose header names this driver, device and
// PTX and whose cubin has the recorded digest.
func FuzzUsableBlob(f *testing.F) {
	lim := h200()
	const text = "// kiln PTX\n.version 7.0\n"
	f.Add(encodeBlob(13000, lim, text, []byte("\x7fELF cubin")))
	f.Add(encodeBlob(12040, lim, text, []byte("\x7fELF cubin")))
	f.Add([]byte("kiln conformance: not a blob any backend produced"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		cubin := usableBlob(blob, 13000, lim, text)
		if cubin == nil {
			return
		}
		if !bytes.Equal(encodeBlob(13000, lim, text, cubin), blob) {
			t.Errorf("accepted a blob that is not this driver's, device's and PTX's encoding of its cubin: % x", blob[:min(len(blob), blobHeader)])
		}
	})
}

// FuzzBindings feeds arbitrary launches to the dispatch checks of a program with
// every kind of buffer: they never panic, reject with a RejectedError, and size
// every accepted binding as the CPU reference does.
func FuzzBindings(f *testing.F) {
	b := ir.NewBuilder("fuzz.bindings", 64, 1, 1)
	b.Buffer("r", ir.U32, ir.Read)
	b.Buffer("w", ir.F32, ir.Write)
	b.Buffer("rw", ir.I32, ir.ReadWrite)
	b.FixedBuffer("fr", ir.U32, ir.Read, 3)
	b.FixedBuffer("fw", ir.U32, ir.Write, 5)
	prog := b.MustBuild()
	lim := h200()
	lim.totalMem = 1 << 12
	m, err := ptx.Emit(prog, ptx.Options{})
	if err != nil {
		f.Fatal(err)
	}
	p := &pipeline{d: &device{a: &adapter{lim: lim}}, prog: prog, mod: m}
	f.Add([]byte{1, 2, 3, 4}, []byte{}, []byte{5, 6, 7, 8}, make([]byte, 12), uint32(7), uint32(0), uint8(5), uint32(1), uint32(1))
	f.Add([]byte{1, 2, 3}, []byte{1}, []byte{}, make([]byte, 8), uint32(1<<20), uint32(3), uint8(2), uint32(1<<27), uint32(70000))
	f.Fuzz(func(t *testing.T, r, w, rw, fr []byte, wCount, fwCount uint32, nInputs uint8, gx, gy uint32) {
		inputs := [][]byte{r, w, rw, fr, nil, nil}[:min(int(nInputs), 6)]
		req := &pluginapi.DispatchRequest{Inputs: inputs, OutputCounts: []uint32{0, wCount, 0, 0, fwCount}, Grid: [3]uint32{gx, gy, 1}}
		binds, err := p.bindings(req)
		var rejected *pluginapi.RejectedError
		if err != nil {
			if !errors.As(err, &rejected) {
				t.Fatalf("bindings error %v is not a RejectedError", err)
			}
		} else {
			for i, bd := range binds {
				var in []byte
				if i < len(inputs) {
					in = inputs[i]
				}
				want := uint32(len(in) / 4)
				switch {
				case bd.decl.Access == ir.Write && bd.decl.Count != 0:
					want = bd.decl.Count
				case bd.decl.Access == ir.Write:
					want = wCount
				}
				if bd.count != want || 4*uint64(bd.count) > lim.maxBufferBytes() {
					t.Fatalf("binding %d (%s): count %d, want %d within %d bytes", i, bd.decl.Name, bd.count, want, lim.maxBufferBytes())
				}
			}
		}
		if err := p.checkGrid(req.Grid); err != nil && !errors.As(err, &rejected) {
			t.Fatalf("checkGrid error %v is not a RejectedError", err)
		}
	})
}
