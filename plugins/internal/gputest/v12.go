package gputest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
)

// IR v1.2 checks for any backend: f16 arithmetic, the casts, bf16 storage and
// every matrix statement, against values computed here with ir/half and
// plain-Go references of the statements (exact where IR v1.2 is exact; f16 div
// and sqrt within 1 ULP, flushed subnormals accepted as the conformance rules
// accept them). Each takes an opened backend (adapter 0).

// V12Check is one of the IR v1.2 checks.
type V12Check struct {
	Name  string
	Check func(*testing.T, pluginapi.Backend)
}

// V12Checks lists the IR v1.2 checks.
func V12Checks() []V12Check {
	return []V12Check{{"F16Arithmetic", V12F16Arithmetic}, {"Casts", V12Casts}, {"BF16Storage", V12BF16Storage},
		{"MatrixMMA", V12MatrixMMA}, {"MatrixAddressing", V12MatrixAddressing}, {"MatrixSharedAndConvert", V12MatrixSharedAndConvert}}
}

func halves(hs []uint16) []byte {
	out := make([]byte, 2*len(hs))
	for i, h := range hs {
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

func halvesOf(b []byte) []uint16 {
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

func floats(fs []float32) []byte {
	out := make([]byte, 4*len(fs))
	for i, f := range fs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

func floatsOf(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// f16Edges are the interesting f16 values: zeros, ±1, 1.5, the largest
// finite, the smallest subnormal and normal, infinities, NaN, inexact ones.
var f16Edges = []uint16{0, 0x8000, 0x3c00, 0xbc00, 0x3e00, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x0400,
	0x7c00, 0xfc00, 0x7e00, 0x2e66, 0x4200, 0x5640, 0x3555, 0xc900}

func f16NaN(h uint16) bool       { return half.Float16(h).IsNaN() }
func f16Subnormal(h uint16) bool { return h&0x7c00 == 0 && h&0x3ff != 0 }

// f16Order orders f16 bits like their values, -0 just below +0.
func f16Order(h uint16) int32 {
	if h&0x8000 != 0 {
		return -int32(h&0x7fff) - 1
	}
	return int32(h)
}

// f16Accept reports whether got is an acceptable result for want, the exact
// result: the same bits, any NaN for NaN, ±0 where the result or an input is
// subnormal (a flush), and within ulps otherwise.
func f16Accept(got, want uint16, ulps int32, inputs ...uint16) bool {
	switch {
	case got == want, f16NaN(got) && f16NaN(want):
		return true
	case f16NaN(got) || f16NaN(want):
		return false
	case got&0x7fff == 0 && f16Subnormal(want):
		return true
	}
	for _, in := range inputs {
		if f16Subnormal(in) && (got&0x7fff == 0 || ulps > 0) {
			return true
		}
	}
	d := f16Order(got) - f16Order(want)
	return d >= -ulps && d <= ulps
}

func minMaxF16(isMin bool, x, y uint16) uint16 {
	switch {
	case f16NaN(x):
		return y
	case f16NaN(y):
		return x
	case isMin && f16Order(y) < f16Order(x), !isMin && f16Order(x) < f16Order(y):
		return y
	}
	return x
}

// V12F16Arithmetic runs every f16 operator on every pair of f16Edges.
func V12F16Arithmetic(t *testing.T, b pluginapi.Backend) {
	bld := ir.NewBuilder("f16_ops", 64, 1, 1)
	for _, name := range []string{"a", "b", "c"} {
		bld.Buffer(name, ir.F16, ir.Read)
	}
	type op struct {
		name  string
		f     func(x, y, z ir.Expr) ir.Expr
		want  func(x, y, z uint16) uint16
		ulps  int32
		isF32 bool
		// alt is another accepted result (fma: fused or not), nil for none.
		alt func(x, y, z uint16) uint16
	}
	h := func(x uint16) half.Float16 { return half.Float16(x) }
	cmp := func(c func(x, y float64) bool) func(x, y, z uint16) uint16 {
		return func(x, y, _ uint16) uint16 {
			if c(h(x).Float64(), h(y).Float64()) {
				return 1
			}
			return 0
		}
	}
	boolU32 := func(c ir.Expr) ir.Expr { return ir.Select(c, ir.LitU32(1), ir.LitU32(0)) }
	ops := []op{
		{"add", func(x, y, _ ir.Expr) ir.Expr { return ir.Add(x, y) }, func(x, y, _ uint16) uint16 { return uint16(half.Add(h(x), h(y))) }, 0, false, nil},
		{"sub", func(x, y, _ ir.Expr) ir.Expr { return ir.Sub(x, y) }, func(x, y, _ uint16) uint16 { return uint16(half.Sub(h(x), h(y))) }, 0, false, nil},
		{"mul", func(x, y, _ ir.Expr) ir.Expr { return ir.Mul(x, y) }, func(x, y, _ uint16) uint16 { return uint16(half.Mul(h(x), h(y))) }, 0, false, nil},
		{"div", func(x, y, _ ir.Expr) ir.Expr { return ir.Div(x, y) }, func(x, y, _ uint16) uint16 { return uint16(half.Div(h(x), h(y))) }, 1, false, nil},
		{"min", func(x, y, _ ir.Expr) ir.Expr { return ir.Min(x, y) }, func(x, y, _ uint16) uint16 { return minMaxF16(true, x, y) }, 0, false, nil},
		{"max", func(x, y, _ ir.Expr) ir.Expr { return ir.Max(x, y) }, func(x, y, _ uint16) uint16 { return minMaxF16(false, x, y) }, 0, false, nil},
		// fma: fused, or a rounded multiply then an add.
		{"fma", func(x, y, z ir.Expr) ir.Expr { return ir.Fma(x, y, z) }, func(x, y, z uint16) uint16 { return uint16(half.FMA(h(x), h(y), h(z))) }, 0, false,
			func(x, y, z uint16) uint16 { return uint16(half.Add(half.Mul(h(x), h(y)), h(z))) }},
		{"neg", func(x, _, _ ir.Expr) ir.Expr { return ir.Neg(x) }, func(x, _, _ uint16) uint16 { return x ^ 0x8000 }, 0, false, nil},
		{"abs", func(x, _, _ ir.Expr) ir.Expr { return ir.Abs(x) }, func(x, _, _ uint16) uint16 { return x &^ 0x8000 }, 0, false, nil},
		{"sqrt", func(x, _, _ ir.Expr) ir.Expr { return ir.Sqrt(x) }, func(x, _, _ uint16) uint16 { return uint16(half.Sqrt(h(x))) }, 1, false, nil},
		{"select", func(x, y, _ ir.Expr) ir.Expr { return ir.Select(ir.Lt(x, y), x, y) }, func(x, y, _ uint16) uint16 {
			if h(x).Float64() < h(y).Float64() {
				return x
			}
			return y
		}, 0, false, nil},
		{"lt", func(x, y, _ ir.Expr) ir.Expr { return boolU32(ir.Lt(x, y)) }, cmp(func(x, y float64) bool { return x < y }), 0, true, nil},
		{"le", func(x, y, _ ir.Expr) ir.Expr { return boolU32(ir.Le(x, y)) }, cmp(func(x, y float64) bool { return x <= y }), 0, true, nil},
		{"eq", func(x, y, _ ir.Expr) ir.Expr { return boolU32(ir.Eq(x, y)) }, cmp(func(x, y float64) bool { return x == y }), 0, true, nil},
		{"ne", func(x, y, _ ir.Expr) ir.Expr { return boolU32(ir.Ne(x, y)) }, cmp(func(x, y float64) bool { return x != y }), 0, true, nil},
		{"gt", func(x, y, _ ir.Expr) ir.Expr { return boolU32(ir.Gt(x, y)) }, cmp(func(x, y float64) bool { return x > y }), 0, true, nil},
		{"widen", func(x, _, _ ir.Expr) ir.Expr { return ir.Cast(ir.F32, x) }, nil, 0, true, nil},
	}
	for _, o := range ops {
		ty := ir.F16
		if o.isF32 {
			ty = ir.U32
			if o.want == nil {
				ty = ir.F32
			}
		}
		bld.Buffer("out_"+o.name, ty, ir.Write)
	}
	gid := bld.Let("i", ir.GlobalID(0))
	x, y, z := ir.Load("a", gid), ir.Load("b", gid), ir.Load("c", gid)
	for _, o := range ops {
		bld.Store("out_"+o.name, gid, o.f(x, y, z))
	}
	p := bld.MustBuild()
	n := len(f16Edges) * len(f16Edges)
	a, bb, c := make([]uint16, n), make([]uint16, n), make([]uint16, n)
	for i := range n {
		a[i], bb[i], c[i] = f16Edges[i/len(f16Edges)], f16Edges[i%len(f16Edges)], f16Edges[(7*i)%len(f16Edges)]
	}
	counts := []uint32{0, 0, 0}
	for range ops {
		counts = append(counts, uint32(n))
	}
	res, err := Run(t, b, p, kernels.Case{Grid: [3]uint32{uint32(n+63) / 64, 1, 1}, Inputs: [][]byte{halves(a), halves(bb), halves(c)}, OutputCounts: counts})
	if err != nil {
		t.Fatal(err)
	}
	for k, o := range ops {
		out := res.Outputs[k]
		bad := 0
		for i := range n {
			switch {
			case o.want == nil:
				got := math.Float32bits(floatsOf(out)[i])
				want := math.Float32bits(half.Float16(a[i]).Float32())
				if got != want && !(math.IsNaN(float64(math.Float32frombits(got))) && f16NaN(a[i])) && !(f16Subnormal(a[i]) && got&0x7fffffff == 0) {
					bad++
					t.Errorf("widen(%#04x) = %#08x, want %#08x", a[i], got, want)
				}
			case o.isF32:
				got, want := kernels.BytesU32(out)[i], uint32(o.want(a[i], bb[i], c[i]))
				if got != want {
					bad++
					t.Errorf("%s(%#04x, %#04x) = %d, want %d", o.name, a[i], bb[i], got, want)
				}
			default:
				got, want := halvesOf(out)[i], o.want(a[i], bb[i], c[i])
				if !f16Accept(got, want, o.ulps, a[i], bb[i], c[i]) && (o.alt == nil || !f16Accept(got, o.alt(a[i], bb[i], c[i]), o.ulps, a[i], bb[i], c[i])) {
					bad++
					t.Errorf("%s(%#04x, %#04x, %#04x) = %#04x, want %#04x", o.name, a[i], bb[i], c[i], got, want)
				}
			}
			if bad > 10 {
				t.Fatalf("%s: too many wrong results", o.name)
			}
		}
	}
}

// castInputs are f32 values that round to f16 and bf16 in every way: ties
// both ways, the overflow threshold, subnormal results and their ties, NaN with
// payloads, and random bit patterns.
func castInputs() []uint32 {
	in := []uint32{0, 0x80000000, math.Float32bits(1), math.Float32bits(-1),
		math.Float32bits(1 + 1.0/2048), math.Float32bits(1 + 3.0/2048), math.Float32bits(1 + 1.0/256), math.Float32bits(1 + 3.0/256),
		math.Float32bits(65504), 0x477fefff, 0x477ff000, math.Float32bits(-65520), math.Float32bits(1e10), 0x7f7fffff, 0xff7fffff,
		math.Float32bits(0x1p-24), math.Float32bits(0x1p-25), math.Float32bits(0x1p-25) + 1, math.Float32bits(3 * 0x1p-25),
		math.Float32bits(0x1p-14 - 0x1p-25), math.Float32bits(0x1p-14), math.Float32bits(-0x1p-20), 1, 0x80000005,
		0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0xff812345,
		math.Float32bits(0.1), math.Float32bits(-3.3333), math.Float32bits(1e-6), math.Float32bits(12345.678)}
	r := rand.New(rand.NewPCG(12, 26))
	for range 400 {
		in = append(in, r.Uint32())
	}
	for range 200 {
		// Values inside f16's range, where rounding matters most.
		in = append(in, math.Float32bits(float32(r.NormFloat64()*1000)))
	}
	return in
}

// V12Casts casts f32 to f16 and bf16 and back.
func V12Casts(t *testing.T, b pluginapi.Backend) {
	bld := ir.NewBuilder("casts16", 64, 1, 1)
	bld.Buffer("x", ir.F32, ir.Read)
	bld.Buffer("h", ir.F16, ir.Write)
	bld.Buffer("bf", ir.BF16, ir.Write)
	bld.Buffer("hback", ir.F32, ir.Write)
	bld.Buffer("bback", ir.F32, ir.Write)
	i := bld.Let("i", ir.GlobalID(0))
	v := ir.Load("x", i)
	bld.Store("h", i, ir.Cast(ir.F16, v))
	bld.Store("bf", i, ir.Cast(ir.BF16, v))
	bld.Store("hback", i, ir.Cast(ir.F32, ir.Cast(ir.F16, v)))
	bld.Store("bback", i, ir.Cast(ir.F32, ir.Cast(ir.BF16, v)))
	p := bld.MustBuild()
	in := castInputs()
	n := uint32(len(in))
	res, err := Run(t, b, p, kernels.Case{Grid: [3]uint32{(n + 63) / 64, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in)}, OutputCounts: []uint32{0, n, n, n, n}})
	if err != nil {
		t.Fatal(err)
	}
	h, bf, hback, bback := halvesOf(res.Outputs[0]), halvesOf(res.Outputs[1]), kernels.BytesU32(res.Outputs[2]), kernels.BytesU32(res.Outputs[3])
	for i, x := range in {
		f := math.Float32frombits(x)
		wantH, wantB := uint16(half.NewFloat16(f)), uint16(half.NewBFloat16(f))
		if !f16Accept(h[i], wantH, 0) {
			t.Errorf("cast<f16>(%#08x) = %#04x, want %#04x", x, h[i], wantH)
		}
		if bf[i] != wantB && !(half.BFloat16(bf[i]).IsNaN() && half.BFloat16(wantB).IsNaN()) {
			t.Errorf("cast<bf16>(%#08x) = %#04x, want %#04x", x, bf[i], wantB)
		}
		if want := math.Float32bits(half.Float16(wantH).Float32()); hback[i] != want && !(f16NaN(wantH) && math.IsNaN(float64(math.Float32frombits(hback[i])))) && !(f16Subnormal(wantH) && hback[i]&0x7fffffff == 0) {
			t.Errorf("cast<f32>(cast<f16>(%#08x)) = %#08x, want %#08x", x, hback[i], want)
		}
		if want := math.Float32bits(half.BFloat16(wantB).Float32()); bback[i] != want && !(half.BFloat16(wantB).IsNaN() && math.IsNaN(float64(math.Float32frombits(bback[i])))) {
			t.Errorf("cast<f32>(cast<bf16>(%#08x)) = %#08x, want %#08x", x, bback[i], want)
		}
	}
}

// V12BF16Storage copies bf16 through a buffer, a shared array and select,
// over an odd element count, bit for bit (NaN payloads included).
func V12BF16Storage(t *testing.T, b pluginapi.Backend) {
	bld := ir.NewBuilder("bf16_copy", 64, 1, 1)
	bld.Buffer("in", ir.BF16, ir.Read)
	bld.Buffer("out", ir.BF16, ir.Write)
	bld.Buffer("rw", ir.BF16, ir.ReadWrite)
	bld.Shared("s", ir.BF16, 64)
	lid := bld.Let("lid", ir.LocalID(0))
	i := bld.Let("i", ir.GlobalID(0))
	bld.Store("s", ir.Sub(ir.LitU32(63), lid), ir.Load("in", i))
	bld.Barrier()
	v := bld.Let("v", ir.Load("s", ir.Sub(ir.LitU32(63), lid)))
	bld.Store("out", i, ir.Select(ir.Lt(i, ir.LitU32(1000)), v, ir.LitBF16(-2)))
	bld.Store("rw", ir.Add(i, ir.LitU32(1)), v)
	p := bld.MustBuild()
	const n = 77
	in := make([]uint16, n)
	r := rand.New(rand.NewPCG(1, 2))
	for k := range in {
		in[k] = uint16(r.Uint32())
	}
	in[3], in[4] = 0x7f81, 0xffc1 // NaNs with payloads
	rw := make([]uint16, n)
	for k := range rw {
		rw[k] = 0x1234
	}
	res, err := Run(t, b, p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{halves(in), nil, halves(rw)}, OutputCounts: []uint32{0, n, 0}})
	if err != nil {
		t.Fatal(err)
	}
	out, gotRW := halvesOf(res.Outputs[0]), halvesOf(res.Outputs[1])
	for k := range n {
		if out[k] != in[k] {
			t.Errorf("out[%d] = %#04x, want %#04x", k, out[k], in[k])
		}
		want := uint16(0x1234)
		if k > 0 {
			want = in[k-1]
		}
		if gotRW[k] != want {
			t.Errorf("rw[%d] = %#04x, want %#04x", k, gotRW[k], want)
		}
	}
}

// tile is a matrix in the matrix tests' reference: rows×cols values,
// row-major, each exactly representable in the matrix's type.
type tile struct {
	rows, cols uint32
	v          []float32
}

func newTile(rows, cols uint32) *tile { return &tile{rows, cols, make([]float32, rows*cols)} }

// at is the index element (r, c) has in an array with the addressing of
// matrix_load and matrix_store (u32 arithmetic).
func at(layout ir.MatrixLayout, off, stride, r, c uint32) uint32 {
	if layout == ir.ColMajor {
		return off + c*stride + r
	}
	return off + r*stride + c
}

// load is matrix_load's reference: 0 out of range and outside the bound.
func (m *tile) load(src []float32, off, stride uint32, layout ir.MatrixLayout, br, bc uint32) {
	for r := range m.rows {
		for c := range m.cols {
			i := at(layout, off, stride, r, c)
			v := float32(0)
			if uint64(i) < uint64(len(src)) && r < br && c < bc {
				v = src[i]
			}
			m.v[r*m.cols+c] = v
		}
	}
}

// store is matrix_store's reference: in row-major order, so the last element
// written to an index wins.
func (m *tile) store(dst []float32, off, stride uint32, layout ir.MatrixLayout, br, bc uint32) {
	for r := range m.rows {
		for c := range m.cols {
			if i := at(layout, off, stride, r, c); uint64(i) < uint64(len(dst)) && r < br && c < bc {
				dst[i] = m.v[r*m.cols+c]
			}
		}
	}
}

// mma is matrix_mma's reference: sequential in k, each product and sum
// rounded to f32.
func (m *tile) mma(a, b *tile) {
	for r := range m.rows {
		for c := range m.cols {
			s := m.v[r*m.cols+c]
			for k := range a.cols {
				p := float32(a.v[r*a.cols+k] * b.v[k*b.cols+c])
				s = float32(s + p)
			}
			m.v[r*m.cols+c] = s
		}
	}
}

// roundTo rounds f32 values to t as cast does.
func roundTo(t ir.Type, vs []float32) []float32 {
	out := make([]float32, len(vs))
	for i, v := range vs {
		switch t {
		case ir.F16:
			out[i] = half.NewFloat16(v).Float32()
		case ir.BF16:
			out[i] = half.NewBFloat16(v).Float32()
		default:
			out[i] = v
		}
	}
	return out
}

// encode writes values (exact in t) as a buffer of t.
func encode(t ir.Type, vs []float32) []byte {
	switch t {
	case ir.F16:
		hs := make([]uint16, len(vs))
		for i, v := range vs {
			hs[i] = uint16(half.NewFloat16(v))
		}
		return halves(hs)
	case ir.BF16:
		hs := make([]uint16, len(vs))
		for i, v := range vs {
			hs[i] = uint16(half.NewBFloat16(v))
		}
		return halves(hs)
	}
	return floats(vs)
}

// decode reads a buffer of t.
func decode(t ir.Type, b []byte) []float32 {
	if t == ir.F32 {
		return floatsOf(b)
	}
	hs := halvesOf(b)
	out := make([]float32, len(hs))
	for i, h := range hs {
		if t == ir.F16 {
			out[i] = half.Float16(h).Float32()
		} else {
			out[i] = half.BFloat16(h).Float32()
		}
	}
	return out
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			if bad++; bad > 10 {
				t.Fatalf("%s: too many wrong elements", what)
			}
		}
	}
}

// randomValues are n values exact in t: small integers when exact is set (so
// any summation order gives the same bits), else random values of t.
func randomValues(r *rand.Rand, t ir.Type, n int, exact bool) []float32 {
	vs := make([]float32, n)
	for i := range vs {
		if exact {
			vs[i] = float32(r.IntN(9) - 4)
		} else {
			vs[i] = float32(r.NormFloat64())
		}
	}
	return roundTo(t, vs)
}

// V12MatrixMMA multiplies M×K by K×N for every operand type, loading
// every operand from buffers, with exact and with random inputs: exact inputs
// match the reference bit for bit on every path; random ones do on a backend
// that claims no tensor cores (its scalar path sums sequentially in k; tf32
// computes in f32), and on one that claims them (matrix units sum in their own
// order and rounding) lie within the matrix_mma bound (verify.MMABound).
func V12MatrixMMA(t *testing.T, b pluginapi.Backend) {
	desc, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tensorCores := len(desc.Adapters) > 0 && desc.Adapters[0].Profile.SupportsTensorCores
	const m, n, k = 32, 48, 16
	for _, c := range []struct {
		name string
		t    ir.Type
		tf32 bool
	}{{"f16", ir.F16, false}, {"bf16", ir.BF16, false}, {"f32", ir.F32, false}, {"tf32", ir.F32, true}} {
		for _, exact := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/exact=%v", c.name, exact), func(t *testing.T) {
				bld := ir.NewBuilder("mma_"+c.name, 64, 1, 1)
				bld.Buffer("A", c.t, ir.Read)
				bld.Buffer("B", c.t, ir.Read)
				bld.Buffer("C", ir.F32, ir.Read)
				bld.Buffer("D", ir.F32, ir.Write)
				a, bm, acc := bld.Matrix("a", c.t, m, k), bld.Matrix("b", c.t, k, n), bld.Matrix("acc", ir.F32, m, n)
				bld.MatrixLoad(a, "A", ir.LitU32(0), ir.LitU32(k), ir.RowMajor)
				bld.MatrixLoad(bm, "B", ir.LitU32(0), ir.LitU32(n), ir.RowMajor)
				bld.MatrixLoad(acc, "C", ir.LitU32(0), ir.LitU32(n), ir.RowMajor)
				if c.tf32 {
					bld.MatrixMMATF32(acc, a, bm)
				} else {
					bld.MatrixMMA(acc, a, bm)
				}
				bld.MatrixStore(acc, "D", ir.LitU32(0), ir.LitU32(n), ir.RowMajor)
				p := bld.MustBuild()
				r := rand.New(rand.NewPCG(3, uint64(c.t)))
				av, bv, cv := randomValues(r, c.t, m*k, exact), randomValues(r, c.t, k*n, exact), randomValues(r, ir.F32, m*n, exact)
				res, err := Run(t, b, p, kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{encode(c.t, av), encode(c.t, bv), floats(cv)}, OutputCounts: []uint32{0, 0, 0, m * n}})
				if err != nil {
					t.Fatal(err)
				}
				ta, tb, tacc := newTile(m, k), newTile(k, n), newTile(m, n)
				copy(ta.v, av)
				copy(tb.v, bv)
				copy(tacc.v, cv)
				tacc.mma(ta, tb)
				if exact || !tensorCores {
					sameFloats(t, "D", floatsOf(res.Outputs[0]), tacc.v)
					return
				}
				mm := verify.Matmul{M: m, N: n, K: k, A: av, B: bv, Acc: cv, TF32: c.tf32}
				if err := mm.Check(floatsOf(res.Outputs[0]), nil); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// V12MatrixAddressing loads and stores with bounds at odd edges, both
// layouts, strides below and above the tile's width, an offset whose u32
// addresses wrap, buffers of odd element counts with elements out of range,
// and stores whose elements overlap, in both layouts, bounded and with stride
// 0 (the last element in row-major order wins).
func V12MatrixAddressing(t *testing.T, b pluginapi.Backend) {
	bld := ir.NewBuilder("matrix_addressing", 96, 1, 1)
	bld.Buffer("S", ir.F32, ir.Read)
	bld.Buffer("D", ir.F32, ir.ReadWrite)
	bld.Buffer("D2", ir.F32, ir.ReadWrite)
	bld.Buffer("D3", ir.F32, ir.ReadWrite)
	bld.Buffer("D4", ir.F32, ir.ReadWrite)
	bld.Buffer("D5", ir.F32, ir.ReadWrite)
	bld.Buffer("H", ir.F16, ir.Read)
	bld.Buffer("HO", ir.F16, ir.ReadWrite)
	bld.Uniform("off", ir.U32)
	tm, u := bld.Matrix("t", ir.F32, 32, 16), bld.Matrix("u", ir.F16, 16, 32)
	lit := ir.LitU32
	bld.MatrixLoadBounded(tm, "S", lit(5), lit(9), ir.ColMajor, lit(13), lit(7))
	bld.MatrixStoreBounded(tm, "D", lit(3), ir.Uniform("off"), ir.RowMajor, lit(29), lit(11))
	bld.MatrixLoad(tm, "S", lit(0xFFFFFFF0), lit(1), ir.RowMajor)
	bld.MatrixStore(tm, "D2", lit(200), lit(33), ir.ColMajor)
	bld.MatrixStore(tm, "D3", lit(1), lit(3), ir.RowMajor)
	bld.MatrixStoreBounded(tm, "D4", lit(2), lit(5), ir.ColMajor, lit(20), lit(9))
	bld.MatrixStoreBounded(tm, "D5", lit(4), lit(0), ir.RowMajor, lit(30), lit(13))
	bld.MatrixLoad(u, "H", lit(2), lit(5), ir.ColMajor)
	bld.MatrixStoreBounded(u, "HO", lit(1), lit(37), ir.RowMajor, lit(15), lit(31))
	p := bld.MustBuild()

	r := rand.New(rand.NewPCG(5, 6))
	s := randomValues(r, ir.F32, 100, false)
	h := randomValues(r, ir.F16, 77, false)
	fill := func(n int, v float32) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	d, d2, d3, d4, d5, ho := fill(700, -7), fill(700, -8), fill(100, -9), fill(90, -11), fill(20, -12), fill(601, -10)
	const stride = 40
	uniforms := binary.LittleEndian.AppendUint32(nil, stride)
	c, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: p})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background(), c.Pipeline)
	res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{floats(s), floats(d), floats(d2), floats(d3), floats(d4), floats(d5), encode(ir.F16, h), encode(ir.F16, ho)}, Uniforms: uniforms})
	if err != nil {
		t.Fatal(err)
	}
	ref, refU := newTile(32, 16), newTile(16, 32)
	ref.load(s, 5, 9, ir.ColMajor, 13, 7)
	ref.store(d, 3, stride, ir.RowMajor, 29, 11)
	ref.load(s, 0xFFFFFFF0, 1, ir.RowMajor, math.MaxUint32, math.MaxUint32)
	ref.store(d2, 200, 33, ir.ColMajor, math.MaxUint32, math.MaxUint32)
	ref.store(d3, 1, 3, ir.RowMajor, math.MaxUint32, math.MaxUint32)
	ref.store(d4, 2, 5, ir.ColMajor, 20, 9)
	ref.store(d5, 4, 0, ir.RowMajor, 30, 13)
	refU.load(h, 2, 5, ir.ColMajor, math.MaxUint32, math.MaxUint32)
	refU.store(ho, 1, 37, ir.RowMajor, 15, 31)
	sameFloats(t, "D", floatsOf(res.Outputs[0]), d)
	sameFloats(t, "D2", floatsOf(res.Outputs[1]), d2)
	sameFloats(t, "D3", floatsOf(res.Outputs[2]), d3)
	sameFloats(t, "D4", floatsOf(res.Outputs[3]), d4)
	sameFloats(t, "D5", floatsOf(res.Outputs[4]), d5)
	sameFloats(t, "HO", decode(ir.F16, res.Outputs[5]), ho)
}

