package edgetest

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// The IR v1.2 rows of the table: f16 arithmetic and the casts to and from f16
// and bf16 on their edge values, each with the outputs it must give computed
// with ir/half (Case.Want), bit for bit: f16 add, sub, mul, div, sqrt and fma
// correctly rounded (fma fused), min and max with f32's NaN and signed-zero
// rules, IEEE comparisons, casts rounded to nearest even, denormals kept.

// F16 returns the f16 edge values as bits: zeros, small integers and halves,
// ties of the conversions, the largest finite value, the smallest normal,
// subnormals, infinities and NaNs (quiet, signalling, negative).
func F16() []uint32 {
	vs := []float32{1, -1, 0.5, -1.5, 2.5, 3, 0.1, -7.9, 100.5, 1000, 2049, 65504, -65504, 0x1p-14, -0x1p-14, 0x1p-24,
		0x1.ff8p-15, -0x1p-20, 3.140625, 1e-3, 0.333251953125}
	out := []uint32{0, 0x8000}
	for _, v := range vs {
		out = append(out, uint32(half.NewFloat16(v)))
	}
	return append(out, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7FFF)
}

// BF16 returns the bf16 edge values as bits.
func BF16() []uint32 {
	return []uint32{0, 0x8000, 0x3F80, 0xBF80, 0x3FC0, 0x4049, 0x7F7F, 0xFF7F, 0x0080, 0x8080, 0x0001, 0x807F,
		0x4B80, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81}
}

// F32Rounding returns f32 values that exercise the rounding to f16 and bf16:
// the f32 edge values and ties, values just beside them, overflow to infinity
// and underflow to subnormals and zero.
func F32Rounding() []uint32 {
	vs := []float32{1 + 0x1p-11, 1 + 3*0x1p-11, 1 + 0x1p-11 + 0x1p-23, 65504, 65519.996, 65520, 1e5, 0x1p-24, 0x1p-25,
		0x1.000002p-25, 3 * 0x1p-26, 0x1p-15 + 0x1p-25, 1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-8 + 0x1p-23, -(1 + 0x1p-8),
		0x1.fep127, 0x1.fefffep127}
	out := F32()
	for _, v := range vs {
		out = append(out, math.Float32bits(v))
	}
	return append(out, 0x7F7F8000, 0x7F7F7FFF, 0x7F800001, 0xFF800001, 0x00008000, 0x00018000)
}

// Exact16 is the bit-exact rule for an f16 or bf16 element: equal bits, or both
// NaN.
func Exact16(t ir.Type, got, want uint32) bool {
	return got == want || isNaN16(t, got) && isNaN16(t, want)
}

func isNaN16(t ir.Type, bits uint32) bool {
	if t == ir.BF16 {
		return half.BFloat16(bits).IsNaN()
	}
	return half.Float16(bits).IsNaN()
}

// f16MinMax is min or max of two f16 values with IR v1's rules: a NaN operand
// yields the other, min(-0, +0) = -0 and max(-0, +0) = +0.
func f16MinMax(isMin bool, x, y uint32) uint32 {
	a, b := half.Float16(x), half.Float16(y)
	switch {
	case a.IsNaN():
		return y
	case b.IsNaN():
		return x
	case a.Float64() < b.Float64():
		if isMin {
			return x
		}
		return y
	case b.Float64() < a.Float64():
		if isMin {
			return y
		}
		return x
	case isMin:
		return x | y&0x8000
	}
	return x & (y | 0x7FFF)
}

// f16Compare is an IEEE comparison of two f16 values (NaN unordered: only ne
// holds).
func f16Compare(op ir.BinaryOp, x, y uint32) bool {
	a, b := half.Float16(x).Float64(), half.Float16(y).Float64()
	switch op {
	case ir.OpEq:
		return a == b
	case ir.OpNe:
		return a != b
	case ir.OpLt:
		return a < b
	case ir.OpLe:
		return a <= b
	case ir.OpGt:
		return a > b
	}
	return a >= b
}

// with sets c.Want to f over the case's input columns, encoded as out.
func with(c Case, out ir.Type, cols [][]uint32, f func(args []uint32) uint32) Case {
	want := make([]uint32, len(cols[0]))
	args := make([]uint32, len(cols))
	for i := range want {
		for k, col := range cols {
			args[k] = col[i]
		}
		want[i] = f(args)
	}
	if out == ir.Bool {
		out = ir.U32
	}
	c.Want = [][]byte{Encode(out, want)}
	return c
}

