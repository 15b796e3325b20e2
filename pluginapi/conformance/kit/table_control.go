package kit

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// controlCases is the control-flow table: counted loops (signed and unsigned,
// bounds read once, wrapping steps, empty ranges, a signed loop ending at the
// largest i32), while with break and return, nested loops, if/else chains,
// barriers inside uniform loops, every builtin on a 3-D launch with and without
// a workgroup-size override, parameters of every type at their defaults and
// specialized, continue (IR v1.1), arms that all leave and code after a return,
// 40 levels of nesting, locals in scopes, and loops of 100000 and more
// iterations (longLoopCases).
func controlCases() []semantic {
	return append([]semantic{
		forLoops(), whileBreakReturn(), nestedLoops(), ifChains(), barrierLoop(),
		builtins(), builtinsOverride(), params(), paramsDefault(), paramsAndOverride(), continueLoops(),
		armsThatLeave(), deepNesting(), localsAndScopes(),
	}, longLoopCases()...)
}

// forLoops covers signed and unsigned counted loops, negative ranges, bounds
// evaluated once, wrapping steps, empty loops, nesting with break, and a signed
// loop up to the largest i32 (its last step must not wrap into another round).
func forLoops() semantic {
	b := ir.NewBuilder("kiln.semantics.for", 4, 1, 1)
	out := b.Buffer("out", ir.I32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	base := b.Let("base", ir.Mul(i, ir.LitU32(8)))
	sum := b.Var("sum", ir.I32, ir.LitI32(0))
	b.For("k", ir.I32, ir.Sub(ir.LitI32(-5), ir.Cast(ir.I32, i)), ir.LitI32(6), ir.LitI32(3), func(body *ir.Block, k ir.Expr) {
		body.Assign("sum", ir.Add(sum, k))
	})
	b.Store(out, base, sum)
	n := b.Var("n", ir.U32, ir.Add(i, ir.LitU32(2)))
	count := b.Var("count", ir.I32, ir.LitI32(0))
	b.For("j", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(body *ir.Block, _ ir.Expr) {
		body.Assign("n", ir.Add(n, ir.LitU32(1)))
		body.Assign("count", ir.Add(count, ir.LitI32(1)))
	})
	b.Store(out, ir.Add(base, ir.LitU32(1)), count)
	wraps := b.Var("wraps", ir.I32, ir.LitI32(0))
	b.For("w", ir.U32, ir.LitU32(0xFFFFFFFD), ir.LitU32(0xFFFFFFFF), ir.LitU32(0x80000001), func(body *ir.Block, _ ir.Expr) {
		body.Assign("wraps", ir.Add(wraps, ir.LitI32(1)))
	})
	b.Store(out, ir.Add(base, ir.LitU32(2)), wraps)
	empty := b.Var("empty", ir.I32, ir.LitI32(0))
	b.For("e", ir.I32, ir.LitI32(5), ir.LitI32(-5), ir.LitI32(1), func(body *ir.Block, _ ir.Expr) {
		body.Assign("empty", ir.LitI32(1))
	})
	b.Store(out, ir.Add(base, ir.LitU32(3)), empty)
	pairs := b.Var("pairs", ir.I32, ir.LitI32(0))
	b.For("x", ir.U32, ir.LitU32(0), ir.LitU32(10), ir.LitU32(1), func(body *ir.Block, x ir.Expr) {
		body.For("y", ir.U32, ir.LitU32(0), ir.LitU32(10), ir.LitU32(1), func(inner *ir.Block, y ir.Expr) {
			inner.If(ir.Gt(y, ir.Add(x, i)), func(then *ir.Block) { then.Break() })
			inner.Assign("pairs", ir.Add(pairs, ir.LitI32(1)))
		})
		body.If(ir.Eq(x, ir.LitU32(6)), func(then *ir.Block) { then.Break() })
	})
	b.Store(out, ir.Add(base, ir.LitU32(4)), pairs)
	last := b.Var("last", ir.I32, ir.LitI32(-1))
	b.For("m", ir.I32, ir.LitI32(math.MaxInt32-2), ir.LitI32(math.MaxInt32), ir.LitI32(1), func(body *ir.Block, m ir.Expr) {
		body.Assign("last", m)
	})
	b.Store(out, ir.Add(base, ir.LitU32(5)), last)
	return semantic{name: "for", prog: b.Program(), c: launch1(1, [][]byte{nil}, []uint32{32}),
		// Invocation 0: -5+-2+1+4 = -2; 2 iterations (n read once); 2 wrapping
		// steps (0xFFFFFFFD, then 0x7FFFFFFE); no empty-range iteration; 1+2+...+7;
		// the last of MaxInt32-2 and MaxInt32-1.
		pinned: [][]uint32{i32Bits(-2, 2, 2, 0, 28, math.MaxInt32-1)}}
}

// whileBreakReturn runs a data-dependent while loop (Collatz steps) with a break
// and an early return for some invocations.
func whileBreakReturn() semantic {
	b, in, out := inOut("kiln.semantics.while", 32, ir.U32, ir.U32)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Ge(i, ir.Len(in)), func(then *ir.Block) { then.Return() })
	b.Store(out, i, ir.LitU32(0xFFFF))
	b.If(ir.Eq(ir.Rem(i, ir.LitU32(5)), ir.LitU32(4)), func(then *ir.Block) { then.Return() })
	x := b.Var("x", ir.U32, ir.Load(in, i))
	steps := b.Var("steps", ir.U32, ir.LitU32(0))
	b.While(ir.Gt(x, ir.LitU32(1)), func(body *ir.Block) {
		body.IfElse(ir.Eq(ir.And(x, ir.LitU32(1)), ir.LitU32(0)), func(then *ir.Block) {
			then.Assign("x", ir.Shr(x, ir.LitU32(1)))
		}, func(els *ir.Block) {
			els.Assign("x", ir.Add(ir.Mul(x, ir.LitU32(3)), ir.LitU32(1)))
		})
		body.Assign("steps", ir.Add(steps, ir.LitU32(1)))
		body.If(ir.Ge(steps, ir.LitU32(100)), func(then *ir.Block) { then.Break() })
	})
	b.Store(out, i, steps)
	return semantic{name: "while", prog: b.Program(),
		c: launch1(2, [][]byte{words(u32s(50, func(i int) uint32 { return uint32(i*37 + 1) })), nil}, []uint32{0, 64})}
}

