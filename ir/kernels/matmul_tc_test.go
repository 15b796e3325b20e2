package kernels_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func options(kv ...any) ir.SpecMap {
	var m ir.SpecMap
	for i := 0; i < len(kv); i += 2 {
		m.Set(kv[i].(string), kv[i+1].(ir.SpecValue))
	}
	return m
}

// TestMatmulTCVariants runs matmul_tc built for every operand type (and tf32),
// other tiles and K steps, on the strict interpreter at ragged sizes and
// several workgroup sizes, against its plain-Go reference.
func TestMatmulTCVariants(t *testing.T) {
	base, _ := kernels.Lookup("matmul_tc")
	for _, c := range []struct {
		opts ir.SpecMap
		name string
	}{
		{options(), "kiln.matrix.matmul_tc.bf16"},
		{options("type", ir.SpecDType(ir.F16)), "kiln.matrix.matmul_tc.f16"},
		{options("type", ir.SpecDType(ir.F32)), "kiln.matrix.matmul_tc.f32"},
		{options("type", ir.SpecDType(ir.F32), "tf32", ir.SpecBool(true), "tk", ir.SpecU32(16)), "kiln.matrix.matmul_tc.f32.tf32"},
		{options("tm", ir.SpecU32(32), "tn", ir.SpecU32(128), "tk", ir.SpecU32(64)), "kiln.matrix.matmul_tc.bf16"},
	} {
		k, rest, err := base.Configure(c.opts)
		if err != nil || rest.Len() != 0 {
			t.Fatalf("Configure(%v): %v", c.opts.Names(), err)
		}
		p := k.Program()
		if p.Name != c.name || k.OpID != c.name {
			t.Errorf("program %q, op id %q; want %q", p.Name, k.OpID, c.name)
		}
		for _, size := range []int{1, 17, 100} {
			for _, wg := range [][3]uint32{{}, {32, 1, 1}, {64, 2, 1}} {
				cs, _ := k.Retune(k.NewCase(rand.New(rand.NewPCG(1, uint64(size))), size), wg, ir.SpecMap{})
				got, err := interp.Run(context.Background(), p, interp.Options{WorkgroupSize: cs.WorkgroupSize, Strict: true},
					interp.Launch{Grid: cs.Grid, Inputs: cs.Inputs, OutputCounts: cs.OutputCounts, Uniforms: cs.Uniforms})
				if err != nil {
					t.Fatalf("%s size %d wg %v: %v", c.name, size, wg, err)
				}
				if err := k.Check(got, k.Reference(cs)); err != nil {
					t.Errorf("%s size %d wg %v: %v", c.name, size, wg, err)
				}
			}
		}
	}
}

// TestMatmulTCOptionErrors pins the combinations matmul_tc refuses to build,
// each with a Fix.
func TestMatmulTCOptionErrors(t *testing.T) {
	k, _ := kernels.Lookup("matmul_tc")
	for _, c := range []struct {
		opts ir.SpecMap
		want string
	}{
		{options("type", ir.SpecDType(ir.U32)), "not a matrix operand type"},
		{options("tf32", ir.SpecBool(true)), "tf32 is a precision for f32 operands"},
		{options("tm", ir.SpecU32(24)), "tm=24 is not a matrix side"},
		{options("type", ir.SpecDType(ir.F32), "tm", ir.SpecU32(256), "tn", ir.SpecU32(256)), "over the 196608"},
		{options("type", ir.SpecU32(1)), "option type of matmul_tc is a type, not a u32"},
	} {
		if _, _, err := k.Configure(c.opts); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("Configure(%v): %v, want %q with a Fix", c.opts.Names(), err, c.want)
		}
	}
	v, ok, err := k.ParseOption("type", "f16")
	if !ok || err != nil || v != ir.SpecDType(ir.F16) {
		t.Errorf("ParseOption(type, f16) = %v, %v, %v", v, ok, err)
	}
	if _, ok, _ := k.ParseOption("epi", "2"); ok {
		t.Error("ParseOption took a name that is no option")
	}
	if _, _, err := k.ParseOption("type", "f64"); err == nil || !strings.Contains(err.Error(), "bf16, f16, f32") {
		t.Errorf("ParseOption(type, f64): %v", err)
	}
}
