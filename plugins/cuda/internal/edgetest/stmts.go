package edgetest

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// StatementCases are the programs for memory, atomics, control flow, builtins,
// parameters and launch shapes; they compare bit for bit, and every output they
// produce is independent of the order in which invocations run.
func StatementCases() []Case {
	return []Case{
		outOfBounds(), sharedOutOfBounds(), atomicsOnBuffers(), atomicsOnShared(), sharedReverse(), zeroFill(),
		forLoops(), whileBreakReturn(), armsThatLeave(), deepNesting(), localsAndScopes(), barriersInLoops(),
		builtins([3]uint32{3, 2, 2}, [3]uint32{}), builtins([3]uint32{2, 1, 3}, [3]uint32{4, 2, 1}),
		params(true), params(false), emptyBuffers(), emptyGrid(), readWrite(), fixedCount(),
	}
}

func seq(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func launch(grid [3]uint32, inputs [][]byte, counts []uint32) kernels.Case {
	return kernels.Case{Grid: grid, Inputs: inputs, OutputCounts: counts}
}

// outOfBounds loads past the end (0) and stores and applies atomics past the end
// (nothing; an atomic's result is 0), with indices near 2^32 whose byte offsets
// would wrap a 32-bit address.
func outOfBounds() Case {
	b := ir.NewBuilder("edge.oob", 32, 1, 1)
	a := b.Buffer("a", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	n := b.Let("n", ir.Len(a))
	b.Store(out, i, ir.Add(ir.Load(a, ir.Add(i, n)), ir.Load(a, ir.Sub(ir.LitU32(0), ir.Add(i, ir.LitU32(1))))))
	b.Store(out, ir.Add(i, ir.Len(out)), ir.LitU32(7))
	b.Store(out, ir.Add(ir.LitU32(0x40000000), i), ir.LitU32(9))
	b.Store(out, ir.LitU32(0xFFFFFFFF), ir.LitU32(11))
	b.Atomic(ir.AtomicAdd, out, ir.Add(ir.Len(out), i), ir.LitU32(5))
	old := b.AtomicResult(ir.AtomicExchange, out, ir.Add(ir.LitU32(0xC0000000), i), ir.LitU32(5), "old")
	b.If(ir.Eq(old, ir.LitU32(0)), func(then *ir.Block) {
		then.Atomic(ir.AtomicAdd, out, i, ir.LitU32(1000))
	})
	return Case{Name: "oob", Prog: b.MustBuild(), Launch: launch([3]uint32{2, 1, 1},
		[][]byte{Words(seq(40, func(i int) uint32 { return uint32(i) + 100 })), nil}, []uint32{0, 48})}
}

// sharedOutOfBounds reads, writes and applies atomics to a shared array past its
// fixed count.
func sharedOutOfBounds() Case {
	b := ir.NewBuilder("edge.shared.oob", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, 8)
	guard := b.Shared("guard", ir.U32, 1)
	l := b.Let("l", ir.LocalID(0))
	b.Store(sh, l, ir.Add(l, ir.LitU32(1)))
	b.If(ir.Eq(l, ir.LitU32(0)), func(then *ir.Block) { then.Store(guard, ir.LitU32(0), ir.LitU32(42)) })
	b.Store(sh, ir.Add(l, ir.LitU32(8)), ir.LitU32(99))
	b.Atomic(ir.AtomicAdd, sh, ir.Add(l, ir.LitU32(1000)), ir.LitU32(1))
	r := b.AtomicResult(ir.AtomicOr, guard, ir.Add(l, ir.LitU32(1)), ir.LitU32(1), "r")
	b.Barrier()
	v := ir.Add(ir.Load(sh, ir.Sub(ir.LitU32(7), l)), ir.Load(sh, ir.Add(l, ir.LitU32(8))))
	b.Store(out, ir.GlobalID(0), ir.Add(v, ir.Add(r, ir.Load(guard, ir.LitU32(0)))))
	return Case{Name: "shared.oob", Prog: b.MustBuild(), Launch: launch([3]uint32{3, 1, 1}, [][]byte{nil}, []uint32{24})}
}

// atomicsOnBuffers applies every atomic operation from many invocations to a few
// slots, whose final values do not depend on the order, and takes results only
// where one invocation owns a slot.
func atomicsOnBuffers() Case {
	b := ir.NewBuilder("edge.atomics.buffer", 64, 1, 1)
	u := b.Buffer("u", ir.U32, ir.ReadWrite)
	s := b.Buffer("s", ir.I32, ir.ReadWrite)
	own := b.Buffer("own", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	si := b.Let("si", ir.Sub(ir.Cast(ir.I32, i), ir.LitI32(100)))
	b.Atomic(ir.AtomicAdd, u, ir.LitU32(0), i)
	b.Atomic(ir.AtomicOr, u, ir.LitU32(1), ir.Shl(ir.LitU32(1), ir.Rem(i, ir.LitU32(32))))
	b.Atomic(ir.AtomicAnd, u, ir.LitU32(2), ir.Not(ir.Shl(ir.LitU32(1), ir.Rem(i, ir.LitU32(29)))))
	b.Atomic(ir.AtomicXor, u, ir.LitU32(3), ir.Mul(i, ir.LitU32(2654435761)))
	b.Atomic(ir.AtomicMin, u, ir.LitU32(4), ir.Add(i, ir.LitU32(0x7FFFFFF0)))
	b.Atomic(ir.AtomicMax, u, ir.LitU32(5), ir.Add(i, ir.LitU32(0x7FFFFFF0)))
	b.Atomic(ir.AtomicMin, s, ir.LitU32(0), si)
	b.Atomic(ir.AtomicMax, s, ir.LitU32(1), si)
	b.Atomic(ir.AtomicAdd, s, ir.LitU32(2), si)
	// Each invocation owns own[2i] and own[2i+1]: every operation's old value is
	// then known.
	slot := b.Let("slot", ir.Mul(i, ir.LitU32(2)))
	var olds []ir.Expr
	for k, op := range ir.AtomicOps() {
		if op == ir.AtomicCompareExchange {
			continue
		}
		olds = append(olds, b.AtomicResult(op, own, slot, ir.Add(i, ir.LitU32(uint32(k)*7)), "old_"+op.String()))
	}
	// After the exchange the slot holds i + 42: the first cas matches and stores,
	// the second no longer matches.
	olds = append(olds, b.AtomicCAS(own, slot, ir.Add(i, ir.LitU32(42)), ir.Add(i, ir.LitU32(49)), "cas_hit"))
	olds = append(olds, b.AtomicCAS(own, slot, ir.Add(i, ir.LitU32(42)), ir.LitU32(0xBAD), "cas_miss"))
	acc := olds[0]
	for _, o := range olds[1:] {
		acc = ir.Xor(ir.Mul(acc, ir.LitU32(31)), o)
	}
	b.Store(own, ir.Add(slot, ir.LitU32(1)), acc)
	sOld := b.AtomicResult(ir.AtomicMin, s, ir.Add(ir.LitU32(3), i), ir.LitI32(-5), "s_old")
	b.Store(s, ir.Add(ir.LitU32(3), i), ir.Add(sOld, ir.Load(s, ir.Add(ir.LitU32(3), i))))
	uInit := []uint32{0, 0, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0}
	sInit := append([]uint32{0, 0x80000000, 0}, seq(256, func(i int) uint32 { return uint32(int32(i) - 128) })...)
	ownInit := seq(512, func(i int) uint32 { return uint32(i) * 0x9E3779B9 })
	return Case{Name: "atomics.buffer", Prog: b.MustBuild(), Launch: launch([3]uint32{4, 1, 1},
		[][]byte{Words(uInit), Words(sInit), Words(ownInit)}, []uint32{0, 0, 0})}
}

// atomicsOnShared accumulates a workgroup histogram in shared memory, with a
// slot of its own for min and for max so the final values do not depend on the
// order.
func atomicsOnShared() Case {
	b := ir.NewBuilder("edge.atomics.shared", 64, 1, 1)
	out := b.Buffer("out", ir.I32, ir.Write)
	h := b.Shared("h", ir.I32, 6)
	l := b.Let("l", ir.LocalID(0))
	b.If(ir.Lt(l, ir.LitU32(6)), func(then *ir.Block) { then.Store(h, l, ir.LitI32(0)) })
	b.Barrier()
	b.Atomic(ir.AtomicAdd, h, ir.Rem(l, ir.LitU32(4)), ir.Sub(ir.Cast(ir.I32, l), ir.LitI32(10)))
	b.Atomic(ir.AtomicMin, h, ir.LitU32(4), ir.Neg(ir.Cast(ir.I32, ir.Add(l, ir.WorkgroupID(0)))))
	b.Atomic(ir.AtomicMax, h, ir.LitU32(5), ir.Cast(ir.I32, ir.Mul(l, l)))
	b.Barrier()
	b.If(ir.Lt(l, ir.LitU32(6)), func(then *ir.Block) {
		then.Store(out, ir.Add(ir.Mul(ir.WorkgroupID(0), ir.LitU32(6)), l), ir.Load(h, l))
	})
	return Case{Name: "atomics.shared", Prog: b.MustBuild(), Launch: launch([3]uint32{3, 1, 1}, [][]byte{nil}, []uint32{18})}
}

// sharedReverse reverses each workgroup's slice through shared arrays of f32 and
// bool across a barrier.
func sharedReverse() Case {
	b := ir.NewBuilder("edge.shared.reverse", 16, 1, 1)
	in := b.Buffer("in", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	flags := b.Buffer("flags", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.F32, 16)
	neg := b.Shared("neg", ir.Bool, 16)
	l := b.Let("l", ir.LocalID(0))
	g := b.Let("g", ir.GlobalID(0))
	v := b.Let("v", ir.Load(in, g))
	b.Store(sh, l, v)
	b.Store(neg, l, ir.Lt(v, ir.LitF32(0)))
	b.Barrier()
	r := b.Let("r", ir.Sub(ir.LitU32(15), l))
	b.Store(out, g, ir.Load(sh, r))
	b.Store(flags, g, ir.Cast(ir.U32, ir.Load(neg, r)))
	return Case{Name: "shared.reverse", Prog: b.MustBuild(), Launch: launch([3]uint32{2, 1, 1},
		[][]byte{Words(F32()[:32]), nil, nil}, []uint32{0, 32, 32})}
}

// zeroFill writes only some elements of write buffers: the rest must come back 0.
func zeroFill() Case {
	b := ir.NewBuilder("edge.zero_fill", 32, 1, 1)
	out := b.Buffer("out", ir.F32, ir.Write)
	sparse := b.Buffer("sparse", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Eq(ir.Rem(i, ir.LitU32(3)), ir.LitU32(1)), func(then *ir.Block) { then.Store(out, i, ir.LitF32(-1)) })
	b.If(ir.Lt(i, ir.LitU32(2)), func(then *ir.Block) { then.Store(sparse, ir.Mul(i, ir.LitU32(1000)), ir.LitU32(5)) })
	return Case{Name: "zero.fill", Prog: b.MustBuild(), Launch: launch([3]uint32{2, 1, 1}, [][]byte{nil, nil}, []uint32{100, 2000})}
}

// forLoops covers signed and unsigned counted loops, negative ranges, bounds
// evaluated once although the body changes the vars they came from, wrapping
// steps, empty loops, continue and nesting with break.
func forLoops() Case {
	b := ir.NewBuilder("edge.for", 4, 1, 1)
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
	b.For("m", ir.I32, ir.LitI32(0x7FFFFFFD), ir.LitI32(0x7FFFFFFF), ir.LitI32(1), func(body *ir.Block, m ir.Expr) {
		body.Assign("last", m)
	})
	b.Store(out, ir.Add(base, ir.LitU32(5)), last)
	return Case{Name: "for", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil}, []uint32{32})}
}

// whileBreakReturn runs a data-dependent while loop (Collatz steps) with a break
// and an early return for some invocations.
func whileBreakReturn() Case {
	b := ir.NewBuilder("edge.while", 32, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
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
	return Case{Name: "while", Prog: b.MustBuild(), Launch: launch([3]uint32{2, 1, 1},
		[][]byte{Words(seq(50, func(i int) uint32 { return uint32(i*37 + 1) })), nil}, []uint32{0, 64})}
}

// armsThatLeave has if/else whose arms both break or return, loops whose bodies
// always return, and code after a return that never runs.
func armsThatLeave() Case {
	b := ir.NewBuilder("edge.arms", 16, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	x := b.Let("x", ir.Load(in, i))
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
	b.Store(out, i, acc)
	b.If(ir.Eq(ir.Rem(x, ir.LitU32(4)), ir.LitU32(0)), func(then *ir.Block) {
		then.For("k", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
			body.Store(out, i, ir.Add(acc, ir.Add(k, ir.LitU32(100))))
			body.Return()
		})
	})
	b.If(ir.Eq(ir.Rem(x, ir.LitU32(4)), ir.LitU32(1)), func(then *ir.Block) {
		then.While(ir.LitBool(true), func(loop *ir.Block) { loop.Return() })
	})
	b.IfElse(ir.Lt(x, ir.LitU32(9)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(acc, ir.LitU32(1000)))
		then.Return()
		then.Store(out, i, ir.LitU32(0xBAD))
	}, func(els *ir.Block) { els.Return() })
	b.Store(out, i, ir.LitU32(0xBAD))
	return Case{Name: "arms.leave", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1},
		[][]byte{Words(seq(16, func(i int) uint32 { return uint32(i * 5 % 13) })), nil}, []uint32{0, 16})}
}

