package kit

import (
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// memoryCases is the memory table: out-of-bounds loads give 0 and out-of-bounds
// stores and atomics do nothing (result 0), on buffers and shared arrays, with
// indices near 2^32 that would wrap a byte offset; empty buffers; write buffers
// start zero-filled; read_write buffers keep what is not written; fixed counts;
// shared arrays of every type across a barrier; a grid with a zero axis.
func memoryCases() []semantic {
	return []semantic{
		outOfBounds(), sharedOutOfBounds(), boundsChecks(), zeroFilled(), readWriteKeeps(), readWriteInPlace(),
		fixedCount(), zeroLength(), zeroGrid(), sharedEveryType(), sharedReverse(), copyBits(),
	}
}

func u32s(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// sharedOOB marks l as indexing shared arrays out of bounds on purpose.
func sharedOOB(l launch) launch {
	l.outOfBounds = true
	return l
}

// launch1 is a launch of grid workgroups with inputs (by binding, nil for write
// buffers) and output counts.
func launch1(grid uint32, inputs [][]byte, counts []uint32) launch {
	return launch{Case: kernels.Case{Grid: [3]uint32{grid, 1, 1}, Inputs: inputs, OutputCounts: counts}}
}

// outOfBounds loads past the end (0) and stores and adds past the end (nothing),
// with indices near 2^32.
func outOfBounds() semantic {
	b := ir.NewBuilder("kiln.semantics.oob", 32, 1, 1)
	a := b.Buffer("a", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	n := b.Let("n", ir.Len(a))
	b.Store(out, i, ir.Add(ir.Load(a, ir.Add(i, n)), ir.Load(a, ir.Sub(ir.LitU32(0), ir.Add(i, ir.LitU32(1))))))
	b.Store(out, ir.Add(i, ir.Len(out)), ir.LitU32(7))
	b.Store(out, ir.Add(ir.LitU32(0x40000000), i), ir.LitU32(9))
	b.Store(out, ir.LitU32(0xFFFFFFFF), ir.LitU32(11))
	b.Atomic(ir.AtomicAdd, out, ir.Add(ir.Len(out), i), ir.LitU32(5))
	old := b.AtomicResult(ir.AtomicAdd, out, ir.Add(ir.LitU32(0x80000000), i), ir.LitU32(5), "old")
	b.If(ir.Eq(old, ir.LitU32(0)), func(then *ir.Block) {
		then.Atomic(ir.AtomicAdd, out, i, ir.LitU32(1))
	})
	return semantic{name: "oob", prog: b.Program(),
		c: launch1(2, [][]byte{words(u32s(40, func(i int) uint32 { return uint32(i) + 100 })), nil}, []uint32{0, 48})}
}

// sharedOutOfBounds reads and writes a shared array past its fixed count.
func sharedOutOfBounds() semantic {
	b := ir.NewBuilder("kiln.semantics.shared.oob", 8, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, 8)
	l := b.Let("l", ir.LocalID(0))
	b.Store(sh, l, ir.Add(l, ir.LitU32(1)))
	b.Store(sh, ir.Add(l, ir.LitU32(8)), ir.LitU32(99))
	b.Atomic(ir.AtomicAdd, sh, ir.Add(l, ir.LitU32(1000)), ir.LitU32(1))
	b.Barrier()
	b.Store(out, ir.GlobalID(0), ir.Add(ir.Load(sh, ir.Sub(ir.LitU32(7), l)), ir.Load(sh, ir.Add(l, ir.LitU32(8)))))
	return semantic{name: "shared.oob", prog: b.Program(), c: sharedOOB(launch1(3, [][]byte{nil}, []uint32{24}))}
}

// boundsChecks pins each rule on one invocation: loads past the end and at
// 2^32-1, an empty buffer, a skipped store and atomic (result 0), atomics on an
// empty write buffer, shared u32 and bool arrays in and out of bounds.
func boundsChecks() semantic {
	b := ir.NewBuilder("kiln.semantics.bounds", 1, 1, 1)
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
	put(5, b.AtomicResult(ir.AtomicAdd, w, ir.LitU32(2), ir.LitU32(5), "oob"))
	put(6, b.AtomicResult(ir.AtomicAdd, w, ir.LitU32(1), ir.LitU32(5), "inb"))
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
	return semantic{name: "bounds", prog: b.Program(),
		c:      sharedOOB(launch1(1, [][]byte{words([]uint32{10, 20, 30}), nil, nil, nil, nil}, []uint32{0, 0, 2, 0, 15})),
		pinned: [][]uint32{{0, 9 + 5}, {}, {0, 0, 30, 0, 0, 0, 9, 0, 11, 0, 0, 11, 13, 1, 2}}}
}

// zeroFilled writes every third element of write buffers of each type: the
// others must come back zero, whatever the memory held before.
func zeroFilled() semantic {
	b := ir.NewBuilder("kiln.semantics.zero_filled", 64, 1, 1)
	var outs []string
	for _, t := range []ir.Type{ir.U32, ir.I32, ir.F32} {
		outs = append(outs, b.Buffer("out_"+t.String(), t, ir.Write))
	}
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Eq(ir.Rem(i, ir.LitU32(3)), ir.LitU32(1)), func(then *ir.Block) {
		then.Store(outs[0], i, ir.Add(i, ir.LitU32(1)))
		then.Store(outs[1], i, ir.Neg(ir.Cast(ir.I32, i)))
		then.Store(outs[2], i, ir.Literal{Type: ir.F32, Bits: negZero})
	})
	return semantic{name: "write.zero_filled", prog: b.Program(),
		c: launch1(5, [][]byte{nil, nil, nil}, []uint32{300, 257, 1000})}
}

// readWriteKeeps stores to some elements of read_write buffers; the others keep
// their input, f32 specials and NaN payloads included.
func readWriteKeeps() semantic {
	b := ir.NewBuilder("kiln.semantics.read_write.keeps", 16, 1, 1)
	u := b.Buffer("u", ir.U32, ir.ReadWrite)
	x := b.Buffer("x", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Eq(ir.And(i, ir.LitU32(3)), ir.LitU32(0)), func(then *ir.Block) {
		then.Store(u, i, ir.Not(i))
		then.Store(x, i, ir.LitF32(2.5))
	})
	return semantic{name: "read_write.keeps", prog: b.Program(),
		c: launch1(4, [][]byte{words(u32Edges), words(f32Edges)}, []uint32{0, 0})}
}

// readWriteInPlace updates a read_write buffer in place.
func readWriteInPlace() semantic {
	b := ir.NewBuilder("kiln.semantics.read_write.in_place", 64, 1, 1)
	x := b.Buffer("x", ir.I32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Sub(ir.Load(x, i), ir.Cast(ir.I32, i)))
	})
	return semantic{name: "read_write.in_place", prog: b.Program(),
		c:      launch1(3, [][]byte{words(i32Bits(1, -2, 3, math.MaxInt32, math.MinInt32, 0, 9))}, []uint32{0}),
		pinned: [][]uint32{i32Bits(1, -3, 1, math.MaxInt32-3, math.MaxInt32-3, -5, 3)}}
}

