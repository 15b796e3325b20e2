package verify_test

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// TestVariantsAreValid pins that every variant of every program the kit runs (the
// semantics tables and the corpus) is a valid program: the rewriting never
// shadows a name, mistypes a value or breaks a loop.
func TestVariantsAreValid(t *testing.T) {
	var progs []*ir.Program
	for _, s := range kit.SemanticPrograms() {
		progs = append(progs, s.Program)
	}
	for _, k := range kernels.All() {
		progs = append(progs, k.Program())
	}
	withFma := 0
	for _, p := range progs {
		vs := verify.Variants(p)
		for _, v := range vs {
			if err := ir.Validate(v.Program); err != nil {
				t.Errorf("%s, %s: %v", p.Name, v.Name, err)
			}
		}
		if len(vs) == 3 {
			withFma++
		}
	}
	if withFma < 2 { // fma.f32 and fma.f32.const at least
		t.Errorf("%d programs have all three variants, want the fma cases at least", withFma)
	}
}

// FuzzVariants feeds Variants every program the canonical decoder accepts: it
// must never panic, and every variant of a valid program must be valid.
func FuzzVariants(f *testing.F) {
	for _, s := range kit.SemanticPrograms() {
		if data, err := ir.Encode(s.Program); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ir.Decode(data)
		if err != nil || ir.Validate(p) != nil {
			return
		}
		for _, v := range verify.Variants(p) {
			if err := ir.Validate(v.Program); err != nil {
				t.Fatalf("%s variant of a valid program is invalid: %v", v.Name, err)
			}
		}
	})
}
