package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// The matrix table (IR v1.2; docs/design.md, "IR v1.2 semantics"): every
// matrix statement on every element type it takes — fill; load and store in
// row and col layout with offsets and strides, from and to buffers and shared
// arrays, bounded at odd edges (17×31 of a 32×32 tile), partly out of range, at
// an offset that wraps around 2^32; mma on f16, bf16, f32 and f32 at tf32
// precision, into a loaded accumulator, chained over K steps with a bounded
// last step, with a equal to b; convert between every pair of types on the
// rounding edges. Inputs are small integers (and values exact in tf32), so
// every partial sum is exact and every backend's sums give the same bits; the
// table states each case's whole output, computed here from the rules, and
// the reference must agree. Addresses, strides and bounds come from uniforms
// or workgroup ids, so a compiler cannot fold them.

var matrixTypes = []ir.Type{ir.F32, ir.F16, ir.BF16}

// bitsOf is v rounded to type t (f32, f16 or bf16), as bits.
func bitsOf(t ir.Type, v float64) uint32 {
	switch t {
	case ir.F16:
		return h(v)
	case ir.BF16:
		return bf(v)
	}
	return f(float32(v))
}

// ints are n small integers, -3..3 in a fixed pattern, as bits of type t.
func ints(t ir.Type, n, seed int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = bitsOf(t, float64((i*7+seed*3)%7-3))
	}
	return out
}

// filled is n copies of bits.
func filled(n int, bits uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = bits
	}
	return out
}

// addr is the addressing of a matrix load or store: offset, stride, layout and
// an optional bound.
type addr struct {
	off, stride uint32
	col         bool
	bound       *[2]uint32
}

// index is element (r, c)'s index, in u32 arithmetic, and whether it is inside
// the bound and the array of n elements.
func (a addr) index(r, c uint32, n int) (uint32, bool) {
	if a.bound != nil && (r >= a.bound[0] || c >= a.bound[1]) {
		return 0, false
	}
	k := a.off + r*a.stride + c
	if a.col {
		k = a.off + c*a.stride + r
	}
	return k, uint64(k) < uint64(n)
}

// gather is what matrix_load reads into a rows×cols tile (row-major) from src.
func gather(src []uint32, rows, cols uint32, a addr) []uint32 {
	tile := make([]uint32, rows*cols)
	for r := range rows {
		for c := range cols {
			if k, ok := a.index(r, c, len(src)); ok {
				tile[r*cols+c] = src[k]
			}
		}
	}
	return tile
}

// scatter is what matrix_store writes from a rows×cols tile into dst.
func scatter(dst, tile []uint32, rows, cols uint32, a addr) {
	for r := range rows {
		for c := range cols {
			if k, ok := a.index(r, c, len(dst)); ok {
				dst[k] = tile[r*cols+c]
			}
		}
	}
}

// addrUniforms declares the uniforms of an addressing (prefix_off, _stride,
// and _rows, _cols when bounded) and returns their expressions and values.
func addrUniforms(b *ir.Builder, prefix string, a addr, values map[string]ir.Literal) (off, stride ir.Expr, bound []ir.Expr) {
	u := func(name string, v uint32) ir.Expr {
		values[prefix+"_"+name] = ir.LitU32(v)
		return b.Uniform(prefix+"_"+name, ir.U32)
	}
	off, stride = u("off", a.off), u("stride", a.stride)
	if a.bound != nil {
		bound = []ir.Expr{u("rows", a.bound[0]), u("cols", a.bound[1])}
	}
	return off, stride, bound
}

func layout(col bool) ir.MatrixLayout {
	if col {
		return ir.ColMajor
	}
	return ir.RowMajor
}

func load(k *ir.Block, m, from string, off, stride ir.Expr, col bool, bound []ir.Expr) {
	if bound != nil {
		k.MatrixLoadBounded(m, from, off, stride, layout(col), bound[0], bound[1])
		return
	}
	k.MatrixLoad(m, from, off, stride, layout(col))
}

func store(k *ir.Block, m, to string, off, stride ir.Expr, col bool, bound []ir.Expr) {
	if bound != nil {
		k.MatrixStoreBounded(m, to, off, stride, layout(col), bound[0], bound[1])
		return
	}
	k.MatrixStore(m, to, off, stride, layout(col))
}

// uniformBlock encodes values for p, recording a failure in *err.
func uniformBlock(p *ir.Program, values map[string]ir.Literal, err *error) []byte {
	block, e := ir.EncodeUniforms(p, values)
	if e != nil && *err == nil {
		*err = e
	}
	return block
}

