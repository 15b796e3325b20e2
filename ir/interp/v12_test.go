package interp

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

var gid = ir.GlobalID(0)

// f16Specials are f16 patterns at the edges: zeros, subnormals, the normal range's
// ends, infinities and NaNs (quiet, signalling, negative with a payload).
var f16Specials = []uint16{
	0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x03FF, 0x83FF, 0x0400, 0x0401, 0x3C00, 0xBC00, 0x3C01, 0x3BFF,
	0x3555, 0x4000, 0x3800, 0x4248, 0x5640, 0x7800, 0x7BFF, 0xFBFF, 0x1400, 0x0200, 0x7C00, 0xFC00,
	0x7E00, 0x7C01, 0xFE01,
}

// f16Pairs is every pair of specials and random patterns.
func f16Pairs(n int) (xs, ys []uint16) {
	for _, a := range f16Specials {
		for _, b := range f16Specials {
			xs, ys = append(xs, a), append(ys, b)
		}
	}
	rng := rand.New(rand.NewPCG(16, 12))
	for range n {
		xs, ys = append(xs, uint16(rng.Uint32())), append(ys, uint16(rng.Uint32()))
	}
	return xs, ys
}

// runF16 runs out[i] = f(x[i], y[i], z[i]) over n elements with f16 inputs; out
// is of type outType.
func runF16(t *testing.T, outType ir.Type, f func(x, y, z ir.Expr) ir.Expr, xs, ys, zs []uint16) []byte {
	t.Helper()
	b := ir.NewBuilder("test.f16.op", 64, 1, 1)
	x := b.Buffer("x", ir.F16, ir.Read)
	y := b.Buffer("y", ir.F16, ir.Read)
	z := b.Buffer("z", ir.F16, ir.Read)
	out := b.Buffer("out", outType, ir.Write)
	b.Store(out, gid, f(ir.Load(x, gid), ir.Load(y, gid), ir.Load(z, gid)))
	n := uint32(len(xs))
	if zs == nil {
		zs = make([]uint16, n)
	}
	outs := mustRun12(t, b.Program(), Options{}, Launch{Grid: [3]uint32{(n + 63) / 64, 1, 1},
		Inputs: [][]byte{u16Bytes(xs...), u16Bytes(ys...), u16Bytes(zs...)}, OutputCounts: []uint32{0, 0, 0, n}})
	return outs[0]
}

func TestF16Arithmetic(t *testing.T) {
	xs, ys := f16Pairs(3000)
	rng := rand.New(rand.NewPCG(1, 2))
	zs := make([]uint16, len(xs))
	for i := range zs {
		zs[i] = f16Specials[rng.IntN(len(f16Specials))]
		if i%2 == 0 {
			zs[i] = uint16(rng.Uint32())
		}
	}
	ops := []struct {
		name string
		f    func(x, y, z ir.Expr) ir.Expr
	}{
		{"add", func(x, y, _ ir.Expr) ir.Expr { return ir.Add(x, y) }},
		{"sub", func(x, y, _ ir.Expr) ir.Expr { return ir.Sub(x, y) }},
		{"mul", func(x, y, _ ir.Expr) ir.Expr { return ir.Mul(x, y) }},
		{"div", func(x, y, _ ir.Expr) ir.Expr { return ir.Div(x, y) }},
		{"sqrt", func(x, _, _ ir.Expr) ir.Expr { return ir.Sqrt(x) }},
		{"fma", func(x, y, z ir.Expr) ir.Expr { return ir.Fma(x, y, z) }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			got := bytesU16(runF16(t, ir.F16, op.f, xs, ys, zs))
			bad := 0
			for i := range xs {
				want := refF16Op(op.name, xs[i], ys[i], zs[i])
				if !refF16.same(got[i], want) {
					if bad++; bad <= 10 {
						t.Errorf("%s(%#04x, %#04x, %#04x) = %#04x, want %#04x", op.name, xs[i], ys[i], zs[i], got[i], want)
					}
				}
			}
		})
	}
}

