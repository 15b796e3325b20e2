package spirv

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// maxCaseInvocations keeps the interpreted corpus runs short: every size of the
// corpus but the 100 000-element ones, and with -short only the small sizes.
func maxCaseInvocations() uint64 {
	if testing.Short() {
		return 1 << 13
	}
	return 1 << 17
}

func TestCorpusRunsOnInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range kernels.All() {
		t.Run(k.Name, func(t *testing.T) { runKernel(t, k, rng) })
	}
}

// runKernel dispatches k on every size of its list that stays within
// maxCaseInvocations() and checks the outputs against k's reference.
func runKernel(t *testing.T, k kernels.Kernel, rng *rand.Rand) {
	p := k.Program()
	m := mustEmit(t, k.Name, p)
	for _, size := range k.Sizes {
		c := k.NewCase(rng, size)
		wg := p.WorkgroupSize
		if c.WorkgroupSize != ([3]uint32{}) {
			wg = c.WorkgroupSize
		}
		if uint64(c.Grid[0])*uint64(c.Grid[1])*uint64(c.Grid[2])*uint64(wg[0]*wg[1]*wg[2]) > maxCaseInvocations() {
			continue
		}
		got, err := dispatchCase(p, m, c)
		if err != nil {
			t.Errorf("%s size %d: %v", k.Name, size, err)
			continue
		}
		if err := k.Check(got, k.Reference(c)); err != nil {
			t.Errorf("%s size %d: %v", k.Name, size, err)
		}
	}
}

func i32(v int32) uint32 { return uint32(v) }

func f(v float32) uint32 { return math.Float32bits(v) }

const (
	minI32  = 0x80000000
	maxI32  = 0x7FFFFFFF
	nan     = 0x7FC00000
	negNaN  = 0xFFC00000
	negZero = 0x80000000
	inf     = 0x7F800000
	negInf  = 0xFF800000
	maxF32  = 0x7F7FFFFF
)

// opCase applies fn to operands of type in and checks each row: operands, then the
// wanted result bits of type out. A wanted NaN accepts any NaN.
type opCase struct {
	name    string
	in, out ir.Type
	fn      func(args []ir.Expr) ir.Expr
	rows    [][]uint32
}

func unaryFn(op ir.UnaryOp) func([]ir.Expr) ir.Expr {
	return func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} }
}

func binaryFn(op ir.BinaryOp) func([]ir.Expr) ir.Expr {
	return func(a []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: a[0], Y: a[1]} }
}

func castFn(to ir.Type) func([]ir.Expr) ir.Expr {
	return func(a []ir.Expr) ir.Expr { return ir.Cast(to, a[0]) }
}

// storage is the buffer element type that carries a value of type t.
func storage(t ir.Type) ir.Type {
	if t == ir.Bool {
		return ir.U32
	}
	return t
}

// runOp runs one invocation per row and returns the result bits.
func runOp(t *testing.T, c opCase) []uint32 {
	t.Helper()
	arity := len(c.rows[0]) - 1
	b := ir.NewBuilder("semantics."+c.name, 64, 1, 1)
	var args []ir.Expr
	gid := b.Let("gid", ir.GlobalID(0))
	for k := range arity {
		buf := b.Buffer(fmt.Sprintf("arg%d", k), storage(c.in), ir.Read)
		var x ir.Expr = ir.Load(buf, gid)
		if c.in == ir.Bool {
			x = ir.Cast(ir.Bool, x)
		}
		args = append(args, x)
	}
	out := b.Buffer("out", storage(c.out), ir.Write)
	r := c.fn(args)
	if c.out == ir.Bool {
		r = ir.Select(r, ir.LitU32(1), ir.LitU32(0))
	}
	b.If(ir.Lt(gid, ir.Len(out)), func(then *ir.Block) { then.Store(out, gid, r) })
	p, err := b.Build()
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	kc := kernels.Case{Grid: [3]uint32{uint32(len(c.rows)+63) / 64, 1, 1}, OutputCounts: make([]uint32, arity+1)}
	for k := range arity {
		data := make([]byte, 4*len(c.rows))
		for i, row := range c.rows {
			binary.LittleEndian.PutUint32(data[4*i:], row[k])
		}
		kc.Inputs = append(kc.Inputs, data)
	}
	kc.Inputs = append(kc.Inputs, nil)
	kc.OutputCounts[arity] = uint32(len(c.rows))
	outs, err := dispatchCase(p, mustEmit(t, c.name, p), kc)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	res := make([]uint32, len(c.rows))
	for i := range res {
		res[i] = binary.LittleEndian.Uint32(outs[0][4*i:])
	}
	return res
}