// nestedLoops: a signed loop whose bound the body raises (read once), a while
// inside a while left by break and by return, and a sign-dependent store.
func nestedLoops() semantic {
	const n = 16
	b, in, out := inOut("kiln.semantics.nested", n, ir.I32, ir.I32)
	gid := b.Let("gid", ir.GlobalID(0))
	x := b.Let("x", ir.Load(in, gid))
	acc := b.Var("acc", ir.I32, ir.LitI32(0))
	limit := b.Var("limit", ir.I32, ir.Sub(x, ir.LitI32(4)))
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
			want[g] = i(-13)
			continue
		}
		accV = accV*100 + k
		if xv%2 != 0 {
			accV = -accV
		}
		want[g] = uint32(accV)
	}
	return semantic{name: "nested", prog: b.Program(), c: launch1(1, [][]byte{words(inputs), nil}, []uint32{0, n}),
		pinned: [][]uint32{want}}
}

// ifChains classifies i32 edge values through nested if/else chains whose arms
// end in stores, returns, or fall through.
func ifChains() semantic {
	b, in, out := inOut("kiln.semantics.if", 32, ir.I32, ir.U32)
	g := b.Let("g", ir.GlobalID(0))
	x := b.Let("x", ir.Load(in, g))
	class := b.Var("class", ir.U32, ir.LitU32(0))
	b.IfElse(ir.Lt(x, ir.LitI32(0)), func(neg *ir.Block) {
		neg.IfElse(ir.Eq(x, ir.LitI32(math.MinInt32)), func(then *ir.Block) {
			then.Store(out, g, ir.LitU32(100))
			then.Return()
		}, func(els *ir.Block) {
			els.Assign("class", ir.LitU32(1))
		})
	}, func(nonneg *ir.Block) {
		nonneg.If(ir.Eq(x, ir.LitI32(0)), func(then *ir.Block) { then.Assign("class", ir.LitU32(2)) })
		nonneg.If(ir.Gt(x, ir.LitI32(31)), func(then *ir.Block) {
			then.IfElse(ir.Eq(ir.And(x, ir.LitI32(1)), ir.LitI32(1)), func(odd *ir.Block) {
				odd.Assign("class", ir.LitU32(3))
			}, func(even *ir.Block) {
				even.Assign("class", ir.LitU32(4))
			})
		})
	})
	b.Store(out, g, ir.Add(class, ir.Mul(g, ir.LitU32(10))))
	return semantic{name: "if", prog: b.Program(), c: launch1(1, [][]byte{words(i32Edges), nil}, []uint32{0, 32})}
}

