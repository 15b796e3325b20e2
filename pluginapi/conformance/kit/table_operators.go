package kit

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// The operator and cast tables apply one operation to columns of edge values: NaN
// (with payloads and signs), ±0, ±inf, denormals, the f32 integers around 2^24,
// 2^31 and 2^32, i32 MIN and MAX, -1, shift amounts of 31, 32, 33 and 64. Each
// operation runs twice: on operands loaded from buffers, and on literal operands
// (the ".const" cases), which GPU compilers fold at compile time with their own
// arithmetic. Rows with a stated result pin docs/design.md's values.

// Bit patterns of f32 edge values.
const (
	nanBits    = 0x7FC00000
	negNaNBits = 0xFFC00000
	negZero    = 0x80000000
	infBits    = 0x7F800000
	negInfBits = 0xFF800000
	maxF32Bits = 0x7F7FFFFF
	minI32Bits = 0x80000000
	maxI32Bits = 0x7FFFFFFF
)

func f(v float32) uint32 { return math.Float32bits(v) }
func i(v int32) uint32   { return uint32(v) }

func f32Bits(vs ...float32) []uint32 {
	out := make([]uint32, len(vs))
	for k, v := range vs {
		out[k] = f(v)
	}
	return out
}

func i32Bits(vs ...int32) []uint32 {
	out := make([]uint32, len(vs))
	for k, v := range vs {
		out[k] = i(v)
	}
	return out
}

var (
	inf = float32(math.Inf(1))

	// f32Edges are the f32 values every f32 operation runs on.
	f32Edges = append(f32Bits(0, 1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3, 0.1, -7.9, 100.5,
		123456.79, 16777216, 16777217, 2147483520, 2147483648, 4294967040, 4294967296, -2147483648, -2147483904,
		math.MaxFloat32, -math.MaxFloat32, 0x1p-126, math.SmallestNonzeroFloat32, 0x1.fffffcp-127, -0x1p-140,
		1e-10, 3.1415927, -3.1415927, 10, 88.7, -104, inf, -inf), negZero, nanBits, 0x7FC00001, negNaNBits)
	i32Edges = i32Bits(0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, 64, -32, math.MaxInt32, math.MinInt32, math.MinInt32+1, 0x55555555, -123456789)
	u32Edges = []uint32{0, 1, 2, 3, 7, 31, 32, 33, 64, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF, 123456789, 0xDEADBEEF}

	// The smaller sets the ".const" cases pair up.
	f32Consts = append(f32Bits(0, 1, -1.5, 3, 0.1, 16777217, math.MaxFloat32, 0x1p-140, inf, -inf), negZero, nanBits)
	i32Consts = i32Bits(0, 1, -1, 7, -7, 31, 33, math.MaxInt32, math.MinInt32)
	u32Consts = []uint32{0, 1, 7, 31, 33, 0x80000000, 0xFFFFFFFF}
	boolVals  = []uint32{0, 1}
)

// edgesOf and constsOf are the edge values and the literal constants of a
// 32-bit type or bool.
func edgesOf(t ir.Type) []uint32  { return of32(t, f32Edges, i32Edges, u32Edges) }
func constsOf(t ir.Type) []uint32 { return of32(t, f32Consts, i32Consts, u32Consts) }

// of32 is f, i or u for f32, i32 or u32, and the booleans for any other t.
func of32(t ir.Type, f, i, u []uint32) []uint32 {
	switch t {
	case ir.F32:
		return f
	case ir.I32:
		return i
	case ir.U32:
		return u
	}
	return boolVals
}

// inPiRange keeps the f32 edges where Vulkan bounds sin and cos: [-π, π], NaN
// and the infinities.
func inPiRange(xs []uint32) []uint32 {
	var out []uint32
	for _, x := range xs {
		v := math.Float32frombits(x)
		if math.Abs(float64(v)) <= math.Pi || math.IsInf(float64(v), 0) || v != v {
			out = append(out, x)
		}
	}
	return out
}

// noPositiveDenormals drops positive denormals: log of one is -87 to -104 or,
// flushed, -inf; implementations in between (lavapipe takes them as 2^-127) are
// outside any rule, so the table does not ask.
func noPositiveDenormals(xs []uint32) []uint32 {
	var out []uint32
	for _, x := range xs {
		if x == 0 || x&0xFF800000 != 0 {
			out = append(out, x)
		}
	}
	return out
}

