package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// The f16 table (IR v1.2; docs/design.md, "IR v1.2 semantics"): casts between
// f32 and f16/bf16, every f16 operator, a multiply then add that must not be
// contracted, and bf16 storage (moves, literals, selects, locals, shared
// arrays, odd element counts). Operands are f16's edge values: ±0, ±inf, NaNs
// with payloads and signs, the smallest and largest subnormals, the smallest
// normal, the largest finite value, ties, and values whose sums and products
// round, overflow or fall into the subnormals. A backend whose profile claims
// neither supports_f16 nor supports_bf16 may reject them (the cases are then
// skipped as not supported).

// h and bf are the f16 and bf16 bits of v, rounded to nearest even.
func h(v float64) uint32  { return uint32(half.Float16FromFloat64(v)) }
func bf(v float64) uint32 { return uint32(half.BFloat16FromFloat64(v)) }

// Bit patterns of f16 and bf16 edge values.
const (
	h16NaN     = 0x7E00
	h16NegNaN  = 0xFE00
	h16Inf     = 0x7C00
	h16NegInf  = 0xFC00
	h16NegZero = 0x8000
	h16Max     = 0x7BFF // 65504
	h16MinSub  = 0x0001 // 2^-24
	h16MaxSub  = 0x03FF
	h16MinNorm = 0x0400 // 2^-14
	bf16NaN    = 0x7FC0
	bf16Inf    = 0x7F80
	bf16NegInf = 0xFF80
)

var (
	// f16Edges are the values every f16 operator runs on.
	f16Edges = []uint32{0, h16NegZero, h(1), h(-1), h(0.5), h(1.5), h(-2.5), h(3), h(0.1), h(1 + 0x1p-10), h(1 - 0x1p-11),
		h(1000), h(2048), h(-2049), h(256), h(65504), h(-65504), h16MinSub, 0x8001, h16MaxSub, h16MinNorm, h(0x1p-11),
		h(3 * 0x1p-11), h(16), h16Inf, h16NegInf, h16NaN, 0x7C01, h16NegNaN}
	// f16Consts are the smaller set of the ".const" cases.
	f16Consts = []uint32{0, h16NegZero, h(1), h(-1.5), h(3), h(0.1), h(65504), h16MinSub, h16MinNorm, h16Inf, h16NegInf, h16NaN}
	// bf16Edges are the bf16 values the storage cases move.
	bf16Edges = []uint32{0, 0x8000, bf(1), bf(-2.5), bf(0.1), 0x7F7F, 0xFF7F, 0x0001, 0x0080, 0x007F, bf16Inf, bf16NegInf,
		bf16NaN, 0x7F81, 0xFFC1}
	// f32Rounding are f32 values at the edges of f16's and bf16's rounding:
	// ties, just above ties, overflow thresholds, subnormal results.
	f32Rounding = f32Bits(1+0x1p-11, 1+3*0x1p-11, 1+0x1p-11+0x1p-20, 65504, 65519, 65520, -65520, 1e10, 0x1p-24, 0x1p-25,
		3*0x1p-25, 0x1p-26, 0x1p-14, 0x1.ffcp-15, 0x1.ff8p-15, 1+0x1p-8, 1+3*0x1p-8, 1+0x1p-8+0x1p-20, 0x1p-133, 0x1p-134,
		0x1.fffffep127, 0x1.fdp127, 0x1.fep127, 0x1.ffp127, -0.1, 0.1, 1e-8)
)

