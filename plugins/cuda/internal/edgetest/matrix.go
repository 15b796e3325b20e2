package edgetest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// The matrix rows of the table (IR v1.2): each is a short script of matrix
// statements over buffers and shared arrays, built as an IR program, whose
// outputs (Case.Want) come from the script run by a plain Go model of
// docs/design.md's matrix semantics (the oracle's order: mma sums k = 0..K−1 in
// f32, products of f16 and bf16 exact), compared bit for bit.

// addr is an offset, stride or bound: base + workgroup_id.x·perGroup +
// i·perIter, with i the enclosing loop's counter.
type addr struct{ base, perGroup, perIter uint32 }

func (a addr) expr() ir.Expr {
	var x ir.Expr = ir.LitU32(a.base)
	if a.perGroup != 0 {
		x = ir.Add(x, ir.Mul(ir.WorkgroupID(0), ir.LitU32(a.perGroup)))
	}
	if a.perIter != 0 {
		x = ir.Add(x, ir.Mul(ir.Local("i"), ir.LitU32(a.perIter)))
	}
	return x
}

func (a addr) at(group, iter uint32) uint32 { return a.base + group*a.perGroup + iter*a.perIter }

// mop is one statement of a script.
type mop struct {
	kind           string // fill, load, store, mma, tf32, convert, loop, group1
	m, other       string // the matrix; the array (load, store), A (mma) or source (convert)
	b              string // mma's B
	offset, stride addr
	layout         ir.MatrixLayout
	bound          *[2]addr
	value          uint32 // fill's bits
	// loop runs body n times (a constant trip count, or one only known at run
	// time when runtime is set); group1 runs body in workgroup 1 only.
	n       uint32
	runtime bool
	body    []mop
}

type mbuf struct {
	name   string
	t      ir.Type
	access ir.Access
	data   []uint32 // input elements (bits), or nil for a write buffer of count
	count  uint32
}

type matCase struct {
	name   string
	wg     [3]uint32
	grid   uint32
	mats   []ir.MatrixDecl
	bufs   []mbuf
	shared []ir.SharedDecl
	ops    []mop
}

func (c matCase) build() *ir.Program {
	b := ir.NewBuilder("matrix."+c.name, c.wg[0], c.wg[1], c.wg[2])
	for _, bf := range c.bufs {
		b.Buffer(bf.name, bf.t, bf.access)
	}
	for _, s := range c.shared {
		b.Shared(s.Name, s.Type, s.Count)
	}
	for _, m := range c.mats {
		b.Matrix(m.Name, m.Type, m.Rows, m.Cols)
	}
	c.emitOps(&b.Block, c.ops)
	return b.Program()
}

func (c matCase) emitOps(k *ir.Block, ops []mop) {
	for _, o := range ops {
		switch o.kind {
		case "fill":
			t := c.matrix(o.m).Type
			k.MatrixFill(o.m, ir.Literal{Type: t, Bits: o.value})
		case "load", "store":
			var rows, cols ir.Expr
			if o.bound != nil {
				rows, cols = o.bound[0].expr(), o.bound[1].expr()
			}
			switch {
			case o.kind == "load" && o.bound == nil:
				k.MatrixLoad(o.m, o.other, o.offset.expr(), o.stride.expr(), o.layout)
			case o.kind == "load":
				k.MatrixLoadBounded(o.m, o.other, o.offset.expr(), o.stride.expr(), o.layout, rows, cols)
			case o.bound == nil:
				k.MatrixStore(o.m, o.other, o.offset.expr(), o.stride.expr(), o.layout)
			default:
				k.MatrixStoreBounded(o.m, o.other, o.offset.expr(), o.stride.expr(), o.layout, rows, cols)
			}
		case "mma":
			k.MatrixMMA(o.m, o.other, o.b)
		case "tf32":
			k.MatrixMMATF32(o.m, o.other, o.b)
		case "convert":
			k.MatrixConvert(o.m, o.other)
		case "loop":
			var to ir.Expr = ir.LitU32(o.n)
			if o.runtime {
				to = ir.Min(ir.Len(c.bufs[0].name), ir.LitU32(o.n))
			}
			k.For("i", ir.U32, ir.LitU32(0), to, ir.LitU32(1), func(body *ir.Block, _ ir.Expr) { c.emitOps(body, o.body) })
		case "group1":
			k.If(ir.Eq(ir.WorkgroupID(0), ir.LitU32(1)), func(body *ir.Block) { c.emitOps(body, o.body) })
		default:
			panic("unknown op " + o.kind)
		}
	}
}

