package kit

import "github.com/kiln-dev/kiln/ir"

// longLoopCases are the control table's long loops: 100000 and more
// iterations in one invocation, in every loop form (for over u32 and i32, while,
// break, continue, bounds from uniforms and parameters, nesting, loops one
// after another, invocations of one workgroup that loop for different
// lengths). A GPU runs them like any loop. A driver that ends long loops by
// itself (Mesa's llvmpipe stops a shader's loops after 65535 iterations in
// all) must refuse the dispatch (a RejectedError) instead of returning what
// the cut loops computed; these cases accept that refusal, never a wrong value.
// Each runs one small workgroup, so the kit stays cheap.
func longLoopCases() []semantic {
	return []semantic{
		longForU32(), longForI32(), longWhile(), longUniform(), longParam(), longNested(), longDivergent(),
	}
}

// longLoops is the number of iterations the long-loop cases run: more than
// llvmpipe's limit of 65535.
const longLoops = 100000

// longCase is a long-loop case of one invocation and out words.
func longCase(name string, b *ir.Builder, out int, pinned ...uint32) semantic {
	return semantic{name: name, prog: b.Program(), c: launch1(1, [][]byte{nil}, []uint32{uint32(out)}),
		pinned: [][]uint32{pinned}, refusable: true}
}

// longForU32 runs a u32 for loop of 100000 iterations that skips a third of
// them with continue, counting the others and keeping the last value.
func longForU32() semantic {
	b := ir.NewBuilder("kiln.semantics.long.for_u32", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	count := b.Var("count", ir.U32, ir.LitU32(0))
	last := b.Var("last", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(longLoops), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.If(ir.Eq(ir.Rem(k, ir.LitU32(3)), ir.LitU32(1)), func(then *ir.Block) { then.Continue() })
		body.Assign("count", ir.Add(count, ir.LitU32(1)))
		body.Assign("last", k)
	})
	b.Store(out, ir.LitU32(0), count)
	b.Store(out, ir.LitU32(1), last)
	return longCase("long.for_u32", b, 2, longLoops-longLoops/3, longLoops-1)
}

// longForI32 runs a signed for loop from -50000 through 50000 (100001
// iterations) and sums its values.
func longForI32() semantic {
	b := ir.NewBuilder("kiln.semantics.long.for_i32", 1, 1, 1)
	out := b.Buffer("out", ir.I32, ir.Write)
	count := b.Var("count", ir.I32, ir.LitI32(0))
	sum := b.Var("sum", ir.I32, ir.LitI32(7))
	b.For("k", ir.I32, ir.LitI32(-50000), ir.LitI32(50001), ir.LitI32(1), func(body *ir.Block, k ir.Expr) {
		body.Assign("count", ir.Add(count, ir.LitI32(1)))
		body.Assign("sum", ir.Add(sum, k))
	})
	b.Store(out, ir.LitU32(0), count)
	b.Store(out, ir.LitU32(1), sum)
	return longCase("long.for_i32", b, 2, 100001, 7)
}

