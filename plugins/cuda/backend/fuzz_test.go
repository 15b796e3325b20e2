package backend

import (
	"bytes"
	"testing"

	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
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
// every accepted binding as the CPU reference does, within the device's largest
// buffer.
func FuzzBindings(f *testing.F) {
	prog := gputest.BindingsProgram()
	lim := h200()
	lim.totalMem = 1 << 12
	m, err := ptx.Emit(prog, ptx.Options{})
	if err != nil {
		f.Fatal(err)
	}
	p := &pipeline{d: &device{a: &adapter{lim: lim}}, prog: prog, mod: m}
	gputest.FuzzBindings(f, p.bindings, p.checkGrid, lim.maxBufferBytes())
}
