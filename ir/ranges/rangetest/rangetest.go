package rangetest

import (
	"encoding/binary"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// Case is a program and a launch of it.
type Case struct {
	Name   string
	Prog   *ir.Program
	Launch kernels.Case
}

// wg is the workgroup width of every program; grid the workgroups of a launch.
const (
	wg   = 64
	grid = 2
)

// Cases returns the programs with their launches.
func Cases() []Case {
	var out []Case
	for _, c := range []struct {
		name string
		body func(b *ir.Builder, lid, one ir.Expr) ir.Expr
	}{
		{"in_range", inRange},
		{"local_id_plus_one", localIDPlusOne},
		{"wrapping_loop", wrappingLoop},
		{"assigned_vars", assignedVars},
		{"signed_index", signedIndex},
	} {
		b := ir.NewBuilder("rangetest."+c.name, wg, 1, 1)
		b.Uniform("one", ir.U32)
		res := b.Buffer("out", ir.U32, ir.Write)
		lid := b.Let("lid", ir.LocalID(0))
		gid := b.Let("gid", ir.GlobalID(0))
		v := c.body(b, lid, ir.Uniform("one"))
		b.If(ir.Lt(gid, ir.Len(res)), func(k *ir.Block) { k.Store(res, gid, v) })
		uniforms := binary.LittleEndian.AppendUint32(nil, 1)
		launch := kernels.Case{Grid: [3]uint32{grid, 1, 1}, Inputs: [][]byte{nil}, OutputCounts: []uint32{grid * wg}, Uniforms: uniforms}
		out = append(out, Case{Name: c.name, Prog: b.MustBuild(), Launch: launch})
	}
	return out
}

// fillSafe declares safe, a shared u32 array of wg elements, stores 3·lid+1 at
// lid (provably in bounds) and waits at a barrier.
func fillSafe(b *ir.Builder, lid ir.Expr) string {
	safe := b.Shared("safe", ir.U32, wg)
	b.Store(safe, lid, ir.Add(ir.Mul(lid, ir.LitU32(3)), ir.LitU32(1)))
	b.Barrier()
	return safe
}

// fillRisky declares a shared u32 array of n elements and stores lid + 7 at lid
// · one (one is the uniform 1, so the emitter cannot bound the index; lanes at or
// beyond n store nothing), then waits at a barrier.
func fillRisky(b *ir.Builder, name string, n uint32, lid, one ir.Expr) string {
	risky := b.Shared(name, ir.U32, n)
	b.Store(risky, ir.Mul(lid, one), ir.Add(lid, ir.LitU32(7)))
	b.Barrier()
	return risky
}

// inRange reads safe at indices a range analysis bounds: 63 - lid, lid·7 % 64,
// lid & 31, min(lid + 10, 63), workgroup_size - 1 - lid, a select of two in-range
// indices, a var never assigned, and the variables of a constant-trip loop and
// of a loop from lid to 64 by 64.
func inRange(b *ir.Builder, lid, _ ir.Expr) ir.Expr {
	safe := fillSafe(b, lid)
	u := ir.LitU32
	never := b.Var("never", ir.U32, lid)
	sum := b.Var("sum", ir.U32, ir.Load(safe, ir.Sub(u(wg-1), lid)))
	for _, index := range []ir.Expr{
		ir.Rem(ir.Mul(lid, u(7)), u(wg)),
		ir.And(lid, u(31)),
		ir.BinaryExpr{Op: ir.OpMin, X: ir.Add(lid, u(10)), Y: u(wg - 1)},
		ir.Sub(ir.Sub(ir.WorkgroupSize(0), u(1)), lid),
		ir.Select(ir.Lt(lid, u(32)), lid, ir.Sub(u(wg-1), lid)),
		never,
	} {
		b.Assign("sum", ir.Add(sum, ir.Load(safe, index)))
	}
	b.For("k", ir.U32, u(0), u(4), u(1), func(k *ir.Block, i ir.Expr) {
		k.Assign("sum", ir.Add(sum, ir.Load(safe, ir.Add(ir.Mul(i, u(16)), ir.And(lid, u(15))))))
	})
	b.For("s", ir.U32, lid, u(wg), u(wg), func(k *ir.Block, s ir.Expr) {
		k.Assign("sum", ir.Add(sum, ir.Mul(ir.Load(safe, s), u(1000))))
	})
	return sum
}

// localIDPlusOne reads risky at lid + 1 (lane 63 is past the end and reads 0),
// stores lid + 100 there (lane 63 stores nothing) and reads the result back.
func localIDPlusOne(b *ir.Builder, lid, one ir.Expr) ir.Expr {
	risky := fillRisky(b, "risky", wg, lid, one)
	next := b.Let("next", ir.Add(lid, ir.LitU32(1)))
	before := b.Let("before", ir.Load(risky, next))
	b.Barrier()
	b.Store(risky, next, ir.Add(lid, ir.LitU32(100)))
	b.Barrier()
	return ir.Add(ir.Mul(before, ir.LitU32(1000)), ir.Load(risky, ir.Mul(lid, one)))
}

// wrappingLoop counts v down from 40 (39 in the upper half of the workgroup,
// so the bound is no constant and the loop is not unrolled) while v < 41,
// until v wraps below 0 to 0xFFFFFFFF. v itself stays below 41, so safe41[v]
// is in bounds, but v - 39 wraps for every v below 39: risky[v - 39] reads 0
// there, and the atomic add on count[v - 40] happens once in the lanes that
// start at 40.
func wrappingLoop(b *ir.Builder, lid, one ir.Expr) ir.Expr {
	u := ir.LitU32
	safe := b.Shared("safe41", ir.U32, 41)
	b.Store(safe, ir.Rem(lid, u(41)), ir.Mul(ir.Rem(lid, u(41)), u(5)))
	risky := fillRisky(b, "risky", 32, lid, one)
	count := fillRisky(b, "risky_count", 1, lid, one)
	sum := b.Var("sum", ir.U32, u(0))
	from := ir.Sub(u(40), ir.Div(lid, u(32)))
	b.For("v", ir.U32, from, u(41), u(0xFFFFFFFF), func(k *ir.Block, v ir.Expr) {
		k.Assign("sum", ir.Add(sum, ir.Add(ir.Load(safe, v), ir.Mul(ir.Load(risky, ir.Sub(v, u(39))), u(100)))))
		k.Atomic(ir.AtomicAdd, count, ir.Sub(v, u(40)), u(1))
	})
	b.Barrier()
	return ir.Add(sum, ir.Mul(ir.Load(count, ir.Div(ir.Mul(lid, one), u(wg))), u(100000)))
}

// assignedVars reads risky at vars assigned in loops: j = lid + 20·(k+1) for k <
// 3 (past the end for the upper lanes), and w = lid, lid + 30, ... while w <
// 100.
func assignedVars(b *ir.Builder, lid, one ir.Expr) ir.Expr {
	u := ir.LitU32
	risky := fillRisky(b, "risky", wg, lid, one)
	sum := b.Var("sum", ir.U32, u(0))
	j := b.Var("j", ir.U32, lid)
	b.For("k", ir.U32, u(0), u(3), u(1), func(k *ir.Block, _ ir.Expr) {
		k.Assign("j", ir.Add(j, u(20)))
		k.Assign("sum", ir.Add(sum, ir.Load(risky, j)))
	})
	w := b.Var("w", ir.U32, lid)
	b.While(ir.Lt(w, u(100)), func(k *ir.Block) {
		k.Assign("sum", ir.Add(ir.Mul(sum, u(3)), ir.Load(risky, w)))
		k.Assign("w", ir.Add(w, u(30)))
	})
	return sum
}

// signedIndex reads risky at u32(i32(lid) - 1), 0xFFFFFFFF for lane 0, and at
// u32(i32(lid) · -1) % 128, past the end for every lane but 0.
func signedIndex(b *ir.Builder, lid, one ir.Expr) ir.Expr {
	risky := fillRisky(b, "risky", wg, lid, one)
	s := b.Let("s", ir.Cast(ir.I32, lid))
	down := ir.Cast(ir.U32, ir.Sub(s, ir.LitI32(1)))
	neg := ir.Rem(ir.Cast(ir.U32, ir.Mul(s, ir.LitI32(-1))), ir.LitU32(128))
	return ir.Add(ir.Load(risky, down), ir.Mul(ir.Load(risky, neg), ir.LitU32(1000)))
}

// MatmulRegSpec is the register-tiled matmul's (ir/kernels matmul_reg) largest
// block, 8×8 per invocation with tiles of depth 16: on a 16×16 workgroup every
// shared index it uses is provably inside its tile.
func MatmulRegSpec() ir.SpecMap {
	var spec ir.SpecMap
	spec.Set("bm", ir.SpecU32(8))
	spec.Set("bn", ir.SpecU32(8))
	spec.Set("tk", ir.SpecU32(16))
	return spec
}