// barrierLoop accumulates through shared memory in a uniform loop with two
// barriers per iteration: each round every lane adds its neighbour's value.
func barrierLoop() semantic {
	b, in, out := inOut("kiln.semantics.barrier_loop", 16, ir.U32, ir.U32)
	sh := b.Shared("sh", ir.U32, 16)
	l := b.Let("l", ir.LocalID(0))
	g := b.Let("g", ir.GlobalID(0))
	v := b.Var("v", ir.U32, ir.Load(in, g))
	b.For("round", ir.U32, ir.LitU32(0), ir.LitU32(5), ir.LitU32(1), func(body *ir.Block, round ir.Expr) {
		body.Store(sh, l, v)
		body.Barrier()
		body.Assign("v", ir.Add(ir.Mul(v, ir.LitU32(3)), ir.Load(sh, ir.Rem(ir.Add(l, ir.Add(round, ir.LitU32(1))), ir.LitU32(16)))))
		body.Barrier()
	})
	b.Store(out, g, v)
	return semantic{name: "barrier_loop", prog: b.Program(),
		c: launch1(3, [][]byte{words(u32s(48, func(i int) uint32 { return uint32(i*i + 7) })), nil}, []uint32{0, 48})}
}

// builtinProgram stores every builtin of every invocation of a 3-D launch.
func builtinProgram() *ir.Program {
	b := ir.NewBuilder("kiln.semantics.builtins", 2, 3, 2)
	out := b.Buffer("out", ir.U32, ir.Write)
	nx := b.Let("nx", ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0)))
	ny := b.Let("ny", ir.Mul(ir.NumWorkgroups(1), ir.WorkgroupSize(1)))
	flat := b.Let("flat", ir.Add(ir.GlobalID(0), ir.Mul(nx, ir.Add(ir.GlobalID(1), ir.Mul(ny, ir.GlobalID(2))))))
	base := b.Let("base", ir.Mul(flat, ir.LitU32(15)))
	kinds := []func(uint8) ir.Expr{ir.GlobalID, ir.LocalID, ir.WorkgroupID, ir.NumWorkgroups, ir.WorkgroupSize}
	for k, f := range kinds {
		for axis := range uint8(3) {
			b.Store(out, ir.Add(base, ir.LitU32(uint32(3*k)+uint32(axis))), f(axis))
		}
	}
	return b.Program()
}

func builtins() semantic {
	grid := [3]uint32{3, 2, 2}
	n := 15 * 3 * 2 * 2 * 2 * 3 * 2
	return semantic{name: "builtins", prog: builtinProgram(),
		c: launch{Case: kernels.Case{Grid: grid, Inputs: [][]byte{nil}, OutputCounts: []uint32{uint32(n)}}}}
}

// builtinsOverride runs the same program with a workgroup-size override.
func builtinsOverride() semantic {
	grid := [3]uint32{2, 1, 3}
	wg := [3]uint32{4, 2, 1}
	n := 15 * 2 * 1 * 3 * 4 * 2 * 1
	return semantic{name: "builtins.override", prog: builtinProgram(),
		c: launch{Case: kernels.Case{Grid: grid, WorkgroupSize: wg, Inputs: [][]byte{nil}, OutputCounts: []uint32{uint32(n)}}}}
}