// deepNesting nests ifs and loops 40 deep, leaving from the innermost levels.
func deepNesting() Case {
	b := ir.NewBuilder("edge.deep", 64, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	var nest func(blk *ir.Block, depth int)
	nest = func(blk *ir.Block, depth int) {
		if depth == 0 {
			blk.Store(out, i, ir.Add(i, ir.LitU32(7)))
			return
		}
		if depth%2 == 0 {
			blk.IfElse(ir.Lt(i, ir.LitU32(uint32(depth+20))), func(then *ir.Block) { nest(then, depth-1) },
				func(els *ir.Block) {
					els.Store(out, i, ir.LitU32(uint32(depth)))
					els.Return()
				})
			return
		}
		blk.While(ir.Gt(i, ir.LitU32(uint32(depth/4))), func(loop *ir.Block) { nest(loop, depth-1); loop.Break() })
	}
	nest(&b.Block, 40)
	return Case{Name: "deep", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil}, []uint32{64})}
}

// localsAndScopes checks that a let keeps the value a var had when it was bound,
// that sibling scopes can reuse names with other types, and that vars of every
// type are assigned in branches.
func localsAndScopes() Case {
	b := ir.NewBuilder("edge.locals", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	outF := b.Buffer("out_f", ir.F32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	base := b.Let("base", ir.Mul(i, ir.LitU32(8)))
	s := b.Var("s", ir.U32, ir.Add(i, ir.LitU32(1)))
	snap := b.Let("snap", s)
	b.Assign("s", ir.Mul(s, ir.LitU32(100)))
	b.Store(out, base, snap)
	b.Store(out, ir.Add(base, ir.LitU32(1)), s)
	flag := b.Var("flag", ir.Bool, ir.Eq(ir.Rem(i, ir.LitU32(2)), ir.LitU32(0)))
	kept := b.Let("kept", flag)
	b.Assign("flag", ir.Not(flag))
	b.Store(out, ir.Add(base, ir.LitU32(2)), ir.Add(ir.Cast(ir.U32, kept), ir.Mul(ir.Cast(ir.U32, flag), ir.LitU32(2))))
	f := b.Var("f", ir.F32, ir.Cast(ir.F32, i))
	b.IfElse(kept, func(then *ir.Block) {
		x := then.Var("x", ir.U32, ir.LitU32(3))
		then.Assign("f", ir.Mul(f, ir.LitF32(0.5)))
		then.Store(out, ir.Add(base, ir.LitU32(3)), x)
	}, func(els *ir.Block) {
		x := els.Let("x", ir.LitF32(2.5))
		els.Assign("f", ir.Add(f, x))
	})
	b.Store(outF, i, f)
	neg := b.Var("neg", ir.I32, ir.LitI32(0))
	b.For("k", ir.I32, ir.LitI32(0), ir.Cast(ir.I32, i), ir.LitI32(1), func(body *ir.Block, k ir.Expr) {
		t := body.Let("t", ir.Sub(neg, k))
		body.Assign("neg", t)
	})
	b.Store(out, ir.Add(base, ir.LitU32(4)), ir.Cast(ir.U32, neg))
	return Case{Name: "locals", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil, nil}, []uint32{64, 8})}
}

