package ptx

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/ranges"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// The tests of fold.go's simplifications: each program runs on the PTX
// interpreter and on the oracle, at sizes and grids that reach past the ends of
// its buffers (the interpreter fails on any unguarded access outside an
// allocation), and the text shows that the simplification happened.

// gridStrideAdd is out[i] = a[i] + b[i] with every invocation adding epi
// elements, gid + k·total for k < epi (a specialization parameter), total the
// grid's invocations: the shape of an elements-per-invocation vector add.
func gridStrideAdd(wg uint32) *ir.Program {
	b := ir.NewBuilder("test.grid_stride_add", wg, 1, 1)
	x := b.Buffer("a", ir.F32, ir.Read)
	y := b.Buffer("b", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	epi := b.Param("epi", ir.U32, ir.LitU32(4))
	gid := b.Let("gid", ir.GlobalID(0))
	total := b.Let("total", ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0)))
	b.For("k", ir.U32, ir.LitU32(0), epi, ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		i := body.Let("i", ir.Add(gid, ir.Mul(k, total)))
		body.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) {
			then.Store(out, i, ir.Add(ir.Load(x, i), ir.Load(y, i)))
		})
	})
	return b.MustBuild()
}

// runBoth runs p on the interpreter and the oracle and fails the test when the
// outputs differ.
func runBoth(t *testing.T, name string, p *ir.Program, c kernels.Case) {
	t.Helper()
	got, err := dispatchCase(p, c, c.Uniforms)
	if err != nil {
		t.Fatalf("%s: interpreter: %v", name, err)
	}
	if err := kit.MatchOracle(p, c, got); err != nil {
		t.Errorf("%s: differs from the oracle: %v", name, err)
	}
}

// count is how many lines of m's text match the pattern.
func count(m *Module, pattern string) int {
	return len(regexp.MustCompile(`(?m)`+pattern).FindAllStringIndex(m.Text, -1))
}

func f32Input(rng *rand.Rand, n int) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()*8 - 4
	}
	return kernels.F32Bytes(v)
}

func TestUnrollGridStride(t *testing.T) {
	p := gridStrideAdd(64)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, epi := range []uint32{1, 2, 4, 8, 16} {
		var spec ir.SpecMap
		spec.Set("epi", ir.SpecU32(epi))
		m := mustEmit(t, "grid_stride_add", p, Options{Spec: spec})
		if n := count(m, `^\t(@%p\d+ )?st\.global`); n != int(epi) {
			t.Errorf("epi %d: %d stores, want %d (one per unrolled iteration)", epi, n, epi)
		}
		// Per element: the if's i < len(out) and the two loads' checks; the
		// store's check is the if's.
		if n := count(m, `^\tsetp\.lt\.u32`); n != 3*int(epi) {
			t.Errorf("epi %d: %d bounds checks, want %d", epi, n, 3*epi)
		}
		if n := count(m, `\bbra\b`); n != 0 {
			t.Errorf("epi %d: %d branches, want none (the ifs predicated)", epi, n)
		}
		// Sizes around the grid's coverage: none, one, a ragged tail, exact, and
		// a grid larger than needed.
		for _, size := range []int{0, 1, 63, 64*int(epi) - 1, 64 * int(epi), 64*int(epi) + 5, 1000} {
			grid := uint32(max((size+64*int(epi)-1)/(64*int(epi)), 1))
			for _, g := range []uint32{grid, grid + 2} {
				c := kernels.Case{Grid: [3]uint32{g, 1, 1}, Spec: spec,
					Inputs: [][]byte{f32Input(rng, size), f32Input(rng, size), nil}, OutputCounts: []uint32{0, 0, uint32(size)}}
				runBoth(t, "grid_stride_add", p, c)
			}
			// Inputs shorter than the output: the loads keep their checks.
			c := kernels.Case{Grid: [3]uint32{grid, 1, 1}, Spec: spec,
				Inputs: [][]byte{f32Input(rng, size/2), f32Input(rng, size/3), nil}, OutputCounts: []uint32{0, 0, uint32(size)}}
			runBoth(t, "grid_stride_add short inputs", p, c)
		}
	}
	var spec ir.SpecMap
	spec.Set("epi", ir.SpecU32(maxUnroll+1))
	if n := count(mustEmit(t, "grid_stride_add", p, Options{Spec: spec}), `^\t(@%p\d+ )?st\.global`); n != 1 {
		t.Errorf("a loop of %d iterations: %d stores, want 1 (not unrolled)", maxUnroll+1, n)
	}
	c := kernels.Case{Grid: [3]uint32{2, 1, 1}, Spec: spec,
		Inputs: [][]byte{f32Input(rng, 3000), f32Input(rng, 3000), nil}, OutputCounts: []uint32{0, 0, 3000}}
	runBoth(t, "grid_stride_add rolled", p, c)
}