func bit(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// HalfCases are the IR v1.2 rows: every f16 operator on the f16 edge values
// (binary ones on every pair), fma on triples, select, and every cast to and
// from f16 and bf16.
func HalfCases() []Case {
	f16 := func(x uint32) half.Float16 { return half.Float16(x) }
	var out []Case
	unary := map[ir.UnaryOp]func(x uint32) uint32{
		ir.OpNeg:  func(x uint32) uint32 { return x ^ 0x8000 },
		ir.OpAbs:  func(x uint32) uint32 { return x & 0x7FFF },
		ir.OpSqrt: func(x uint32) uint32 { return uint32(half.Sqrt(f16(x))) },
	}
	for _, op := range []ir.UnaryOp{ir.OpNeg, ir.OpAbs, ir.OpSqrt} {
		cols := [][]uint32{F16()}
		c := elementwise(fmt.Sprintf("%s.f16", op), ir.F16, ir.F16, cols, func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} })
		out = append(out, with(c, ir.F16, cols, func(a []uint32) uint32 { return unary[op](a[0]) }))
	}
	arith := map[ir.BinaryOp]func(a, b half.Float16) half.Float16{
		ir.OpAdd: half.Add, ir.OpSub: half.Sub, ir.OpMul: half.Mul, ir.OpDiv: half.Div,
	}
	for _, op := range []ir.BinaryOp{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpMin, ir.OpMax, ir.OpEq, ir.OpNe, ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe} {
		res := ir.F16
		f := func(a []uint32) uint32 { return f16MinMax(op == ir.OpMin, a[0], a[1]) }
		switch {
		case op.IsComparison():
			res = ir.Bool
			f = func(a []uint32) uint32 { return bit(f16Compare(op, a[0], a[1])) }
		case arith[op] != nil:
			f = func(a []uint32) uint32 { return uint32(arith[op](f16(a[0]), f16(a[1]))) }
		}
		cols := pairs(F16())
		c := elementwise(fmt.Sprintf("%s.f16", op), ir.F16, res, cols, func(x []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: x[0], Y: x[1]} })
		out = append(out, with(c, res, cols, f))
	}
	cols := pairs(F16())
	sel := elementwise("select.f16", ir.F16, ir.F16, cols, func(x []ir.Expr) ir.Expr { return ir.Select(ir.Lt(x[0], x[1]), x[0], x[1]) })
	out = append(out, with(sel, ir.F16, cols, func(a []uint32) uint32 {
		if f16Compare(ir.OpLt, a[0], a[1]) {
			return a[0]
		}
		return a[1]
	}))
	out = append(out, fma16())
	casts := []struct {
		from, to ir.Type
		xs       []uint32
		f        func(x uint32) uint32
	}{
		{ir.F32, ir.F16, F32Rounding(), func(x uint32) uint32 { return uint32(half.NewFloat16(math.Float32frombits(x))) }},
		{ir.F16, ir.F32, F16(), func(x uint32) uint32 { return math.Float32bits(f16(x).Float32()) }},
		{ir.F32, ir.BF16, F32Rounding(), func(x uint32) uint32 { return uint32(half.NewBFloat16(math.Float32frombits(x))) }},
		{ir.BF16, ir.F32, BF16(), func(x uint32) uint32 { return x << 16 }},
	}
	for _, c := range casts {
		cols := [][]uint32{c.xs}
		k := elementwise(fmt.Sprintf("cast.%s.%s", c.from, c.to), c.from, c.to, cols, func(x []ir.Expr) ir.Expr { return ir.Cast(c.to, x[0]) })
		out = append(out, with(k, c.to, cols, func(a []uint32) uint32 { return c.f(a[0]) }))
	}
	cols = pairs(BF16())
	bsel := elementwise("select.bf16", ir.BF16, ir.BF16, cols, func(x []ir.Expr) ir.Expr {
		return ir.Select(ir.Lt(ir.Cast(ir.F32, x[0]), ir.Cast(ir.F32, x[1])), x[0], x[1])
	})
	return append(out, with(bsel, ir.BF16, cols, func(a []uint32) uint32 {
		if half.BFloat16(a[0]).Float64() < half.BFloat16(a[1]).Float64() {
			return a[0]
		}
		return a[1]
	}))
}

// fma16 runs f16 fma over triples chosen to expose a separate rounding of the
// product, with infinities, NaN, zeros and subnormals.
func fma16() Case {
	var xs []uint32
	for _, v := range []float32{0, 1, -1, 0.1, 3, 0x1p-24, 1 + 0x1p-10, -(1 - 0x1p-11), 65504, 0x1p-14, 2049} {
		xs = append(xs, uint32(half.NewFloat16(v)))
	}
	xs = append(xs, 0x8000, 0x7C00, 0xFC00, 0x7E00)
	var a, b, c []uint32
	for _, x := range xs {
		for _, y := range xs {
			for _, z := range xs {
				a, b, c = append(a, x), append(b, y), append(c, z)
			}
		}
	}
	cols := [][]uint32{a, b, c}
	k := elementwise("fma.f16", ir.F16, ir.F16, cols, func(x []ir.Expr) ir.Expr { return ir.Fma(x[0], x[1], x[2]) })
	return with(k, ir.F16, cols, func(v []uint32) uint32 {
		return uint32(half.FMA(half.Float16(v[0]), half.Float16(v[1]), half.Float16(v[2])))
	})
}