// paramProgram stores values computed from parameters of every type.
func paramProgram() *ir.Program {
	b := ir.NewBuilder("kiln.semantics.params", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	pu := b.Param("pu", ir.U32, ir.LitU32(7))
	pi := b.Param("pi", ir.I32, ir.LitI32(-3))
	pf := b.Param("pf", ir.F32, ir.LitF32(2.5))
	pb := b.Param("pb", ir.Bool, ir.LitBool(true))
	b.Store(out, ir.LitU32(0), pu)
	b.Store(out, ir.LitU32(1), ir.Cast(ir.U32, pi))
	b.Store(out, ir.LitU32(2), ir.Cast(ir.U32, ir.Mul(pf, ir.LitF32(4))))
	b.Store(out, ir.LitU32(3), ir.Select(pb, ir.LitU32(1), ir.LitU32(2)))
	for k := range uint32(4) {
		b.Store(out, ir.LitU32(4+k), ir.Cast(ir.U32, ir.Eq(ir.Rem(pu, ir.LitU32(k+2)), ir.LitU32(1))))
	}
	return b.Program()
}

func params() semantic {
	s := semantic{name: "params.spec", prog: paramProgram(), c: launch1(1, [][]byte{nil}, []uint32{8}),
		pinned: [][]uint32{{0xFFFFFFF1, minI32Bits, 0, 2, 1, 1, 1, 1}}}
	s.c.Spec.Set("pu", ir.SpecU32(0xFFFFFFF1))
	s.c.Spec.Set("pi", ir.SpecI32(math.MinInt32))
	s.c.Spec.Set("pf", ir.SpecF32(-1e30))
	s.c.Spec.Set("pb", ir.SpecBool(false))
	return s
}

func paramsDefault() semantic {
	return semantic{name: "params.default", prog: paramProgram(), c: launch1(1, [][]byte{nil}, []uint32{8}),
		pinned: [][]uint32{{7, i(-3), 10, 1, 1, 1, 0, 0}}}
}

// paramsAndOverride specializes parameters together with a workgroup-size
// override.
func paramsAndOverride() semantic {
	b := ir.NewBuilder("kiln.semantics.params.override", 2, 2, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	scale := b.Param("scale", ir.U32, ir.LitU32(3))
	flip := b.Param("flip", ir.Bool, ir.LitBool(false))
	half := b.Param("half", ir.F32, ir.LitF32(0.5))
	lin := b.Let("lin", ir.Add(ir.Mul(ir.LocalID(1), ir.WorkgroupSize(0)), ir.LocalID(0)))
	v := ir.Add(ir.Mul(lin, scale), ir.Cast(ir.U32, ir.Mul(half, ir.LitF32(4))))
	b.Store(out, lin, ir.Select(flip, ir.Not(v), v))
	b.Store(out, ir.Add(lin, ir.LitU32(100)), ir.Mul(ir.WorkgroupSize(0), ir.WorkgroupSize(1)))
	s := semantic{name: "params.override", prog: b.Program(),
		c:      launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, WorkgroupSize: [3]uint32{3, 1, 1}, Inputs: [][]byte{nil}, OutputCounts: []uint32{110}}},
		pinned: [][]uint32{{4, 14, 24}}}
	s.c.Spec.Set("scale", ir.SpecU32(10))
	s.c.Spec.Set("half", ir.SpecF32(1))
	return s
}

