package backend

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// FuzzUsableBlob feeds arbitrary cached blobs to the header check: it never panics
// and accepts only blobs whose header names the device.
func FuzzUsableBlob(f *testing.F) {
	p := vk.Properties{VendorID: 0x10de, DeviceID: 0x2330, PipelineCacheUUID: [16]byte{9, 8, 7, 6, 5, 4, 3, 2, 1}}
	f.Add(cacheHeader(p, "body"))
	f.Add(cacheHeader(p, ""))
	f.Add([]byte("kiln conformance: not a blob any backend produced"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		got := usableBlob(blob, p)
		if got == nil {
			return
		}
		if !bytes.Equal(got, blob) || len(blob) < 32 || binary.LittleEndian.Uint32(blob[8:]) != p.VendorID ||
			binary.LittleEndian.Uint32(blob[12:]) != p.DeviceID || !bytes.Equal(blob[16:32], p.PipelineCacheUUID[:]) {
			t.Errorf("accepted a blob whose header does not name the device: % x", blob[:min(len(blob), 32)])
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
	lim := vk.Limits{MaxStorageBufferRange: 1 << 12, MaxComputeWorkGroupCount: [3]uint32{65535, 65535, 65535}}
	p := &pipeline{d: &device{a: &adapter{props: vk.Properties{Limits: lim}}}, prog: prog, wg: prog.WorkgroupSize}
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
				if bd.count != want {
					t.Fatalf("binding %d (%s): count %d, want %d", i, bd.decl.Name, bd.count, want)
				}
			}
		}
		if err := p.checkGrid(req.Grid); err != nil && !errors.As(err, &rejected) {
			t.Fatalf("checkGrid error %v is not a RejectedError", err)
		}
	})
}
