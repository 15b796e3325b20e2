package edgetest

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// SubgroupCases run the subgroup operations at every size CUDA runs them (whole
// warps and segments of them), in uniform and divergent control flow, under the
// table's bit-exact rule; the conformance kit's subgroup table checks them
// within the cross-backend bounds.
func SubgroupCases() []Case {
	return []Case{
		subgroups("auto.64", 64, 0), subgroups("auto.48", 48, 0), subgroups("fixed.8", 32, 8), subgroups("fixed.32", 128, 32),
		subgroupsDivergent(),
	}
}

func seq(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
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
	return Case{Name: "subgroups.divergent", Prog: b.MustBuild(), Launch: kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{nil}, OutputCounts: []uint32{256}}}
}