// f16Cases is the f16 table.
func f16Cases() []semantic {
	var cases []opCase
	cases = append(cases, cast16Cases()...)
	cases = append(cases,
		unary16(ir.OpNeg, []uint32{0, h16NegZero}, []uint32{h(1.5), h(-1.5)}, []uint32{h16NaN, h16NegNaN}, []uint32{h16Inf, h16NegInf}),
		unary16(ir.OpAbs, []uint32{h16NegZero, 0}, []uint32{h16NegInf, h16Inf}, []uint32{h16NegNaN, h16NaN}, []uint32{0x8001, h16MinSub}),
		unary16(ir.OpSqrt, []uint32{h(4), h(2)}, []uint32{h(-1), h16NaN}, []uint32{h16Inf, h16Inf}, []uint32{h16NegZero, h16NegZero},
			[]uint32{h(2), 0x3DA8}, []uint32{h16MinSub, h(0x1p-12)}),
	)
	pins := binary16Pins()
	for _, op := range []ir.BinaryOp{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpMin, ir.OpMax, ir.OpEq, ir.OpNe, ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe} {
		out := ir.F16
		if op.IsComparison() {
			out = ir.Bool
		}
		cases = append(cases, opCase{name: fmt.Sprintf("%s.f16", op), in: ir.F16, out: out, fn: binaryFn(op),
			pinned: pins[op.String()], cols: pairs(f16Edges), consts: pairs(f16Consts)})
	}
	triples := triplesOf(h(0), h(1), h(-1), h(1+0x1p-10), h(1-0x1p-10), h(0.1), h(3), h(65504), h16MinSub, h16MinNorm, h16Inf, h16NegZero)
	cases = append(cases,
		opCase{name: "fma.f16", in: ir.F16, out: ir.F16, fn: func(a []ir.Expr) ir.Expr { return ir.Fma(a[0], a[1], a[2]) },
			pinned: [][]uint32{{h(2), h(3), h(1), h(7)}, {h(1 + 0x1p-10), h(1 - 0x1p-10), h(-1), 0x8010}},
			cols:   triples, consts: triplesOf(h(1+0x1p-10), h(1-0x1p-10), h(-1), h(3))},
		// a·b + c is two roundings, never one: a backend that contracts it
		// (or keeps the product in f32) gives -2^-20 on the second row.
		opCase{name: "muladd.f16", in: ir.F16, out: ir.F16, fn: func(a []ir.Expr) ir.Expr { return ir.Add(ir.Mul(a[0], a[1]), a[2]) },
			pinned: [][]uint32{{h(2), h(3), h(1), h(7)}, {h(1 + 0x1p-10), h(1 - 0x1p-10), h(-1), 0}, {h(0.1), h(3), h(-0.3), mulAdd16(h(0.1), h(3), h(-0.3))}},
			cols:   triples, consts: triplesOf(h(1+0x1p-10), h(1-0x1p-10), h(-1), h(0.1))},
		opCase{name: "select.f16", in: ir.F16, out: ir.F16, fn: func(x []ir.Expr) ir.Expr { return ir.Select(ir.Lt(x[0], x[1]), x[0], x[1]) },
			pinned: [][]uint32{{h16NegZero, 0, 0}, {0, h16NegZero, h16NegZero}, {h(-1), h16NaN, h16NaN}},
			cols:   pairs(f16Edges), consts: pairs(f16Consts)},
	)
	var out []semantic
	for _, c := range cases {
		out = append(out, c.semantics()...)
	}
	return append(out, bf16Storage()...)
}

// unary16 applies op to every f16 edge value.
func unary16(op ir.UnaryOp, pinned ...[]uint32) opCase {
	return opCase{name: fmt.Sprintf("%s.f16", op), in: ir.F16, out: ir.F16, fn: unaryFn(op), pinned: pinned,
		cols: [][]uint32{f16Edges}, consts: [][]uint32{f16Consts}}
}

// triplesOf returns every (x, y, z) of xs³ as three columns.
func triplesOf(xs ...uint32) [][]uint32 {
	var a, b, c []uint32
	for _, x := range xs {
		for _, y := range xs {
			for _, z := range xs {
				a, b, c = append(a, x), append(b, y), append(c, z)
			}
		}
	}
	return [][]uint32{a, b, c}
}

// cast16Cases are the casts between f32 and the 16-bit types, both ways, on
// loaded and literal operands.
func cast16Cases() []opCase {
	f32In := append(append([]uint32{}, f32Edges...), f32Rounding...)
	f32Consts16 := append(append([]uint32{}, f32Consts...), f32Bits(1+0x1p-11, 65520, 0x1p-25, 1+0x1p-8, 0x1p-133)...)
	castTo := func(t ir.Type) func([]ir.Expr) ir.Expr { return func(x []ir.Expr) ir.Expr { return ir.Cast(t, x[0]) } }
	return []opCase{
		{name: "cast.f32.f16", in: ir.F32, out: ir.F16, fn: castTo(ir.F16), cols: [][]uint32{f32In}, consts: [][]uint32{f32Consts16},
			pinned: [][]uint32{{f(1), h(1)}, {f(65504), h16Max}, {f(65519), h16Max}, {f(65520), h16Inf}, {f(-65520), h16NegInf},
				{f(1 + 0x1p-11), h(1)}, {f(1 + 3*0x1p-11), h(1 + 0x1p-9)}, {f(1 + 0x1p-11 + 0x1p-20), h(1 + 0x1p-10)},
				{f(0x1p-24), h16MinSub}, {f(0x1p-25), 0}, {f(3 * 0x1p-25), 0x0002}, {f(0x1p-26), 0}, {f(-0x1p-26), h16NegZero},
				{f(0x1p-14), h16MinNorm}, {f(0x1.ffcp-15), h16MinNorm}, {f(0x1.ff8p-15), h16MaxSub}, {negZero, h16NegZero}, {nanBits, h16NaN},
				{infBits, h16Inf}, {f(0.1), 0x2E66}, {f(1e10), h16Inf}}},
		{name: "cast.f32.bf16", in: ir.F32, out: ir.BF16, fn: castTo(ir.BF16), cols: [][]uint32{f32In}, consts: [][]uint32{f32Consts16},
			pinned: [][]uint32{{f(1), 0x3F80}, {f(1 + 0x1p-8), 0x3F80}, {f(1 + 3*0x1p-8), 0x3F82}, {f(1 + 0x1p-8 + 0x1p-20), 0x3F81},
				{maxF32Bits, bf16Inf}, {f(0x1.fdp127), 0x7F7E}, {f(0x1.fep127), 0x7F7F}, {f(0x1.ffp127), bf16Inf}, {f(0x1p-133), 0x0001},
				{f(0x1p-134), 0}, {negZero, 0x8000}, {negNaNBits, 0xFFC0}, {negInfBits, bf16NegInf}, {f(0.1), 0x3DCD}}},
		{name: "cast.f16.f32", in: ir.F16, out: ir.F32, fn: castTo(ir.F32), cols: [][]uint32{f16Edges}, consts: [][]uint32{f16Consts},
			pinned: [][]uint32{{h16MinSub, f(0x1p-24)}, {h16Max, f(65504)}, {h16NegInf, negInfBits}, {h16NegZero, negZero},
				{0x3555, f(0.333251953125)}, {h16MaxSub, f(1023 * 0x1p-24)}, {h16NaN, nanBits}}},
		{name: "cast.bf16.f32", in: ir.BF16, out: ir.F32, fn: castTo(ir.F32), cols: [][]uint32{bf16Edges}, consts: [][]uint32{bf16Edges},
			pinned: [][]uint32{{0x0001, 0x00010000}, {bf16NegInf, negInfBits}, {0x3F80, f(1)}, {0x8000, negZero}, {0x7F7F, 0x7F7F0000}}},
	}
}