// matrixCases is the matrix table.
func matrixCases() []semantic {
	var out []semantic
	for _, t := range matrixTypes {
		out = append(out, fillCase(t))
		// Each store's span fits half the output, so the two workgroups
		// never write one element (which would race); no store aliases
		// (its stride is at least the tile's width in its layout).
		out = append(out, tileCase("load_store.row."+t.String(), t, 32, 16, 700, 1100,
			addr{off: 3, stride: 20}, addr{off: 1, stride: 17}))
		out = append(out, tileCase("load_store.col."+t.String(), t, 16, 32, 700, 1100,
			addr{off: 5, stride: 19, col: true}, addr{off: 2, stride: 33}))
		out = append(out, tileCase("store.col."+t.String(), t, 32, 16, 600, 1100,
			addr{off: 0, stride: 16}, addr{off: 7, stride: 33, col: true}))
		out = append(out, tileCase("bound.17x31."+t.String(), t, 32, 32, 40*40, 1600,
			addr{off: 41, stride: 40, bound: &[2]uint32{17, 31}}, addr{off: 0, stride: 40, bound: &[2]uint32{17, 31}}))
		out = append(out, tileCase("bound.col.5x0."+t.String(), t, 16, 16, 300, 600,
			addr{off: 0, stride: 16, col: true, bound: &[2]uint32{5, 40}}, addr{off: 4, stride: 17, bound: &[2]uint32{16, 0}}))
		// Partly out of range: the load reads 10 of 256 elements, the first
		// workgroup's store writes 10, the second's none.
		out = append(out, tileCase("range."+t.String(), t, 16, 16, 100, 50,
			addr{off: 90, stride: 16}, addr{off: 40, stride: 16}))
		// (r, c) at 0xFFFFFFF0 + 16r + c: row 0 is out of range, rows 1.. wrap
		// around to 0.. and are loaded.
		out = append(out, tileCase("wrap."+t.String(), t, 16, 16, 300, 600,
			addr{off: 0xFFFFFFF0, stride: 16}, addr{off: 0, stride: 16}))
		out = append(out, sharedCase(t))
	}
	for _, t := range matrixTypes {
		out = append(out, mmaCase("mma."+t.String(), t, false, 32, 16, 48))
	}
	out = append(out, mmaCase("mma.tf32", ir.F32, true, 16, 32, 16))
	for _, t := range matrixTypes {
		out = append(out, chainCase(t, 72))
	}
	out = append(out, squareCase())
	out = append(out, convertCases()...)
	return out
}

// fillCase fills a 16×32 matrix with a value and stores it over a buffer
// prefilled with another; a second matrix is filled with -0 and stored after
// it, a third (f32 and f16) with NaN.
func fillCase(t ir.Type) semantic {
	const rows, cols = 16, 32
	b := ir.NewBuilder("kiln.semantics.matrix.fill."+t.String(), 64, 1, 1)
	o := b.Buffer("out", t, ir.ReadWrite)
	m := b.Matrix("m", t, rows, cols)
	z := b.Matrix("z", t, rows, cols)
	b.MatrixFill(m, ir.Literal{Type: t, Bits: bitsOf(t, 1.5)})
	b.MatrixFill(z, ir.Literal{Type: t, Bits: bitsOf(t, 0) | signBit(t)})
	b.MatrixStore(m, o, ir.LitU32(0), ir.LitU32(cols), ir.RowMajor)
	b.MatrixStore(z, o, ir.LitU32(rows*cols), ir.LitU32(cols), ir.RowMajor)
	nan := bitsOf(t, 0) | nanOf(t)
	b.MatrixFill(m, ir.Literal{Type: t, Bits: nan})
	b.MatrixStore(m, o, ir.LitU32(2*rows*cols), ir.LitU32(cols), ir.RowMajor)
	n := 3*rows*cols + 5
	want := filled(n, bitsOf(t, -7))
	copy(want, filled(rows*cols, bitsOf(t, 1.5)))
	copy(want[rows*cols:], filled(rows*cols, signBit(t)))
	copy(want[2*rows*cols:], filled(rows*cols, nan))
	return semantic{
		name: "fill." + t.String(), prog: b.Program(), pinned: [][]uint32{want},
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(t, filled(n, bitsOf(t, -7)))}, OutputCounts: []uint32{0}}},
	}
}