func isNaNBits(b uint32) bool { return b&0x7FFFFFFF > 0x7F800000 }

func checkOp(t *testing.T, c opCase) {
	t.Helper()
	got := runOp(t, c)
	for i, row := range c.rows {
		want := row[len(row)-1]
		if got[i] == want || (c.out == ir.F32 && isNaNBits(want) && isNaNBits(got[i])) {
			continue
		}
		t.Errorf("%s%#x = %#x, want %#x", c.name, row[:len(row)-1], got[i], want)
	}
}

func TestIntegerSemantics(t *testing.T) {
	for _, c := range []opCase{
		{"div.i32", ir.I32, ir.I32, binaryFn(ir.OpDiv), [][]uint32{
			{7, 2, 3}, {i32(-7), 2, i32(-3)}, {7, i32(-2), i32(-3)}, {i32(-7), i32(-2), 3},
			{5, 0, 0}, {i32(-5), 0, 0}, {0, 0, 0}, {minI32, i32(-1), minI32}, {minI32, 1, minI32},
			{minI32, 2, i32(-1 << 30)}, {i32(-1), minI32, 0}, {minI32, minI32, 1}, {maxI32, i32(-1), i32(-maxI32)},
		}},
		{"rem.i32", ir.I32, ir.I32, binaryFn(ir.OpRem), [][]uint32{
			{7, 2, 1}, {i32(-7), 2, i32(-1)}, {7, i32(-2), 1}, {i32(-7), i32(-2), i32(-1)},
			{5, 0, 0}, {i32(-5), 0, 0}, {minI32, i32(-1), 0}, {minI32, 3, i32(-2)}, {i32(-1), minI32, i32(-1)},
			{minI32, minI32, 0}, {maxI32, minI32, maxI32},
		}},
		{"div.u32", ir.U32, ir.U32, binaryFn(ir.OpDiv), [][]uint32{
			{7, 2, 3}, {0xFFFFFFFF, 2, 0x7FFFFFFF}, {5, 0, 0}, {0, 0, 0}, {0x80000000, 0xFFFFFFFF, 0}, {0xFFFFFFFF, 1, 0xFFFFFFFF},
		}},
		{"rem.u32", ir.U32, ir.U32, binaryFn(ir.OpRem), [][]uint32{
			{7, 2, 1}, {5, 0, 0}, {0xFFFFFFFF, 10, 5}, {3, 0xFFFFFFFF, 3},
		}},
		{"shl.u32", ir.U32, ir.U32, binaryFn(ir.OpShl), [][]uint32{
			{1, 33, 2}, {1, 31, 0x80000000}, {3, 0xFFFFFFFF, 0x80000000}, {5, 32, 5}, {0xFFFFFFFF, 4, 0xFFFFFFF0},
		}},
		{"shl.i32", ir.I32, ir.I32, binaryFn(ir.OpShl), [][]uint32{
			{1, 32, 1}, {1, i32(-1), minI32}, {i32(-1), 1, i32(-2)},
		}},
		{"shr.i32", ir.I32, ir.I32, binaryFn(ir.OpShr), [][]uint32{
			{i32(-8), 1, i32(-4)}, {i32(-1), 31, i32(-1)}, {i32(-8), 33, i32(-4)}, {minI32, 31, i32(-1)},
			{maxI32, 30, 1}, {i32(-8), i32(-1), i32(-1)}, {16, 36, 1},
		}},
		{"shr.u32", ir.U32, ir.U32, binaryFn(ir.OpShr), [][]uint32{
			{0x80000000, 1, 0x40000000}, {0x80000000, 63, 1}, {0xFFFFFFFF, 32, 0xFFFFFFFF},
		}},
		{"add.i32", ir.I32, ir.I32, binaryFn(ir.OpAdd), [][]uint32{{maxI32, 1, minI32}, {i32(-3), 1, i32(-2)}}},
		{"sub.u32", ir.U32, ir.U32, binaryFn(ir.OpSub), [][]uint32{{0, 1, 0xFFFFFFFF}}},
		{"mul.u32", ir.U32, ir.U32, binaryFn(ir.OpMul), [][]uint32{{0x10000, 0x10000, 0}, {0xFFFFFFFF, 3, 0xFFFFFFFD}}},
		{"min.i32", ir.I32, ir.I32, binaryFn(ir.OpMin), [][]uint32{{i32(-1), 1, i32(-1)}, {minI32, maxI32, minI32}}},
		{"max.i32", ir.I32, ir.I32, binaryFn(ir.OpMax), [][]uint32{{i32(-1), 1, 1}, {minI32, maxI32, maxI32}}},
		{"min.u32", ir.U32, ir.U32, binaryFn(ir.OpMin), [][]uint32{{0xFFFFFFFF, 1, 1}}},
		{"max.u32", ir.U32, ir.U32, binaryFn(ir.OpMax), [][]uint32{{0xFFFFFFFF, 1, 0xFFFFFFFF}}},
		{"and.u32", ir.U32, ir.U32, binaryFn(ir.OpAnd), [][]uint32{{0xF0F0, 0xFF00, 0xF000}}},
		{"or.i32", ir.I32, ir.I32, binaryFn(ir.OpOr), [][]uint32{{0xF0F0, 0xFF00, 0xFFF0}}},
		{"xor.u32", ir.U32, ir.U32, binaryFn(ir.OpXor), [][]uint32{{0xF0F0, 0xFF00, 0x0FF0}}},
		{"lt.i32", ir.I32, ir.Bool, binaryFn(ir.OpLt), [][]uint32{{i32(-1), 1, 1}, {1, 1, 0}, {minI32, maxI32, 1}}},
		{"lt.u32", ir.U32, ir.Bool, binaryFn(ir.OpLt), [][]uint32{{0xFFFFFFFF, 1, 0}, {1, 2, 1}}},
		{"le.i32", ir.I32, ir.Bool, binaryFn(ir.OpLe), [][]uint32{{1, 1, 1}, {2, i32(-1), 0}}},
		{"gt.u32", ir.U32, ir.Bool, binaryFn(ir.OpGt), [][]uint32{{0xFFFFFFFF, 1, 1}, {1, 1, 0}}},
		{"ge.i32", ir.I32, ir.Bool, binaryFn(ir.OpGe), [][]uint32{{i32(-1), 1, 0}, {1, 1, 1}}},
		{"eq.i32", ir.I32, ir.Bool, binaryFn(ir.OpEq), [][]uint32{{5, 5, 1}, {5, 6, 0}}},
		{"ne.u32", ir.U32, ir.Bool, binaryFn(ir.OpNe), [][]uint32{{5, 5, 0}, {5, 6, 1}}},
		{"neg.i32", ir.I32, ir.I32, unaryFn(ir.OpNeg), [][]uint32{{minI32, minI32}, {5, i32(-5)}, {0, 0}}},
		{"neg.u32", ir.U32, ir.U32, unaryFn(ir.OpNeg), [][]uint32{{1, 0xFFFFFFFF}}},
		{"abs.i32", ir.I32, ir.I32, unaryFn(ir.OpAbs), [][]uint32{{minI32, minI32}, {i32(-5), 5}, {5, 5}}},
		{"not.u32", ir.U32, ir.U32, unaryFn(ir.OpNot), [][]uint32{{0, 0xFFFFFFFF}, {0xF0F0F0F0, 0x0F0F0F0F}}},
		{"not.i32", ir.I32, ir.I32, unaryFn(ir.OpNot), [][]uint32{{0, i32(-1)}}},
		{"not.bool", ir.Bool, ir.Bool, unaryFn(ir.OpNot), [][]uint32{{0, 1}, {1, 0}}},
		{"eq.bool", ir.Bool, ir.Bool, binaryFn(ir.OpEq), [][]uint32{{0, 0, 1}, {1, 0, 0}}},
		{"ne.bool", ir.Bool, ir.Bool, binaryFn(ir.OpNe), [][]uint32{{0, 0, 0}, {1, 0, 1}}},
		{"land.bool", ir.Bool, ir.Bool, binaryFn(ir.OpLAnd), [][]uint32{{1, 1, 1}, {1, 0, 0}, {0, 1, 0}}},
		{"lor.bool", ir.Bool, ir.Bool, binaryFn(ir.OpLOr), [][]uint32{{0, 0, 0}, {1, 0, 1}, {0, 1, 1}}},
		{"select.i32", ir.I32, ir.I32, func(a []ir.Expr) ir.Expr {
			return ir.Select(ir.Lt(a[0], ir.LitI32(0)), a[1], a[2])
		}, [][]uint32{{i32(-1), 7, 8, 7}, {1, 7, 8, 8}}},
	} {
		checkOp(t, c)
	}
}