// opCase is an operation applied row by row to operands of type in, giving a
// result of type out.
type opCase struct {
	name    string
	in, out ir.Type
	fn      func(args []ir.Expr) ir.Expr
	// pinned rows: the operands, then the result docs/design.md gives.
	pinned [][]uint32
	// cols are more operand columns, checked against the CPU reference only;
	// consts the columns of the ".const" case.
	cols, consts [][]uint32
}

// storage is the buffer element type that carries a value of type t.
func storage(t ir.Type) ir.Type {
	if t == ir.Bool {
		return ir.U32
	}
	return t
}

// rows returns the operand columns: the pinned rows' operands, then extra.
func (c opCase) rows(extra [][]uint32) [][]uint32 {
	arity := len(extra)
	if len(c.pinned) > 0 {
		arity = len(c.pinned[0]) - 1
	}
	cols := make([][]uint32, arity)
	for _, row := range c.pinned {
		for k := range arity {
			cols[k] = append(cols[k], row[k])
		}
	}
	for k := range extra {
		cols[k] = append(cols[k], extra[k]...)
	}
	return cols
}

// pins returns the pinned results as the pins of the one output.
func (c opCase) pins() [][]uint32 {
	if len(c.pinned) == 0 {
		return nil
	}
	var out []uint32
	for _, row := range c.pinned {
		out = append(out, row[len(row)-1])
	}
	return [][]uint32{out}
}

// semantics returns the case on loaded operands and the case on literals.
func (c opCase) semantics() []semantic {
	return []semantic{c.loaded(), c.literal()}
}

// loaded builds out[i] = fn(in0[i], in1[i], ...).
func (c opCase) loaded() semantic {
	cols := c.rows(c.cols)
	n := uint32(len(cols[0]))
	b := ir.NewBuilder("kiln.semantics."+c.name, 64, 1, 1)
	gid := b.Let("gid", ir.GlobalID(0))
	var args []ir.Expr
	var inputs [][]byte
	for k, col := range cols {
		buf := b.Buffer(fmt.Sprintf("in%d", k), storage(c.in), ir.Read)
		var x ir.Expr = ir.Load(buf, gid)
		if c.in == ir.Bool {
			x = ir.Cast(ir.Bool, x)
		}
		args = append(args, x)
		inputs = append(inputs, encode(storage(c.in), col))
	}
	out := b.Buffer("out", storage(c.out), ir.Write)
	b.If(ir.Lt(gid, ir.Len(out)), func(then *ir.Block) { then.Store(out, gid, c.result(args)) })
	counts := make([]uint32, len(cols)+1)
	counts[len(cols)] = n
	return semantic{
		name: c.name, prog: b.Program(), pinned: c.pins(),
		c: launch{Case: kernels.Case{Grid: [3]uint32{(n + 63) / 64, 1, 1}, Inputs: append(inputs, nil), OutputCounts: counts}},
	}
}

// literal builds out[i] = fn(literal operands of row i), one store per row.
func (c opCase) literal() semantic {
	cols := c.rows(c.consts)
	n := len(cols[0])
	b := ir.NewBuilder("kiln.semantics."+c.name+".const", 1, 1, 1)
	out := b.Buffer("out", storage(c.out), ir.Write)
	for row := range n {
		var args []ir.Expr
		for _, col := range cols {
			args = append(args, ir.Literal{Type: c.in, Bits: col[row]})
		}
		b.Store(out, ir.LitU32(uint32(row)), c.result(args))
	}
	return semantic{
		name: c.name + ".const", prog: b.Program(), pinned: c.pins(),
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil}, OutputCounts: []uint32{uint32(n)}}},
	}
}

// result applies fn, storing a bool as u32.
func (c opCase) result(args []ir.Expr) ir.Expr {
	v := c.fn(args)
	if c.out == ir.Bool {
		v = ir.Cast(ir.U32, v)
	}
	return v
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

func unaryFn(op ir.UnaryOp) func([]ir.Expr) ir.Expr {
	return func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} }
}

func binaryFn(op ir.BinaryOp) func([]ir.Expr) ir.Expr {
	return func(a []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: a[0], Y: a[1]} }
}

