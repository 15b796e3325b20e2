package autotune

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// OptionsKey depends on the kernel, every fixed option's value and the
// adapter, not on the order the options were set in, and never meets a
// program's key for the same spec.
func TestOptionsKey(t *testing.T) {
	spec := func(typ ir.Type, tf32 bool) ir.SpecMap {
		var m ir.SpecMap
		m.Set("tf32", ir.SpecBool(tf32))
		m.Set("type", ir.SpecDType(typ))
		return m
	}
	base := OptionsKey("matmul_tc", spec(ir.BF16, false), "cuda/ab")
	if !validHex(base.Hex()) || base.Adapter() != "cuda/ab" {
		t.Fatalf("key %s", base)
	}
	var reordered ir.SpecMap
	reordered.Set("type", ir.SpecDType(ir.BF16))
	reordered.Set("tf32", ir.SpecBool(false))
	if OptionsKey("matmul_tc", reordered, "cuda/ab") != base {
		t.Error("the key depends on the order options were set in")
	}
	for _, other := range []Key{
		OptionsKey("matmul_tc", spec(ir.F16, false), "cuda/ab"),
		OptionsKey("matmul_tc", spec(ir.F32, true), "cuda/ab"),
		OptionsKey("matmul_tc", spec(ir.BF16, false), "vulkan/ab"),
		OptionsKey("matmul", spec(ir.BF16, false), "cuda/ab"),
		OptionsKey("matmul_tc", ir.SpecMap{}, "cuda/ab"),
	} {
		if other == base {
			t.Errorf("%s collides with the bf16 key", other)
		}
	}
}