func TestFloatSemantics(t *testing.T) {
	for _, c := range []opCase{
		{"min.f32", ir.F32, ir.F32, binaryFn(ir.OpMin), [][]uint32{
			{nan, f(1), f(1)}, {f(1), nan, f(1)}, {nan, negNaN, nan}, {negZero, 0, negZero}, {0, negZero, negZero},
			{0, 0, 0}, {negZero, negZero, negZero}, {f(-1), f(2), f(-1)}, {f(2), f(-1), f(-1)}, {inf, negInf, negInf},
			{negNaN, negInf, negInf}, {f(-3), negZero, f(-3)}, {f(3), negZero, negZero}, {f(3), 0, 0},
		}},
		{"max.f32", ir.F32, ir.F32, binaryFn(ir.OpMax), [][]uint32{
			{nan, f(1), f(1)}, {f(1), nan, f(1)}, {nan, nan, nan}, {negZero, 0, 0}, {0, negZero, 0},
			{negZero, negZero, negZero}, {f(-1), f(2), f(2)}, {f(2), f(-1), f(2)}, {inf, negInf, inf},
			{f(-3), negZero, negZero}, {f(-3), 0, 0}, {f(3), negZero, f(3)},
		}},
		{"div.f32", ir.F32, ir.F32, binaryFn(ir.OpDiv), [][]uint32{
			{f(1), 0, inf}, {f(-1), 0, negInf}, {f(1), negZero, negInf}, {0, 0, nan}, {f(6), f(3), f(2)},
			{maxF32, maxF32, f(1)}, {f(3e38), f(3e38), f(1)}, {f(1), f(3e38), f(1 / float32(3e38))},
			{f(1e38), f(2e38), f(0.5)}, {f(5), inf, 0}, {inf, inf, nan}, {f(-8), f(0x1p127), f(-0x1p-124)},
			{inf, f(2e38), inf},
		}},
		{"add.f32", ir.F32, ir.F32, binaryFn(ir.OpAdd), [][]uint32{
			{f(0.1), f(0.2), f(float32(0.1) + float32(0.2))}, {negZero, negZero, negZero}, {0, negZero, 0},
			{maxF32, maxF32, inf}, {inf, negInf, nan}, {f(1), f(0x1p-24), f(1)}, {f(1), f(0x1.8p-24), f(1 + 0x1p-23)},
		}},
		{"sub.f32", ir.F32, ir.F32, binaryFn(ir.OpSub), [][]uint32{{f(1), f(1), 0}, {negZero, 0, negZero}}},
		{"mul.f32", ir.F32, ir.F32, binaryFn(ir.OpMul), [][]uint32{
			{f(3), f(0.1), f(3 * float32(0.1))}, {negZero, f(5), negZero}, {inf, 0, nan}, {f(1e30), f(1e30), inf},
		}},
		{"fma.f32", ir.F32, ir.F32, func(a []ir.Expr) ir.Expr { return ir.Fma(a[0], a[1], a[2]) }, [][]uint32{
			{f(2), f(3), f(1), f(7)}, {f(1 + 0x1p-12), f(1 - 0x1p-12), f(-1), f(-0x1p-24)},
		}},
		{"neg.f32", ir.F32, ir.F32, unaryFn(ir.OpNeg), [][]uint32{{0, negZero}, {negZero, 0}, {f(1.5), f(-1.5)}, {inf, negInf}, {nan, negNaN}}},
		{"abs.f32", ir.F32, ir.F32, unaryFn(ir.OpAbs), [][]uint32{{negZero, 0}, {negInf, inf}, {f(-1.5), f(1.5)}, {negNaN, nan}}},
		{"floor.f32", ir.F32, ir.F32, unaryFn(ir.OpFloor), [][]uint32{{f(-1.5), f(-2)}, {f(1.5), f(1)}, {negZero, negZero}}},
		{"ceil.f32", ir.F32, ir.F32, unaryFn(ir.OpCeil), [][]uint32{{f(-1.5), f(-1)}, {f(1.5), f(2)}}},
		{"sqrt.f32", ir.F32, ir.F32, unaryFn(ir.OpSqrt), [][]uint32{{f(4), f(2)}, {f(-1), nan}, {inf, inf}, {negZero, negZero}}},
		{"lt.f32", ir.F32, ir.Bool, binaryFn(ir.OpLt), [][]uint32{{nan, f(1), 0}, {f(1), nan, 0}, {f(-1), f(1), 1}, {negZero, 0, 0}}},
		{"le.f32", ir.F32, ir.Bool, binaryFn(ir.OpLe), [][]uint32{{nan, nan, 0}, {negZero, 0, 1}}},
		{"gt.f32", ir.F32, ir.Bool, binaryFn(ir.OpGt), [][]uint32{{nan, f(1), 0}, {f(2), f(1), 1}}},
		{"ge.f32", ir.F32, ir.Bool, binaryFn(ir.OpGe), [][]uint32{{f(1), nan, 0}, {f(1), f(1), 1}}},
		{"eq.f32", ir.F32, ir.Bool, binaryFn(ir.OpEq), [][]uint32{{nan, nan, 0}, {negZero, 0, 1}, {f(1), f(1), 1}}},
		{"ne.f32", ir.F32, ir.Bool, binaryFn(ir.OpNe), [][]uint32{{nan, nan, 1}, {nan, f(1), 1}, {negZero, 0, 0}, {f(1), f(2), 1}}},
	} {
		checkOp(t, c)
	}
}