// signBit and nanOf are the sign bit and a quiet NaN of type t.
func signBit(t ir.Type) uint32 {
	if t.Is16Bit() {
		return 0x8000
	}
	return negZero
}

func nanOf(t ir.Type) uint32 {
	switch t {
	case ir.F16:
		return h16NaN
	case ir.BF16:
		return bf16NaN
	}
	return nanBits
}

// tileCase loads a rows×cols matrix from a buffer of srcN elements with ld and
// stores it with st over a read_write buffer of dstN elements prefilled with
// -7, on two workgroups: workgroup w adds w·dstN/2 to the store's offset, so
// the second writes elsewhere (or out of range) as the first.
func tileCase(name string, t ir.Type, rows, cols uint32, srcN, dstN int, ld, st addr) semantic {
	b := ir.NewBuilder("kiln.semantics.matrix."+name, 64, 1, 1)
	values := map[string]ir.Literal{}
	in := b.Buffer("in", t, ir.Read)
	o := b.Buffer("out", t, ir.ReadWrite)
	m := b.Matrix("m", t, rows, cols)
	lo, ls, lb := addrUniforms(b, "load", ld, values)
	so, ss, sb := addrUniforms(b, "store", st, values)
	load(&b.Block, m, in, lo, ls, ld.col, lb)
	shift := b.Let("shift", ir.Mul(ir.WorkgroupID(0), ir.LitU32(uint32(dstN/2))))
	store(&b.Block, m, o, ir.Add(so, shift), ss, st.col, sb)
	src := make([]uint32, srcN)
	for i := range src {
		src[i] = bitsOf(t, float64(i%2000-1000)/4)
	}
	src[0], src[1] = signBit(t), nanOf(t) // -0 and NaN move unchanged
	dst := filled(dstN, bitsOf(t, -7))
	tile := gather(src, rows, cols, ld)
	for w := range uint32(2) {
		st2 := st
		st2.off += w * uint32(dstN/2)
		scatter(dst, tile, rows, cols, st2)
	}
	var err error
	p := b.Program()
	block := uniformBlock(p, values, &err)
	return semantic{
		name: name, prog: p, pinned: [][]uint32{dst}, err: err,
		c: launch{Case: kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{encode(t, src), encode(t, filled(dstN, bitsOf(t, -7)))},
			OutputCounts: []uint32{0, 0}, Uniforms: block}},
	}
}

// sharedCase moves a tile through shared memory every way: invocations store
// a shared array, a barrier, a matrix_load from it (row); matrix_store to a
// second shared array (col) and matrix_load from it back to back (ordered
// without a barrier); matrix_store to the first array, a barrier, and the
// invocations copy it to the output.
func sharedCase(t ir.Type) semantic {
	const rows, cols, wg = 16, 32, 64
	const n = rows * cols
	b, in, o := inOut("kiln.semantics.matrix.shared."+t.String(), wg, t, t)
	s1 := b.Shared("s1", t, n)
	s2 := b.Shared("s2", t, n+16)
	m := b.Matrix("m", t, rows, cols)
	q := b.Matrix("q", t, rows, cols)
	lid := b.Let("lid", ir.LocalID(0))
	b.For("i", ir.U32, lid, ir.LitU32(n), ir.LitU32(wg), func(k *ir.Block, i ir.Expr) {
		k.Store(s1, i, ir.Load(in, i))
	})
	b.Barrier()
	b.MatrixLoad(m, s1, ir.LitU32(0), ir.LitU32(cols), ir.RowMajor)
	b.MatrixStore(m, s2, ir.LitU32(16), ir.LitU32(rows), ir.ColMajor)
	b.MatrixLoad(q, s2, ir.LitU32(16), ir.LitU32(rows), ir.ColMajor)
	b.Barrier()
	b.MatrixStore(q, s1, ir.LitU32(0), ir.LitU32(cols), ir.RowMajor)
	b.Barrier()
	b.For("j", ir.U32, lid, ir.LitU32(n), ir.LitU32(wg), func(k *ir.Block, j ir.Expr) {
		k.Store(o, j, ir.Load(s1, j))
	})
	src := ints(t, n, 1)
	return semantic{
		name: "shared." + t.String(), prog: b.Program(), pinned: [][]uint32{src},
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(t, src), nil}, OutputCounts: []uint32{0, n}}},
	}
}