func (c matCase) matrix(name string) ir.MatrixDecl {
	for _, m := range c.mats {
		if m.Name == name {
			return m
		}
	}
	panic("no matrix " + name)
}

// launch is the case's dispatch.
func (c matCase) launch() kernels.Case {
	l := kernels.Case{Grid: [3]uint32{c.grid, 1, 1}}
	for _, bf := range c.bufs {
		if bf.access == ir.Write {
			l.Inputs = append(l.Inputs, nil)
			l.OutputCounts = append(l.OutputCounts, bf.count)
			continue
		}
		l.Inputs = append(l.Inputs, Encode(bf.t, bf.data))
		l.OutputCounts = append(l.OutputCounts, 0)
	}
	return l
}

// bitsToF32 and bitsFromF32 convert element bits of t exactly to f32 and back, rounded
// to nearest even.
func bitsToF32(t ir.Type, bits uint32) float32 {
	switch t {
	case ir.F16:
		return half.Float16(bits).Float32()
	case ir.BF16:
		return math.Float32frombits(bits << 16)
	}
	return math.Float32frombits(bits)
}

func bitsFromF32(t ir.Type, v float32) uint32 {
	switch t {
	case ir.F16:
		return uint32(half.NewFloat16(v))
	case ir.BF16:
		return uint32(half.NewBFloat16(v))
	}
	return math.Float32bits(v)
}

// model runs the script in Go and returns the outputs.
type model struct {
	c      matCase
	arrays map[string][]uint32
	known  map[string][]bool // a shared array's elements written so far
	mats   map[string][]uint32
	group  uint32
	err    error
}

func (c matCase) reference() ([][]byte, error) {
	md := &model{c: c, arrays: map[string][]uint32{}}
	for _, bf := range c.bufs {
		if bf.access == ir.Write {
			md.arrays[bf.name] = make([]uint32, bf.count)
		} else {
			md.arrays[bf.name] = append([]uint32(nil), bf.data...)
		}
	}
	for g := range c.grid {
		md.group = g
		md.mats, md.known = map[string][]uint32{}, map[string][]bool{}
		for _, m := range c.mats {
			md.mats[m.Name] = make([]uint32, m.Rows*m.Cols)
		}
		for _, s := range c.shared {
			md.arrays[s.Name], md.known[s.Name] = make([]uint32, s.Count), make([]bool, s.Count)
		}
		md.run(c.ops, 0)
	}
	var outs [][]byte
	for _, bf := range c.bufs {
		if bf.access != ir.Read {
			outs = append(outs, Encode(bf.t, md.arrays[bf.name]))
		}
	}
	return outs, md.err
}

func (md *model) run(ops []mop, iter uint32) {
	for _, o := range ops {
		switch o.kind {
		case "fill":
			for i := range md.mats[o.m] {
				md.mats[o.m][i] = o.value
			}
		case "load", "store":
			md.access(o, iter)
		case "mma", "tf32":
			acc, a, b := md.c.matrix(o.m), md.c.matrix(o.other), md.c.matrix(o.b)
			for r := range acc.Rows {
				for col := range acc.Cols {
					s := math.Float32frombits(md.mats[o.m][r*acc.Cols+col])
					for k := range a.Cols {
						p := float32(bitsToF32(a.Type, md.mats[o.other][r*a.Cols+k]) * bitsToF32(b.Type, md.mats[o.b][k*b.Cols+col]))
						s = float32(s + p)
					}
					md.mats[o.m][r*acc.Cols+col] = math.Float32bits(s)
				}
			}
		case "convert":
			from, to := md.c.matrix(o.other).Type, md.c.matrix(o.m).Type
			for i, v := range md.mats[o.other] {
				md.mats[o.m][i] = bitsFromF32(to, bitsToF32(from, v))
			}
		case "loop":
			for i := range o.n {
				md.run(o.body, i)
			}
		case "group1":
			if md.group == 1 {
				md.run(o.body, iter)
			}
		}
	}
}