func TestTranscendentalsAreNearGo(t *testing.T) {
	for _, c := range []struct {
		op ir.UnaryOp
		fn func(float64) float64
	}{{ir.OpExp, math.Exp}, {ir.OpLog, math.Log}, {ir.OpSin, math.Sin}, {ir.OpCos, math.Cos}} {
		xs := []float32{0.5, 1, 2, 3.25, 10}
		rows := make([][]uint32, len(xs))
		for i, x := range xs {
			rows[i] = []uint32{f(x), 0}
		}
		got := runOp(t, opCase{name: c.op.String() + ".f32", in: ir.F32, out: ir.F32, fn: unaryFn(c.op), rows: rows})
		for i, x := range xs {
			if want := c.fn(float64(x)); math.Abs(float64(math.Float32frombits(got[i]))-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%s(%v) = %v, want %v", c.op, x, math.Float32frombits(got[i]), want)
			}
		}
	}
}

func TestCastSemantics(t *testing.T) {
	for _, c := range []opCase{
		{"f32.to.i32", ir.F32, ir.I32, castFn(ir.I32), [][]uint32{
			{f(1.9), 1}, {f(-1.9), i32(-1)}, {f(2147483520), 2147483520}, {f(0x1p31), maxI32}, {f(3e9), maxI32},
			{f(-0x1p31), minI32}, {f(-3e9), minI32}, {nan, 0}, {negNaN, 0}, {inf, maxI32}, {negInf, minI32},
			{negZero, 0}, {f(-2147483520), i32(-2147483520)}, {f(0.5), 0},
		}},
		{"f32.to.u32", ir.F32, ir.U32, castFn(ir.U32), [][]uint32{
			{f(1.9), 1}, {f(-0.5), 0}, {f(-1), 0}, {negInf, 0}, {f(4294967040), 4294967040}, {f(0x1p32), 0xFFFFFFFF},
			{inf, 0xFFFFFFFF}, {nan, 0}, {f(3e9), 3000000000}, {negZero, 0}, {f(-3e9), 0},
		}},
		{"i32.to.f32", ir.I32, ir.F32, castFn(ir.F32), [][]uint32{
			{16777217, f(16777216)}, {16777219, f(16777220)}, {i32(-1), f(-1)}, {minI32, f(-0x1p31)},
			{maxI32, f(0x1p31)}, {0, 0},
		}},
		{"u32.to.f32", ir.U32, ir.F32, castFn(ir.F32), [][]uint32{
			{0xFFFFFFFF, f(0x1p32)}, {16777217, f(16777216)}, {0x80000000, f(0x1p31)}, {0xFFFFFF7F, f(4294967040)},
		}},
		{"i32.to.u32", ir.I32, ir.U32, castFn(ir.U32), [][]uint32{{i32(-1), 0xFFFFFFFF}, {minI32, 0x80000000}}},
		{"u32.to.i32", ir.U32, ir.I32, castFn(ir.I32), [][]uint32{{0xFFFFFFFF, i32(-1)}}},
		{"bool.to.i32", ir.Bool, ir.I32, castFn(ir.I32), [][]uint32{{1, 1}, {0, 0}}},
		{"bool.to.u32", ir.Bool, ir.U32, castFn(ir.U32), [][]uint32{{1, 1}, {0, 0}}},
		{"i32.to.bool", ir.I32, ir.Bool, castFn(ir.Bool), [][]uint32{{0, 0}, {5, 1}, {minI32, 1}}},
		{"u32.to.bool", ir.U32, ir.Bool, castFn(ir.Bool), [][]uint32{{0, 0}, {0x80000000, 1}}},
		{"f32.to.f32", ir.F32, ir.F32, castFn(ir.F32), [][]uint32{{negZero, negZero}}},
	} {
		checkOp(t, c)
	}
}

