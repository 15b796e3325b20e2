package interp

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// elemBytes encodes elements of t held in register form (f32 bits, or 16 bits).
func elemBytes(t ir.Type, v []uint32) []byte {
	if !t.Is16Bit() {
		return u32Bytes(v...)
	}
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = uint16(x)
	}
	return u16Bytes(h...)
}

func bytesElems(t ir.Type, b []byte) []uint32 {
	if !t.Is16Bit() {
		return bytesU32(b)
	}
	h := bytesU16(b)
	v := make([]uint32, len(h))
	for i, x := range h {
		v[i] = uint32(x)
	}
	return v
}

// refAddr is a matrix load's or store's addressing, modelled by the tests.
type refAddr struct {
	off, stride uint32
	layout      ir.MatrixLayout
	bound       []uint32 // rows, cols; nil for none
}

// at is the index of element (r, c), and whether it is inside the bound and n.
func (a refAddr) at(r, c, n uint32) (uint32, bool) {
	if a.bound != nil && (r >= a.bound[0] || c >= a.bound[1]) {
		return 0, false
	}
	var k uint64
	if a.layout == ir.RowMajor {
		k = uint64(a.off) + uint64(r)*uint64(a.stride) + uint64(c)
	} else {
		k = uint64(a.off) + uint64(c)*uint64(a.stride) + uint64(r)
	}
	k %= 1 << 32 // u32 wrapping
	return uint32(k), k < uint64(n)
}

func (a refAddr) uniforms() []uint32 {
	r, c := uint32(0), uint32(0)
	if a.bound != nil {
		r, c = a.bound[0], a.bound[1]
	}
	return []uint32{a.off, a.stride, r, c}
}

// tileProgram loads matrix m from a with ld's addressing and stores it to c with
// st's, every operand a uniform.
func tileProgram(typ ir.Type, rows, cols uint32, ld, st refAddr) *ir.Program {
	b := ir.NewBuilder("test.tile", 32, 1, 1)
	var u [8]ir.Expr
	for i, n := range []string{"lo", "ls", "lr", "lc", "so", "ss", "sr", "sc"} {
		u[i] = b.Uniform(n, ir.U32)
	}
	a := b.Buffer("a", typ, ir.Read)
	c := b.Buffer("c", typ, ir.ReadWrite)
	m := b.Matrix("m", typ, rows, cols)
	if ld.bound != nil {
		b.MatrixLoadBounded(m, a, u[0], u[1], ld.layout, u[2], u[3])
	} else {
		b.MatrixLoad(m, a, u[0], u[1], ld.layout)
	}
	if st.bound != nil {
		b.MatrixStoreBounded(m, c, u[4], u[5], st.layout, u[6], u[7])
	} else {
		b.MatrixStore(m, c, u[4], u[5], st.layout)
	}
	return b.Program()
}

func pattern(t ir.Type, n int, seed uint64) []uint32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	v := make([]uint32, n)
	for i := range v {
		v[i] = rng.Uint32()
		if t.Is16Bit() {
			v[i] &= 0xFFFF
		}
		if v[i] == 0 {
			v[i] = 1 // keep 0 for "not loaded"
		}
	}
	return v
}

type tileCase struct {
	name       string
	typ        ir.Type
	rows, cols uint32
	ld, st     refAddr
	na, nc     int
}

// runTile runs a tileCase and checks c against the model: the tile is a's
// elements where in bound and range, else 0; c keeps its marker where the store
// does not write.
func runTile(t *testing.T, tc tileCase, strict bool) {
	t.Helper()
	a := pattern(tc.typ, tc.na, 1)
	c := pattern(tc.typ, tc.nc, 2)
	tile := make([]uint32, tc.rows*tc.cols)
	for r := range tc.rows {
		for col := range tc.cols {
			if k, ok := tc.ld.at(r, col, uint32(len(a))); ok {
				tile[r*tc.cols+col] = a[k]
			}
		}
	}
	want := append([]uint32(nil), c...)
	for r := range tc.rows {
		for col := range tc.cols {
			if k, ok := tc.st.at(r, col, uint32(len(c))); ok {
				want[k] = tile[r*tc.cols+col]
			}
		}
	}
	p := tileProgram(tc.typ, tc.rows, tc.cols, tc.ld, tc.st)
	l := Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{elemBytes(tc.typ, a), elemBytes(tc.typ, c)},
		Uniforms: u32Bytes(append(tc.ld.uniforms(), tc.st.uniforms()...)...)}
	outs := mustRun12(t, p, Options{Strict: strict}, l)
	got := bytesElems(tc.typ, outs[0])
	bad := 0
	for i := range want {
		if got[i] != want[i] {
			if bad++; bad <= 5 {
				t.Errorf("%s: c[%d] = %#x, want %#x", tc.name, i, got[i], want[i])
			}
		}
	}
}

func rowPlain(cols uint32) refAddr { return refAddr{off: 0, stride: cols, layout: ir.RowMajor} }