// barriersInLoops passes values between invocations through shared memory in a
// loop with barriers, a tree reduction with a barrier per level.
func barriersInLoops() Case {
	b := ir.NewBuilder("edge.barriers", 32, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, 32)
	l := b.Let("l", ir.LocalID(0))
	b.Store(sh, l, ir.Load(in, ir.GlobalID(0)))
	b.Barrier()
	width := b.Var("width", ir.U32, ir.LitU32(16))
	b.While(ir.Gt(width, ir.LitU32(0)), func(loop *ir.Block) {
		loop.If(ir.Lt(l, width), func(then *ir.Block) {
			then.Store(sh, l, ir.Add(ir.Load(sh, l), ir.Load(sh, ir.Add(l, width))))
		})
		loop.Barrier()
		loop.Assign("width", ir.Shr(width, ir.LitU32(1)))
	})
	b.Store(out, ir.GlobalID(0), ir.Load(sh, ir.LitU32(0)))
	return Case{Name: "barriers", Prog: b.MustBuild(), Launch: launch([3]uint32{3, 1, 1},
		[][]byte{Words(seq(96, func(i int) uint32 { return uint32(i*i + 3) })), nil}, []uint32{0, 96})}
}

// builtinProgram stores every builtin of every invocation of a 3-D launch.
func builtinProgram() *ir.Program {
	b := ir.NewBuilder("edge.builtins", 2, 3, 2)
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
	return b.MustBuild()
}