// binary16Pins are docs/design.md's values for f16 binary operators, by
// operator.
func binary16Pins() map[string][][]uint32 {
	return map[string][][]uint32{
		"add": {{h(65504), h(16), h16Inf}, {h(1), h(0x1p-11), h(1)}, {h(1), h(3 * 0x1p-11), h(1 + 0x1p-9)},
			{h16Inf, h16NegInf, h16NaN}, {h16NegZero, h16NegZero, h16NegZero}, {0, h16NegZero, 0},
			{h16MinSub, h16MinSub, 0x0002}, {h(0.1), h(0.2), h(float64(half.Float16FromFloat64(0.1).Float32()) + float64(half.Float16FromFloat64(0.2).Float32()))}},
		"sub": {{h(1), h(1), 0}, {h16NegZero, 0, h16NegZero}, {h16MinNorm, h16MinSub, h16MaxSub}},
		"mul": {{h16MinNorm, h(0x1p-10), h16MinSub}, {h16MinSub, h(0.5), 0}, {h(256), h(256), h16Inf}, {h16NegZero, h(5), h16NegZero},
			{h16Inf, 0, h16NaN}, {h(3), h(0.1), h(3 * float64(half.Float16FromFloat64(0.1).Float32()))}},
		"div": {{h(1), 0, h16Inf}, {h(-1), 0, h16NegInf}, {h(1), h16NegZero, h16NegInf}, {0, 0, h16NaN}, {h(6), h(3), h(2)},
			{h(1), h(3), 0x3555}, {h(5), h16Inf, 0}, {h16MinSub, h(2), 0}},
		"min": {{h16NaN, h(1), h(1)}, {h(1), h16NaN, h(1)}, {h16NegZero, 0, h16NegZero}, {0, h16NegZero, h16NegZero},
			{h16Inf, h16NegInf, h16NegInf}, {h(-1), h(2), h(-1)}},
		"max": {{h16NaN, h(1), h(1)}, {h(1), h16NaN, h(1)}, {h16NegZero, 0, 0}, {0, h16NegZero, 0}, {h16Inf, h16NegInf, h16Inf}},
		"lt":  {{h16NaN, h(1), 0}, {h(1), h16NaN, 0}, {h(-1), h(1), 1}, {h16NegZero, 0, 0}},
		"le":  {{h16NaN, h16NaN, 0}, {h16NegZero, 0, 1}},
		"gt":  {{h16NaN, h(1), 0}, {h(2), h(1), 1}},
		"ge":  {{h(1), h16NaN, 0}, {h(1), h(1), 1}},
		"eq":  {{h16NaN, h16NaN, 0}, {h16NegZero, 0, 1}, {h(1), h(1), 1}},
		"ne":  {{h16NaN, h16NaN, 1}, {h16NegZero, 0, 0}, {h(1), h(2), 1}},
	}
}