// run1 emits p and runs it on one workgroup with the given inputs (by binding; nil
// for write buffers) and output counts.
func run1(t *testing.T, p *ir.Program, inputs [][]uint32, counts []uint32) [][]uint32 {
	t.Helper()
	c := kernels.Case{Grid: [3]uint32{1, 1, 1}, OutputCounts: counts}
	for _, in := range inputs {
		if in == nil {
			c.Inputs = append(c.Inputs, nil)
			continue
		}
		data := make([]byte, 4*len(in))
		for i, w := range in {
			binary.LittleEndian.PutUint32(data[4*i:], w)
		}
		c.Inputs = append(c.Inputs, data)
	}
	outs, err := dispatchCase(p, mustEmit(t, p.Name, p), c)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	res := make([][]uint32, len(outs))
	for i, o := range outs {
		for k := 0; k < len(o); k += 4 {
			res[i] = append(res[i], binary.LittleEndian.Uint32(o[k:]))
		}
	}
	return res
}

func TestBoundsChecks(t *testing.T) {
	b := ir.NewBuilder("semantics.bounds", 1, 1, 1)
	r := b.Buffer("r", ir.U32, ir.Read)
	empty := b.Buffer("empty", ir.U32, ir.Read)
	w := b.Buffer("w", ir.U32, ir.Write)
	emptyW := b.Buffer("empty_w", ir.I32, ir.Write)
	out := b.Buffer("out", ir.U32, ir.Write)
	s := b.Shared("s", ir.U32, 4)
	sb := b.Shared("sb", ir.Bool, 2)
	put := func(i uint32, x ir.Expr) { b.Store(out, ir.LitU32(i), x) }
	put(0, ir.Load(r, ir.LitU32(3)))
	put(1, ir.Load(r, ir.LitU32(0xFFFFFFFF)))
	put(2, ir.Load(r, ir.LitU32(2)))
	put(3, ir.Load(empty, ir.LitU32(0)))
	put(4, ir.Len(empty))
	b.Store(w, ir.LitU32(2), ir.LitU32(7))
	b.Store(w, ir.LitU32(1), ir.LitU32(9))
	old := b.AtomicResult(ir.AtomicAdd, w, ir.LitU32(2), ir.LitU32(5), "oob")
	put(5, old)
	inb := b.AtomicResult(ir.AtomicAdd, w, ir.LitU32(1), ir.LitU32(5), "inb")
	put(6, inb)
	b.Store(emptyW, ir.LitU32(0), ir.LitI32(-1))
	put(7, ir.Cast(ir.U32, b.AtomicResult(ir.AtomicMax, emptyW, ir.LitU32(0), ir.LitI32(4), "none")))
	b.Store(s, ir.LitU32(3), ir.LitU32(11))
	b.Store(s, ir.LitU32(4), ir.LitU32(12))
	put(8, ir.Load(s, ir.LitU32(3)))
	put(9, ir.Load(s, ir.LitU32(4)))
	put(10, b.AtomicResult(ir.AtomicExchange, s, ir.LitU32(4), ir.LitU32(13), "s_oob"))
	put(11, b.AtomicResult(ir.AtomicExchange, s, ir.LitU32(3), ir.LitU32(13), "s_inb"))
	put(12, ir.Load(s, ir.LitU32(3)))
	b.Store(sb, ir.LitU32(1), ir.LitBool(true))
	put(13, ir.Select(ir.Load(sb, ir.LitU32(1)), ir.LitU32(1), ir.LitU32(2)))
	put(14, ir.Select(ir.Load(sb, ir.LitU32(9)), ir.LitU32(1), ir.LitU32(2)))
	p := b.MustBuild()
	got := run1(t, p, [][]uint32{{10, 20, 30}, nil, nil, nil, nil}, []uint32{0, 0, 2, 0, 15})
	want := [][]uint32{
		{0, 9 + 5}, // w: the store and atomic at 2 were skipped
		{},         // empty_w
		{0, 0, 30, 0, 0, 0, 9, 0, 11, 0, 0, 11, 13, 1, 2},
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("output %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestControlFlowSemantics(t *testing.T) {
	const n = 16
	b := ir.NewBuilder("semantics.control", n, 1, 1)
	in := b.Buffer("in", ir.I32, ir.Read)
	out := b.Buffer("out", ir.I32, ir.Write)
	gid := b.Let("gid", ir.GlobalID(0))
	x := b.Let("x", ir.Load(in, gid))
	acc := b.Var("acc", ir.I32, ir.LitI32(0))
	limit := b.Var("limit", ir.I32, ir.Sub(x, ir.LitI32(4)))
	// A signed counted loop from -3 whose bound is read once: the body raises
	// limit, which must not extend the loop.
	b.For("i", ir.I32, ir.LitI32(-3), limit, ir.LitI32(2), func(body *ir.Block, i ir.Expr) {
		body.Assign("limit", ir.Add(limit, ir.LitI32(10)))
		body.Assign("acc", ir.Add(acc, i))
	})
	b.While(ir.LitBool(true), func(outer *ir.Block) {
		k := outer.Var("k", ir.I32, ir.LitI32(0))
		outer.While(ir.Lt(k, x), func(inner *ir.Block) {
			inner.If(ir.Eq(k, ir.LitI32(5)), func(then *ir.Block) { then.Break() })
			inner.If(ir.Eq(x, ir.LitI32(13)), func(then *ir.Block) {
				then.Store(out, gid, ir.LitI32(-13))
				then.Return()
			})
			inner.Assign("k", ir.Add(k, ir.LitI32(1)))
		})
		outer.Assign("acc", ir.Add(ir.Mul(acc, ir.LitI32(100)), k))
		outer.Break()
	})
	b.IfElse(ir.Eq(ir.Rem(x, ir.LitI32(2)), ir.LitI32(0)), func(then *ir.Block) {
		then.Store(out, gid, acc)
	}, func(els *ir.Block) {
		els.Store(out, gid, ir.Neg(acc))
	})
	p := b.MustBuild()
	inputs := make([]uint32, n)
	want := make([]uint32, n)
	for g := range n {
		xv := int32(g) - 2
		inputs[g] = uint32(xv)
		var accV int32
		for i := int32(-3); i < xv-4; i += 2 {
			accV += i
		}
		k := int32(0)
		for k < xv && k != 5 {
			k++
		}
		if xv == 13 {
			want[g] = uint32(0xFFFFFFF3) // -13
			continue
		}
		accV = accV*100 + k
		if xv%2 != 0 {
			accV = -accV
		}
		want[g] = uint32(accV)
	}
	got := run1(t, p, [][]uint32{inputs, nil}, []uint32{0, n})
	if fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got[0], want)
	}
}