// TestF16FmaIsFused pins the oracle's fma as fused: (1+2^-10)(1-2^-11) - 1 is
// 2^-11 - 2^-21 exactly, an f16 value, while a product rounded to f16 first is 1
// and gives 0.
func TestF16FmaIsFused(t *testing.T) {
	a := refF16.fromFloat64(1 + math.Ldexp(1, -10))
	b := refF16.fromFloat64(1 - math.Ldexp(1, -11))
	c := refF16.fromFloat64(-1)
	got := bytesU16(runF16(t, ir.F16, func(x, y, z ir.Expr) ir.Expr { return ir.Fma(x, y, z) }, []uint16{a}, []uint16{b}, []uint16{c}))
	if want := refF16.fromFloat64(math.Ldexp(1, -11) - math.Ldexp(1, -21)); got[0] != want || want == 0 {
		t.Errorf("fma = %#04x, want %#04x", got[0], want)
	}
}

func TestF16MinMax(t *testing.T) {
	const nan, negNaN, one, two, inf = 0x7E00, 0xFE01, 0x3C00, 0x4000, 0x7C00
	cases := []struct{ x, y, min, max uint16 }{
		{0x0000, 0x8000, 0x8000, 0x0000},
		{0x8000, 0x0000, 0x8000, 0x0000},
		{0x8000, 0x8000, 0x8000, 0x8000},
		{nan, one, one, one},
		{one, nan, one, one},
		{negNaN, two, two, two},
		{one, two, one, two},
		{two, 0xBC00, 0xBC00, two},
		{inf, 0xFC00, 0xFC00, inf},
		{0x0001, 0x8001, 0x8001, 0x0001},
	}
	var xs, ys []uint16
	for _, c := range cases {
		xs, ys = append(xs, c.x), append(ys, c.y)
	}
	mins := bytesU16(runF16(t, ir.F16, func(x, y, _ ir.Expr) ir.Expr { return ir.Min(x, y) }, xs, ys, nil))
	maxs := bytesU16(runF16(t, ir.F16, func(x, y, _ ir.Expr) ir.Expr { return ir.Max(x, y) }, xs, ys, nil))
	for i, c := range cases {
		if mins[i] != c.min || maxs[i] != c.max {
			t.Errorf("min/max(%#04x, %#04x) = %#04x/%#04x, want %#04x/%#04x", c.x, c.y, mins[i], maxs[i], c.min, c.max)
		}
	}
	// Both NaN: NaN.
	got := bytesU16(runF16(t, ir.F16, func(x, y, _ ir.Expr) ir.Expr { return ir.Min(x, y) }, []uint16{nan}, []uint16{negNaN}, nil))
	if !refF16.isNaN(got[0]) {
		t.Errorf("min(NaN, NaN) = %#04x, want NaN", got[0])
	}
}

func TestF16NegAbsKeepPayloads(t *testing.T) {
	in := []uint16{0x0000, 0x8000, 0x3C00, 0xFBFF, 0x7C00, 0x7E00, 0x7C01, 0xFE01, 0x0001}
	neg := bytesU16(runF16(t, ir.F16, func(x, _, _ ir.Expr) ir.Expr { return ir.Neg(x) }, in, in, nil))
	abs := bytesU16(runF16(t, ir.F16, func(x, _, _ ir.Expr) ir.Expr { return ir.Abs(x) }, in, in, nil))
	for i, v := range in {
		if neg[i] != v^0x8000 || abs[i] != v&0x7FFF {
			t.Errorf("neg/abs(%#04x) = %#04x/%#04x, want %#04x/%#04x", v, neg[i], abs[i], v^0x8000, v&0x7FFF)
		}
	}
}