// fixedCount uses read and write buffers with a fixed element count; the
// dispatch's output count for a fixed buffer is ignored.
func fixedCount() semantic {
	b := ir.NewBuilder("kiln.semantics.fixed_count", 16, 1, 1)
	a := b.FixedBuffer("a", ir.U32, ir.Read, 3)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 5)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(out, i, ir.Add(ir.Load(a, i), ir.Mul(ir.Len(out), ir.LitU32(100))))
	return semantic{name: "fixed_count", prog: b.Program(),
		c:      launch1(1, [][]byte{words([]uint32{1, 2, 3}), nil}, []uint32{0, 99}),
		pinned: [][]uint32{{501, 502, 503, 500, 500}}}
}

// zeroLength binds empty read, write and read_write buffers next to a non-empty
// one: len reads 0 and every access to them is out of bounds.
func zeroLength() semantic {
	b := ir.NewBuilder("kiln.semantics.zero_length", 8, 1, 1)
	a := b.Buffer("a", ir.F32, ir.Read)
	empty := b.Buffer("empty", ir.F32, ir.Write)
	out := b.Buffer("out", ir.U32, ir.Write)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(empty, i, ir.LitF32(1))
	b.Store(rw, i, ir.LitU32(3))
	b.Store(out, i, ir.Add(ir.Add(ir.Len(a), ir.Len(empty)), ir.Add(ir.Len(rw), ir.Cast(ir.U32, ir.Load(a, i)))))
	return semantic{name: "zero_length", prog: b.Program(),
		c: launch1(1, [][]byte{nil, nil, nil, nil}, []uint32{0, 0, 8, 0}), pinned: [][]uint32{{}, make([]uint32, 8), {}}}
}