// loopProgram writes, for each invocation g and each iteration of body's loop
// over k, out[g·slots + slot] for a slot the body picks.
func loopProgram(name string, slots uint32, loop func(b *ir.Builder, out string, base ir.Expr)) *ir.Program {
	b := ir.NewBuilder(name, 32, 1, 1)
	out := b.Buffer("out", ir.I32, ir.ReadWrite)
	base := b.Let("base", ir.Mul(ir.GlobalID(0), ir.LitU32(slots)))
	loop(b, out, base)
	return b.MustBuild()
}

// loopCase is a loopProgram with the stores its text must have (unrolled
// copies, or 1 when it stays a loop).
type loopCase struct {
	p      *ir.Program
	stores int
}

func loopPrograms() []loopCase {
	return []loopCase{
		// continue skips k = 2, break ends at k = 5; both conditions fold, so
		// copies 2 and 5 store nothing and copies 6 and 7 are left out.
		{loopProgram("test.unroll_break_continue", 8, func(b *ir.Builder, out string, base ir.Expr) {
			b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(8), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
				body.If(ir.Eq(k, ir.LitU32(2)), func(then *ir.Block) { then.Continue() })
				body.If(ir.Eq(k, ir.LitU32(5)), func(then *ir.Block) { then.Break() })
				body.Store(out, ir.Add(base, k), ir.Add(ir.Bitcast(ir.I32, k), ir.LitI32(100)))
			})
		}), 4},
		// Signed bounds: -5, -2, 1.
		{loopProgram("test.unroll_i32_step", 4, func(b *ir.Builder, out string, base ir.Expr) {
			b.Var("slot", ir.U32, ir.LitU32(0))
			b.For("k", ir.I32, ir.LitI32(-5), ir.LitI32(4), ir.LitI32(3), func(body *ir.Block, k ir.Expr) {
				body.Store(out, ir.Add(base, ir.Local("slot")), k)
				body.Assign("slot", ir.Add(ir.Local("slot"), ir.LitU32(1)))
			})
		}), 3},
		// The same bits, unsigned: 0xFFFFFFFE < 2 is false, no iteration.
		{loopProgram("test.unroll_u32_empty", 1, func(b *ir.Builder, out string, base ir.Expr) {
			b.For("k", ir.U32, ir.LitU32(0xFFFFFFFE), ir.LitU32(2), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
				body.Store(out, base, ir.LitI32(7))
			})
		}), 0},
		// i32 from -2 to 2: four iterations across zero.
		{loopProgram("test.unroll_i32_cross_zero", 4, func(b *ir.Builder, out string, base ir.Expr) {
			b.For("k", ir.I32, ir.LitI32(-2), ir.LitI32(2), ir.LitI32(1), func(body *ir.Block, k ir.Expr) {
				body.Store(out, ir.Add(base, ir.Bitcast(ir.U32, ir.Add(k, ir.LitI32(2)))), ir.Mul(k, k))
			})
		}), 4},
		// Nested constant loops, the inner one's bound from the outer counter.
		{loopProgram("test.unroll_nested", 16, func(b *ir.Builder, out string, base ir.Expr) {
			b.For("i", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(outer *ir.Block, i ir.Expr) {
				outer.For("j", ir.U32, ir.LitU32(0), ir.Add(i, ir.LitU32(1)), ir.LitU32(1), func(inner *ir.Block, j ir.Expr) {
					slot := ir.Add(ir.Mul(i, ir.LitU32(4)), j)
					inner.Store(out, ir.Add(base, slot), ir.Bitcast(ir.I32, ir.Add(ir.Mul(i, ir.LitU32(10)), j)))
				})
			})
		}), 10},
		// A loop with a run-time bound stays a loop.
		{loopProgram("test.loop_runtime_bound", 8, func(b *ir.Builder, out string, base ir.Expr) {
			b.For("k", ir.U32, ir.LitU32(0), ir.Min(ir.Len(out), ir.LitU32(8)), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
				body.Store(out, ir.Add(base, k), ir.LitI32(3))
			})
		}), 1},
	}
}