func TestMatrixLoadAddressing(t *testing.T) {
	cases := []tileCase{
		{"f32 row", ir.F32, 16, 16, refAddr{0, 16, ir.RowMajor, nil}, rowPlain(16), 256, 256},
		{"f16 col odd stride", ir.F16, 16, 32, refAddr{3, 17, ir.ColMajor, nil}, rowPlain(32), 600, 512},
		{"bf16 bound 5x3", ir.BF16, 32, 16, refAddr{5, 20, ir.RowMajor, []uint32{5, 3}}, rowPlain(16), 641, 512},
		{"f32 partly out of range", ir.F32, 16, 16, refAddr{200, 16, ir.RowMajor, nil}, rowPlain(16), 301, 256},
		{"f16 offset wraps", ir.F16, 16, 16, refAddr{0xFFFFFFF0, 16, ir.RowMajor, nil}, rowPlain(16), 300, 256},
		{"f16 col offset wraps", ir.F16, 16, 16, refAddr{0xFFFFFFF0, 16, ir.ColMajor, nil}, rowPlain(16), 300, 256},
		{"f32 r*stride wraps", ir.F32, 32, 16, refAddr{0, 1 << 28, ir.RowMajor, nil}, rowPlain(16), 64, 512},
		{"f16 bound cols 0", ir.F16, 16, 16, refAddr{0, 16, ir.ColMajor, []uint32{17, 0}}, rowPlain(16), 256, 256},
		{"bf16 col overlapping", ir.BF16, 16, 16, refAddr{1, 15, ir.ColMajor, []uint32{16, 7}}, rowPlain(16), 255, 256},
		{"f32 bound beyond", ir.F32, 16, 16, refAddr{0, 16, ir.RowMajor, []uint32{1000, 0xFFFFFFFF}}, rowPlain(16), 255, 256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runTile(t, tc, false)
			runTile(t, tc, true)
		})
	}
}

func TestMatrixStoreAddressing(t *testing.T) {
	cases := []tileCase{
		{"f32 row offset", ir.F32, 16, 16, rowPlain(16), refAddr{7, 20, ir.RowMajor, nil}, 256, 400},
		{"f16 col bound 3x5", ir.F16, 16, 16, rowPlain(16), refAddr{0, 16, ir.ColMajor, []uint32{3, 5}}, 256, 257},
		{"bf16 offset wraps", ir.BF16, 16, 16, rowPlain(16), refAddr{0xFFFFFFF0, 16, ir.RowMajor, nil}, 256, 255},
		{"f16 partly out of range", ir.F16, 16, 32, rowPlain(32), refAddr{100, 32, ir.RowMajor, nil}, 512, 301},
		{"f32 col", ir.F32, 32, 16, rowPlain(16), refAddr{1, 33, ir.ColMajor, nil}, 512, 600},
		{"bf16 bound odd edge", ir.BF16, 32, 32, rowPlain(32), refAddr{3, 31, ir.ColMajor, []uint32{31, 17}}, 1024, 999},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runTile(t, tc, false)
			runTile(t, tc, true)
		})
	}
}

// refMMA is acc + a·b computed step by step with math/big, each product and each
// sum rounded to f32: the oracle's sequential k order. a and b hold exact values.
func refMMA(acc []float32, a, b []float64, m, n, k int) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			s := acc[i*n+j]
			for kk := range k {
				p := refRound32(new(big.Float).SetPrec(200).Mul(bigOf(a[i*k+kk]), bigOf(b[kk*n+j])))
				s = refRound32(new(big.Float).SetPrec(200).Add(bigOf(float64(s)), bigOf(float64(p))))
			}
			out[i*n+j] = s
		}
	}
	return out
}

// mmaProgram computes acc += A·B once: A (M×K, row-major in a), B (K×N, col-major
// in b, so its stride is K), acc (M×N f32, row-major).
func mmaProgram(typ ir.Type, m, n, k uint32, tf32 bool) *ir.Program {
	b := ir.NewBuilder("test.mma", 64, 1, 1)
	ab := b.Buffer("a", typ, ir.Read)
	bb := b.Buffer("b", typ, ir.Read)
	cb := b.Buffer("acc", ir.F32, ir.ReadWrite)
	A := b.Matrix("A", typ, m, k)
	B := b.Matrix("B", typ, k, n)
	C := b.Matrix("C", ir.F32, m, n)
	b.MatrixLoad(A, ab, u32(0), u32(k), ir.RowMajor)
	b.MatrixLoad(B, bb, u32(0), u32(k), ir.ColMajor)
	b.MatrixLoad(C, cb, u32(0), u32(n), ir.RowMajor)
	if tf32 {
		b.MatrixMMATF32(C, A, B)
	} else {
		b.MatrixMMA(C, A, B)
	}
	b.MatrixStore(C, cb, u32(0), u32(n), ir.RowMajor)
	return b.Program()
}

// runMMA runs mmaProgram on a (row-major M×K) and b (row-major K×N, transposed
// here for the col-major load), elements in register form.
func runMMA(t *testing.T, typ ir.Type, m, n, k int, tf32 bool, a, bm []uint32, acc []float32) []float32 {
	t.Helper()
	bt := make([]uint32, k*n)
	for kk := range k {
		for j := range n {
			bt[j*k+kk] = bm[kk*n+j]
		}
	}
	outs := mustRun12(t, mmaProgram(typ, uint32(m), uint32(n), uint32(k), tf32), Options{Strict: true}, Launch{
		Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{elemBytes(typ, a), elemBytes(typ, bt), f32Bytes(acc...)}})
	got := bytesU32(outs[0])
	r := make([]float32, len(got))
	for i, x := range got {
		r[i] = math.Float32frombits(x)
	}
	return r
}

