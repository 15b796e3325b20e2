package edgetest

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// Edge values by type, as bit patterns.

// F32 returns the f32 edge values: zeros of both signs, small integers and
// halves (rounding ties), values at the limits of i32 and u32 conversions, the
// largest finite values, the smallest normal and denormals, arguments near the
// ends of exp's range and large enough for sin and cos to need argument
// reduction, infinities and NaNs with and without a payload and sign.
func F32() []uint32 {
	vs := []float32{0, negZero(), 1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3, 0.1, -7.9, 100.5, 123456.79,
		16777216, 16777217, 2147483520, 2147483648, -2147483648, -2147483904, 4294967040, 4294967296,
		math.MaxFloat32, -math.MaxFloat32, 0x1p-126, -0x1p-126, math.SmallestNonzeroFloat32, 0x1.fffffcp-127,
		-0x1p-140, 1e-10, 3.1415927, -3.1415927, 6.2831855, 10, 88.7, -104, 1000.25, -9999.5, 3e7,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = math.Float32bits(v)
	}
	return append(out, 0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7F800001)
}

// I32 returns the i32 edge values: small values of both signs, shift amounts
// around 32, the extremes, and bit patterns.
func I32() []uint32 {
	vs := []int32{0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, 64, -32, math.MaxInt32, math.MinInt32, math.MinInt32 + 1,
		0x55555555, -123456789, 1 << 24, 1<<24 + 1}
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = uint32(v)
	}
	return out
}

// U32 returns the u32 edge values.
func U32() []uint32 {
	return []uint32{0, 1, 2, 3, 7, 31, 32, 33, 64, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF,
		123456789, 0xDEADBEEF, 1 << 24, 1<<24 + 1, 0xFFFFFF7F, 0xFFFFFF80}
}

func negZero() float32 { return float32(math.Copysign(0, -1)) }

func edges(t ir.Type) []uint32 {
	switch t {
	case ir.F32:
		return F32()
	case ir.I32:
		return I32()
	}
	return U32()
}

// Words encodes ws as little-endian bytes.
func Words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// Encode encodes ws as little-endian elements of type t: 2 bytes each for f16
// and bf16, 4 for the others.
func Encode(t ir.Type, ws []uint32) []byte {
	if !t.Is16Bit() {
		return Words(ws)
	}
	out := make([]byte, 2*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(w))
	}
	return out
}

// elementwise builds out[i] = f(in0[i], in1[i], ...) over the columns cols, with
// operands of type in and a result of type out (a bool result is stored as u32).
func elementwise(name string, in, out ir.Type, cols [][]uint32, f func(args []ir.Expr) ir.Expr) Case {
	b := ir.NewBuilder("edge."+name, 64, 1, 1)
	var bufs []string
	for k := range cols {
		bufs = append(bufs, b.Buffer(fmt.Sprintf("in%d", k), in, ir.Read))
	}
	store := out
	if out == ir.Bool {
		store = ir.U32
	}
	res := b.Buffer("out", store, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(res)), func(then *ir.Block) {
		var args []ir.Expr
		for _, buf := range bufs {
			args = append(args, ir.Load(buf, i))
		}
		v := f(args)
		if out == ir.Bool {
			v = ir.Cast(ir.U32, v)
		}
		then.Store(res, i, v)
	})
	n := uint32(len(cols[0]))
	c := Case{Name: name, Prog: b.MustBuild(), Launch: kernels.Case{Grid: [3]uint32{(n + 63) / 64, 1, 1}}}
	for _, col := range cols {
		c.Launch.Inputs = append(c.Launch.Inputs, Encode(in, col))
	}
	c.Launch.Inputs = append(c.Launch.Inputs, nil)
	c.Launch.OutputCounts = make([]uint32, len(cols)+1)
	c.Launch.OutputCounts[len(cols)] = n
	return c
}

// pairs returns every (x, y) of xs × xs as two columns.
func pairs(xs []uint32) [][]uint32 {
	var a, b []uint32
	for _, x := range xs {
		for _, y := range xs {
			a, b = append(a, x), append(b, y)
		}
	}
	return [][]uint32{a, b}
}

// Table returns the whole edge table: ValueCases, SubgroupCases, HalfCases,
// MatrixCases and 8 random matrix scripts (RandomMatrixCases).
func Table() []Case {
	out := append(append(ValueCases(), SubgroupCases()...), HalfCases()...)
	return append(append(out, MatrixCases()...), RandomMatrixCases(1, 8)...)
}