func (md *model) access(o mop, iter uint32) {
	m := md.c.matrix(o.m)
	arr := md.arrays[o.other]
	off, stride := o.offset.at(md.group, iter), o.stride.at(md.group, iter)
	rows, cols := m.Rows, m.Cols
	if o.bound != nil {
		rows, cols = o.bound[0].at(md.group, iter), o.bound[1].at(md.group, iter)
	}
	for r := range m.Rows {
		for c := range m.Cols {
			idx := off + r*stride + c
			if o.layout == ir.ColMajor {
				idx = off + c*stride + r
			}
			inside := r < rows && c < cols && uint64(idx) < uint64(len(arr))
			e := r*m.Cols + c
			switch {
			case o.kind == "load" && !inside:
				md.mats[o.m][e] = 0
			case o.kind == "load":
				if k := md.known[o.other]; k != nil && !k[idx] {
					md.err = fmt.Errorf("the script loads element %d of shared array %s before writing it", idx, o.other)
				}
				md.mats[o.m][e] = arr[idx]
			case inside:
				arr[idx] = md.mats[o.m][e]
				if k := md.known[o.other]; k != nil {
					k[idx] = true
				}
			}
		}
	}
}

// random returns n random element bits of t: f16 and bf16 values in [-4, 4),
// f32 values in [-1, 1).
func random(rng *rand.Rand, t ir.Type, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		if t == ir.F32 {
			out[i] = math.Float32bits(rng.Float32()*2 - 1)
		} else {
			out[i] = bitsFromF32(t, rng.Float32()*8-4)
		}
	}
	return out
}

func row(m string, from string, off, stride uint32) mop {
	return mop{kind: "load", m: m, other: from, offset: addr{base: off}, stride: addr{base: stride}, layout: ir.RowMajor}
}

func storeRow(m string, to string, off, stride uint32) mop {
	return mop{kind: "store", m: m, other: to, offset: addr{base: off}, stride: addr{base: stride}, layout: ir.RowMajor}
}