// valueOf is the exact value of x in register form of type t.
func valueOf(t ir.Type, x uint32) float64 {
	switch t {
	case ir.F16:
		return refF16.value(uint16(x))
	case ir.BF16:
		return refBF16.value(uint16(x))
	}
	return float64(math.Float32frombits(x))
}

// encodeAs rounds v into register form of type t.
func encodeAs(t ir.Type, v float64) uint32 {
	switch t {
	case ir.F16:
		return uint32(refF16.fromFloat64(v))
	case ir.BF16:
		return uint32(refBF16.fromFloat64(v))
	}
	return math.Float32bits(float32(v))
}

func TestMatrixMMA(t *testing.T) {
	cases := []struct {
		name    string
		typ     ir.Type
		m, n, k int
		tf32    bool
		ints    bool // small integers: every partial sum exact
	}{
		{"f16 exact", ir.F16, 16, 16, 32, false, true},
		{"bf16 exact", ir.BF16, 32, 16, 16, false, true},
		{"f32 exact", ir.F32, 16, 32, 16, false, true},
		{"f16 rounding", ir.F16, 16, 16, 48, false, false},
		{"bf16 rounding", ir.BF16, 16, 32, 32, false, false},
		{"f32 rounding", ir.F32, 32, 16, 16, false, false},
		{"tf32 ignored", ir.F32, 16, 16, 16, true, false},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 99))
			gen := func(n int) ([]uint32, []float64) {
				bits, vals := make([]uint32, n), make([]float64, n)
				for i := range bits {
					v := rng.NormFloat64() * 3
					if tc.ints {
						v = float64(rng.IntN(9) - 4)
					}
					bits[i] = encodeAs(tc.typ, v)
					vals[i] = valueOf(tc.typ, bits[i])
				}
				return bits, vals
			}
			a, av := gen(tc.m * tc.k)
			b, bv := gen(tc.k * tc.n)
			acc := make([]float32, tc.m*tc.n)
			for i := range acc {
				acc[i] = float32(rng.NormFloat64() * 10)
				if tc.ints {
					acc[i] = float32(rng.IntN(100) - 50)
				}
			}
			got := runMMA(t, tc.typ, tc.m, tc.n, tc.k, tc.tf32, a, b, acc)
			want := refMMA(acc, av, bv, tc.m, tc.n, tc.k)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("acc[%d] = %g, want %g", i, got[i], want[i])
				}
			}
		})
	}
}

// TestMatrixMMASequentialOrder pins the oracle's order: 2^24 + 1 + 1 + ... in
// order of k rounds back to 2^24 at every step (ties to even), where a pairwise
// or all-at-once sum would give 2^24 + 16.
func TestMatrixMMASequentialOrder(t *testing.T) {
	const m, n, k = 16, 16, 16
	one := make([]uint32, m*k)
	for i := range one {
		one[i] = 0x3C00
	}
	acc := make([]float32, m*n)
	for i := range acc {
		acc[i] = 1 << 24
	}
	got := runMMA(t, ir.F16, m, n, k, false, one, one, acc)
	for i, v := range got {
		if v != 1<<24 {
			t.Fatalf("acc[%d] = %g, want 2^24 (sequential f32 sums)", i, v)
		}
	}
}

// TestMatrixMMALastStep: only the last k step contributes, so an mma that drops
// it leaves the accumulator at 0.
func TestMatrixMMALastStep(t *testing.T) {
	for _, typ := range []ir.Type{ir.F16, ir.BF16, ir.F32} {
		const m, n, k = 16, 16, 32
		a := make([]uint32, m*k)
		b := make([]uint32, k*n)
		for i := range m {
			a[i*k+k-1] = encodeAs(typ, float64(i+1))
		}
		for j := range n {
			b[(k-1)*n+j] = encodeAs(typ, float64(j+1))
		}
		got := runMMA(t, typ, m, n, k, false, a, b, make([]float32, m*n))
		for i := range m {
			for j := range n {
				if want := float32((i + 1) * (j + 1)); got[i*n+j] != want {
					t.Fatalf("%s: acc[%d][%d] = %g, want %g", typ, i, j, got[i*n+j], want)
				}
			}
		}
	}
}