// unaryCase applies op to every edge value of t (or to xs when set).
func unaryCase(op ir.UnaryOp, t ir.Type, xs []uint32, pinned ...[]uint32) opCase {
	if xs == nil {
		xs = edgesOf(t)
	}
	consts := constsOf(t)
	switch op {
	case ir.OpSin, ir.OpCos:
		consts = inPiRange(consts)
	case ir.OpLog:
		consts = noPositiveDenormals(consts)
	}
	return opCase{name: fmt.Sprintf("%s.%s", op, t), in: t, out: t, fn: unaryFn(op), pinned: pinned,
		cols: [][]uint32{xs}, consts: [][]uint32{consts}}
}

// binaryCase applies op to every pair of edge values of t.
func binaryCase(op ir.BinaryOp, t ir.Type, pinned ...[]uint32) opCase {
	out := t
	if op.IsComparison() || op == ir.OpLAnd || op == ir.OpLOr {
		out = ir.Bool
	}
	return opCase{name: fmt.Sprintf("%s.%s", op, t), in: t, out: out, fn: binaryFn(op), pinned: pinned,
		cols: pairs(edgesOf(t)), consts: pairs(constsOf(t))}
}

// operatorCases is the operator table: every unary and binary operator on every
// type it takes, fma and select.
func operatorCases() []semantic {
	var cases []opCase
	cases = append(cases, unaryCases()...)
	cases = append(cases, binaryCases()...)
	cases = append(cases, fmaCase())
	cases = append(cases, selectCases()...)
	var out []semantic
	for _, c := range cases {
		out = append(out, c.semantics()...)
	}
	return out
}

func unaryCases() []opCase {
	return []opCase{
		unaryCase(ir.OpNeg, ir.I32, nil, []uint32{minI32Bits, minI32Bits}, []uint32{5, i(-5)}, []uint32{0, 0}),
		unaryCase(ir.OpNeg, ir.U32, nil, []uint32{1, 0xFFFFFFFF}),
		unaryCase(ir.OpNeg, ir.F32, nil, []uint32{0, negZero}, []uint32{negZero, 0}, []uint32{f(1.5), f(-1.5)},
			[]uint32{infBits, negInfBits}, []uint32{nanBits, negNaNBits}),
		unaryCase(ir.OpNot, ir.I32, nil, []uint32{0, i(-1)}),
		unaryCase(ir.OpNot, ir.U32, nil, []uint32{0, 0xFFFFFFFF}, []uint32{0xF0F0F0F0, 0x0F0F0F0F}),
		unaryCase(ir.OpNot, ir.Bool, nil, []uint32{0, 1}, []uint32{1, 0}),
		unaryCase(ir.OpAbs, ir.I32, nil, []uint32{minI32Bits, minI32Bits}, []uint32{i(-5), 5}, []uint32{5, 5}),
		unaryCase(ir.OpAbs, ir.F32, nil, []uint32{negZero, 0}, []uint32{negInfBits, infBits}, []uint32{f(-1.5), f(1.5)},
			[]uint32{negNaNBits, nanBits}),
		unaryCase(ir.OpSqrt, ir.F32, nil, []uint32{f(4), f(2)}, []uint32{f(-1), nanBits}, []uint32{infBits, infBits},
			[]uint32{negZero, negZero}),
		unaryCase(ir.OpExp, ir.F32, nil, []uint32{0, f(1)}, []uint32{negInfBits, 0}, []uint32{infBits, infBits}),
		unaryCase(ir.OpLog, ir.F32, noPositiveDenormals(f32Edges), []uint32{f(1), 0}, []uint32{0, negInfBits},
			[]uint32{f(-1), nanBits}, []uint32{infBits, infBits}),
		unaryCase(ir.OpSin, ir.F32, inPiRange(f32Edges), []uint32{0, 0}, []uint32{negZero, negZero}),
		unaryCase(ir.OpCos, ir.F32, inPiRange(f32Edges), []uint32{0, f(1)}),
		unaryCase(ir.OpFloor, ir.F32, nil, []uint32{f(-1.5), f(-2)}, []uint32{f(1.5), f(1)}, []uint32{negZero, negZero},
			[]uint32{f(-0.5), f(-1)}, []uint32{infBits, infBits}),
		unaryCase(ir.OpCeil, ir.F32, nil, []uint32{f(-1.5), f(-1)}, []uint32{f(1.5), f(2)}, []uint32{f(-0.5), negZero}),
		unaryCase(ir.OpTrunc, ir.F32, nil, []uint32{f(-1.5), f(-1)}, []uint32{f(1.9), f(1)}, []uint32{f(-0.5), negZero},
			[]uint32{f(0.5), 0}, []uint32{infBits, infBits}, []uint32{negZero, negZero}, []uint32{nanBits, nanBits},
			[]uint32{f(4194304.5), f(4194304)}),
		unaryCase(ir.OpRound, ir.F32, append(f32Edges, f32Bits(3.5, -3.5, 4.5, 0.49999997, 8388609, 4194304.5)...),
			[]uint32{f(0.5), 0}, []uint32{f(1.5), f(2)}, []uint32{f(2.5), f(2)}, []uint32{f(-0.5), negZero},
			[]uint32{f(-1.5), f(-2)}, []uint32{f(-2.5), f(-2)}, []uint32{f(0.49999997), 0}, []uint32{f(8388609), f(8388609)},
			[]uint32{f(3.5), f(4)}, []uint32{f(4194304.5), f(4194304)}, []uint32{f(4194305.5), f(4194306)},
			[]uint32{negInfBits, negInfBits}),
		unaryCase(ir.OpClz, ir.U32, nil, []uint32{0, 32}, []uint32{1, 31}, []uint32{0x80000000, 0}, []uint32{0xFFFF, 16}),
		unaryCase(ir.OpClz, ir.I32, nil, []uint32{0, 32}, []uint32{i(-1), 0}, []uint32{1, 31}, []uint32{maxI32Bits, 1}),
		unaryCase(ir.OpPopcount, ir.U32, nil, []uint32{0, 0}, []uint32{0xFFFFFFFF, 32}, []uint32{0xF0F0, 8}),
		unaryCase(ir.OpPopcount, ir.I32, nil, []uint32{i(-1), 32}, []uint32{minI32Bits, 1}, []uint32{7, 3}),
	}
}