func matCases() []matCase {
	rng := rand.New(rand.NewPCG(12, 34))
	mat := func(name string, t ir.Type, rows, cols uint32) ir.MatrixDecl {
		return ir.MatrixDecl{Name: name, Type: t, Rows: rows, Cols: cols}
	}
	in := func(name string, t ir.Type, n int) mbuf {
		return mbuf{name: name, t: t, access: ir.Read, data: random(rng, t, n)}
	}
	out := func(name string, t ir.Type, n uint32) mbuf { return mbuf{name: name, t: t, access: ir.Write, count: n} }
	bound := func(r, c addr) *[2]addr { return &[2]addr{r, c} }
	mmaCase := func(name string, t ir.Type, m, n, k uint32, tf32 bool, wg [3]uint32) matCase {
		kind := "mma"
		if tf32 {
			kind = "tf32"
		}
		return matCase{name: name, wg: wg, grid: 2,
			mats: []ir.MatrixDecl{mat("acc", ir.F32, m, n), mat("a", t, m, k), mat("b", t, k, n)},
			bufs: []mbuf{in("x", t, int(2*m*k)), in("y", t, int(2*k*n)), in("c", ir.F32, int(m*n)), out("out", ir.F32, 2*m*n)},
			ops: []mop{
				row("acc", "c", 0, n),
				{kind: "load", m: "a", other: "x", offset: addr{perGroup: m * k}, stride: addr{base: k}, layout: ir.RowMajor},
				{kind: "load", m: "b", other: "y", offset: addr{perGroup: k * n}, stride: addr{base: n}, layout: ir.RowMajor},
				{kind: kind, m: "acc", other: "a", b: "b"},
				{kind: kind, m: "acc", other: "a", b: "b"},
				{kind: "store", m: "acc", other: "out", offset: addr{perGroup: m * n}, stride: addr{base: n}, layout: ir.RowMajor},
			}}
	}
	return []matCase{
		{name: "fill.store.f16.bounded", wg: [3]uint32{64, 1, 1}, grid: 2,
			mats: []ir.MatrixDecl{mat("m", ir.F16, 32, 16)},
			bufs: []mbuf{out("out", ir.F16, 1001)},
			ops: []mop{
				{kind: "fill", m: "m", value: uint32(half.NewFloat16(1.5))},
				{kind: "store", m: "m", other: "out", offset: addr{base: 3, perGroup: 500}, stride: addr{base: 20}, layout: ir.RowMajor,
					bound: bound(addr{base: 13, perGroup: 4}, addr{base: 7})},
			}},
		{name: "load.col.store.row.bf16", wg: [3]uint32{96, 1, 1}, grid: 1,
			mats: []ir.MatrixDecl{mat("m", ir.BF16, 32, 48)},
			bufs: []mbuf{in("x", ir.BF16, 2001), out("out", ir.BF16, 1601)},
			ops: []mop{
				{kind: "load", m: "m", other: "x", offset: addr{base: 5}, stride: addr{base: 40}, layout: ir.ColMajor},
				storeRow("m", "out", 1, 50),
			}},
		{name: "load.out.of.range.f32", wg: [3]uint32{32, 2, 1}, grid: 1,
			mats: []ir.MatrixDecl{mat("m", ir.F32, 16, 16)},
			bufs: []mbuf{in("x", ir.F32, 100), out("out", ir.F32, 256)},
			ops:  []mop{row("m", "x", 50, 16), storeRow("m", "out", 0, 16)},
		},
		{name: "load.wrapping.index", wg: [3]uint32{64, 1, 1}, grid: 1,
			mats: []ir.MatrixDecl{mat("m", ir.F32, 16, 16)},
			bufs: []mbuf{in("x", ir.F32, 300), out("out", ir.F32, 256)},
			ops: []mop{
				{kind: "load", m: "m", other: "x", offset: addr{base: 0xFFFFFFF0}, stride: addr{base: 16}, layout: ir.RowMajor},
				storeRow("m", "out", 0, 16),
			}},
		{name: "load.bound.store.bound.col.f16", wg: [3]uint32{128, 1, 1}, grid: 2,
			mats: []ir.MatrixDecl{mat("m", ir.F16, 48, 32)},
			bufs: []mbuf{in("x", ir.F16, 3000), mbuf{name: "out", t: ir.F16, access: ir.ReadWrite, data: random(rng, ir.F16, 2999)}},
			ops: []mop{
				{kind: "load", m: "m", other: "x", offset: addr{base: 7, perGroup: 3}, stride: addr{base: 33}, layout: ir.RowMajor,
					bound: bound(addr{base: 5}, addr{base: 3, perGroup: 25})},
				{kind: "store", m: "m", other: "out", offset: addr{base: 11, perGroup: 1520}, stride: addr{base: 49}, layout: ir.ColMajor, // disjoint per group (a group spans 1517 elements), the second cut by the end
					bound: bound(addr{base: 47}, addr{base: 31})},
			}},
		{name: "unwritten.reads.zero", wg: [3]uint32{64, 1, 1}, grid: 1,
			mats: []ir.MatrixDecl{mat("m", ir.F32, 16, 32), mat("h", ir.F16, 16, 16)},
			bufs: []mbuf{mbuf{name: "out", t: ir.F32, access: ir.ReadWrite, data: random(rng, ir.F32, 600)}, mbuf{name: "o16", t: ir.F16, access: ir.ReadWrite, data: random(rng, ir.F16, 300)}},
			ops:  []mop{storeRow("m", "out", 1, 32), storeRow("h", "o16", 0, 16)},
		},
		mmaCase("mma.f16", ir.F16, 32, 48, 16, false, [3]uint32{64, 1, 1}),
		mmaCase("mma.bf16", ir.BF16, 16, 16, 64, false, [3]uint32{96, 1, 1}),
		mmaCase("mma.f32", ir.F32, 16, 32, 32, false, [3]uint32{32, 4, 1}),
		mmaCase("mma.tf32", ir.F32, 48, 16, 16, true, [3]uint32{256, 1, 1}),
		{name: "mma.k.loop.shared.transpose", wg: [3]uint32{64, 1, 1}, grid: 2,
			mats:   []ir.MatrixDecl{mat("acc", ir.F32, 16, 32), mat("a", ir.F16, 16, 16), mat("b", ir.F16, 16, 32), mat("t", ir.F32, 32, 16)},
			bufs:   []mbuf{in("x", ir.F16, 16*48), in("y", ir.F16, 48*32), out("out", ir.F32, 2*512)},
			shared: []ir.SharedDecl{{Name: "s", Type: ir.F32, Count: 512}},
			ops: []mop{
				{kind: "fill", m: "acc", value: math.Float32bits(0.25)},
				{kind: "loop", n: 3, body: []mop{
					{kind: "load", m: "a", other: "x", offset: addr{perIter: 16}, stride: addr{base: 48}, layout: ir.RowMajor},
					{kind: "load", m: "b", other: "y", offset: addr{perIter: 16 * 32}, stride: addr{base: 32}, layout: ir.RowMajor},
					{kind: "mma", m: "acc", other: "a", b: "b"},
				}},
				storeRow("acc", "s", 0, 32),
				{kind: "load", m: "t", other: "s", offset: addr{}, stride: addr{base: 32}, layout: ir.ColMajor},
				{kind: "store", m: "t", other: "out", offset: addr{perGroup: 512}, stride: addr{base: 16}, layout: ir.RowMajor},
			}},
		{name: "mma.runtime.loop.uniform.if", wg: [3]uint32{48, 1, 1}, grid: 2,
			mats: []ir.MatrixDecl{mat("acc", ir.F32, 16, 16), mat("a", ir.BF16, 16, 16), mat("b", ir.BF16, 16, 16)},
			bufs: []mbuf{in("x", ir.BF16, 1024), in("y", ir.BF16, 1024), out("out", ir.F32, 512)},
			ops: []mop{
				{kind: "loop", n: 4, runtime: true, body: []mop{
					{kind: "load", m: "a", other: "x", offset: addr{perIter: 256}, stride: addr{base: 16}, layout: ir.ColMajor},
					{kind: "load", m: "b", other: "y", offset: addr{perIter: 256}, stride: addr{base: 16}, layout: ir.RowMajor},
					{kind: "mma", m: "acc", other: "a", b: "b"},
				}},
				{kind: "group1", body: []mop{{kind: "mma", m: "acc", other: "a", b: "b"}}},
				{kind: "store", m: "acc", other: "out", offset: addr{perGroup: 256}, stride: addr{base: 16}, layout: ir.RowMajor},
			}},
		{name: "mma.chunked.f32", wg: [3]uint32{64, 1, 1}, grid: 1,
			mats:   []ir.MatrixDecl{mat("acc", ir.F32, 32, 32), mat("a", ir.F32, 32, 256), mat("b", ir.F32, 256, 32)},
			bufs:   []mbuf{in("x", ir.F32, 32*256), in("y", ir.F32, 256*32), out("out", ir.F32, 32*32)},
			shared: []ir.SharedDecl{{Name: "big", Type: ir.U32, Count: 8000}},
			ops: []mop{
				row("a", "x", 0, 256),
				row("b", "y", 0, 32),
				{kind: "mma", m: "acc", other: "a", b: "b"},
				storeRow("acc", "out", 0, 32),
			}},
		{name: "mma.a.equals.b.f16", wg: [3]uint32{32, 1, 1}, grid: 1,
			mats: []ir.MatrixDecl{mat("acc", ir.F32, 16, 16), mat("a", ir.F16, 16, 16)},
			bufs: []mbuf{in("x", ir.F16, 256), out("out", ir.F32, 256)},
			ops: []mop{
				row("a", "x", 0, 16),
				{kind: "mma", m: "acc", other: "a", b: "a"},
				storeRow("acc", "out", 0, 16),
			}},
		{name: "convert.chain.shared.f16", wg: [3]uint32{64, 1, 1}, grid: 1,
			mats:   []ir.MatrixDecl{mat("f", ir.F32, 32, 16), mat("h", ir.F16, 32, 16), mat("g", ir.BF16, 32, 16), mat("back", ir.F32, 32, 16), mat("h2", ir.F16, 32, 16)},
			bufs:   []mbuf{{name: "x", t: ir.F32, access: ir.Read, data: convertInputs(rng, 512)}, out("o32", ir.F32, 512), out("o16", ir.F16, 512), out("ob", ir.BF16, 512)},
			shared: []ir.SharedDecl{{Name: "s", Type: ir.F16, Count: 513}},
			ops: []mop{
				row("f", "x", 0, 16),
				{kind: "convert", m: "h", other: "f"},
				{kind: "convert", m: "g", other: "h"},
				{kind: "convert", m: "back", other: "g"},
				storeRow("back", "o32", 0, 16),
				storeRow("h", "s", 1, 16),
				row("h2", "s", 1, 16),
				storeRow("h2", "o16", 0, 16),
				storeRow("g", "ob", 0, 16),
			}},
	}
}