// TestMatrixGEMM multiplies 32×48 by 48×32 in 16×16 tiles, one output tile per
// workgroup, stepping through K in a uniform loop: the tiles' k order is the
// whole product's, so the result equals the sequential model.
func TestMatrixGEMM(t *testing.T) {
	const M, N, K, T = 32, 32, 48, 16
	b := ir.NewBuilder("test.gemm", 32, 1, 1)
	ab := b.Buffer("a", ir.F16, ir.Read)
	bb := b.Buffer("b", ir.F16, ir.Read)
	cb := b.Buffer("c", ir.F32, ir.Write)
	A := b.Matrix("A", ir.F16, T, T)
	B := b.Matrix("B", ir.F16, T, T)
	C := b.Matrix("C", ir.F32, T, T)
	row := b.Let("row", ir.Mul(ir.WorkgroupID(1), u32(T)))
	col := b.Let("col", ir.Mul(ir.WorkgroupID(0), u32(T)))
	b.MatrixFill(C, ir.LitF32(0))
	b.For("kt", ir.U32, u32(0), u32(K), u32(T), func(k *ir.Block, kt ir.Expr) {
		k.MatrixLoad(A, ab, ir.Add(ir.Mul(row, u32(K)), kt), u32(K), ir.RowMajor)
		k.MatrixLoad(B, bb, ir.Add(ir.Mul(kt, u32(N)), col), u32(N), ir.RowMajor)
		k.MatrixMMA(C, A, B)
	})
	b.MatrixStore(C, cb, ir.Add(ir.Mul(row, u32(N)), col), u32(N), ir.RowMajor)
	rng := rand.New(rand.NewPCG(5, 6))
	a, av := make([]uint32, M*K), make([]float64, M*K)
	bm, bv := make([]uint32, K*N), make([]float64, K*N)
	for i := range a {
		a[i] = encodeAs(ir.F16, rng.NormFloat64())
		av[i] = valueOf(ir.F16, a[i])
	}
	for i := range bm {
		bm[i] = encodeAs(ir.F16, rng.NormFloat64())
		bv[i] = valueOf(ir.F16, bm[i])
	}
	outs := mustRun12(t, b.Program(), Options{Strict: true}, Launch{Grid: [3]uint32{N / T, M / T, 1},
		Inputs: [][]byte{elemBytes(ir.F16, a), elemBytes(ir.F16, bm)}, OutputCounts: []uint32{0, 0, M * N}})
	got := bytesU32(outs[0])
	want := refMMA(make([]float32, M*N), av, bv, M, N, K)
	for i := range want {
		if got[i] != math.Float32bits(want[i]) {
			t.Fatalf("c[%d] = %g, want %g", i, math.Float32frombits(got[i]), want[i])
		}
	}
}

// TestMatrixConvertAndFill converts an f32 tile to f16 and bf16 and onwards,
// each element as cast does, and fills tiles of each type.
func TestMatrixConvertAndFill(t *testing.T) {
	b := ir.NewBuilder("test.convert", 16, 1, 1)
	in := b.Buffer("in", ir.F32, ir.Read)
	o16 := b.Buffer("o16", ir.F16, ir.Write)
	obf := b.Buffer("obf", ir.BF16, ir.Write)
	o16bf := b.Buffer("o16bf", ir.BF16, ir.Write)
	obf16 := b.Buffer("obf16", ir.F16, ir.Write)
	obf32 := b.Buffer("obf32", ir.F32, ir.Write)
	ofill := b.Buffer("ofill", ir.BF16, ir.Write)
	S := b.Matrix("S", ir.F32, 16, 16)
	H := b.Matrix("H", ir.F16, 16, 16)
	BF := b.Matrix("BF", ir.BF16, 16, 16)
	HB := b.Matrix("HB", ir.BF16, 16, 16)
	BH := b.Matrix("BH", ir.F16, 16, 16)
	BS := b.Matrix("BS", ir.F32, 16, 16)
	b.MatrixLoad(S, in, u32(0), u32(16), ir.RowMajor)
	b.MatrixConvert(H, S)
	b.MatrixConvert(BF, S)
	b.MatrixConvert(HB, H)
	b.MatrixConvert(BH, BF)
	b.MatrixConvert(BS, BF)
	for _, s := range [][2]string{{H, o16}, {BF, obf}, {HB, o16bf}, {BH, obf16}, {BS, obf32}} {
		b.MatrixStore(s[0], s[1], u32(0), u32(16), ir.RowMajor)
	}
	b.MatrixFill(BF, ir.LitBF16(-3.5))
	b.MatrixStore(BF, ofill, u32(0), u32(16), ir.RowMajor)
	vals := f32CastInputs()[:256]
	outs := mustRun12(t, b.Program(), Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{f32Bytes(vals...)}, OutputCounts: []uint32{0, 256, 256, 256, 256, 256, 256}})
	h, bf, hb, bh, bs, fill := bytesU16(outs[0]), bytesU16(outs[1]), bytesU16(outs[2]), bytesU16(outs[3]), bytesU32(outs[4]), bytesU16(outs[5])
	for i, v := range vals {
		wh := refF16.fromFloat64(float64(v))
		wbf := refBF16.fromFloat64(float64(v))
		check := func(what string, ok bool, got, want any) {
			if !ok {
				t.Errorf("%s of %g: %#x, want %#x", what, v, got, want)
			}
		}
		check("f32->f16", refF16.same(h[i], wh), h[i], wh)
		check("f32->bf16", refBF16.same(bf[i], wbf), bf[i], wbf)
		whb := refBF16.fromFloat64(refF16.value(wh))
		check("f16->bf16", refBF16.same(hb[i], whb), hb[i], whb)
		wbh := refF16.fromFloat64(refBF16.value(wbf))
		check("bf16->f16", refF16.same(bh[i], wbh), bh[i], wbh)
		wbs := refBF16.value(wbf)
		gs := float64(math.Float32frombits(bs[i]))
		check("bf16->f32", gs == wbs || (math.IsNaN(gs) && math.IsNaN(wbs)), bs[i], wbs)
		check("fill", fill[i] == 0xC060, fill[i], 0xC060)
	}
}