// zeroGrid dispatches nothing: write buffers come back zeroed, read_write ones
// unchanged.
func zeroGrid() semantic {
	b := ir.NewBuilder("kiln.semantics.zero_grid", 8, 1, 1)
	rw := b.Buffer("rw", ir.U32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(rw, i, ir.LitU32(1))
	b.Store(out, i, ir.LitU32(1))
	return semantic{name: "zero_grid", prog: b.Program(),
		c:      launch{Case: kernels.Case{Grid: [3]uint32{4, 0, 1}, Inputs: [][]byte{words([]uint32{5, 6, 7}), nil}, OutputCounts: []uint32{0, 16}}},
		pinned: [][]uint32{{5, 6, 7}, make([]uint32, 16)}}
}

// sharedEveryType passes values of every type through shared arrays across a
// barrier, each lane reading its neighbour's slot.
func sharedEveryType() semantic {
	b := ir.NewBuilder("kiln.semantics.shared.types", 32, 1, 1)
	fin := b.Buffer("f", ir.F32, ir.Read)
	iin := b.Buffer("i", ir.I32, ir.Read)
	fout := b.Buffer("f_out", ir.F32, ir.Write)
	iout := b.Buffer("i_out", ir.I32, ir.Write)
	uout := b.Buffer("u_out", ir.U32, ir.Write)
	fs := b.Shared("fs", ir.F32, 32)
	is := b.Shared("is", ir.I32, 32)
	us := b.Shared("us", ir.U32, 32)
	bs := b.Shared("bs", ir.Bool, 32)
	l := b.Let("l", ir.LocalID(0))
	g := b.Let("g", ir.GlobalID(0))
	b.Store(fs, l, ir.Load(fin, g))
	b.Store(is, l, ir.Load(iin, g))
	b.Store(us, l, ir.Mul(g, ir.LitU32(2654435761)))
	b.Store(bs, l, ir.Lt(ir.Load(iin, g), ir.LitI32(0)))
	b.Barrier()
	n := b.Let("n", ir.Rem(ir.Add(l, ir.LitU32(1)), ir.LitU32(32)))
	b.Store(fout, g, ir.Load(fs, n))
	b.Store(iout, g, ir.Load(is, n))
	b.Store(uout, g, ir.Add(ir.Load(us, n), ir.Cast(ir.U32, ir.Load(bs, n))))
	fs64 := append(append([]uint32{}, f32Edges...), f32Edges[:64-len(f32Edges)]...)
	is64 := u32s(64, func(k int) uint32 { return i32Edges[k%len(i32Edges)] })
	return semantic{name: "shared.types", prog: b.Program(),
		c: launch1(2, [][]byte{words(fs64), words(is64), nil, nil, nil}, []uint32{0, 0, 64, 64, 64})}
}

// sharedReverse reverses each workgroup's slice through a shared f32 array.
func sharedReverse() semantic {
	b, in, out := inOut("kiln.semantics.shared.reverse", 16, ir.F32, ir.F32)
	sh := b.Shared("sh", ir.F32, 16)
	l := b.Let("l", ir.LocalID(0))
	g := b.Let("g", ir.GlobalID(0))
	b.Store(sh, l, ir.Load(in, g))
	b.Barrier()
	b.Store(out, g, ir.Load(sh, ir.Sub(ir.LitU32(15), l)))
	return semantic{name: "shared.reverse", prog: b.Program(),
		c: launch1(2, [][]byte{words(f32Edges[:32]), nil}, []uint32{0, 32})}
}

// copyBits copies f32 and i32 buffers: a load and a store move bits unchanged
// (a device that flushes denormals may flush a copied one).
func copyBits() semantic {
	b := ir.NewBuilder("kiln.semantics.copy", 64, 1, 1)
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.I32, ir.Read)
	xo := b.Buffer("x_out", ir.F32, ir.Write)
	yo := b.Buffer("y_out", ir.I32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(xo, i, ir.Load(x, i))
	b.Store(yo, i, ir.Load(y, i))
	return semantic{name: "copy", prog: b.Program(),
		c: launch1(1, [][]byte{words(f32Edges), words(i32Edges), nil, nil}, []uint32{0, 0, uint32(len(f32Edges)), uint32(len(i32Edges))})}
}