// convertInputs are f32 values for the conversions: random ones, ties of the
// f16 and bf16 roundings, overflow, subnormal results, infinities and NaN.
func convertInputs(rng *rand.Rand, n int) []uint32 {
	special := []float32{1 + 0x1p-11, 1 + 3*0x1p-11, 65520, -1e6, 0x1p-25, 3 * 0x1p-26, 0x1p-20, 1 + 0x1p-8, 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1))}
	out := random(rng, ir.F32, n)
	for i, v := range special {
		out[i] = math.Float32bits(v)
	}
	out[len(special)] = 0x7FC00000
	return out
}

// MatrixCases are the matrix rows: every matrix statement (fill, load and store
// in both layouts with offsets, strides, odd bounds, out-of-range and wrapping
// indices, buffer and shared sources; mma in f16, bf16, f32 and tf32 with K
// loops constant and at run time and in a uniform if; convert chains), with the
// outputs the model computes.
func MatrixCases() []Case {
	var out []Case
	for _, c := range matCases() {
		want, err := c.reference()
		if err != nil {
			panic(fmt.Sprintf("edgetest: matrix row %s: %v", c.name, err))
		}
		out = append(out, Case{Name: "matrix." + c.name, Prog: c.build(), Launch: c.launch(), Want: want})
	}
	return out
}