// mmaMatrices declares the matrices of acc += A·B, in this order: A (m×k) and B
// (k×n) of type t, and the f32 accumulator acc (m×n).
func mmaMatrices(b *ir.Builder, t ir.Type, m, n, k uint32) (a, bm, acc string) {
	return b.Matrix("A", t, m, k), b.Matrix("B", t, k, n), b.Matrix("acc", ir.F32, m, n)
}

// mmaCase multiplies an m×k a by a k×n b (row-major buffers; b read in col
// layout from its transpose on odd workgroups) into an accumulator loaded from
// a buffer, on two workgroups that each read their own slices.
func mmaCase(name string, t ir.Type, tf32 bool, m, n, k uint32) semantic {
	b := ir.NewBuilder("kiln.semantics.matrix."+name, 64, 1, 1)
	ab := b.Buffer("a", t, ir.Read)
	bb := b.Buffer("b", t, ir.Read)
	bt := b.Buffer("bt", t, ir.Read)
	cb := b.Buffer("c", ir.F32, ir.ReadWrite)
	am, bm, acc := mmaMatrices(b, t, m, n, k)
	w := b.Let("w", ir.WorkgroupID(0))
	b.MatrixLoad(am, ab, ir.Mul(w, ir.LitU32(m*k)), ir.LitU32(k), ir.RowMajor)
	b.IfElse(ir.Eq(w, ir.LitU32(0)), func(then *ir.Block) {
		then.MatrixLoad(bm, bb, ir.LitU32(0), ir.LitU32(n), ir.RowMajor)
	}, func(els *ir.Block) {
		els.MatrixLoad(bm, bt, ir.LitU32(0), ir.LitU32(k), ir.ColMajor)
	})
	b.MatrixLoad(acc, cb, ir.Mul(w, ir.LitU32(m*n)), ir.LitU32(n), ir.RowMajor)
	if tf32 {
		b.MatrixMMATF32(acc, am, bm)
	} else {
		b.MatrixMMA(acc, am, bm)
	}
	b.MatrixStore(acc, cb, ir.Mul(w, ir.LitU32(m*n)), ir.LitU32(n), ir.RowMajor)
	a := ints(t, int(2*m*k), 2)
	bv := ints(t, int(k*n), 3)
	btv := make([]uint32, k*n) // bt[c][r] = b[r][c]
	for r := range k {
		for c := range n {
			btv[c*k+r] = bv[r*n+c]
		}
	}
	c0 := ints(ir.F32, int(2*m*n), 4)
	want := make([]uint32, 2*m*n)
	for wg := range uint32(2) {
		for i := range m {
			for j := range n {
				s := verify.Value(ir.F32, c0[wg*m*n+i*n+j])
				for e := range k {
					s += verify.Value(t, a[wg*m*k+i*k+e]) * verify.Value(t, bv[e*n+j])
				}
				want[wg*m*n+i*n+j] = f(float32(s))
			}
		}
	}
	return semantic{
		name: name, prog: b.Program(), pinned: [][]uint32{want},
		c: launch{Case: kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{encode(t, a), encode(t, bv), encode(t, btv), words(c0)},
			OutputCounts: []uint32{0, 0, 0, 0}}},
	}
}

// chainCase is a matmul of 16×32 tiles over K = kk, K steps of 16 with the
// last one bounded (kk is not a multiple of 16), from a uniform K.
func chainCase(t ir.Type, kk uint32) semantic {
	const m, n, step = 16, 32, 16
	b := ir.NewBuilder("kiln.semantics.matrix.chain."+t.String(), 32, 1, 1)
	ab := b.Buffer("a", t, ir.Read)
	bb := b.Buffer("b", t, ir.Read)
	cb := b.Buffer("c", ir.F32, ir.Write)
	am, bm, acc := mmaMatrices(b, t, m, n, step)
	k := b.Uniform("k", ir.U32)
	b.MatrixFill(acc, ir.LitF32(0))
	b.For("k0", ir.U32, ir.LitU32(0), k, ir.LitU32(step), func(loop *ir.Block, k0 ir.Expr) {
		depth := loop.Let("depth", ir.Sub(k, k0))
		loop.MatrixLoadBounded(am, ab, k0, k, ir.RowMajor, ir.LitU32(m), depth)
		loop.MatrixLoadBounded(bm, bb, ir.Mul(k0, ir.LitU32(n)), ir.LitU32(n), ir.RowMajor, depth, ir.LitU32(n))
		loop.MatrixMMA(acc, am, bm)
	})
	b.MatrixStore(acc, cb, ir.LitU32(0), ir.LitU32(n), ir.RowMajor)
	a := ints(t, int(m*kk), 5)
	// b has 16 more rows than K, nonzero: a backend that reads past the
	// bound of the last step gets them.
	bv := ints(t, int((kk+step)*n), 6)
	want := make([]uint32, m*n)
	for i := range uint32(m) {
		for j := range uint32(n) {
			s := 0.0
			for e := range kk {
				s += verify.Value(t, a[i*kk+e]) * verify.Value(t, bv[e*n+j])
			}
			want[i*n+j] = f(float32(s))
		}
	}
	var err error
	p := b.Program()
	block := uniformBlock(p, map[string]ir.Literal{"k": ir.LitU32(kk)}, &err)
	return semantic{
		name: "chain." + t.String(), prog: p, pinned: [][]uint32{want}, err: err,
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(t, a), encode(t, bv), nil},
			OutputCounts: []uint32{0, 0, m * n}, Uniforms: block}},
	}
}