// matrixSharedProgram stages a tile through shared memory: invocations write s,
// then matrix_load reads it, matrix_store writes t, and invocations copy t out.
// barriers leaves out the barriers when false.
func matrixSharedProgram(barriers bool) *ir.Program {
	b := ir.NewBuilder("test.mshared", 32, 1, 1)
	out := b.Buffer("out", ir.F16, ir.Write)
	s := b.Shared("s", ir.F16, 256)
	ts := b.Shared("t", ir.F16, 256)
	M := b.Matrix("M", ir.F16, 16, 16)
	b.For("j", ir.U32, u32(0), u32(8), u32(1), func(k *ir.Block, j ir.Expr) {
		i := ir.Add(ir.Mul(lid, u32(8)), j)
		k.Store(s, i, ir.Cast(ir.F16, ir.Cast(ir.F32, i)))
	})
	if barriers {
		b.Barrier()
	}
	b.MatrixLoad(M, s, u32(0), u32(16), ir.ColMajor) // transposes
	b.MatrixStore(M, ts, u32(0), u32(16), ir.RowMajor)
	if barriers {
		b.Barrier()
	}
	b.For("j2", ir.U32, u32(0), u32(8), u32(1), func(k *ir.Block, j ir.Expr) {
		i := ir.Add(ir.Mul(lid, u32(8)), j)
		k.Store(out, i, ir.Load(ts, i))
	})
	return b.Program()
}

func TestMatrixSharedMemory(t *testing.T) {
	for _, strict := range []bool{false, true} {
		outs := mustRun12(t, matrixSharedProgram(true), Options{Strict: strict}, Launch{Grid: [3]uint32{1, 1, 1},
			OutputCounts: []uint32{256}})
		got := bytesU16(outs[0])
		for r := range 16 {
			for c := range 16 {
				if want := refF16.fromFloat64(float64(c*16 + r)); got[r*16+c] != want {
					t.Fatalf("strict %v: out[%d][%d] = %#04x, want %#04x", strict, r, c, got[r*16+c], want)
				}
			}
		}
	}
}

// strictErr runs p in strict mode (one workgroup unless grid says) and returns
// its *StrictError.
func strictErr(t *testing.T, p *ir.Program, l Launch) *StrictError {
	t.Helper()
	if l.Grid == ([3]uint32{}) {
		l.Grid = [3]uint32{1, 1, 1}
	}
	_, err := v12Run(p, Options{Strict: true}, l)
	return asStrictErr(t, err)
}

// asStrictErr returns err as a *StrictError, failing the test if it is not one
// or lacks a Fix.
func asStrictErr(t *testing.T, err error) *StrictError {
	t.Helper()
	var se *StrictError
	if !errors.As(err, &se) {
		t.Fatalf("want a *StrictError, got %v", err)
	}
	if !strings.Contains(err.Error(), "Fix: ") {
		t.Errorf("strict error lacks a Fix: %v", err)
	}
	return se
}

// TestMatrixStrictRaces: matrix statements' shared accesses race with the
// invocations' own when no barrier separates them, in both directions, and not
// with each other.
func TestMatrixStrictRaces(t *testing.T) {
	se := strictErr(t, matrixSharedProgram(false), Launch{OutputCounts: []uint32{256}})
	if se.Hazard != ReadAfterWrite || !se.Collective || se.OtherCollective || se.Array != "s" ||
		se.Statement != "body[1]" || !strings.HasPrefix(se.OtherStatement, "body[0]") {
		t.Errorf("matrix_load after stores without a barrier: %+v", se)
	}

	build := func(body func(b *ir.Builder, s, m string)) *ir.Program {
		b := ir.NewBuilder("test.mrace", 16, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		s := b.Shared("s", ir.F32, 256)
		m := b.Matrix("M", ir.F32, 16, 16)
		b.MatrixFill(m, ir.LitF32(1))
		body(b, s, m)
		b.Store(out, lid, ir.LitF32(0))
		return b.Program()
	}
	cases := []struct {
		name  string
		body  func(b *ir.Builder, s, m string)
		check func(se *StrictError) bool
	}{
		{"invocation reads a matrix_store's word", func(b *ir.Builder, s, m string) {
			b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
			b.Store(s, ir.Add(lid, u32(16)), ir.Load(s, lid))
		}, func(se *StrictError) bool {
			return se.Hazard == ReadAfterWrite && !se.Collective && se.OtherCollective && se.OtherStatement == "body[1]"
		}},
		{"matrix_store over an invocation's read, alone", func(b *ir.Builder, s, m string) {
			b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
			b.Barrier()
			b.Let("x", ir.Load(s, ir.Mul(lid, u32(16))))
			b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
		}, func(se *StrictError) bool {
			return se.Hazard == WriteAfterRead && se.Collective && !se.OtherCollective && se.Statement == "body[4]" &&
				se.OtherStatement == "body[3]"
		}},
		{"invocation writes over a matrix_load's read", func(b *ir.Builder, s, m string) {
			b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
			b.Barrier()
			b.MatrixLoad(m, s, u32(0), u32(16), ir.RowMajor)
			b.Store(s, ir.Mul(lid, u32(3)), ir.LitF32(2))
		}, func(se *StrictError) bool {
			return se.Hazard == WriteAfterRead && !se.Collective && se.OtherCollective && se.Invocation == [3]uint32{0, 0, 0} &&
				se.OtherStatement == "body[3]"
		}},
		{"invocation writes over a matrix_store's word", func(b *ir.Builder, s, m string) {
			b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
			b.Store(s, ir.Add(lid, u32(100)), ir.LitF32(2))
		}, func(se *StrictError) bool {
			return se.Hazard == WriteAfterWrite && !se.Collective && se.OtherCollective && se.Index == 100
		}},
		{"matrix_load of a word nothing wrote", func(b *ir.Builder, s, m string) {
			b.MatrixLoadBounded(m, s, u32(0), u32(16), ir.RowMajor, u32(1), u32(3))
		}, func(se *StrictError) bool {
			return se.Hazard == UninitializedRead && se.Collective && se.Index == 0 && se.Statement == "body[1]"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			se := strictErr(t, build(c.body), Launch{OutputCounts: []uint32{16}})
			if !c.check(se) {
				t.Errorf("%+v", se)
			}
		})
	}

	// Matrix statements are ordered among themselves: a store then a load of the
	// same words needs no barrier; with barriers against the invocations the
	// program is clean.
	clean := build(func(b *ir.Builder, s, m string) {
		b.MatrixStore(m, s, u32(0), u32(16), ir.RowMajor)
		b.MatrixLoad(m, s, u32(0), u32(16), ir.RowMajor)
		b.MatrixStore(m, s, u32(0), u32(16), ir.ColMajor)
		b.Barrier()
		b.Store(s, ir.Add(lid, u32(16)), ir.Load(s, ir.Add(lid, u32(16))))
		b.Barrier()
		b.MatrixLoad(m, s, u32(0), u32(16), ir.RowMajor)
	})
	mustRun12(t, clean, Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{16}})
}

