package ptx

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// FuzzEmit feeds Emit every program the canonical decoder accepts: Emit must never
// panic, must reject exactly what ir.Validate rejects, and must turn a valid
// program into deterministic text that declares what it uses and holds only
// instructions of the interpreted subset (the tensor-core emulator's for a
// tensor-core module).
func FuzzEmit(f *testing.F) {
	for _, np := range allPrograms() {
		data, err := ir.Encode(np.prog)
		if err != nil {
			f.Fatalf("%s: %v", np.name, err)
		}
		f.Add(data, uint8(80))
	}
	f.Fuzz(func(t *testing.T, data []byte, sm uint8) {
		p, err := ir.Decode(data)
		if err != nil {
			return
		}
		opts := Options{Target: Target{SM: 70}}
		if sm >= 80 {
			opts.Target.SM = 80
		}
		m, err := Emit(p, opts)
		if !gputest.EmitAgrees(t, p, err) {
			return
		}
		parse := func(text string) error { _, err := parseModule(text); return err }
		if isTensorCoreModule(m) {
			parse = func(text string) error { _, err := newTCEmu(text); return err }
		}
		if err := parse(m.Text); err != nil {
			t.Fatalf("the module does not parse: %v\n%s", err, numbered(m.Text))
		}
		again, err := Emit(p, opts)
		if err != nil || again.Text != m.Text {
			t.Fatalf("a second Emit differs (%v)", err)
		}
	})
}