// RandomMatrixCases returns n random matrix scripts from seed, with the outputs
// the model computes: A and B (f16, bf16 or f32, sides of 16 to 48) loaded from
// buffers of random sizes in either layout with random offsets, strides and
// bounds, an accumulator filled or loaded, mma (tf32 at random for f32),
// a convert of the accumulator to a random type, and both stored in random
// layouts and bounds, on workgroups of 32 to 128 invocations.
func RandomMatrixCases(seed uint64, n int) []Case {
	rng := rand.New(rand.NewPCG(seed, 0x6d6d61))
	types := []ir.Type{ir.F16, ir.BF16, ir.F32}
	side := func() uint32 { return 16 * (1 + rng.Uint32N(3)) }
	layout := func() ir.MatrixLayout { return ir.MatrixLayout(1 + rng.IntN(2)) }
	access := func(kind, m, arr string, rows, cols uint32) mop {
		o := mop{kind: kind, m: m, other: arr, layout: layout(), offset: addr{base: rng.Uint32N(24)}}
		if o.layout == ir.RowMajor {
			o.stride = addr{base: cols + rng.Uint32N(8)}
		} else {
			o.stride = addr{base: rows + rng.Uint32N(8)}
		}
		if rng.IntN(2) == 0 {
			o.bound = &[2]addr{{base: rng.Uint32N(rows + 4)}, {base: rng.Uint32N(cols + 4)}}
		}
		return o
	}
	size := func(rows, cols uint32) uint32 { return rows*cols/2 + rng.Uint32N(2*rows*cols) }
	var out []Case
	for i := range n {
		t, u := types[rng.IntN(3)], types[rng.IntN(3)]
		m, k, nn := side(), side(), side()
		wgs := []uint32{32, 48, 64, 96, 128}
		c := matCase{name: fmt.Sprintf("random.%d", i), wg: [3]uint32{wgs[rng.IntN(len(wgs))], 1, 1}, grid: 1,
			mats: []ir.MatrixDecl{{Name: "acc", Type: ir.F32, Rows: m, Cols: nn}, {Name: "a", Type: t, Rows: m, Cols: k},
				{Name: "b", Type: t, Rows: k, Cols: nn}, {Name: "c", Type: u, Rows: m, Cols: nn}},
			bufs: []mbuf{
				{name: "x", t: t, access: ir.Read, data: random(rng, t, int(size(m, k)))},
				{name: "y", t: t, access: ir.Read, data: random(rng, t, int(size(k, nn)))},
				{name: "z", t: ir.F32, access: ir.Read, data: random(rng, ir.F32, int(size(m, nn)))},
				{name: "out", t: ir.F32, access: ir.Write, count: size(m, nn)},
				{name: "out2", t: u, access: ir.ReadWrite, data: random(rng, u, int(size(m, nn)))},
			}}
		c.ops = append(c.ops, access("load", "a", "x", m, k), access("load", "b", "y", k, nn))
		if rng.IntN(2) == 0 {
			c.ops = append(c.ops, mop{kind: "fill", m: "acc", value: math.Float32bits(float32(rng.IntN(9)) - 4)})
		} else {
			c.ops = append(c.ops, access("load", "acc", "z", m, nn))
		}
		kind := "mma"
		if t == ir.F32 && rng.IntN(2) == 0 {
			kind = "tf32"
		}
		c.ops = append(c.ops, mop{kind: kind, m: "acc", other: "a", b: "b"}, mop{kind: "convert", m: "c", other: "acc"},
			access("store", "acc", "out", m, nn), access("store", "c", "out2", m, nn))
		want, err := c.reference()
		if err != nil {
			panic(fmt.Sprintf("edgetest: random matrix script %d: %v", i, err))
		}
		out = append(out, Case{Name: "matrix." + c.name, Prog: c.build(), Launch: c.launch(), Want: want})
	}
	return out
}
