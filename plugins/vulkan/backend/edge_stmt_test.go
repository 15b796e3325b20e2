package backend

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// statementEdges are the table's programs for memory, atomics, control flow,
// builtins, parameters and launch shapes; they compare bit for bit.
func statementEdges() []edge {
	return []edge{
		outOfBounds(), sharedOutOfBounds(), atomicsOnBuffers(), atomicsOnShared(), sharedReverse(),
		forLoops(), whileBreakReturn(), builtins(), builtinsOverride(), params(), paramsDefault(),
		zeroLength(), zeroGrid(), readWrite(), fixedCount(),
	}
}

func u32s(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// outOfBounds loads past the end (0) and stores past the end (nothing), with indices
// near 2^32 that would wrap a byte offset.
func outOfBounds() edge {
	b := ir.NewBuilder("edge.oob", 32, 1, 1)
	a := b.Buffer("a", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	n := b.Let("n", ir.Len(a))
	b.Store(out, i, ir.Add(ir.Load(a, ir.Add(i, n)), ir.Load(a, ir.Sub(ir.LitU32(0), ir.Add(i, ir.LitU32(1))))))
	b.Store(out, ir.Add(i, ir.Len(out)), ir.LitU32(7))
	b.Store(out, ir.Add(ir.LitU32(0x40000000), i), ir.LitU32(9))
	b.Store(out, ir.LitU32(0xffffffff), ir.LitU32(11))
	b.Atomic(ir.AtomicAdd, out, ir.Add(ir.Len(out), i), ir.LitU32(5))
	old := b.AtomicResult(ir.AtomicAdd, out, ir.Add(ir.LitU32(0x80000000), i), ir.LitU32(5), "old")
	b.If(ir.Eq(old, ir.LitU32(0)), func(then *ir.Block) {
		then.Atomic(ir.AtomicAdd, out, i, ir.LitU32(1))
	})
	return edge{name: "oob", prog: b.Program(), grid: [3]uint32{2, 1, 1},
		inputs: [][]byte{words(u32s(40, func(i int) uint32 { return uint32(i) + 100 })), nil}, counts: []uint32{0, 48}}
}

// sharedOutOfBounds reads and writes a shared array past its fixed count.
func sharedOutOfBounds() edge {
	b := ir.NewBuilder("edge.shared.oob", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, 8)
	l := b.Let("l", ir.LocalID(0))
	b.Store(sh, l, ir.Add(l, ir.LitU32(1)))
	b.Store(sh, ir.Add(l, ir.LitU32(8)), ir.LitU32(99))
	b.Atomic(ir.AtomicAdd, sh, ir.Add(l, ir.LitU32(1000)), ir.LitU32(1))
	b.Barrier()
	b.Store(out, ir.GlobalID(0), ir.Add(ir.Load(sh, ir.Sub(ir.LitU32(7), l)), ir.Load(sh, ir.Add(l, ir.LitU32(8)))))
	return edge{name: "shared.oob", prog: b.Program(), grid: [3]uint32{3, 1, 1}, inputs: [][]byte{nil}, counts: []uint32{24}}
}

// atomicsOnBuffers applies every atomic operation from many invocations to a few
// slots; the final values do not depend on the order.
func atomicsOnBuffers() edge {
	b := ir.NewBuilder("edge.atomics.buffer", 64, 1, 1)
	u := b.Buffer("u", ir.U32, ir.ReadWrite)
	s := b.Buffer("s", ir.I32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	si := b.Let("si", ir.Sub(ir.Cast(ir.I32, i), ir.LitI32(100)))
	b.Atomic(ir.AtomicAdd, u, ir.LitU32(0), i)
	b.Atomic(ir.AtomicOr, u, ir.LitU32(1), ir.Shl(ir.LitU32(1), ir.Rem(i, ir.LitU32(32))))
	b.Atomic(ir.AtomicAnd, u, ir.LitU32(2), ir.Not(ir.Shl(ir.LitU32(1), ir.Rem(i, ir.LitU32(29)))))
	b.Atomic(ir.AtomicXor, u, ir.LitU32(3), ir.Mul(i, ir.LitU32(2654435761)))
	b.Atomic(ir.AtomicMin, u, ir.LitU32(4), ir.Add(i, ir.LitU32(0x7ffffff0)))
	b.Atomic(ir.AtomicMax, u, ir.LitU32(5), ir.Add(i, ir.LitU32(0x7ffffff0)))
	b.Atomic(ir.AtomicMin, s, ir.LitU32(0), si)
	b.Atomic(ir.AtomicMax, s, ir.LitU32(1), si)
	b.Atomic(ir.AtomicAdd, s, ir.LitU32(2), si)
	b.If(ir.Eq(i, ir.LitU32(77)), func(then *ir.Block) {
		old := then.AtomicResult(ir.AtomicExchange, u, ir.LitU32(6), ir.LitU32(0xabcdef), "old")
		then.Store(u, ir.LitU32(7), old)
		olds := then.AtomicResult(ir.AtomicExchange, s, ir.LitU32(3), ir.LitI32(-5), "olds")
		then.Store(s, ir.LitU32(4), olds)
	})
	uInit := []uint32{0, 0, 0xffffffff, 0, 0xffffffff, 0, 0x5555, 0}
	sInit := []uint32{0, uint32(0x80000000), 0, 1234, 0}
	return edge{name: "atomics.buffer", prog: b.Program(), grid: [3]uint32{4, 1, 1},
		inputs: [][]byte{words(uInit), words(sInit)}, counts: []uint32{0, 0}}
}

// atomicsOnShared accumulates a workgroup histogram in shared memory.
func atomicsOnShared() edge {
	b := ir.NewBuilder("edge.atomics.shared", 64, 1, 1)
	out := b.Buffer("out", ir.I32, ir.Write)
	sh := b.Shared("h", ir.I32, 4)
	l := b.Let("l", ir.LocalID(0))
	b.If(ir.Lt(l, ir.LitU32(4)), func(then *ir.Block) {
		then.Store(sh, l, ir.LitI32(0))
	})
	b.Barrier()
	b.Atomic(ir.AtomicAdd, sh, ir.Rem(l, ir.LitU32(4)), ir.Sub(ir.Cast(ir.I32, l), ir.LitI32(10)))
	b.Atomic(ir.AtomicMin, sh, ir.LitU32(3), ir.Neg(ir.Cast(ir.I32, l)))
	b.Barrier()
	b.If(ir.Lt(l, ir.LitU32(4)), func(then *ir.Block) {
		then.Store(out, ir.Add(ir.Mul(ir.WorkgroupID(0), ir.LitU32(4)), l), ir.Load(sh, l))
	})
	return edge{name: "atomics.shared", prog: b.Program(), grid: [3]uint32{3, 1, 1}, inputs: [][]byte{nil}, counts: []uint32{12}}
}

// sharedReverse reverses each workgroup's slice through shared arrays of f32 and
// bool across a barrier.
func sharedReverse() edge {
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
	xs := f32Edges[:32]
	return edge{name: "shared.reverse", prog: b.Program(), grid: [3]uint32{2, 1, 1},
		inputs: [][]byte{words(xs), nil, nil}, counts: []uint32{0, 32, 32}}
}

// forLoops covers signed and unsigned counted loops, negative ranges, bounds
// evaluated once, wrapping steps, empty loops and nesting with break.
func forLoops() edge {
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
	b.For("w", ir.U32, ir.LitU32(0xfffffffd), ir.LitU32(0xffffffff), ir.LitU32(0x80000001), func(body *ir.Block, _ ir.Expr) {
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
	return edge{name: "for", prog: b.Program(), grid: [3]uint32{1, 1, 1}, inputs: [][]byte{nil}, counts: []uint32{32}}
}

// whileBreakReturn runs a data-dependent while loop (Collatz steps) with a break
// and an early return for some invocations.
func whileBreakReturn() edge {
	b := ir.NewBuilder("edge.while", 32, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Ge(i, ir.Len(in)), func(then *ir.Block) { then.Return() })
	b.Store(out, i, ir.LitU32(0xffff))
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
	return edge{name: "while", prog: b.Program(), grid: [3]uint32{2, 1, 1},
		inputs: [][]byte{words(u32s(50, func(i int) uint32 { return uint32(i*37 + 1) })), nil}, counts: []uint32{0, 64}}
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
	return b.Program()
}

func builtins() edge {
	grid := [3]uint32{3, 2, 2}
	n := 15 * 3 * 2 * 2 * 3 * 2 * 2
	return edge{name: "builtins", prog: builtinProgram(), grid: grid, inputs: [][]byte{nil}, counts: []uint32{uint32(n)}}
}

// builtinsOverride runs the same program with a workgroup-size override.
func builtinsOverride() edge {
	grid := [3]uint32{2, 1, 3}
	wg := [3]uint32{4, 2, 1}
	n := 15 * 2 * 1 * 3 * 4 * 2 * 1
	return edge{name: "builtins.override", prog: builtinProgram(), grid: grid, wg: wg, inputs: [][]byte{nil}, counts: []uint32{uint32(n)}}
}

// paramProgram stores one value computed from parameters of every type.
func paramProgram() *ir.Program {
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
	return b.Program()
}

func params() edge {
	e := edge{name: "params.spec", prog: paramProgram(), grid: [3]uint32{1, 1, 1}, inputs: [][]byte{nil}, counts: []uint32{8}}
	e.spec.Set("pu", ir.SpecU32(0xfffffff1))
	e.spec.Set("pi", ir.SpecI32(math.MinInt32))
	e.spec.Set("pf", ir.SpecF32(-1e30))
	e.spec.Set("pb", ir.SpecBool(false))
	return e
}

func paramsDefault() edge {
	return edge{name: "params.default", prog: paramProgram(), grid: [3]uint32{1, 1, 1}, inputs: [][]byte{nil}, counts: []uint32{8}}
}

// zeroLength binds empty read and write buffers (4-byte dummies with count 0) next
// to a non-empty one; len reads 0 and every access to them is out of bounds.
func zeroLength() edge {
	b := ir.NewBuilder("edge.zero", 8, 1, 1)
	a := b.Buffer("a", ir.F32, ir.Read)
	empty := b.Buffer("empty", ir.F32, ir.Write)
	out := b.Buffer("out", ir.U32, ir.Write)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(empty, i, ir.LitF32(1))
	b.Store(rw, i, ir.LitU32(3))
	b.Store(out, i, ir.Add(ir.Add(ir.Len(a), ir.Len(empty)), ir.Add(ir.Len(rw), ir.Cast(ir.U32, ir.Load(a, i)))))
	return edge{name: "zero.length", prog: b.Program(), grid: [3]uint32{1, 1, 1},
		inputs: [][]byte{nil, nil, nil, nil}, counts: []uint32{0, 0, 8, 0}}
}

// zeroGrid dispatches nothing: write buffers come back zeroed, read_write unchanged.
func zeroGrid() edge {
	b := ir.NewBuilder("edge.zero.grid", 8, 1, 1)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(rw, i, ir.LitU32(1))
	b.Store(out, i, ir.LitU32(1))
	return edge{name: "zero.grid", prog: b.Program(), grid: [3]uint32{4, 0, 1},
		inputs: [][]byte{words([]uint32{5, 6, 7}), nil}, counts: []uint32{0, 16}}
}

// readWrite updates a read_write buffer in place, reading neighbours written by
// nobody.
func readWrite() edge {
	b := ir.NewBuilder("edge.read_write", 64, 1, 1)
	x := b.Buffer("x", ir.I32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Sub(ir.Load(x, i), ir.Cast(ir.I32, i)))
	})
	return edge{name: "read_write", prog: b.Program(), grid: [3]uint32{3, 1, 1},
		inputs: [][]byte{words(i32Bits(1, -2, 3, math.MaxInt32, math.MinInt32, 0, 9))}, counts: []uint32{0}}
}

// fixedCount uses write and read buffers with a fixed element count.
func fixedCount() edge {
	b := ir.NewBuilder("edge.fixed", 16, 1, 1)
	a := b.FixedBuffer("a", ir.U32, ir.Read, 3)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 5)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(out, i, ir.Add(ir.Load(a, i), ir.Mul(ir.Len(out), ir.LitU32(100))))
	return edge{name: "fixed.count", prog: b.Program(), grid: [3]uint32{1, 1, 1},
		inputs: [][]byte{words([]uint32{1, 2, 3}), nil}, counts: []uint32{0, 99}}
}