func TestF16Comparisons(t *testing.T) {
	xs, ys := f16Pairs(500)
	cmps := []struct {
		name string
		op   func(x, y ir.Expr) ir.Expr
		ref  func(a, b float64) bool
	}{
		{"eq", ir.Eq, func(a, b float64) bool { return a == b }},
		{"ne", ir.Ne, func(a, b float64) bool { return a != b }},
		{"lt", ir.Lt, func(a, b float64) bool { return a < b }},
		{"le", ir.Le, func(a, b float64) bool { return a <= b }},
		{"gt", ir.Gt, func(a, b float64) bool { return a > b }},
		{"ge", ir.Ge, func(a, b float64) bool { return a >= b }},
	}
	for _, c := range cmps {
		got := bytesU32(runF16(t, ir.U32, func(x, y, _ ir.Expr) ir.Expr {
			return ir.Select(c.op(x, y), ir.LitU32(1), ir.LitU32(0))
		}, xs, ys, nil))
		for i := range xs {
			want := uint32(0)
			if c.ref(refF16.value(xs[i]), refF16.value(ys[i])) {
				want = 1
			}
			if got[i] != want {
				t.Fatalf("%s(%#04x, %#04x) = %d, want %d", c.name, xs[i], ys[i], got[i], want)
			}
		}
	}
}

// f32CastInputs are f32 values at the edges of f16 and bf16 rounding.
func f32CastInputs() []float32 {
	v := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.5, 65504, 65519.996, 65520, -65520, 1e9,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		float32(math.Ldexp(1, -24)), float32(math.Ldexp(1, -25)), float32(math.Ldexp(1.5, -25)),
		float32(math.Ldexp(1, -25) + math.Ldexp(1, -40)), float32(math.Ldexp(3, -25)), float32(math.Ldexp(1, -14)),
		float32(math.Ldexp(1023, -24)), float32(1 + math.Ldexp(1, -11)), float32(1 + math.Ldexp(3, -11)),
		float32(1 + math.Ldexp(1, -11) + math.Ldexp(1, -23)), float32(1 + math.Ldexp(1, -8)), float32(1 + math.Ldexp(3, -8)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Ldexp(1, -126)),
		float32(math.Ldexp(0x7FFFFF, -149)), float32(math.Ldexp(0x10080, -16+1)),
		math.Float32frombits(0x7F7F8000), math.Float32frombits(0x7F7FFFFF), math.Float32frombits(0x3F808000),
		math.Float32frombits(0x3F818000), math.Float32frombits(0x00008000), math.Float32frombits(0x00018000),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		v = append(v, math.Float32frombits(rng.Uint32()))
		v = append(v, float32(rng.NormFloat64()*1000))
	}
	return v
}

func TestCastF32To16(t *testing.T) {
	in := f32CastInputs()
	for _, typ := range []ir.Type{ir.F16, ir.BF16} {
		ref := refF16
		if typ == ir.BF16 {
			ref = refBF16
		}
		b := ir.NewBuilder("test.cast.to16", 64, 1, 1)
		x := b.Buffer("x", ir.F32, ir.Read)
		out := b.Buffer("out", typ, ir.Write)
		b.Store(out, gid, ir.Cast(typ, ir.Load(x, gid)))
		n := uint32(len(in))
		got := bytesU16(mustRun12(t, b.Program(), Options{}, Launch{Grid: [3]uint32{(n + 63) / 64, 1, 1},
			Inputs: [][]byte{f32Bytes(in...)}, OutputCounts: []uint32{0, n}})[0])
		for i, v := range in {
			if want := ref.fromFloat64(float64(v)); !ref.same(got[i], want) {
				t.Errorf("cast %s(%g = %#08x) = %#04x, want %#04x", typ, v, math.Float32bits(v), got[i], want)
			}
		}
	}
}