// builtins runs builtinProgram on grid with an optional workgroup-size override.
func builtins(grid, wg [3]uint32) Case {
	size := builtinProgram().WorkgroupSize
	name := "builtins"
	if wg != ([3]uint32{}) {
		size, name = wg, "builtins.override"
	}
	n := 15 * grid[0] * grid[1] * grid[2] * size[0] * size[1] * size[2]
	c := Case{Name: name, Prog: builtinProgram(), Launch: launch(grid, [][]byte{nil}, []uint32{n})}
	c.Launch.WorkgroupSize = wg
	return c
}

// params stores values computed from parameters of every type, specialized or at
// their defaults.
func params(specialized bool) Case {
	b := ir.NewBuilder("edge.params", 1, 1, 1)
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
	c := Case{Name: "params.default", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil}, []uint32{8})}
	if specialized {
		c.Name = "params.spec"
		c.Launch.Spec.Set("pu", ir.SpecU32(0xFFFFFFF1))
		c.Launch.Spec.Set("pi", ir.SpecI32(math.MinInt32))
		c.Launch.Spec.Set("pf", ir.SpecF32(-1e30))
		c.Launch.Spec.Set("pb", ir.SpecBool(false))
	}
	return c
}

// emptyBuffers binds empty read, write and read_write buffers next to a non-empty
// one: len reads 0 and every access to them is out of bounds.
func emptyBuffers() Case {
	b := ir.NewBuilder("edge.empty", 8, 1, 1)
	a := b.Buffer("a", ir.F32, ir.Read)
	empty := b.Buffer("empty", ir.F32, ir.Write)
	out := b.Buffer("out", ir.U32, ir.Write)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(empty, i, ir.LitF32(1))
	b.Store(rw, i, ir.LitU32(3))
	b.Atomic(ir.AtomicAdd, rw, i, ir.LitU32(3))
	b.Store(out, i, ir.Add(ir.Add(ir.Len(a), ir.Len(empty)), ir.Add(ir.Len(rw), ir.Cast(ir.U32, ir.Load(a, i)))))
	return Case{Name: "empty.buffers", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1},
		[][]byte{nil, nil, nil, nil}, []uint32{0, 0, 8, 0})}
}

