package spirv

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// FuzzEmit feeds EmitFor (a target with every subgroup class and float controls,
// and the same with every binding addressed) every program the canonical decoder
// accepts: it must never panic, must reject exactly what ir.Validate rejects, and
// must turn a valid program into a well-framed, deterministic module that
// spirv-val accepts (when it is installed).
func FuzzEmit(f *testing.F) {
	for _, np := range allPrograms(f) {
		data, err := ir.Encode(np.prog)
		if err != nil {
			f.Fatalf("%s: %v", np.name, err)
		}
		f.Add(data)
	}
	val, _ := exec.LookPath("spirv-val")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ir.Decode(data)
		if err != nil {
			return
		}
		m, err := EmitFor(p, fullTarget)
		if !gputest.EmitAgrees(t, p, err) {
			return
		}
		decode(t, m.Words)
		again, err := EmitFor(p, fullTarget)
		if err != nil || !slices.Equal(again.Words, m.Words) {
			t.Fatalf("a second Emit differs (%v)", err)
		}
		if val != "" {
			validate(t, val, "fuzz", m)
		}
		// The same program with every binding reached through a device address,
		// on a device with the 128 bytes of push constants every device has.
		target := fullTarget
		target.BufferAddresses = 1<<len(p.Buffers) - 1
		addressed, err := EmitFor(p, target)
		if err != nil {
			t.Fatalf("Emit with addresses rejected a valid program: %v", err)
		}
		decode(t, addressed.Words)
		if val != "" {
			validate(t, val, "fuzz-addressed", addressed)
		}
	})
}
