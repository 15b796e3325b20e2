package ptx

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// TestEveryMatmulTCTileIsASCII emits every tile `kiln tune` tries for
// matmul_tc (each type, on sm_90 and sm_80): ptxas rejects a module holding
// any byte beyond ASCII, comments included, so the scalar path's header, which
// quotes why the tensor cores were not used, must not carry the reason's ×.
func TestEveryMatmulTCTileIsASCII(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	for _, typ := range []string{"bf16", "f16", "f32"} {
		var fixed ir.SpecMap
		v, _, err := k.ParseOption("type", typ)
		if err != nil {
			t.Fatal(err)
		}
		fixed.Set("type", v)
		space, _ := k.OptionSpace(fixed)
		if len(space) < 2 {
			t.Fatalf("%s: %d tiles", typ, len(space))
		}
		for _, c := range space {
			p := c.Kernel.Program()
			for _, target := range []Target{{SM: 90}, {SM: 80}} {
				m, err := Emit(p, backendOptions(target, p.WorkgroupSize[0]))
				if err != nil {
					t.Fatalf("%s %v sm_%d: %v", typ, c.Options, target.SM, err)
				}
				for i := 0; i < len(m.Text); i++ {
					if m.Text[i] >= 0x80 {
						line := m.Text[:min(len(m.Text), i+20)]
						t.Fatalf("%s %v sm_%d: byte %#x at %d is not ASCII: …%s", typ, c.Options, target.SM, m.Text[i], i, line[max(0, i-60):])
					}
				}
			}
		}
	}
}