// longWhile counts to 100000 in a while loop that skips all but every third
// round with continue, then on to 150000 in a while true left by break.
func longWhile() semantic {
	b := ir.NewBuilder("kiln.semantics.long.while", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	c := b.Var("c", ir.U32, ir.LitU32(0))
	thirds := b.Var("thirds", ir.U32, ir.LitU32(0))
	b.While(ir.Lt(c, ir.LitU32(longLoops)), func(body *ir.Block) {
		body.Assign("c", ir.Add(c, ir.LitU32(1)))
		body.If(ir.Ne(ir.Rem(c, ir.LitU32(3)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		body.Assign("thirds", ir.Add(thirds, ir.LitU32(1)))
	})
	b.Store(out, ir.LitU32(0), c)
	b.Store(out, ir.LitU32(1), thirds)
	b.While(ir.LitBool(true), func(body *ir.Block) {
		body.Assign("c", ir.Add(c, ir.LitU32(1)))
		body.If(ir.Eq(c, ir.LitU32(150000)), func(then *ir.Block) { then.Break() })
	})
	b.Store(out, ir.LitU32(2), c)
	return longCase("long.while", b, 3, longLoops, longLoops/3, 150000)
}

// longUniform takes its bound and step from uniforms (100000 and 1), which
// the compiler cannot see.
func longUniform() semantic {
	b := ir.NewBuilder("kiln.semantics.long.uniform", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	n := b.Uniform("n", ir.U32)
	step := b.Uniform("step", ir.U32)
	count := b.Var("count", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), n, step, func(body *ir.Block, _ ir.Expr) {
		body.Assign("count", ir.Add(count, ir.LitU32(1)))
	})
	b.Store(out, ir.LitU32(0), count)
	return withUniforms(longCase("long.uniform", b, 1, longLoops),
		map[string]ir.Literal{"n": ir.LitU32(longLoops), "step": ir.LitU32(1)})
}

// longParam takes its bound from a parameter specialized to 100001.
func longParam() semantic {
	b := ir.NewBuilder("kiln.semantics.long.param", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	n := b.Param("n", ir.U32, ir.LitU32(10))
	count := b.Var("count", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(body *ir.Block, _ ir.Expr) {
		body.Assign("count", ir.Add(count, ir.LitU32(1)))
	})
	b.Store(out, ir.LitU32(0), count)
	s := longCase("long.param", b, 1, longLoops+1)
	s.c.Spec.Set("n", ir.SpecU32(longLoops+1))
	return s
}

// longNested runs 400 × 250 iterations in two nested loops, then two loops
// of 33000 one after the other: no loop is long, but together they are
// (llvmpipe counts the iterations of all of a shader's loops together).
func longNested() semantic {
	b := ir.NewBuilder("kiln.semantics.long.nested", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	inner := b.Var("inner", ir.U32, ir.LitU32(0))
	b.For("i", ir.U32, ir.LitU32(0), ir.LitU32(400), ir.LitU32(1), func(outer *ir.Block, _ ir.Expr) {
		outer.For("j", ir.U32, ir.LitU32(0), ir.LitU32(250), ir.LitU32(1), func(body *ir.Block, _ ir.Expr) {
			body.Assign("inner", ir.Add(inner, ir.LitU32(1)))
		})
	})
	first := b.Var("first", ir.U32, ir.LitU32(0))
	b.For("a", ir.U32, ir.LitU32(0), ir.LitU32(33000), ir.LitU32(1), func(body *ir.Block, _ ir.Expr) {
		body.Assign("first", ir.Add(first, ir.LitU32(1)))
	})
	second := b.Var("second", ir.U32, ir.LitU32(0))
	b.While(ir.Lt(second, ir.LitU32(33000)), func(body *ir.Block) {
		body.Assign("second", ir.Add(second, ir.LitU32(1)))
	})
	b.Store(out, ir.LitU32(0), inner)
	b.Store(out, ir.LitU32(1), first)
	b.Store(out, ir.LitU32(2), second)
	return longCase("long.nested", b, 3, longLoops, 33000, 33000)
}

// longDivergent has the 2 invocations of a workgroup loop 1000 and 100000
// times: one of them goes past 65535.
func longDivergent() semantic {
	b := ir.NewBuilder("kiln.semantics.long.divergent", 2, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	n := b.Let("n", ir.Add(ir.LitU32(1000), ir.Mul(g, ir.LitU32(longLoops-1000))))
	c := b.Var("c", ir.U32, ir.LitU32(0))
	b.While(ir.LitBool(true), func(body *ir.Block) {
		body.If(ir.Ge(c, n), func(then *ir.Block) { then.Break() })
		body.Assign("c", ir.Add(c, ir.LitU32(1)))
	})
	b.Store(out, g, c)
	return longCase("long.divergent", b, 2, 1000, longLoops)
}