// bf16Storage are the bf16 storage cases and the 16-bit memory cases: moves
// keep every bit (NaN payloads, -0, subnormals), literals, selects, locals,
// shared arrays across a barrier, and buffers of an odd element count.
func bf16Storage() []semantic {
	var out []semantic
	for _, t := range []ir.Type{ir.BF16, ir.F16} {
		edges := bf16Edges
		if t == ir.F16 {
			edges = f16Edges
		}
		// move: out[i] = in[i] through a var, and out[n+i] = a literal of the
		// same bits, and select by a u32 flag column.
		n := uint32(len(edges))
		b := ir.NewBuilder("kiln.semantics.move."+t.String(), 64, 1, 1)
		in := b.Buffer("in", t, ir.Read)
		flags := b.Buffer("flags", ir.U32, ir.Read)
		o := b.Buffer("out", t, ir.Write)
		gid := b.Let("gid", ir.GlobalID(0))
		b.If(ir.Lt(gid, ir.LitU32(n)), func(then *ir.Block) {
			then.Var("v", t, ir.Literal{Type: t})
			then.Assign("v", ir.Load(in, gid))
			then.Store(o, gid, ir.Local("v"))
			then.Store(o, ir.Add(gid, ir.LitU32(2*n)), ir.Select(ir.Ne(ir.Load(flags, gid), ir.LitU32(0)), ir.Load(in, gid), ir.Literal{Type: t, Bits: edges[0]}))
		})
		for i, e := range edges {
			b.If(ir.Eq(gid, ir.LitU32(0)), func(then *ir.Block) {
				then.Store(o, ir.LitU32(n+uint32(i)), ir.Literal{Type: t, Bits: e})
			})
		}
		flagCol := make([]uint32, n)
		for i := range flagCol {
			flagCol[i] = uint32(i % 2)
		}
		pins := append(append([]uint32{}, edges...), edges...)
		out = append(out, semantic{
			name: "move." + t.String(), prog: b.Program(), pinned: [][]uint32{pins},
			c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(t, edges), words(flagCol), nil},
				OutputCounts: []uint32{0, 0, 3 * n}}},
		})
		out = append(out, sharedMirror(t, edges))
	}
	return append(out, oddCount())
}

// sharedMirror stores a workgroup's 16-bit values into a shared array, and
// after a barrier each invocation reads its mirror's: 2-byte elements of a
// shared array must not overlap their neighbours.
func sharedMirror(t ir.Type, edges []uint32) semantic {
	const wg = 64
	vals := make([]uint32, wg)
	for i := range vals {
		vals[i] = edges[i%len(edges)]
	}
	b, in, o := inOut("kiln.semantics.shared_reverse."+t.String(), wg, t, t)
	sh := b.Shared("tile", t, wg)
	lid := b.Let("lid", ir.LocalID(0))
	b.Store(sh, lid, ir.Load(in, lid))
	b.Barrier()
	b.Store(o, lid, ir.Load(sh, ir.Sub(ir.LitU32(wg-1), lid)))
	rev := make([]uint32, wg)
	for i := range rev {
		rev[i] = vals[wg-1-i]
	}
	return semantic{
		name: "shared_reverse." + t.String(), prog: b.Program(), pinned: [][]uint32{rev},
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(t, vals), nil}, OutputCounts: []uint32{0, wg}}},
	}
}

// oddCount copies an f16 buffer of 7 elements (14 bytes) into a write buffer
// of 7, reading one past the end (0) into an eighth slot of a second output:
// `len` counts 2-byte elements and bounds hold at an odd count.
func oddCount() semantic {
	b, in, o := inOut("kiln.semantics.odd_count.f16", 8, ir.F16, ir.F16)
	n := b.Buffer("n", ir.U32, ir.Write)
	gid := b.Let("gid", ir.GlobalID(0))
	b.Store(o, gid, ir.Add(ir.Load(in, gid), ir.LitF16(1)))
	b.If(ir.Eq(gid, ir.LitU32(0)), func(then *ir.Block) {
		then.Store(n, ir.LitU32(0), ir.Len(in))
		then.Store(n, ir.LitU32(1), ir.Len(o))
		then.Store(n, ir.LitU32(2), ir.Cast(ir.U32, ir.Cast(ir.F32, ir.Load(in, ir.LitU32(7)))))
	})
	vals := []uint32{h(1), h(2), h(3), h(-1), h(0.5), h(65504), h(-4)}
	want := []uint32{h(2), h(3), h(4), 0, h(1.5), h16Max, h(-3)}
	return semantic{
		name: "odd_count.f16", prog: b.Program(), pinned: [][]uint32{want, {7, 7, 0}},
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(ir.F16, vals), nil, nil},
			OutputCounts: []uint32{0, 7, 3}}},
	}
}

// mulAdd16 is a·b + c in f16 with two roundings.
func mulAdd16(a, b, c uint32) uint32 {
	return uint32(half.Add(half.Mul(half.Float16(a), half.Float16(b)), half.Float16(c)))
}