func TestUnrollControlFlowAndBounds(t *testing.T) {
	progs := loopPrograms()
	for _, tc := range progs {
		m := mustEmit(t, tc.p.Name, tc.p, Options{})
		if n := count(m, `^\t(@%p\d+ )?st\.global`); n != tc.stores {
			t.Errorf("%s: %d stores in the text, want %d\n%s", tc.p.Name, n, tc.stores, numbered(m.Text))
		}
		// The output is shorter than the grid's slots, so the last stores fall
		// outside it and must be dropped.
		for _, size := range []int{0, 5, 37, 100} {
			in := make([]uint32, size)
			for i := range in {
				in[i] = 0xFFFFFFFF
			}
			c := kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in)}, OutputCounts: []uint32{0}}
			runBoth(t, tc.p.Name, tc.p, c)
		}
	}
}

// boundsProgram is out[i] = a[i] + 1 under an if on cond, written predicated
// (a body of a let and a store) or, with predicated false, as a branch (the same
// body inside a loop of one iteration, which makes it more than lets and stores).
func boundsProgram(name string, predicated bool, cond func(i ir.Expr, a, out string) ir.Expr) *ir.Program {
	b := ir.NewBuilder(name, 32, 1, 1)
	a := b.Buffer("a", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(cond(i, a, out), func(then *ir.Block) {
		body := func(k *ir.Block) {
			v := k.Let("v", ir.Add(ir.Load(a, i), ir.LitU32(1)))
			k.Store(out, i, v)
		}
		if predicated {
			body(then)
			return
		}
		then.For("once", ir.U32, ir.LitU32(0), ir.LitU32(1), ir.LitU32(1), func(k *ir.Block, _ ir.Expr) { body(k) })
	})
	return b.MustBuild()
}

// boundsCase is a condition for boundsProgram and the bounds checks
// (setp.lt.u32) its text must have: the condition's and the accesses' own,
// where the condition did not establish them.
type boundsCase struct {
	name   string
	cond   func(i ir.Expr, a, out string) ir.Expr
	checks int
}

func boundsCases() []boundsCase {
	return []boundsCase{
		{"lt_out", func(i ir.Expr, a, out string) ir.Expr { return ir.Lt(i, ir.Len(out)) }, 2},
		{"gt_out", func(i ir.Expr, a, out string) ir.Expr { return ir.Gt(ir.Len(out), i) }, 2},
		{"lt_a", func(i ir.Expr, a, out string) ir.Expr { return ir.Lt(i, ir.Len(a)) }, 2},
		{"land", func(i ir.Expr, a, out string) ir.Expr { return ir.LAnd(ir.Lt(i, ir.Len(a)), ir.Lt(i, ir.Len(out))) }, 2},
		{"le_out", func(i ir.Expr, a, out string) ir.Expr { return ir.Le(i, ir.Len(out)) }, 2},
		{"lor", func(i ir.Expr, a, out string) ir.Expr { return ir.LOr(ir.Lt(i, ir.Len(a)), ir.Lt(i, ir.Len(out))) }, 4},
		{"lt_literal", func(i ir.Expr, a, out string) ir.Expr { return ir.Lt(i, ir.LitU32(40)) }, 3},
	}
}

// TestBoundsFromConditions checks the bounds an if's condition establishes, in
// both forms, at sizes where the input, the output or both are shorter than the
// grid.
func TestBoundsFromConditions(t *testing.T) {
	for _, tc := range boundsCases() {
		for _, predicated := range []bool{true, false} {
			name := "test.bound_" + tc.name
			if !predicated {
				name += "_branch"
			}
			p := boundsProgram(name, predicated, tc.cond)
			m := mustEmit(t, name, p, Options{})
			if n := count(m, `^\tsetp\.lt\.u32`); n != tc.checks {
				t.Errorf("%s: %d bounds checks, want %d\n%s", name, n, tc.checks, numbered(m.Text))
			}
			if n := count(m, `\bbra\b`); (n == 0) != predicated {
				t.Errorf("%s: %d branches\n%s", name, n, numbered(m.Text))
			}
			for _, sizes := range [][2]int{{0, 0}, {10, 50}, {50, 10}, {64, 64}, {33, 31}} {
				in := make([]uint32, sizes[0])
				for i := range in {
					in[i] = uint32(i * 3)
				}
				c := kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in), nil}, OutputCounts: []uint32{0, uint32(sizes[1])}}
				runBoth(t, name, p, c)
			}
		}
	}
}