// TestCast16ToF32 converts every 16-bit pattern of both types to f32.
func TestCast16ToF32(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	for _, typ := range []ir.Type{ir.F16, ir.BF16} {
		ref := refF16
		if typ == ir.BF16 {
			ref = refBF16
		}
		b := ir.NewBuilder("test.cast.from16", 256, 1, 1)
		x := b.Buffer("x", typ, ir.Read)
		out := b.Buffer("out", ir.F32, ir.Write)
		b.Store(out, gid, ir.Cast(ir.F32, ir.Load(x, gid)))
		got := bytesU32(mustRun12(t, b.Program(), Options{}, Launch{Grid: [3]uint32{256, 1, 1},
			Inputs: [][]byte{u16Bytes(all...)}, OutputCounts: []uint32{0, 1 << 16}})[0])
		for i, bits := range all {
			want := ref.value(bits)
			g := math.Float32frombits(got[i])
			if math.IsNaN(want) {
				if !math.IsNaN(float64(g)) {
					t.Fatalf("cast f32(%s %#04x) = %g, want NaN", typ, bits, g)
				}
				continue
			}
			if float64(g) != want || math.Signbit(float64(g)) != math.Signbit(want) {
				t.Fatalf("cast f32(%s %#04x) = %g, want %g", typ, bits, g, want)
			}
		}
	}
}

func TestCasts16Rejected(t *testing.T) {
	// Validate rejects these, and so does the interpreter's own compiler.
	for _, c := range []struct{ from, to ir.Type }{
		{ir.F16, ir.BF16}, {ir.BF16, ir.F16}, {ir.U32, ir.F16}, {ir.F16, ir.I32}, {ir.Bool, ir.BF16}, {ir.BF16, ir.U32},
	} {
		b := ir.NewBuilder("test.cast.bad", 1, 1, 1)
		x := b.Var("x", c.from, ir.Cast(c.from, ir.LitU32(0)))
		if c.from.Is16Bit() {
			x = b.Var("x", c.from, ir.Literal{Type: c.from})
		}
		b.Var("y", c.to, ir.Cast(c.to, x))
		p := b.Program()
		if _, err := v12Compile(p, Options{}); err == nil {
			t.Errorf("cast %s -> %s compiled", c.from, c.to)
		}
		if _, err := compile(p, Options{}); err == nil || !strings.Contains(err.Error(), "cast from") {
			t.Errorf("cast %s -> %s: err %v, want the interpreter's rejected cast", c.from, c.to, err)
		}
	}
	for _, op := range []ir.BinaryOp{ir.OpAdd, ir.OpEq, ir.OpMin} {
		b := ir.NewBuilder("test.bf16.arith", 1, 1, 1)
		x := b.Buffer("x", ir.BF16, ir.Read)
		out := b.Buffer("out", ir.BF16, ir.Write)
		b.Store(out, u32(0), ir.Select(ir.LitBool(true), ir.BinaryExpr{Op: op, X: ir.Load(x, u32(0)), Y: ir.Load(x, u32(0))}, ir.Load(x, u32(0))))
		if _, err := v12Compile(b.Program(), Options{}); err == nil {
			t.Errorf("bf16 %s compiled", op)
		}
		if _, err := compile(b.Program(), Options{}); err == nil {
			t.Errorf("bf16 %s compiled without validation", op)
		}
	}
	b := ir.NewBuilder("test.f16.exp", 1, 1, 1)
	out := b.Buffer("out", ir.F16, ir.Write)
	b.Store(out, u32(0), ir.Exp(ir.LitF16(1)))
	if _, err := v12Compile(b.Program(), Options{}); err == nil {
		t.Error("f16 exp compiled")
	}
	if _, err := compile(b.Program(), Options{}); err == nil {
		t.Error("f16 exp compiled without validation")
	}
	// No 16-bit subgroup operations, bitcasts or atomics.
	for name, e := range map[string]ir.Expr{
		"subgroup_shuffle": ir.SubgroupExpr{Op: ir.SubgroupOpShuffle, X: ir.LitF16(1), Lane: u32(0)},
		"subgroup_add":     ir.SubgroupExpr{Op: ir.SubgroupOpAdd, X: ir.LitF16(1)},
		"bitcast":          ir.Bitcast(ir.F16, u32(1)),
	} {
		b := ir.NewBuilder("test.f16.rejected", 32, 1, 1)
		b.Var("x", ir.F16, e)
		if _, err := v12Compile(b.Program(), Options{}); err == nil {
			t.Errorf("f16 %s compiled", name)
		}
		if _, err := compile(b.Program(), Options{}); err == nil {
			t.Errorf("f16 %s compiled without validation", name)
		}
	}
	b = ir.NewBuilder("test.f16.atomic", 1, 1, 1)
	s := b.Shared("s", ir.F16, 2)
	b.Atomic(ir.AtomicExchange, s, u32(0), ir.LitF16(1))
	if _, err := compile(b.Program(), Options{}); err == nil {
		t.Error("an f16 atomic compiled without validation")
	}
}