// ValueCases applies every unary and binary operator to every type it accepts
// (binary ones to every pair of edge values), select, fma over triples, and every
// cast, elementwise.
func ValueCases() []Case {
	var out []Case
	arith := []ir.Type{ir.I32, ir.U32, ir.F32}
	ints := []ir.Type{ir.I32, ir.U32}
	unary := map[ir.UnaryOp][]ir.Type{
		ir.OpNeg: arith, ir.OpNot: ints, ir.OpAbs: {ir.I32, ir.F32}, ir.OpSqrt: {ir.F32}, ir.OpExp: {ir.F32},
		ir.OpLog: {ir.F32}, ir.OpSin: {ir.F32}, ir.OpCos: {ir.F32}, ir.OpFloor: {ir.F32}, ir.OpCeil: {ir.F32},
		ir.OpTrunc: {ir.F32}, ir.OpRound: {ir.F32}, ir.OpClz: ints, ir.OpPopcount: ints,
	}
	for _, op := range ir.UnaryOps() {
		for _, t := range unary[op] {
			xs := edges(t)
			c := elementwise(fmt.Sprintf("%s.%s", op, t), t, t, [][]uint32{xs}, func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} })
			c.Match = transcendental(op, xs)
			out = append(out, c)
		}
	}
	out = append(out, elementwise("not.bool", ir.I32, ir.Bool, [][]uint32{I32()}, func(a []ir.Expr) ir.Expr {
		return ir.Not(ir.Lt(a[0], ir.LitI32(0)))
	}))
	binary := map[ir.BinaryOp][]ir.Type{
		ir.OpAdd: arith, ir.OpSub: arith, ir.OpMul: arith, ir.OpDiv: arith, ir.OpMin: arith, ir.OpMax: arith,
		ir.OpRem: ints, ir.OpAnd: ints, ir.OpOr: ints, ir.OpXor: ints, ir.OpShl: ints, ir.OpShr: ints,
		ir.OpEq: arith, ir.OpNe: arith, ir.OpLt: arith, ir.OpLe: arith, ir.OpGt: arith, ir.OpGe: arith,
	}
	for _, op := range ir.BinaryOps() {
		for _, t := range binary[op] {
			res := t
			if op.IsComparison() {
				res = ir.Bool
			}
			out = append(out, elementwise(fmt.Sprintf("%s.%s", op, t), t, res, pairs(edges(t)), func(x []ir.Expr) ir.Expr {
				return ir.BinaryExpr{Op: op, X: x[0], Y: x[1]}
			}))
		}
	}
	for _, op := range []ir.BinaryOp{ir.OpEq, ir.OpNe, ir.OpLAnd, ir.OpLOr} {
		out = append(out, elementwise(fmt.Sprintf("%s.bool", op), ir.U32, ir.Bool, pairs([]uint32{0, 1}), func(x []ir.Expr) ir.Expr {
			return ir.BinaryExpr{Op: op, X: ir.Cast(ir.Bool, x[0]), Y: ir.Cast(ir.Bool, x[1])}
		}))
	}
	for _, t := range arith {
		out = append(out, elementwise(fmt.Sprintf("select.%s", t), t, t, pairs(edges(t)), func(x []ir.Expr) ir.Expr {
			return ir.Select(ir.Lt(x[0], x[1]), x[0], x[1])
		}))
	}
	out = append(out, elementwise("select.bool", ir.U32, ir.Bool, [][]uint32{{0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 1, 1, 0, 0, 1, 1}, {0, 1, 0, 1, 0, 1, 0, 1}},
		func(x []ir.Expr) ir.Expr {
			return ir.Select(ir.Cast(ir.Bool, x[0]), ir.Cast(ir.Bool, x[1]), ir.Cast(ir.Bool, x[2]))
		}))
	for _, from := range arith {
		for _, to := range []ir.Type{ir.I32, ir.U32, ir.F32, ir.Bool} {
			if from == ir.F32 && to == ir.Bool {
				continue
			}
			out = append(out, elementwise(fmt.Sprintf("cast.%s.%s", from, to), from, to, [][]uint32{edges(from)}, func(x []ir.Expr) ir.Expr {
				return ir.Cast(to, x[0])
			}))
		}
	}
	for _, to := range []ir.Type{ir.I32, ir.U32, ir.Bool} {
		out = append(out, elementwise(fmt.Sprintf("cast.bool.%s", to), ir.I32, to, [][]uint32{I32()}, func(x []ir.Expr) ir.Expr {
			return ir.Cast(to, ir.Ge(x[0], ir.LitI32(0)))
		}))
	}
	for _, from := range arith {
		for _, to := range arith {
			if from != to {
				out = append(out, elementwise(fmt.Sprintf("bitcast.%s.%s", from, to), from, to, [][]uint32{edges(from)}, func(x []ir.Expr) ir.Expr {
					return ir.Bitcast(to, x[0])
				}))
			}
		}
	}
	return append(out, fma())
}

// fma runs fma over triples of f32 values chosen to expose a separate rounding of
// the product (and to meet infinities, NaN, zeros and denormals).
func fma() Case {
	vs := []float32{0, negZero(), 1, -1, 0.1, 3, 1e-10, 16777217, 0x1.000002p0, -0x1.fffffep-1, math.MaxFloat32, 0x1p-126,
		0x1p-140, float32(math.Inf(1)), float32(math.Inf(-1))}
	xs := make([]uint32, len(vs))
	for i, v := range vs {
		xs[i] = math.Float32bits(v)
	}
	xs = append(xs, 0x7FC00000)
	var a, b, c []uint32
	for _, x := range xs {
		for _, y := range xs {
			for _, z := range xs {
				a, b, c = append(a, x), append(b, y), append(c, z)
			}
		}
	}
	return elementwise("fma.f32", ir.F32, ir.F32, [][]uint32{a, b, c}, func(x []ir.Expr) ir.Expr { return ir.Fma(x[0], x[1], x[2]) })
}