func TestSpecializationAndWorkgroupOverride(t *testing.T) {
	b := ir.NewBuilder("semantics.spec", 2, 2, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	scale := b.Param("scale", ir.U32, ir.LitU32(3))
	flip := b.Param("flip", ir.Bool, ir.LitBool(false))
	half := b.Param("half", ir.F32, ir.LitF32(0.5))
	lin := b.Let("lin", ir.Add(ir.Mul(ir.LocalID(1), ir.WorkgroupSize(0)), ir.LocalID(0)))
	v := ir.Add(ir.Mul(lin, scale), ir.Cast(ir.U32, ir.Mul(half, ir.LitF32(4))))
	b.Store(out, lin, ir.Select(flip, ir.Not(v), v))
	b.Store(out, ir.Add(lin, ir.LitU32(100)), ir.Mul(ir.WorkgroupSize(0), ir.WorkgroupSize(1)))
	p := b.MustBuild()
	m := mustEmit(t, p.Name, p)
	for _, tc := range []struct {
		spec func(*ir.SpecMap)
		wg   [3]uint32
		want []uint32
	}{
		{func(*ir.SpecMap) {}, [3]uint32{}, []uint32{2, 5, 8, 11}},
		{func(s *ir.SpecMap) { s.Set("scale", ir.SpecU32(10)); s.Set("half", ir.SpecF32(1)) }, [3]uint32{3, 1, 1}, []uint32{4, 14, 24}},
		{func(s *ir.SpecMap) { s.Set("flip", ir.SpecBool(true)) }, [3]uint32{1, 2, 1}, []uint32{^uint32(2), ^uint32(5)}},
	} {
		c := kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil}, OutputCounts: []uint32{110}, WorkgroupSize: tc.wg}
		tc.spec(&c.Spec)
		outs, err := dispatchCase(p, m, c)
		if err != nil {
			t.Fatal(err)
		}
		invocations := uint32(len(tc.want))
		for i, w := range tc.want {
			if got := binary.LittleEndian.Uint32(outs[0][4*i:]); got != w {
				t.Errorf("wg %v: out[%d] = %d, want %d", tc.wg, i, got, w)
			}
		}
		if got := binary.LittleEndian.Uint32(outs[0][400:]); got != invocations {
			t.Errorf("wg %v: workgroup_size x*y = %d, want %d", tc.wg, got, invocations)
		}
	}
}