// continueLoops (IR v1.1): continue in a for loop (the step is still added),
// in a while loop (the condition is tested again), in nested loops and next to
// break.
func continueLoops() semantic {
	b := ir.NewBuilder("kiln.semantics.continue", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	acc := b.Var("acc", ir.U32, ir.LitU32(0))
	iters := b.Var("iters", ir.U32, ir.LitU32(0))
	b.For("i", ir.U32, ir.LitU32(0), ir.Add(g, ir.LitU32(10)), ir.LitU32(1), func(outer *ir.Block, i ir.Expr) {
		outer.Assign("iters", ir.Add(iters, ir.LitU32(1)))
		outer.If(ir.Eq(ir.Rem(i, ir.LitU32(3)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		n := outer.Var("n", ir.U32, i)
		outer.While(ir.Gt(n, ir.LitU32(0)), func(inner *ir.Block) {
			inner.Assign("n", ir.Sub(n, ir.LitU32(1)))
			inner.If(ir.Eq(ir.And(n, ir.LitU32(1)), ir.LitU32(1)), func(then *ir.Block) { then.Continue() })
			inner.Assign("acc", ir.Add(acc, n))
			inner.If(ir.Gt(acc, ir.Add(ir.LitU32(40), g)), func(then *ir.Block) { then.Break() })
		})
		outer.IfElse(ir.Gt(acc, ir.LitU32(20)), func(then *ir.Block) { then.Continue() },
			func(els *ir.Block) { els.Assign("acc", ir.Add(acc, ir.LitU32(100))) })
	})
	signed := b.Var("signed", ir.I32, ir.LitI32(0))
	b.For("j", ir.I32, ir.LitI32(-4), ir.LitI32(4), ir.LitI32(1), func(body *ir.Block, j ir.Expr) {
		body.If(ir.Lt(j, ir.LitI32(0)), func(then *ir.Block) { then.Continue() })
		body.Assign("signed", ir.Add(signed, j))
	})
	base := b.Let("base", ir.Mul(g, ir.LitU32(3)))
	b.Store(out, base, acc)
	b.Store(out, ir.Add(base, ir.LitU32(1)), iters)
	b.Store(out, ir.Add(base, ir.LitU32(2)), ir.Cast(ir.U32, signed))
	var want []uint32
	for g := uint32(0); g < 8; g++ {
		acc, iters := uint32(0), uint32(0)
		for i := uint32(0); i < g+10; i++ {
			iters++
			if i%3 == 0 {
				continue
			}
			for n := i; n > 0; {
				n--
				if n&1 == 1 {
					continue
				}
				acc += n
				if acc > 40+g {
					break
				}
			}
			if acc > 20 {
				continue
			}
			acc += 100
		}
		want = append(want, acc, iters, 0+1+2+3)
	}
	return semantic{name: "continue", prog: b.Program(), c: launch1(1, [][]byte{nil}, []uint32{24}), pinned: [][]uint32{want}}
}

// armsThatLeave has if/else whose arms both break or return, loops whose bodies
// always return, and code after a return that never runs.
func armsThatLeave() semantic {
	b, in, out := inOut("kiln.semantics.arms", 16, ir.U32, ir.U32)
	g := b.Let("g", ir.GlobalID(0))
	x := b.Let("x", ir.Load(in, g))
	acc := b.Var("acc", ir.U32, ir.LitU32(1))
	b.While(ir.LitBool(true), func(loop *ir.Block) {
		loop.IfElse(ir.Gt(x, ir.LitU32(5)), func(then *ir.Block) { then.Break() }, func(els *ir.Block) { els.Break() })
		loop.Assign("acc", ir.LitU32(0xBAD))
	})
	b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.IfElse(ir.Lt(k, ir.Rem(x, ir.LitU32(3))), func(then *ir.Block) {
			then.Assign("acc", ir.Add(acc, ir.LitU32(10)))
		}, func(els *ir.Block) { els.Break() })
	})
	b.Store(out, g, acc)
	b.If(ir.Eq(ir.Rem(x, ir.LitU32(4)), ir.LitU32(0)), func(then *ir.Block) {
		then.For("k", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
			body.Store(out, g, ir.Add(acc, ir.Add(k, ir.LitU32(100))))
			body.Return()
		})
	})
	b.If(ir.Eq(ir.Rem(x, ir.LitU32(4)), ir.LitU32(1)), func(then *ir.Block) {
		then.While(ir.LitBool(true), func(loop *ir.Block) { loop.Return() })
	})
	b.IfElse(ir.Lt(x, ir.LitU32(9)), func(then *ir.Block) {
		then.Store(out, g, ir.Add(acc, ir.LitU32(1000)))
		then.Return()
		then.Store(out, g, ir.LitU32(0xBAD))
	}, func(els *ir.Block) { els.Return() })
	b.Store(out, g, ir.LitU32(0xBAD))
	xs := u32s(16, func(k int) uint32 { return uint32(k * 5 % 13) })
	want := make([]uint32, 16)
	for k, x := range xs {
		acc := uint32(1)
		for j := range uint32(4) {
			if j >= x%3 {
				break
			}
			acc += 10
		}
		switch {
		case x%4 == 0:
			want[k] = acc + 100
		case x%4 == 1, x >= 9:
			want[k] = acc
		default:
			want[k] = acc + 1000
		}
	}
	return semantic{name: "arms", prog: b.Program(), c: launch1(1, [][]byte{words(xs), nil}, []uint32{0, 16}), pinned: [][]uint32{want}}
}

// deepNesting nests ifs and while loops 40 deep, leaving from the innermost
// levels: invocation g stores g+7 when it gets through every level, else the
// depth of the if that turned it away.
func deepNesting() semantic {
	b := ir.NewBuilder("kiln.semantics.deep", 64, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	var nest func(blk *ir.Block, depth int)
	nest = func(blk *ir.Block, depth int) {
		if depth == 0 {
			blk.Store(out, g, ir.Add(g, ir.LitU32(7)))
			return
		}
		if depth%2 == 0 {
			blk.IfElse(ir.Lt(g, ir.LitU32(uint32(depth+20))), func(then *ir.Block) { nest(then, depth-1) },
				func(els *ir.Block) {
					els.Store(out, g, ir.LitU32(uint32(depth)))
					els.Return()
				})
			return
		}
		blk.While(ir.Gt(g, ir.LitU32(uint32(depth/4))), func(loop *ir.Block) { nest(loop, depth-1); loop.Break() })
	}
	nest(&b.Block, 40)
	return semantic{name: "deep", prog: b.Program(), c: launch1(1, [][]byte{nil}, []uint32{64})}
}

// localsAndScopes checks that a let keeps the value a var had when it was bound,
// that sibling scopes can reuse names with other types, and that vars of every
// type are assigned in branches and loops.
func localsAndScopes() semantic {
	b := ir.NewBuilder("kiln.semantics.locals", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	outF := b.Buffer("out_f", ir.F32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	base := b.Let("base", ir.Mul(g, ir.LitU32(8)))
	s := b.Var("s", ir.U32, ir.Add(g, ir.LitU32(1)))
	snap := b.Let("snap", s)
	b.Assign("s", ir.Mul(s, ir.LitU32(100)))
	b.Store(out, base, snap)
	b.Store(out, ir.Add(base, ir.LitU32(1)), s)
	flag := b.Var("flag", ir.Bool, ir.Eq(ir.Rem(g, ir.LitU32(2)), ir.LitU32(0)))
	kept := b.Let("kept", flag)
	b.Assign("flag", ir.Not(flag))
	b.Store(out, ir.Add(base, ir.LitU32(2)), ir.Add(ir.Cast(ir.U32, kept), ir.Mul(ir.Cast(ir.U32, flag), ir.LitU32(2))))
	f := b.Var("f", ir.F32, ir.Cast(ir.F32, g))
	b.IfElse(kept, func(then *ir.Block) {
		x := then.Var("x", ir.U32, ir.LitU32(3))
		then.Assign("f", ir.Mul(f, ir.LitF32(0.5)))
		then.Store(out, ir.Add(base, ir.LitU32(3)), x)
	}, func(els *ir.Block) {
		x := els.Let("x", ir.LitF32(2.5))
		els.Assign("f", ir.Add(f, x))
	})
	b.Store(outF, g, f)
	neg := b.Var("neg", ir.I32, ir.LitI32(0))
	b.For("k", ir.I32, ir.LitI32(0), ir.Cast(ir.I32, g), ir.LitI32(1), func(body *ir.Block, k ir.Expr) {
		t := body.Let("t", ir.Sub(neg, k))
		body.Assign("neg", t)
	})
	b.Store(out, ir.Add(base, ir.LitU32(4)), ir.Cast(ir.U32, neg))
	// Invocation 0: snap 1, s 100, kept 1 + flag 0, x 3, neg 0; invocation 1:
	// snap 2, s 200, kept 0 + flag 2·1, no x, neg 0. f: 0·0.5, 1+2.5.
	return semantic{name: "locals", prog: b.Program(), c: launch1(1, [][]byte{nil, nil}, []uint32{64, 8}),
		pinned: [][]uint32{{1, 100, 1, 3, 0, 0, 0, 0, 2, 200, 2, 0, 0}, f32Bits(0, 3.5)}}
}