// TestMatrixPartialWorkgroup: a matrix statement reached by part of the workgroup
// is an error in and out of strict mode, as a divergent barrier is. Validate
// rejects these programs statically; the run-time check stands behind it.
func TestMatrixPartialWorkgroup(t *testing.T) {
	for _, stmt := range []string{"matrix_fill", "matrix_store", "matrix_mma"} {
		b := ir.NewBuilder("test.mpartial", 16, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		A := b.Matrix("A", ir.F16, 16, 16)
		C := b.Matrix("C", ir.F32, 16, 16)
		b.MatrixFill(A, ir.LitF16(1))
		b.MatrixFill(C, ir.LitF32(0))
		// go is true on lanes 0..2 only, which static checks cannot see.
		goOn := b.Var("go", ir.Bool, ir.LitBool(false))
		b.If(ir.Lt(lid, u32(3)), func(k *ir.Block) { k.Assign("go", ir.LitBool(true)) })
		b.If(goOn, func(k *ir.Block) {
			switch stmt {
			case "matrix_fill":
				k.MatrixFill(C, ir.LitF32(1))
			case "matrix_store":
				k.MatrixStore(C, out, u32(0), u32(16), ir.RowMajor)
			case "matrix_mma":
				k.MatrixMMA(C, A, A)
			}
		})
		for _, strict := range []bool{false, true} {
			_, err := dynamicRun(t, b.Program(), Options{Strict: strict}, Launch{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{256}})
			if err == nil || !strings.Contains(err.Error(), stmt+" at body[4].then[0] reached by only 3 of 16 invocations") ||
				!strings.Contains(err.Error(), "local id (3,0,0)") || !strings.Contains(err.Error(), "Fix: ") {
				t.Errorf("%s, strict %v: %v", stmt, strict, err)
			}
		}
	}
	// A return before a matrix statement ends lanes for good.
	b := ir.NewBuilder("test.mreturn", 8, 1, 1)
	C := b.Matrix("C", ir.F32, 16, 16)
	b.If(ir.Eq(lid, u32(5)), func(k *ir.Block) { k.Return() })
	b.MatrixFill(C, ir.LitF32(0))
	if _, err := dynamicRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}}); err == nil ||
		!strings.Contains(err.Error(), "matrix_fill at body[1] reached by only 7 of 8") {
		t.Errorf("after a return: %v", err)
	}
	// A branch no invocation takes skips its matrix statements.
	b = ir.NewBuilder("test.mnone", 8, 1, 1)
	C = b.Matrix("C", ir.F32, 16, 16)
	b.If(ir.Gt(lid, u32(100)), func(k *ir.Block) { k.MatrixFill(C, ir.LitF32(0)) })
	if _, err := dynamicRun(t, b.Program(), Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1}}); err != nil {
		t.Errorf("a matrix statement no invocation reaches: %v", err)
	}
}

