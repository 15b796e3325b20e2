package backend

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kiln-dev/kiln/plugins/internal/gputest"
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
	prog := gputest.BindingsProgram()
	lim := vk.Limits{MaxStorageBufferRange: 1 << 12, MaxComputeWorkGroupCount: [3]uint32{65535, 65535, 65535}}
	p := &pipeline{d: &device{a: &adapter{props: vk.Properties{Limits: lim}}}, prog: prog, wg: prog.WorkgroupSize}
	gputest.FuzzBindings(f, p.bindings, p.checkGrid, 0)
}
