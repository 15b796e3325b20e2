package gputest

import (
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// BindingsProgram is a program with a buffer of every kind, for fuzzing a
// backend's dispatch checks: read u32, write f32, read_write i32, a read u32 of
// 3 elements and a write u32 of 5.
func BindingsProgram() *ir.Program {
	b := ir.NewBuilder("fuzz.bindings", 64, 1, 1)
	b.Buffer("r", ir.U32, ir.Read)
	b.Buffer("w", ir.F32, ir.Write)
	b.Buffer("rw", ir.I32, ir.ReadWrite)
	b.FixedBuffer("fr", ir.U32, ir.Read, 3)
	b.FixedBuffer("fw", ir.U32, ir.Write, 5)
	return b.MustBuild()
}

// FuzzBindings feeds arbitrary launches of [BindingsProgram] to the dispatch
// checks as a Dispatch meets them: the SDK's (pluginapi.CheckLaunch), then the
// backend's. bindings sizes the bindings of a request the SDK accepted (in
// binding order), checkGrid checks its grid. They must never
// panic, reject only with a RejectedError, and size every accepted binding as
// the CPU reference does: a write buffer by its fixed count or the request's
// output count, any other by its input; with maxBytes > 0, no binding larger.
func FuzzBindings[B interface{ Sized() *gpukit.Binding }](f *testing.F, bindings func(req *pluginapi.DispatchRequest) ([]B, error), checkGrid func(grid [3]uint32) error, maxBytes uint64) {
	prog := BindingsProgram()
	f.Add([]byte{1, 2, 3, 4}, []byte{}, []byte{5, 6, 7, 8}, make([]byte, 12), uint32(7), uint32(0), uint8(5), uint32(1), uint32(1))
	f.Add([]byte{1, 2, 3}, []byte{1}, []byte{}, make([]byte, 8), uint32(1<<20), uint32(3), uint8(2), uint32(1<<27), uint32(70000))
	f.Fuzz(func(t *testing.T, r, w, rw, fr []byte, wCount, fwCount uint32, nInputs uint8, gx, gy uint32) {
		inputs := [][]byte{r, w, rw, fr, nil, nil}[:min(int(nInputs), 6)]
		req := &pluginapi.DispatchRequest{Inputs: inputs, OutputCounts: []uint32{0, wCount, 0, 0, fwCount}, Grid: [3]uint32{gx, gy, 1}}
		err := pluginapi.CheckLaunch(prog, prog.WorkgroupSize, req)
		var got []uint32
		if err == nil {
			var binds []B
			binds, err = bindings(req)
			for _, b := range binds {
				got = append(got, b.Sized().Count)
			}
		}
		var rejected *pluginapi.RejectedError
		if err != nil {
			if !errors.As(err, &rejected) {
				t.Fatalf("bindings error %v is not a RejectedError", err)
			}
		} else {
			for i, n := range got {
				decl := prog.Buffers[i]
				var in []byte
				if i < len(inputs) {
					in = inputs[i]
				}
				want := uint32(len(in) / 4)
				switch {
				case decl.Access == ir.Write && decl.Count != 0:
					want = decl.Count
				case decl.Access == ir.Write:
					want = wCount
				}
				if n != want || maxBytes > 0 && 4*uint64(n) > maxBytes {
					t.Fatalf("binding %d (%s): count %d, want %d within %d bytes", i, decl.Name, n, want, maxBytes)
				}
			}
		}
		if err := checkGrid(req.Grid); err != nil && !errors.As(err, &rejected) {
			t.Fatalf("checkGrid error %v is not a RejectedError", err)
		}
	})
}

// EmitAgrees fails t when an emitter's verdict on p (emitErr, what Emit
// returned) disagrees with ir.Validate's: an emitter must reject exactly the
// programs Validate rejects. It reports whether p is valid, so that the caller
// goes on to check the module.
func EmitAgrees(t testing.TB, p *ir.Program, emitErr error) bool {
	t.Helper()
	if verr := ir.Validate(p); verr != nil {
		if emitErr == nil {
			t.Fatalf("Emit accepted a program Validate rejects: %v", verr)
		}
		return false
	}
	if emitErr != nil {
		t.Fatalf("Emit rejected a valid program: %v", emitErr)
	}
	return true
}