func binaryCases() []opCase {
	arith := []ir.Type{ir.I32, ir.U32, ir.F32}
	ints := []ir.Type{ir.I32, ir.U32}
	types := map[ir.BinaryOp][]ir.Type{
		ir.OpAdd: arith, ir.OpSub: arith, ir.OpMul: arith, ir.OpDiv: arith, ir.OpMin: arith, ir.OpMax: arith,
		ir.OpRem: ints, ir.OpAnd: ints, ir.OpOr: ints, ir.OpXor: ints, ir.OpShl: ints, ir.OpShr: ints,
		ir.OpEq: append(arith, ir.Bool), ir.OpNe: append(arith, ir.Bool),
		ir.OpLt: arith, ir.OpLe: arith, ir.OpGt: arith, ir.OpGe: arith,
		ir.OpLAnd: {ir.Bool}, ir.OpLOr: {ir.Bool},
	}
	pinned := binaryPins()
	var out []opCase
	for _, op := range ir.BinaryOps() {
		for _, t := range types[op] {
			out = append(out, binaryCase(op, t, pinned[fmt.Sprintf("%s.%s", op, t)]...))
		}
	}
	return out
}

// binaryPins are docs/design.md's values for binary operators, by case name.
func binaryPins() map[string][][]uint32 {
	return map[string][][]uint32{
		"div.i32": {{7, 2, 3}, {i(-7), 2, i(-3)}, {7, i(-2), i(-3)}, {i(-7), i(-2), 3}, {5, 0, 0}, {i(-5), 0, 0},
			{0, 0, 0}, {minI32Bits, i(-1), minI32Bits}, {minI32Bits, 1, minI32Bits}, {minI32Bits, 2, i(-1 << 30)},
			{i(-1), minI32Bits, 0}, {minI32Bits, minI32Bits, 1}, {maxI32Bits, i(-1), i(-math.MaxInt32)}},
		"rem.i32": {{7, 2, 1}, {i(-7), 2, i(-1)}, {7, i(-2), 1}, {i(-7), i(-2), i(-1)}, {5, 0, 0}, {i(-5), 0, 0},
			{minI32Bits, i(-1), 0}, {minI32Bits, 3, i(-2)}, {i(-1), minI32Bits, i(-1)}, {minI32Bits, minI32Bits, 0},
			{maxI32Bits, minI32Bits, maxI32Bits}},
		"div.u32": {{7, 2, 3}, {0xFFFFFFFF, 2, 0x7FFFFFFF}, {5, 0, 0}, {0, 0, 0}, {0x80000000, 0xFFFFFFFF, 0},
			{0xFFFFFFFF, 1, 0xFFFFFFFF}},
		"rem.u32": {{7, 2, 1}, {5, 0, 0}, {0xFFFFFFFF, 10, 5}, {3, 0xFFFFFFFF, 3}},
		"shl.u32": {{1, 33, 2}, {1, 31, 0x80000000}, {3, 0xFFFFFFFF, 0x80000000}, {5, 32, 5}, {0xFFFFFFFF, 4, 0xFFFFFFF0}},
		"shl.i32": {{1, 32, 1}, {1, i(-1), minI32Bits}, {i(-1), 1, i(-2)}},
		"shr.i32": {{i(-8), 1, i(-4)}, {i(-1), 31, i(-1)}, {i(-8), 33, i(-4)}, {minI32Bits, 31, i(-1)},
			{maxI32Bits, 30, 1}, {i(-8), i(-1), i(-1)}, {16, 36, 1}},
		"shr.u32":   {{0x80000000, 1, 0x40000000}, {0x80000000, 63, 1}, {0xFFFFFFFF, 32, 0xFFFFFFFF}},
		"add.i32":   {{maxI32Bits, 1, minI32Bits}, {i(-3), 1, i(-2)}},
		"sub.u32":   {{0, 1, 0xFFFFFFFF}},
		"mul.u32":   {{0x10000, 0x10000, 0}, {0xFFFFFFFF, 3, 0xFFFFFFFD}},
		"min.i32":   {{i(-1), 1, i(-1)}, {minI32Bits, maxI32Bits, minI32Bits}},
		"max.i32":   {{i(-1), 1, 1}, {minI32Bits, maxI32Bits, maxI32Bits}},
		"min.u32":   {{0xFFFFFFFF, 1, 1}},
		"max.u32":   {{0xFFFFFFFF, 1, 0xFFFFFFFF}},
		"and.u32":   {{0xF0F0, 0xFF00, 0xF000}},
		"or.i32":    {{0xF0F0, 0xFF00, 0xFFF0}},
		"xor.u32":   {{0xF0F0, 0xFF00, 0x0FF0}},
		"lt.i32":    {{i(-1), 1, 1}, {1, 1, 0}, {minI32Bits, maxI32Bits, 1}},
		"lt.u32":    {{0xFFFFFFFF, 1, 0}, {1, 2, 1}},
		"le.i32":    {{1, 1, 1}, {2, i(-1), 0}},
		"gt.u32":    {{0xFFFFFFFF, 1, 1}, {1, 1, 0}},
		"ge.i32":    {{i(-1), 1, 0}, {1, 1, 1}},
		"eq.i32":    {{5, 5, 1}, {5, 6, 0}},
		"ne.u32":    {{5, 5, 0}, {5, 6, 1}},
		"eq.bool":   {{0, 0, 1}, {1, 0, 0}},
		"ne.bool":   {{0, 0, 0}, {1, 0, 1}},
		"land.bool": {{1, 1, 1}, {1, 0, 0}, {0, 1, 0}, {0, 0, 0}},
		"lor.bool":  {{0, 0, 0}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}},
		"min.f32": {{nanBits, f(1), f(1)}, {f(1), nanBits, f(1)}, {nanBits, negNaNBits, nanBits}, {negZero, 0, negZero},
			{0, negZero, negZero}, {0, 0, 0}, {negZero, negZero, negZero}, {f(-1), f(2), f(-1)}, {f(2), f(-1), f(-1)},
			{infBits, negInfBits, negInfBits}, {negNaNBits, negInfBits, negInfBits}, {f(-3), negZero, f(-3)},
			{f(3), negZero, negZero}, {f(3), 0, 0}},
		"max.f32": {{nanBits, f(1), f(1)}, {f(1), nanBits, f(1)}, {nanBits, nanBits, nanBits}, {negZero, 0, 0},
			{0, negZero, 0}, {negZero, negZero, negZero}, {f(-1), f(2), f(2)}, {f(2), f(-1), f(2)},
			{infBits, negInfBits, infBits}, {f(-3), negZero, negZero}, {f(-3), 0, 0}, {f(3), negZero, f(3)}},
		"div.f32": {{f(1), 0, infBits}, {f(-1), 0, negInfBits}, {f(1), negZero, negInfBits}, {0, 0, nanBits},
			{f(6), f(3), f(2)}, {maxF32Bits, maxF32Bits, f(1)}, {f(3e38), f(3e38), f(1)}, {f(1e38), f(2e38), f(0.5)},
			{f(5), infBits, 0}, {infBits, infBits, nanBits}, {f(-8), f(0x1p127), f(-0x1p-124)}, {infBits, f(2e38), infBits}},
		"add.f32": {{f(0.1), f(0.2), f(float32(0.1) + float32(0.2))}, {negZero, negZero, negZero}, {0, negZero, 0},
			{maxF32Bits, maxF32Bits, infBits}, {infBits, negInfBits, nanBits}, {f(1), f(0x1p-24), f(1)},
			{f(1), f(0x1.8p-24), f(1 + 0x1p-23)}},
		"sub.f32": {{f(1), f(1), 0}, {negZero, 0, negZero}},
		"mul.f32": {{f(3), f(0.1), f(3 * float32(0.1))}, {negZero, f(5), negZero}, {infBits, 0, nanBits},
			{f(1e30), f(1e30), infBits}},
		"lt.f32": {{nanBits, f(1), 0}, {f(1), nanBits, 0}, {f(-1), f(1), 1}, {negZero, 0, 0}},
		"le.f32": {{nanBits, nanBits, 0}, {negZero, 0, 1}},
		"gt.f32": {{nanBits, f(1), 0}, {f(2), f(1), 1}},
		"ge.f32": {{f(1), nanBits, 0}, {f(1), f(1), 1}},
		"eq.f32": {{nanBits, nanBits, 0}, {negZero, 0, 1}, {f(1), f(1), 1}},
		"ne.f32": {{nanBits, nanBits, 1}, {nanBits, f(1), 1}, {negZero, 0, 0}, {f(1), f(2), 1}},
	}
}