func TestFoldInt(t *testing.T) {
	for _, tc := range []struct {
		op   ir.BinaryOp
		t    ir.Type
		a, b uint32
		want uint32
		ok   bool
	}{
		{ir.OpAdd, ir.U32, 0xFFFFFFFF, 2, 1, true},
		{ir.OpSub, ir.U32, 1, 2, 0xFFFFFFFF, true},
		{ir.OpMul, ir.I32, 0x10000, 0x10000, 0, true},
		{ir.OpMin, ir.I32, 0xFFFFFFFF, 1, 0xFFFFFFFF, true},
		{ir.OpMin, ir.U32, 0xFFFFFFFF, 1, 1, true},
		{ir.OpMax, ir.I32, 0xFFFFFFFF, 1, 1, true},
		{ir.OpXor, ir.U32, 6, 3, 5, true},
		{ir.OpDiv, ir.U32, 6, 0, 0, true},
		{ir.OpShl, ir.U32, 1, 40, 256, true},
		{ir.OpLAnd, ir.U32, 1, 2, 0, false},
	} {
		got, ok := ranges.Eval(tc.op, tc.t, tc.a, tc.b)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s.%s(%#x, %#x) = %#x, %v; want %#x, %v", tc.op, tc.t, tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
	// Folded constants in a program: 3·4 − 12 = 0, so out[gid + 0·x] = out[gid].
	b := ir.NewBuilder("test.fold", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	z := b.Let("z", ir.Sub(ir.Mul(ir.LitU32(3), ir.LitU32(4)), ir.LitU32(12)))
	i := b.Let("i", ir.Add(ir.GlobalID(0), ir.Mul(z, ir.NumWorkgroups(0))))
	b.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) { then.Store(out, i, ir.Add(i, ir.LitU32(0))) })
	p := b.MustBuild()
	m := mustEmit(t, "fold", p, Options{})
	if strings.Contains(m.Text, "mul.lo.u32") || strings.Contains(m.Text, "sub.u32") || strings.Contains(m.Text, "add.u32") {
		t.Errorf("constant arithmetic left in the text:\n%s", numbered(m.Text))
	}
	runBoth(t, "fold", p, kernels.Case{Grid: [3]uint32{3, 1, 1}, OutputCounts: []uint32{70}})
}

// TestPredicatedIfKeepsSubgroupsInBranches: a subgroup operation must run only
// in the lanes the if admits, so an if around one stays a branch.
func TestPredicatedIfKeepsSubgroupsInBranches(t *testing.T) {
	b := ir.NewBuilder("test.if_subgroup", 64, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) {
		then.Store(out, i, ir.SubgroupAdd(ir.Load(in, i)))
	})
	p := b.MustBuild()
	m := mustEmit(t, p.Name, p, Options{})
	if n := count(m, `\bbra\b`); n == 0 {
		t.Errorf("the if around a subgroup add was predicated:\n%s", numbered(m.Text))
	}
	// Whole subgroups in or out: the IR leaves divergent subgroup operations undefined.
	for _, size := range []int{0, 32, 64, 128} {
		v := make([]uint32, size)
		for k := range v {
			v[k] = uint32(k + 1)
		}
		runBoth(t, p.Name, p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(v), nil}, OutputCounts: []uint32{0, uint32(size)}})
	}
}