// TestMatrixNonUniformOperands: strict mode reports invocations that disagree on
// an operand; outside it, the invocation with local id (0,0,0) decides. Validate
// rejects these programs statically; the run-time check stands behind it.
func TestMatrixNonUniformOperands(t *testing.T) {
	build := func(operand string) *ir.Program {
		b := ir.NewBuilder("test.mnonuniform", 8, 1, 1)
		a := b.Buffer("a", ir.F32, ir.Read)
		out := b.Buffer("out", ir.F32, ir.Write)
		M := b.Matrix("M", ir.F32, 16, 16)
		// v is 0 except on lane 3, which static checks cannot see.
		v := b.Var("v", ir.U32, u32(0))
		b.If(ir.Eq(lid, u32(3)), func(k *ir.Block) { k.Assign("v", u32(16)) })
		off, stride, rows := u32(0), u32(16), u32(16)
		switch operand {
		case "offset":
			off = v
		case "stride":
			stride = ir.Add(stride, v)
		case "bound rows":
			rows = ir.Sub(rows, v)
		}
		if operand == "value" {
			b.MatrixFill(M, ir.Cast(ir.F32, v))
		} else {
			b.MatrixLoadBounded(M, a, off, stride, ir.RowMajor, rows, u32(16))
		}
		b.MatrixStore(M, out, u32(0), u32(16), ir.RowMajor)
		return b.Program()
	}
	in := make([]float32, 600)
	for i := range in {
		in[i] = float32(i)
	}
	l := Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{f32Bytes(in...)}, OutputCounts: []uint32{0, 256}}
	for _, op := range []string{"offset", "stride", "bound rows", "value"} {
		p := build(op)
		_, err := dynamicRun(t, p, Options{Strict: true}, l)
		se := asStrictErr(t, err)
		want := map[string][2]uint32{"offset": {16, 0}, "stride": {32, 16}, "bound rows": {0, 16},
			"value": {math.Float32bits(16), 0}}[op]
		if se.Hazard != NonUniformOperand || se.Operand != op || se.Invocation != [3]uint32{3, 0, 0} ||
			se.Other != [3]uint32{} || se.Value != want[0] || se.OtherValue != want[1] || se.Statement != "body[2]" {
			t.Errorf("%s: %+v", op, se)
		}
		// Non-strict: lane 0's values, so the plain tile (or zeros for the fill).
		outs, err := dynamicRun(t, p, Options{}, l)
		if err != nil {
			t.Fatal(err)
		}
		got := bytesU32(outs[0])
		for i := range 256 {
			w := float32(i)
			if op == "value" {
				w = 0
			}
			if math.Float32frombits(got[i]) != w {
				t.Fatalf("%s non-strict: out[%d] = %g, want %g", op, i, math.Float32frombits(got[i]), w)
			}
		}
	}
}

