package edgetest

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// V11Cases are the programs for IR v1.1's statements and dispatch inputs:
// continue, compare-exchange under contention, uniforms, and subgroups of every
// size CUDA runs (whole warps and segments of them), in uniform and divergent
// control flow. The unary operators and bitcasts of IR v1.1 are in ValueCases.
func V11Cases() []Case {
	return []Case{
		continueLoops(), casContention(), uniforms(),
		subgroups("auto.64", 64, 0), subgroups("auto.48", 48, 0), subgroups("fixed.8", 32, 8), subgroups("fixed.32", 128, 32),
		subgroupsDivergent(),
	}
}

// continueLoops skips iterations of for and while loops with continue, next to
// break, nested.
func continueLoops() Case {
	b := ir.NewBuilder("edge.continue", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	base := b.Let("base", ir.Mul(i, ir.LitU32(4)))
	odd := b.Var("odd", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), ir.Add(i, ir.LitU32(10)), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.If(ir.Eq(ir.And(k, ir.LitU32(1)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		body.Assign("odd", ir.Add(odd, k))
	})
	b.Store(out, base, odd)
	n := b.Var("n", ir.U32, ir.LitU32(0))
	seen := b.Var("seen", ir.U32, ir.LitU32(0))
	b.While(ir.Lt(n, ir.LitU32(20)), func(loop *ir.Block) {
		loop.Assign("n", ir.Add(n, ir.LitU32(1)))
		loop.If(ir.Eq(ir.Rem(n, ir.Add(i, ir.LitU32(2))), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		loop.If(ir.Gt(n, ir.Add(i, ir.LitU32(12))), func(then *ir.Block) { then.Break() })
		loop.Assign("seen", ir.Add(ir.Mul(seen, ir.LitU32(3)), n))
	})
	b.Store(out, ir.Add(base, ir.LitU32(1)), seen)
	pairs := b.Var("pairs", ir.U32, ir.LitU32(0))
	b.For("x", ir.U32, ir.LitU32(0), ir.LitU32(6), ir.LitU32(1), func(body *ir.Block, x ir.Expr) {
		body.For("y", ir.U32, ir.LitU32(0), ir.LitU32(6), ir.LitU32(1), func(inner *ir.Block, y ir.Expr) {
			inner.If(ir.Eq(x, y), func(then *ir.Block) { then.Continue() })
			inner.Assign("pairs", ir.Add(ir.Mul(pairs, ir.LitU32(7)), ir.Add(x, i)))
		})
		body.If(ir.Eq(x, ir.Rem(i, ir.LitU32(6))), func(then *ir.Block) { then.Continue() })
		body.Assign("pairs", ir.Xor(pairs, ir.LitU32(0x5555)))
	})
	b.Store(out, ir.Add(base, ir.LitU32(2)), pairs)
	return Case{Name: "continue", Prog: b.MustBuild(), Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil}, []uint32{32})}
}

// casContention has every invocation try to claim one slot of a buffer and of a
// shared array with cas; exactly one wins each, which the winners' count and the
// slots' final values show whatever the order.
func casContention() Case {
	b := ir.NewBuilder("edge.cas", 64, 1, 1)
	claim := b.Buffer("claim", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.I32, ir.Write)
	sh := b.Shared("sh", ir.I32, 2)
	l := b.Let("l", ir.LocalID(0))
	b.If(ir.Lt(l, ir.LitU32(2)), func(then *ir.Block) { then.Store(sh, l, ir.LitI32(0)) })
	b.Barrier()
	old := b.AtomicCAS(claim, ir.LitU32(0), ir.LitU32(0), ir.LitU32(7), "old")
	b.If(ir.Eq(old, ir.LitU32(0)), func(then *ir.Block) { then.Atomic(ir.AtomicAdd, claim, ir.LitU32(1), ir.LitU32(1)) })
	b.If(ir.Ne(old, ir.LitU32(0)), func(then *ir.Block) { then.Atomic(ir.AtomicAdd, claim, ir.LitU32(2), old) })
	sOld := b.AtomicCAS(sh, ir.LitU32(0), ir.LitI32(0), ir.LitI32(-1), "s_old")
	b.If(ir.Eq(sOld, ir.LitI32(0)), func(then *ir.Block) { then.Atomic(ir.AtomicAdd, sh, ir.LitU32(1), ir.LitI32(1)) })
	b.Append(ir.AtomicStmt{Op: ir.AtomicCompareExchange, Target: claim, Index: ir.LitU32(0xFFFF), Compare: ir.LitU32(0), Value: ir.LitU32(1)}) // out of bounds
	oob := b.AtomicCAS(sh, ir.LitU32(2), ir.LitI32(0), ir.LitI32(5), "oob")
	b.Barrier()
	b.If(ir.Lt(l, ir.LitU32(2)), func(then *ir.Block) {
		then.Store(out, ir.Add(ir.Mul(ir.WorkgroupID(0), ir.LitU32(2)), l), ir.Add(ir.Load(sh, l), oob))
	})
	return Case{Name: "cas", Prog: b.MustBuild(), Launch: launch([3]uint32{4, 1, 1},
		[][]byte{Words([]uint32{0, 0, 0}), nil}, []uint32{0, 8})}
}

// uniforms reads a uniform of each type, uses one as a loop bound and one as an
// index; the values are edge values.
func uniforms() Case {
	b := ir.NewBuilder("edge.uniforms", 16, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	outF := b.Buffer("out_f", ir.F32, ir.Write)
	n := b.Uniform("n", ir.U32)
	k := b.Uniform("k", ir.I32)
	x := b.Uniform("x", ir.F32)
	i := b.Let("i", ir.GlobalID(0))
	sum := b.Var("sum", ir.U32, ir.LitU32(0))
	b.For("j", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(body *ir.Block, j ir.Expr) {
		body.Assign("sum", ir.Add(sum, ir.Add(j, i)))
	})
	b.Store(out, i, ir.Add(sum, ir.Cast(ir.U32, k)))
	b.Store(out, ir.Add(i, ir.LitU32(16)), ir.Bitcast(ir.U32, ir.Mul(x, ir.Cast(ir.F32, i))))
	b.Store(outF, ir.Cast(ir.U32, ir.Add(k, ir.LitI32(5))), ir.Add(x, ir.LitF32(1)))
	p := b.MustBuild()
	block, err := ir.EncodeUniforms(p, map[string]ir.Literal{"n": ir.LitU32(7), "k": ir.LitI32(-3), "x": ir.LitF32(-2.75)})
	if err != nil {
		panic(err) // the table's own constant uniforms: only a broken table gets here
	}
	return Case{Name: "uniforms", Prog: p, Launch: launch([3]uint32{1, 1, 1}, [][]byte{nil, nil}, []uint32{32, 4}), Uniforms: block}
}

// subgroups runs every subgroup operation on every type it takes, the subgroup
// builtins, shuffles to lanes inside and beyond the subgroup and a broadcast,
// with workgroups of wg invocations and a required subgroup size (0: any).
func subgroups(name string, wg, size uint32) Case {
	b := ir.NewBuilder("edge.subgroups."+name, wg, 1, 1)
	b.RequireSubgroupSize(size)
	inU := b.Buffer("in_u", ir.U32, ir.Read)
	inI := b.Buffer("in_i", ir.I32, ir.Read)
	inF := b.Buffer("in_f", ir.F32, ir.Read)
	outU := b.Buffer("out_u", ir.U32, ir.Write)
	outI := b.Buffer("out_i", ir.I32, ir.Write)
	outF := b.Buffer("out_f", ir.F32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	lane := b.Let("lane", ir.SubgroupInvocationID())
	u := b.Let("u", ir.Load(inU, g))
	si := b.Let("si", ir.Load(inI, g))
	f := b.Let("f", ir.Load(inF, g))
	const k = 8
	put := func(buf string, j uint32, v ir.Expr) { b.Store(buf, ir.Add(ir.Mul(g, ir.LitU32(k)), ir.LitU32(j)), v) }
	for j, op := range []func(ir.Expr) ir.Expr{ir.SubgroupAdd, ir.SubgroupMin, ir.SubgroupMax} {
		put(outU, uint32(j), op(u))
		put(outI, uint32(j), op(si))
		put(outF, uint32(j), op(f))
	}
	src := b.Let("src", ir.Rem(ir.Add(ir.Mul(lane, ir.LitU32(7)), ir.LitU32(3)), ir.LitU32(40)))
	put(outU, 3, ir.SubgroupShuffle(u, src))
	put(outI, 3, ir.SubgroupShuffle(si, ir.Xor(lane, ir.LitU32(1))))
	put(outF, 3, ir.SubgroupShuffle(f, src))
	put(outU, 4, ir.SubgroupBroadcast(u, ir.LitU32(5)))
	put(outF, 4, ir.SubgroupBroadcast(f, ir.Sub(ir.SubgroupSize(), ir.LitU32(1))))
	put(outI, 4, ir.SubgroupBroadcast(si, ir.LitU32(1000)))
	put(outU, 5, ir.SubgroupSize())
	put(outU, 6, lane)
	flag := b.Let("flag", ir.Gt(u, ir.LitU32(0x80000000)))
	put(outU, 7, ir.Cast(ir.U32, ir.SubgroupShuffle(flag, ir.Sub(ir.LitU32(31), lane))))
	n := 2 * wg
	fs := F32()
	cols := [][]uint32{
		seq(int(n), func(i int) uint32 { return uint32(i)*0x9E3779B9 ^ uint32(i>>3) }),
		seq(int(n), func(i int) uint32 { return I32()[i*7%len(I32())] + uint32(i) }),
		seq(int(n), func(i int) uint32 {
			// Edge values (NaN, infinities, zeros) in the first workgroup only, so
			// the second one's sums are finite.
			if i%5 == 0 && i < int(wg) {
				return fs[i/5%len(fs)]
			}
			return math.Float32bits(float32(i%13)*1.25e-3 - float32(i%7)*3e4)
		}),
	}
	c := Case{Name: "subgroups." + name, Prog: b.MustBuild(), Launch: kernels.Case{Grid: [3]uint32{2, 1, 1}}}
	for _, col := range cols {
		c.Launch.Inputs = append(c.Launch.Inputs, Words(col))
	}
	c.Launch.Inputs = append(c.Launch.Inputs, nil, nil, nil)
	c.Launch.OutputCounts = []uint32{0, 0, 0, k * n, k * n, k * n}
	return c
}

// subgroupsDivergent has subgroups of one workgroup take different branches and
// loop different numbers of times, each running subgroup operations there; every
// subgroup stays uniform.
func subgroupsDivergent() Case {
	b := ir.NewBuilder("edge.subgroups.divergent", 64, 2, 1)
	b.RequireSubgroupSize(16)
	out := b.Buffer("out", ir.U32, ir.Write)
	flat := b.Let("flat", ir.Add(ir.LocalID(0), ir.Mul(ir.LocalID(1), ir.LitU32(64))))
	sub := b.Let("sub", ir.Div(flat, ir.SubgroupSize()))
	g := b.Let("g", ir.Add(flat, ir.Mul(ir.WorkgroupID(0), ir.LitU32(128))))
	acc := b.Var("acc", ir.U32, g)
	b.IfElse(ir.Eq(ir.Rem(sub, ir.LitU32(3)), ir.LitU32(0)), func(then *ir.Block) {
		then.Assign("acc", ir.SubgroupAdd(acc))
	}, func(els *ir.Block) {
		els.Assign("acc", ir.SubgroupMax(ir.Mul(acc, ir.LitU32(2654435761))))
	})
	b.For("r", ir.U32, ir.LitU32(0), ir.Rem(sub, ir.LitU32(4)), ir.LitU32(1), func(body *ir.Block, r ir.Expr) {
		body.If(ir.Eq(r, ir.LitU32(1)), func(then *ir.Block) { then.Continue() })
		body.Assign("acc", ir.Add(acc, ir.SubgroupShuffle(acc, ir.Rem(ir.Add(ir.SubgroupInvocationID(), r), ir.LitU32(16)))))
	})
	b.If(ir.Lt(sub, ir.LitU32(6)), func(then *ir.Block) {
		then.Store(out, g, ir.SubgroupMin(ir.Xor(acc, g)))
		then.Return()
	})
	b.Store(out, g, ir.SubgroupBroadcast(acc, ir.LitU32(3)))
	return Case{Name: "subgroups.divergent", Prog: b.MustBuild(), Launch: launch([3]uint32{2, 1, 1}, [][]byte{nil}, []uint32{256})}
}