// runtimeExitsProgram continues and breaks on data in a loop of six, and adds to
// a var in a predicated if.
func runtimeExitsProgram() *ir.Program {
	b := ir.NewBuilder("test.unroll_runtime_exits", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.ReadWrite)
	sums := b.Buffer("sums", ir.U32, ir.Write)
	base := b.Let("base", ir.Mul(ir.GlobalID(0), ir.LitU32(6)))
	b.Var("sum", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(6), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		v := body.Let("v", ir.Load(out, ir.Add(base, k)))
		body.If(ir.Eq(ir.Rem(v, ir.LitU32(5)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		body.If(ir.Eq(ir.Rem(v, ir.LitU32(7)), ir.LitU32(0)), func(then *ir.Block) { then.Break() })
		body.If(ir.Gt(v, ir.LitU32(10)), func(then *ir.Block) {
			then.Assign("sum", ir.Add(ir.Local("sum"), v))
		})
		body.Store(out, ir.Add(base, k), ir.Mul(v, ir.LitU32(2)))
	})
	b.If(ir.Lt(ir.GlobalID(0), ir.Len(sums)), func(then *ir.Block) {
		then.Store(sums, ir.GlobalID(0), ir.Local("sum"))
	})
	return b.MustBuild()
}

// TestRuntimeBreakContinueUnrolled: continue and break on data in an unrolled
// loop, and an if of an assignment written predicated.
func TestRuntimeBreakContinueUnrolled(t *testing.T) {
	p := runtimeExitsProgram()
	m := mustEmit(t, p.Name, p, Options{})
	if n := count(m, `^\t@%p\d+ mov\.b32 %r\d+, %r\d+`); n != 6 {
		t.Errorf("%d predicated assignments, want 6 (one per copy)\n%s", n, numbered(m.Text))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{0, 6, 100, 250, 384} {
		in := make([]uint32, size)
		for i := range in {
			in[i] = uint32(rng.IntN(40))
		}
		runBoth(t, p.Name, p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in), nil}, OutputCounts: []uint32{0, 50}})
	}
}