// TestLiterals16 stores literals and 16-bit values through let, var, assign and
// select.
func TestLiterals16(t *testing.T) {
	b := ir.NewBuilder("test.lit16", 4, 1, 1)
	in := b.Buffer("in", ir.BF16, ir.Read)
	out := b.Buffer("out", ir.F16, ir.Write)
	outb := b.Buffer("outb", ir.BF16, ir.Write)
	h := b.Let("h", ir.LitF16(1.5))
	v := b.Var("v", ir.F16, ir.LitF16(65504))
	b.If(ir.Eq(lid, u32(2)), func(k *ir.Block) { k.Assign("v", ir.Add(v, ir.LitF16(32))) }) // 65536: inf
	b.Store(out, lid, ir.Select(ir.Lt(lid, u32(2)), h, v))
	lb := b.Let("lb", ir.Load(in, lid))
	b.Store(outb, lid, ir.Select(ir.Eq(lid, u32(0)), ir.LitBF16(-2), lb))
	outs := mustRun12(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{u16Bytes(1, 2, 0x7FC1, 0xFF80)}, OutputCounts: []uint32{0, 4, 4}})
	if got, want := bytesU16(outs[0]), []uint16{0x3E00, 0x3E00, 0x7C00, 0x7BFF}; !slices.Equal(got, want) {
		t.Errorf("f16 out %#04x, want %#04x", got, want)
	}
	if got, want := bytesU16(outs[1]), []uint16{0xC000, 2, 0x7FC1, 0xFF80}; !slices.Equal(got, want) {
		t.Errorf("bf16 out %#04x, want %#04x", got, want)
	}
	bad := ir.NewBuilder("test.lit16.bad", 1, 1, 1)
	o := bad.Buffer("out", ir.F16, ir.Write)
	bad.Store(o, u32(0), ir.Literal{Type: ir.F16, Bits: 0x13C00})
	if _, err := v12Compile(bad.Program(), Options{}); err == nil || !strings.Contains(err.Error(), "more than 16") {
		t.Errorf("f16 literal with 17 bits: %v", err)
	}
}

// memory16Program copies in (f16) to out (f16) and inb to outb (bf16) at every
// global id, negates rw in place, and records the lens.
func memory16Program() *ir.Program {
	b := ir.NewBuilder("test.mem16", 4, 1, 1)
	in := b.Buffer("in", ir.F16, ir.Read)
	out := b.Buffer("out", ir.F16, ir.Write)
	inb := b.Buffer("inb", ir.BF16, ir.Read)
	outb := b.Buffer("outb", ir.BF16, ir.Write)
	rw := b.Buffer("rw", ir.F16, ir.ReadWrite)
	lens := b.FixedBuffer("lens", ir.U32, ir.Write, 5)
	b.Store(out, gid, ir.Load(in, gid))
	b.Store(outb, gid, ir.Load(inb, gid))
	b.If(ir.Lt(gid, ir.Len(rw)), func(k *ir.Block) { k.Store(rw, gid, ir.Neg(ir.Load(rw, gid))) })
	b.If(ir.Eq(gid, u32(0)), func(k *ir.Block) {
		for i, name := range []string{in, out, inb, outb, rw} {
			k.Store(lens, u32(uint32(i)), ir.Len(name))
		}
	})
	return b.Program()
}

