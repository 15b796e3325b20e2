package ptx

import (
	"regexp"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// TestConstantDivisors: a division or remainder by a constant that is never 0
// (nor -1 on i32) uses the constant as an immediate operand, a u32 power of two
// becomes a shift or a mask, and a divisor known only at run time keeps its
// zero guard; the results equal the oracle's on edge values.
func TestConstantDivisors(t *testing.T) {
	b := ir.NewBuilder("test.divisors", 64, 1, 1)
	d := b.Uniform("d", ir.U32)
	x := b.Buffer("x", ir.U32, ir.Read)
	y := b.Buffer("y", ir.I32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(in *ir.Block) {
		xv := in.Let("xv", ir.Load(x, i))
		yv := in.Let("yv", ir.Load(y, i))
		u := func(v uint32) ir.Expr { return ir.LitU32(v) }
		s := func(v int32) ir.Expr { return ir.LitI32(v) }
		results := []ir.Expr{
			ir.Div(xv, u(16)), ir.Rem(xv, u(16)), ir.Div(xv, u(10)), ir.Rem(xv, u(10)),
			ir.Cast(ir.U32, ir.Div(yv, s(16))), ir.Cast(ir.U32, ir.Rem(yv, s(16))),
			ir.Cast(ir.U32, ir.Div(yv, s(-7))), ir.Cast(ir.U32, ir.Rem(yv, s(-7))),
			ir.Div(xv, d), ir.Rem(xv, d),
		}
		for k, r := range results {
			in.Store(out, ir.Add(ir.Mul(i, u(uint32(len(results)))), u(uint32(k))), r)
		}
	})
	p := b.MustBuild()
	m := mustEmit(t, p.Name, p, Options{})
	for _, want := range []string{
		`shr\.u32 %r\d+, %r\d+, 4;`, `and\.b32 %r\d+, %r\d+, 15;`,
		`div\.u32 %r\d+, %r\d+, 10;`, `rem\.u32 %r\d+, %r\d+, 10;`,
		`div\.s32 %r\d+, %r\d+, 16;`, `rem\.s32 %r\d+, %r\d+, 16;`,
		`div\.s32 %r\d+, %r\d+, -7;`, `rem\.s32 %r\d+, %r\d+, -7;`,
		`setp\.eq\.u32 %p\d+, %r\d+, 0;`,
	} {
		if !regexp.MustCompile(want).MatchString(m.Text) {
			t.Errorf("no %s in the module", want)
		}
	}
	xs := []uint32{0, 1, 9, 10, 15, 16, 17, 0x7fffffff, 0x80000000, 0xffffffff}
	ys := []int32{0, 1, -1, 15, -15, 16, -16, 17, -2147483648, 2147483647}
	n := len(xs)
	ysBits := make([]uint32, n)
	for k, v := range ys {
		ysBits[k] = uint32(v)
	}
	for _, div := range []uint32{0, 3} {
		runBoth(t, p.Name, p, kernels.Case{
			Inputs:       [][]byte{kernels.U32Bytes(xs), kernels.U32Bytes(ysBits), nil},
			OutputCounts: []uint32{0, 0, uint32(n * 10)},
			Uniforms:     kernels.U32Bytes([]uint32{div}),
			Grid:         [3]uint32{1, 1, 1},
		})
	}
}