// constantIfsProgram has ifs whose conditions fold with the parameter bm.
func constantIfsProgram() *ir.Program {
	b := ir.NewBuilder("test.constant_ifs", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	out2 := b.Buffer("out2", ir.U32, ir.Write)
	bm := b.Param("bm", ir.U32, ir.LitU32(2))
	i := b.Let("i", ir.GlobalID(0))
	b.IfElse(ir.LAnd(ir.Lt(ir.LitU32(1), bm), ir.Ge(ir.LitI32(-1), ir.LitI32(-3))), func(then *ir.Block) {
		then.Store(out, i, ir.LitU32(11))
	}, func(els *ir.Block) {
		els.Store(out, i, ir.LitU32(22))
	})
	b.If(ir.LOr(ir.Ne(bm, ir.LitU32(2)), ir.LitBool(false)), func(then *ir.Block) {
		then.Store(out2, i, ir.LitU32(33))
	})
	return b.MustBuild()
}

// TestConstantIfs: an if on a folded condition is one of its blocks, or
// nothing, and no branch is left.
func TestConstantIfs(t *testing.T) {
	p := constantIfsProgram()
	for _, tc := range []struct {
		bm     uint32
		stores int
	}{{2, 1}, {1, 2}} {
		var spec ir.SpecMap
		spec.Set("bm", ir.SpecU32(tc.bm))
		m := mustEmit(t, p.Name, p, Options{Spec: spec})
		if n := count(m, `\bbra\b`); n != 0 {
			t.Errorf("bm %d: %d branches, want none\n%s", tc.bm, n, numbered(m.Text))
		}
		if n := count(m, `^\t(@%p\d+ )?st\.global`); n != tc.stores {
			t.Errorf("bm %d: %d stores, want %d\n%s", tc.bm, n, tc.stores, numbered(m.Text))
		}
		for _, size := range []int{0, 1, 40, 64} {
			runBoth(t, p.Name, p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Spec: spec, OutputCounts: []uint32{uint32(size), uint32(size)}})
		}
	}
}

// optPrograms are the programs of this file, for the tests over every program
// (ptxas, no contraction).
func optPrograms() []namedProgram {
	spec := func(name string, v uint32) ir.SpecMap {
		var m ir.SpecMap
		m.Set(name, ir.SpecU32(v))
		return m
	}
	var out []namedProgram
	for _, epi := range []uint32{1, 4, 8, maxUnroll + 1} {
		out = append(out, namedProgram{fmt.Sprintf("opt.grid_stride_add.epi%d", epi), gridStrideAdd(64), Options{Spec: spec("epi", epi)}})
	}
	for _, c := range loopPrograms() {
		out = append(out, namedProgram{"opt." + c.p.Name, c.p, Options{}})
	}
	for _, c := range boundsCases() {
		out = append(out, namedProgram{"opt.bound_" + c.name, boundsProgram("test.bound_"+c.name, true, c.cond), Options{}},
			namedProgram{"opt.bound_" + c.name + "_branch", boundsProgram("test.bound_"+c.name+"_branch", false, c.cond), Options{}})
	}
	out = append(out, namedProgram{"opt.runtime_exits", runtimeExitsProgram(), Options{}},
		namedProgram{"opt.constant_ifs.bm1", constantIfsProgram(), Options{Spec: spec("bm", 1)}},
		namedProgram{"opt.constant_ifs.bm2", constantIfsProgram(), Options{Spec: spec("bm", 2)}})
	return out
}

// TestNonCoherentReads: with Options.NonCoherentReads the loads of read buffers
// (only those) take the non-coherent path.
func TestNonCoherentReads(t *testing.T) {
	for _, tc := range []struct {
		kernel    string
		nc, plain int // loads with and without .nc under NonCoherentReads
	}{
		{"vector_add", 2, 0}, // a, b read (one element per invocation); out written
		{"saxpy", 1, 1},      // x read; y read_write
	} {
		k, _ := kernels.Lookup(tc.kernel)
		var one ir.SpecMap
		if _, ok := k.Program().Param("epi"); ok {
			one.Set("epi", ir.SpecU32(1))
		}
		nc := mustEmit(t, tc.kernel, k.Program(), Options{NonCoherentReads: true, Spec: one})
		plain := mustEmit(t, tc.kernel, k.Program(), Options{Spec: one})
		if n := count(nc, `ld\.global\.nc\.b32`); n != tc.nc {
			t.Errorf("%s: %d nc loads, want %d\n%s", tc.kernel, n, tc.nc, numbered(nc.Text))
		}
		if n := count(nc, `ld\.global\.b32`); n != tc.plain {
			t.Errorf("%s: %d plain loads, want %d", tc.kernel, n, tc.plain)
		}
		if n := count(plain, `\.nc\.`); n != 0 {
			t.Errorf("%s: %d nc loads without the option", tc.kernel, n)
		}
	}
}