// TestMemory16 pins 2-byte elements: odd element counts, len in elements,
// out-of-bounds loads 0 and stores dropped, and little-endian bytes.
func TestMemory16(t *testing.T) {
	p := memory16Program()
	in := u16Bytes(0x3C00, 0x4000, 0x4200, 0x4400, 0x4500) // 5 elements
	inb := u16Bytes(0x3F80, 0x4000, 0x4040)                // 3
	rw := u16Bytes(0x3C00, 0x8001, 0x7E00)                 // 3
	l := Launch{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{in, nil, inb, nil, rw}, OutputCounts: []uint32{0, 7, 0, 5}}
	outs := mustRun12(t, p, Options{}, l)
	want := [][]uint16{
		{0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0, 0},
		{0x3F80, 0x4000, 0x4040, 0, 0},
		{0xBC00, 0x0001, 0xFE00},
	}
	for i, w := range want {
		if len(outs[i]) != 2*len(w) {
			t.Fatalf("output %d is %d bytes, want %d", i, len(outs[i]), 2*len(w))
		}
		if got := bytesU16(outs[i]); !slices.Equal(got, w) {
			t.Errorf("output %d = %#04x, want %#04x", i, got, w)
		}
	}
	if got := bytesU32(outs[3]); got[0] != 5 || got[1] != 7 || got[2] != 3 || got[3] != 5 || got[4] != 3 {
		t.Errorf("lens %v, want [5 7 3 5 3]", got)
	}
	if outs[0][0] != 0x00 || outs[0][1] != 0x3C {
		t.Errorf("bytes % x, want little-endian 00 3c", outs[0][:2])
	}
	if rw[0] != 0x00 || rw[1] != 0x3C {
		t.Error("the read_write input was modified")
	}
	// An input of an odd byte count is not whole elements.
	l.Inputs[0] = in[:9]
	if _, err := v12Run(p, Options{}, l); err == nil || !strings.Contains(err.Error(), "not a multiple of 2") {
		t.Errorf("9-byte f16 input: %v", err)
	}
	// A fixed count is in elements: 3 f16 elements are 6 bytes.
	b := ir.NewBuilder("test.mem16.fixed", 1, 1, 1)
	fx := b.FixedBuffer("fx", ir.F16, ir.Read, 3)
	fo := b.FixedBuffer("fo", ir.BF16, ir.Write, 3)
	b.Store(fo, u32(2), ir.Cast(ir.BF16, ir.Cast(ir.F32, ir.Load(fx, u32(1)))))
	outs, err := v12Run(b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u16Bytes(0, 0x3C00, 0)}})
	if err != nil || !slices.Equal(bytesU16(outs[0]), []uint16{0, 0, 0x3F80}) {
		t.Errorf("fixed 16-bit buffers: %v %x", err, outs)
	}
	if _, err := v12Run(b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u16Bytes(0, 0)}}); err == nil {
		t.Error("a 4-byte input for 3 f16 elements was accepted")
	}
}