// emptyGrid dispatches nothing: write buffers come back zeroed, read_write ones
// unchanged.
func emptyGrid() Case {
	b := ir.NewBuilder("edge.empty_grid", 8, 1, 1)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(rw, i, ir.LitU32(1))
	b.Store(out, i, ir.LitU32(1))
	return Case{Name: "empty.grid", Prog: b.MustBuild(), Launch: launch([3]uint32{4, 0, 1},
		[][]byte{Words([]uint32{5, 6, 7}), nil}, []uint32{0, 16})}
}

// readWrite updates a read_write buffer in place.
func readWrite() Case {
	b := ir.NewBuilder("edge.read_write", 64, 1, 1)
	x := b.Buffer("x", ir.I32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Sub(ir.Load(x, i), ir.Cast(ir.I32, i)))
	})
	return Case{Name: "read_write", Prog: b.MustBuild(), Launch: launch([3]uint32{3, 1, 1},
		[][]byte{Words(I32())}, []uint32{0})}
}

// fixedCount uses read and write buffers with a fixed element count.
func fixedCount() Case {
	b := ir.NewBuilder("edge.fixed", 16, 1, 1)
	a := b.FixedBuffer("a", ir.U32, ir.Read, 3)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 5)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(out, i, ir.Add(ir.Load(a, i), ir.Mul(ir.Len(out), ir.LitU32(100))))
	return Case{Name: "fixed.count", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1},
		[][]byte{Words([]uint32{1, 2, 3}), nil}, []uint32{0, 99})}
}