// TestMatrixUnwritten: reading a matrix nothing wrote is a strict error; outside
// strict mode it reads 0, in every workgroup (matrices start over in each).
func TestMatrixUnwritten(t *testing.T) {
	type reader struct {
		name string
		read func(b *ir.Builder, A, C, D string)
		mat  string
	}
	readers := []reader{
		{"store", func(b *ir.Builder, A, C, D string) {}, "C"},
		{"mma acc", func(b *ir.Builder, A, C, D string) { b.MatrixFill(A, ir.LitF16(1)); b.MatrixMMA(C, A, A) }, "C"},
		{"mma a", func(b *ir.Builder, A, C, D string) { b.MatrixFill(C, ir.LitF32(0)); b.MatrixMMA(C, A, A) }, "A"},
		{"convert", func(b *ir.Builder, A, C, D string) { b.MatrixConvert(C, D) }, "D"},
	}
	for i, r := range readers {
		b := ir.NewBuilder("test.munwritten", 16, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		A := b.Matrix("A", ir.F16, 16, 16)
		C := b.Matrix("C", ir.F32, 16, 16)
		D := b.Matrix("D", ir.BF16, 16, 16)
		// Workgroup 0 writes C first; the others do not.
		b.If(ir.Eq(ir.WorkgroupID(0), u32(0)), func(k *ir.Block) { k.MatrixFill(C, ir.LitF32(7)) })
		r.read(b, A, C, D)
		b.MatrixStore(C, out, ir.Mul(ir.WorkgroupID(0), u32(256)), u32(16), ir.RowMajor)
		p := b.Program()
		l := Launch{Grid: [3]uint32{2, 1, 1}, OutputCounts: []uint32{512}}
		k, err := v12Compile(p, Options{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		k.workers = 1
		err = runKernel(k, l)
		var se *StrictError
		wantWG := [3]uint32{1, 0, 0}
		if i >= 2 { // the mma's a and the convert's source are never written
			wantWG = [3]uint32{}
		}
		if !errors.As(err, &se) || se.Hazard != UnwrittenMatrix || se.Matrix != r.mat || se.Workgroup != wantWG ||
			!strings.Contains(err.Error(), "Fix: ") {
			t.Errorf("%s: %v, want an unwritten %s in workgroup %v", r.name, err, r.mat, wantWG)
		}
		// Outside strict mode, on one worker that runs both workgroups.
		k, _ = v12Compile(p, Options{})
		k.workers = 1
		outs, err := k.Run(t.Context(), l)
		if err != nil {
			t.Fatal(err)
		}
		got := bytesU32(outs[0])
		// Workgroup 0's C, then workgroup 1's.
		want := map[string][2]float32{
			"store":   {7, 0},
			"mma acc": {7 + 16, 16}, // + A·A, A all ones
			"mma a":   {0, 0},       // C = 0 + 0·0
			"convert": {0, 0},       // zeros converted
		}[r.name]
		for j := range 512 {
			w := want[j/256]
			if math.Float32frombits(got[j]) != w {
				t.Fatalf("%s non-strict: out[%d] = %g, want %g", r.name, j, math.Float32frombits(got[j]), w)
			}
		}
	}
}

func runKernel(k *Kernel, l Launch) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := k.Run(ctx, l)
	return err
}

// TestMatrixCompileErrors: the compiler checks what it relies on even for a
// program it is given without validation.
func TestMatrixCompileErrors(t *testing.T) {
	cases := []struct {
		name string
		body func(b *ir.Builder)
		want string
	}{
		{"unknown matrix", func(b *ir.Builder) { b.MatrixFill("nope", ir.LitF32(0)) }, "unknown matrix"},
		{"fill type", func(b *ir.Builder) { b.MatrixFill("H", ir.LitF32(0)) }, "matrix_fill of f16 matrix"},
		{"load type", func(b *ir.Builder) { b.MatrixLoad("H", "f", u32(0), u32(16), ir.RowMajor) }, "matrix_load of f16 matrix"},
		{"load from write", func(b *ir.Builder) { b.MatrixLoad("F", "w", u32(0), u32(16), ir.RowMajor) }, "whose access is write"},
		{"store to read", func(b *ir.Builder) { b.MatrixStore("F", "f", u32(0), u32(16), ir.RowMajor) }, "whose access is read"},
		{"offset type", func(b *ir.Builder) { b.MatrixLoad("F", "f", ir.LitI32(0), u32(16), ir.RowMajor) }, "offset is i32"},
		{"layout", func(b *ir.Builder) { b.MatrixLoad("F", "f", u32(0), u32(16), 0) }, "matrix layout"},
		{"mma acc type", func(b *ir.Builder) { b.MatrixMMA("H", "H2", "H2") }, "accumulates into f16"},
		{"mma mixed", func(b *ir.Builder) { b.MatrixMMA("F", "H", "B") }, "matrix_mma of f16 matrix"},
		{"mma acc operand", func(b *ir.Builder) { b.MatrixMMA("F", "F", "F2") }, "one of its operands"},
		{"mma shapes", func(b *ir.Builder) { b.MatrixMMA("F", "H", "Wide") }, "do not chain"},
		{"tf32 on f16", func(b *ir.Builder) { b.MatrixMMATF32("F", "H", "H2") }, "tf32"},
		{"convert self", func(b *ir.Builder) { b.MatrixConvert("H", "H") }, "into itself"},
		{"convert shape", func(b *ir.Builder) { b.MatrixConvert("F", "Wide") }, "one shape"},
		{"local shadows a matrix", func(b *ir.Builder) { b.Let("F", u32(0)) }, "already declared"},
	}
	for _, c := range cases {
		b := ir.NewBuilder("test.merr", 16, 1, 1)
		b.Buffer("f", ir.F32, ir.Read)
		b.Buffer("w", ir.F32, ir.Write)
		b.Matrix("F", ir.F32, 16, 16)
		b.Matrix("F2", ir.F32, 16, 16)
		b.Matrix("H", ir.F16, 16, 16)
		b.Matrix("H2", ir.F16, 16, 16)
		b.Matrix("B", ir.BF16, 16, 16)
		b.Matrix("Wide", ir.F16, 16, 32)
		c.body(b)
		if _, err := compile(b.Program(), Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestKitchenSinkV12 runs ir's v1.2 kitchen-sink program (every declaration,
// statement, layout, precision and 16-bit operator), decoded from its binary
// and JSON files, through Compile in and out of strict mode: both decode to one
// program, and strict mode finds nothing and changes nothing.
func TestKitchenSinkV12(t *testing.T) {
	bin, err := os.ReadFile("../testdata/kitchen_sink_v12.kilnir")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile("../testdata/kitchen_sink_v12.json")
	if err != nil {
		t.Fatal(err)
	}
	pb, err := ir.Decode(bin)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := ir.ParseJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32 // the uniform n: two k steps of 16
	rng := rand.New(rand.NewPCG(8, 9))
	half := func(ref refFormat, count int) []byte {
		v := make([]uint16, count)
		for i := range v {
			v[i] = ref.fromFloat64(float64(rng.IntN(7) - 3))
		}
		return u16Bytes(v...)
	}
	f32s := make([]float32, 64*n)
	for i := range f32s {
		f32s[i] = float32(rng.IntN(5) - 2)
	}
	// One workgroup: a second would store its tiles over the first's rows.
	l := Launch{Grid: [3]uint32{1, 1, 1}, Uniforms: u32Bytes(n),
		Inputs: [][]byte{half(refF16, 64*n), half(refBF16, 64*n), f32Bytes(f32s...), f32Bytes(make([]float32, 64*n)...), half(refF16, 64*n)}}
	var first [][]byte
	for _, p := range []*ir.Program{pb, pj} {
		for _, strict := range []bool{false, true} {
			outs := mustRun12(t, p, Options{Strict: strict}, l)
			if first == nil {
				first = outs
				continue
			}
			for i := range outs {
				if !bytes.Equal(outs[i], first[i]) {
					t.Fatalf("output %d differs (strict %v)", i, strict)
				}
			}
		}
	}
	nonzero := false
	for _, b := range first[0] {
		nonzero = nonzero || b != 0
	}
	if !nonzero {
		t.Error("the kitchen sink's c is all zeros")
	}
}