// V12MatrixSharedAndConvert runs two workgroups, each on its own tile:
// bf16 from a shared array the invocations filled, converted to f32 and f16,
// stored transposed to a shared f16 array and loaded back (matrix statements
// ordered among themselves), multiplied by itself onto a filled accumulator,
// converted to bf16 (rounding) and stored to a shared array the invocations
// then copy out after a barrier.
func V12MatrixSharedAndConvert(t *testing.T, b pluginapi.Backend) {
	bld := ir.NewBuilder("matrix_shared", 64, 1, 1)
	bld.Buffer("In", ir.BF16, ir.Read)
	bld.Buffer("Out", ir.BF16, ir.Write)
	bld.Buffer("Acc", ir.F32, ir.Write)
	bld.Shared("sh", ir.BF16, 300)
	bld.Shared("sf", ir.F16, 256)
	a, f, h := bld.Matrix("a", ir.BF16, 16, 16), bld.Matrix("f", ir.F32, 16, 16), bld.Matrix("h", ir.F16, 16, 16)
	acc, g := bld.Matrix("acc", ir.F32, 16, 16), bld.Matrix("g", ir.BF16, 16, 16)
	lit := ir.LitU32
	base := bld.Let("base", ir.Mul(ir.WorkgroupID(0), lit(256)))
	bld.For("i", ir.U32, ir.LocalID(0), lit(256), lit(64), func(k *ir.Block, i ir.Expr) {
		k.Store("sh", ir.Add(i, lit(7)), ir.Load("In", ir.Add(base, i)))
	})
	bld.Barrier()
	bld.MatrixLoad(a, "sh", lit(7), lit(16), ir.RowMajor)
	bld.MatrixConvert(f, a)
	bld.MatrixConvert(h, f)
	bld.MatrixStore(h, "sf", lit(0), lit(16), ir.ColMajor)
	bld.MatrixLoad(h, "sf", lit(0), lit(16), ir.RowMajor)
	bld.MatrixFill(acc, ir.LitF32(0.5))
	bld.MatrixMMA(acc, h, h)
	bld.MatrixConvert(g, acc)
	bld.MatrixStore(g, "sh", lit(0), lit(16), ir.RowMajor)
	bld.Barrier()
	bld.For("i", ir.U32, ir.LocalID(0), lit(256), lit(64), func(k *ir.Block, i ir.Expr) {
		k.Store("Out", ir.Add(base, i), ir.Load("sh", i))
	})
	bld.MatrixStore(acc, "Acc", base, lit(16), ir.RowMajor)
	p := bld.MustBuild()

	r := rand.New(rand.NewPCG(7, 8))
	in := make([]float32, 512)
	for i := range in {
		in[i] = float32(r.IntN(13)-6) * 0.25
	}
	res, err := Run(t, b, p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{encode(ir.BF16, in)}, OutputCounts: []uint32{0, 512, 512}})
	if err != nil {
		t.Fatal(err)
	}
	wantOut, wantAcc := make([]float32, 512), make([]float32, 512)
	for w := range 2 {
		ta := newTile(16, 16)
		copy(ta.v, in[256*w:])
		th := newTile(16, 16) // the transpose, through sf
		for r := range uint32(16) {
			for c := range uint32(16) {
				th.v[r*16+c] = ta.v[c*16+r]
			}
		}
		tacc := newTile(16, 16)
		for i := range tacc.v {
			tacc.v[i] = 0.5
		}
		tacc.mma(th, th)
		copy(wantAcc[256*w:], tacc.v)
		copy(wantOut[256*w:], roundTo(ir.BF16, tacc.v))
	}
	sameFloats(t, "Out", decode(ir.BF16, res.Outputs[0]), wantOut)
	sameFloats(t, "Acc", floatsOf(res.Outputs[1]), wantAcc)
}