// fmaCase runs fma over triples of f32 edge values; the unfused result is
// accepted too (Variants).
func fmaCase() opCase {
	xs := append(f32Bits(0, 1, -1, 0.1, 3, 1e-10, 16777217, 0x1.000002p0, -0x1.fffffep-1, math.MaxFloat32, 0x1p-126, inf, -inf), negZero)
	return opCase{
		name: "fma.f32", in: ir.F32, out: ir.F32,
		fn:     func(a []ir.Expr) ir.Expr { return ir.Fma(a[0], a[1], a[2]) },
		pinned: [][]uint32{{f(2), f(3), f(1), f(7)}, {f(1 + 0x1p-12), f(1 - 0x1p-12), f(-1), f(-0x1p-24)}},
		cols:   triplesOf(xs...), consts: triplesOf(f32Bits(0, 1, 0x1.000002p0, -0x1.000004p0, 3)...),
	}
}

// selectCases pick by a comparison of the operands themselves, on every type.
func selectCases() []opCase {
	var out []opCase
	for _, t := range []ir.Type{ir.I32, ir.U32, ir.F32} {
		// select is a move: it never turns -0 into +0 or a NaN payload into another,
		// and integer bits that happen to spell ±0.0 and ±1.0 stay integers (a
		// compiler that folds such selects by float patterns breaks them).
		pinned := map[ir.Type][][]uint32{
			ir.F32: {{negZero, 0, 0}, {0, negZero, negZero}, {f(-1), nanBits, nanBits}},
			ir.U32: {{0x3F800000, 0x80000000, 0x3F800000}, {0, 0xBF800000, 0}, {0x80000000, 0xBF800000, 0x80000000}},
			ir.I32: {{minI32Bits, 0x3F800000, minI32Bits}, {0xBF800000, 0, 0xBF800000}, {minI32Bits, 0xBF800000, minI32Bits}},
		}[t]
		out = append(out, opCase{
			name: "select." + t.String(), in: t, out: t, pinned: pinned,
			fn:   func(x []ir.Expr) ir.Expr { return ir.Select(ir.Lt(x[0], x[1]), x[0], x[1]) },
			cols: pairs(edgesOf(t)), consts: pairs(constsOf(t)),
		})
	}
	out = append(out, opCase{
		name: "select.bool", in: ir.Bool, out: ir.Bool,
		fn:     func(x []ir.Expr) ir.Expr { return ir.Select(x[0], x[1], x[2]) },
		pinned: [][]uint32{{1, 1, 0, 1}, {1, 0, 1, 0}, {0, 1, 0, 0}, {0, 0, 1, 1}},
		cols:   [][]uint32{{0, 1}, {1, 0}, {1, 1}}, consts: [][]uint32{{1}, {0}, {1}},
	})
	return out
}