// squareCase is mma with a equal to b (A·A) on f16, into an accumulator that
// is then converted to f16 and stored.
func squareCase() semantic {
	const s = 16
	b := ir.NewBuilder("kiln.semantics.matrix.square.f16", 32, 1, 1)
	ab := b.Buffer("a", ir.F16, ir.Read)
	cb := b.Buffer("c", ir.F16, ir.Write)
	am := b.Matrix("A", ir.F16, s, s)
	acc := b.Matrix("acc", ir.F32, s, s)
	hm := b.Matrix("H", ir.F16, s, s)
	b.MatrixLoad(am, ab, ir.LitU32(0), ir.LitU32(s), ir.RowMajor)
	b.MatrixFill(acc, ir.LitF32(0.5))
	b.MatrixMMA(acc, am, am)
	b.MatrixConvert(hm, acc)
	b.MatrixStore(hm, cb, ir.LitU32(0), ir.LitU32(s), ir.RowMajor)
	a := ints(ir.F16, s*s, 7)
	want := make([]uint32, s*s)
	for i := range s {
		for j := range s {
			v := 0.5
			for e := range s {
				v += verify.Value(ir.F16, a[i*s+e]) * verify.Value(ir.F16, a[e*s+j])
			}
			want[i*s+j] = h(v)
		}
	}
	return semantic{
		name: "square.f16", prog: b.Program(), pinned: [][]uint32{want},
		c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(ir.F16, a), nil}, OutputCounts: []uint32{0, s * s}}},
	}
}

// convertCases convert a 16×16 matrix of every type into every other type, on
// the rounding edges of the narrower types (as cast does).
func convertCases() []semantic {
	var out []semantic
	edges := map[ir.Type][]uint32{
		ir.F32:  append(append([]uint32{}, f32Rounding...), f32Edges...),
		ir.F16:  f16Edges,
		ir.BF16: bf16Edges,
	}
	for _, from := range matrixTypes {
		for _, to := range matrixTypes {
			if from == to {
				continue
			}
			const s = 16
			src := make([]uint32, s*s)
			for i := range src {
				src[i] = edges[from][i%len(edges[from])]
			}
			name := fmt.Sprintf("convert.%s.%s", from, to)
			b, in, o := inOut("kiln.semantics.matrix."+name, 32, from, to)
			sm := b.Matrix("S", from, s, s)
			dm := b.Matrix("D", to, s, s)
			b.MatrixLoad(sm, in, ir.LitU32(0), ir.LitU32(s), ir.RowMajor)
			b.MatrixConvert(dm, sm)
			b.MatrixStore(dm, o, ir.LitU32(0), ir.LitU32(s), ir.RowMajor)
			want := make([]uint32, s*s)
			for i, x := range src {
				want[i] = convertBits(from, to, x)
			}
			out = append(out, semantic{
				name: name, prog: b.Program(), pinned: [][]uint32{want},
				c: launch{Case: kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(from, src), nil}, OutputCounts: []uint32{0, s * s}}},
			})
		}
	}
	return out
}

// convertBits converts bits of type from to type to as cast does: exactly to
// f32, then rounded to nearest even (NaN stays a NaN).
func convertBits(from, to ir.Type, x uint32) uint32 {
	v := verify.Value(from, x)
	if v != v {
		return nanOf(to)
	}
	if v == 0 && x&signBit(from) != 0 {
		return signBit(to)
	}
	return bitsOf(to, v)
}