// TestRunBound16 runs over caller memory: 16-bit buffers are written back in
// place, 2 bytes per element, and bytes beyond the elements stay untouched.
func TestRunBound16(t *testing.T) {
	k, err := v12Compile(memory16Program(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := u16Bytes(0x3C00, 0x4000, 0x4200)
	out := u16Bytes(0xAAAA, 0xAAAA, 0xAAAA, 0xAAAA, 0xAAAA)
	inb := u16Bytes(0x3F80)
	outb := u16Bytes(0x1111)
	backing := u16Bytes(0x3C00, 0x4000, 0x7777)
	rw := backing[:4] // 2 elements; the third stays as it is
	lens := make([]byte, 20)
	if err := k.RunBound(context.Background(), [3]uint32{2, 1, 1}, nil, [][]byte{in, out, inb, outb, rw, lens}); err != nil {
		t.Fatal(err)
	}
	if got, want := bytesU16(out), []uint16{0x3C00, 0x4000, 0x4200, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("out %#04x, want %#04x", got, want)
	}
	if got, want := bytesU16(outb), []uint16{0x3F80}; !slices.Equal(got, want) {
		t.Errorf("outb %#04x, want %#04x", got, want)
	}
	if got, want := bytesU16(backing), []uint16{0xBC00, 0xC000, 0x7777}; !slices.Equal(got, want) {
		t.Errorf("rw %#04x, want %#04x", got, want)
	}
	err = k.RunBound(context.Background(), [3]uint32{1, 1, 1}, nil, [][]byte{in[:5], out, inb, outb, rw, lens})
	if err == nil || !strings.Contains(err.Error(), "not a multiple of 2") {
		t.Errorf("5-byte f16 buffer: %v", err)
	}
}

// TestShared16 uses f16 and bf16 shared arrays of odd counts; an unwritten
// element reads as the low half of the poison pattern.
func TestShared16(t *testing.T) {
	b := ir.NewBuilder("test.shared16", 8, 1, 1)
	in := b.Buffer("in", ir.F16, ir.Read)
	out := b.Buffer("out", ir.F16, ir.Write)
	outb := b.Buffer("outb", ir.F32, ir.Write)
	s := b.Shared("s", ir.F16, 5)
	sb := b.Shared("sb", ir.BF16, 3)
	b.Store(s, lid, ir.Load(in, lid)) // lanes 5..7 store out of bounds: nothing
	b.If(ir.Lt(lid, u32(2)), func(k *ir.Block) { k.Store(sb, lid, ir.Cast(ir.BF16, ir.Cast(ir.F32, ir.Load(in, lid)))) })
	b.Barrier()
	b.Store(out, lid, ir.Load(s, ir.Sub(u32(4), lid))) // lanes 5..7 wrap: out of bounds, 0
	b.If(ir.Lt(lid, u32(2)), func(k *ir.Block) { k.Store(outb, lid, ir.Cast(ir.F32, ir.Load(sb, lid))) })
	p := b.Program()
	l := Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u16Bytes(0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 1, 2, 3)},
		OutputCounts: []uint32{0, 8, 2}}
	for _, strict := range []bool{false, true} {
		outs, err := v12Run(p, Options{Strict: strict}, l)
		if strict {
			// Lanes 5..7 index s out of bounds, which strict mode reports.
			var se *StrictError
			if !asStrict(err, &se) || se.Hazard != OutOfBounds || se.Array != "s" {
				t.Fatalf("strict: %v, want out of bounds on s", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytesU16(outs[0]), []uint16{0x4500, 0x4400, 0x4200, 0x4000, 0x3C00, 0, 0, 0}; !slices.Equal(got, want) {
			t.Errorf("out %#04x, want %#04x", got, want)
		}
		if got := bytesU32(outs[1]); math.Float32frombits(got[0]) != 1 || math.Float32frombits(got[1]) != 2 {
			t.Errorf("outb %v, want [1 2]", got)
		}
	}
	// Reading an element nothing wrote gives 0xBEEF (the poison's low half).
	b = ir.NewBuilder("test.shared16.poison", 1, 1, 1)
	o := b.Buffer("out", ir.F32, ir.Write)
	ps := b.Shared("ps", ir.F16, 3)
	b.Store(o, u32(0), ir.Cast(ir.F32, ir.Load(ps, u32(1))))
	outs := mustRun12(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{1}})
	if got, want := bytesU32(outs[0])[0], math.Float32bits(float32(refF16.value(0xBEEF))); got != want {
		t.Errorf("poisoned f16 reads %#08x, want %#08x", got, want)
	}
}

func asStrict(err error, se **StrictError) bool {
	e, ok := err.(*StrictError)
	if ok {
		*se = e
	}
	return ok
}
