package interp

import (
	"math"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// eval runs a one-invocation program that stores e into out[0] and returns the bits;
// a bool e is stored cast to u32.
func eval(t *testing.T, e ir.Expr, typ ir.Type) uint32 {
	t.Helper()
	bufType := typ
	if typ == ir.Bool {
		bufType, e = ir.U32, ir.Cast(ir.U32, e)
	}
	b := ir.NewBuilder("test.eval", 1, 1, 1)
	out := b.FixedBuffer("out", bufType, ir.Write, 1)
	b.Store(out, ir.LitU32(0), e)
	outs := mustRun(t, b.Program(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})
	return bytesU32(outs[0])[0]
}

func f32bits(v float32) uint32 { return math.Float32bits(v) }

// pow2 is 2^e as an f32 literal (exact for e in the normal range).
func pow2(e int) ir.Expr { return ir.LitF32(float32(math.Ldexp(1, e))) }

var (
	nan    = ir.Literal{Type: ir.F32, Bits: 0x7FC00000}
	posInf = ir.LitF32(float32(math.Inf(1)))
	negInf = ir.LitF32(float32(math.Inf(-1)))
	negZ   = ir.Literal{Type: ir.F32, Bits: signBit}
	posZ   = ir.LitF32(0)
	minI   = ir.LitI32(math.MinInt32)
)

func i32(v int32) uint32 { return uint32(v) }

func TestSemanticsTable(t *testing.T) {
	tests := []struct {
		name string
		e    ir.Expr
		typ  ir.Type
		want uint32
	}{
		// Integer division and remainder.
		{"i32 div by zero", ir.Div(ir.LitI32(7), ir.LitI32(0)), ir.I32, 0},
		{"u32 div by zero", ir.Div(ir.LitU32(7), ir.LitU32(0)), ir.U32, 0},
		{"i32 rem by zero", ir.Rem(ir.LitI32(-7), ir.LitI32(0)), ir.I32, 0},
		{"u32 rem by zero", ir.Rem(ir.LitU32(7), ir.LitU32(0)), ir.U32, 0},
		{"MIN / -1", ir.Div(minI, ir.LitI32(-1)), ir.I32, signBit},
		{"MIN % -1", ir.Rem(minI, ir.LitI32(-1)), ir.I32, 0},
		{"i32 div truncates", ir.Div(ir.LitI32(-7), ir.LitI32(2)), ir.I32, i32(-3)},
		{"rem sign of dividend (negative)", ir.Rem(ir.LitI32(-7), ir.LitI32(2)), ir.I32, i32(-1)},
		{"rem sign of dividend (positive)", ir.Rem(ir.LitI32(7), ir.LitI32(-2)), ir.I32, 1},
		{"u32 div large", ir.Div(ir.LitU32(0xFFFFFFFF), ir.LitU32(2)), ir.U32, 0x7FFFFFFF},
		{"i32 add wraps", ir.Add(ir.LitI32(math.MaxInt32), ir.LitI32(1)), ir.I32, signBit},
		{"u32 sub wraps", ir.Sub(ir.LitU32(0), ir.LitU32(1)), ir.U32, 0xFFFFFFFF},
		{"u32 mul wraps", ir.Mul(ir.LitU32(0x10000), ir.LitU32(0x10001)), ir.U32, 0x10000},
		{"i32 neg MIN", ir.Neg(minI), ir.I32, signBit},
		{"u32 neg", ir.Neg(ir.LitU32(1)), ir.U32, 0xFFFFFFFF},
		{"i32 abs MIN", ir.Abs(minI), ir.I32, signBit},
		{"i32 abs", ir.Abs(ir.LitI32(-5)), ir.I32, 5},
		{"i32 min", ir.Min(ir.LitI32(-5), ir.LitI32(3)), ir.I32, i32(-5)},
		{"u32 min", ir.Min(ir.LitU32(0xFFFFFFFB), ir.LitU32(3)), ir.U32, 3},
		{"i32 max", ir.Max(ir.LitI32(-5), ir.LitI32(3)), ir.I32, 3},
		{"u32 max", ir.Max(ir.LitU32(0xFFFFFFFB), ir.LitU32(3)), ir.U32, 0xFFFFFFFB},
		{"not u32", ir.Not(ir.LitU32(0x0F0F0F0F)), ir.U32, 0xF0F0F0F0},
		{"not bool", ir.Not(ir.LitBool(false)), ir.Bool, 1},
		{"xor", ir.Xor(ir.LitU32(0xFF00), ir.LitU32(0x0FF0)), ir.U32, 0xF0F0},
		// Shifts take the amount mod 32.
		{"shl 33", ir.Shl(ir.LitU32(1), ir.LitU32(33)), ir.U32, 2},
		{"shl 32", ir.Shl(ir.LitU32(5), ir.LitU32(32)), ir.U32, 5},
		{"shr u32 logical mod 32", ir.Shr(ir.LitU32(0x80000000), ir.LitU32(35)), ir.U32, 0x10000000},
		{"shr i32 arithmetic", ir.Shr(ir.LitI32(-16), ir.LitI32(2)), ir.I32, i32(-4)},
		{"shl by negative i32 (31)", ir.Shl(ir.LitI32(1), ir.LitI32(-1)), ir.I32, signBit},
		{"shr i32 by negative (31)", ir.Shr(minI, ir.LitI32(-1)), ir.I32, i32(-1)},
		{"shr i32 by 64", ir.Shr(ir.LitI32(-64), ir.LitI32(64)), ir.I32, i32(-64)},
		// f32 to integer casts truncate and saturate; NaN gives 0.
		{"f32->u32 large", ir.Cast(ir.U32, ir.LitF32(1e10)), ir.U32, math.MaxUint32},
		{"f32->u32 2^32", ir.Cast(ir.U32, ir.LitF32(4294967296)), ir.U32, math.MaxUint32},
		{"f32->u32 largest below 2^32", ir.Cast(ir.U32, ir.LitF32(4294967040)), ir.U32, 4294967040},
		{"f32->u32 negative", ir.Cast(ir.U32, ir.LitF32(-5)), ir.U32, 0},
		{"f32->u32 -0.7", ir.Cast(ir.U32, ir.LitF32(-0.7)), ir.U32, 0},
		{"f32->u32 NaN", ir.Cast(ir.U32, nan), ir.U32, 0},
		{"f32->u32 +inf", ir.Cast(ir.U32, posInf), ir.U32, math.MaxUint32},
		{"f32->u32 -inf", ir.Cast(ir.U32, negInf), ir.U32, 0},
		{"f32->u32 truncates", ir.Cast(ir.U32, ir.LitF32(3.9)), ir.U32, 3},
		{"f32->i32 large", ir.Cast(ir.I32, ir.LitF32(3e9)), ir.I32, math.MaxInt32},
		{"f32->i32 2^31", ir.Cast(ir.I32, ir.LitF32(2147483648)), ir.I32, math.MaxInt32},
		{"f32->i32 largest below 2^31", ir.Cast(ir.I32, ir.LitF32(2147483520)), ir.I32, 2147483520},
		{"f32->i32 -2^31", ir.Cast(ir.I32, ir.LitF32(-2147483648)), ir.I32, signBit},
		{"f32->i32 very negative", ir.Cast(ir.I32, ir.LitF32(-3e9)), ir.I32, signBit},
		{"f32->i32 NaN", ir.Cast(ir.I32, nan), ir.I32, 0},
		{"f32->i32 +inf", ir.Cast(ir.I32, posInf), ir.I32, math.MaxInt32},
		{"f32->i32 -inf", ir.Cast(ir.I32, negInf), ir.I32, signBit},
		{"f32->i32 truncates toward zero", ir.Cast(ir.I32, ir.LitF32(-3.9)), ir.I32, i32(-3)},
		// Integer to f32 rounds to nearest even.
		{"i32->f32 16777217", ir.Cast(ir.F32, ir.LitI32(16777217)), ir.F32, f32bits(16777216)},
		{"i32->f32 16777219", ir.Cast(ir.F32, ir.LitI32(16777219)), ir.F32, f32bits(16777220)},
		{"i32->f32 -16777217", ir.Cast(ir.F32, ir.LitI32(-16777217)), ir.F32, f32bits(-16777216)},
		{"u32->f32 16777217", ir.Cast(ir.F32, ir.LitU32(16777217)), ir.F32, f32bits(16777216)},
		{"u32->f32 max", ir.Cast(ir.F32, ir.LitU32(math.MaxUint32)), ir.F32, f32bits(4294967296)},
		{"i32->f32 MIN", ir.Cast(ir.F32, minI), ir.F32, f32bits(-2147483648)},
		// u32 and i32 reinterpret; bool casts.
		{"i32->u32", ir.Cast(ir.U32, ir.LitI32(-1)), ir.U32, 0xFFFFFFFF},
		{"u32->i32", ir.Cast(ir.I32, ir.LitU32(0x80000000)), ir.I32, signBit},
		{"bool->u32 true", ir.Cast(ir.U32, ir.LitBool(true)), ir.U32, 1},
		{"bool->i32 false", ir.Cast(ir.I32, ir.LitBool(false)), ir.I32, 0},
		{"u32->bool 5", ir.Cast(ir.Bool, ir.LitU32(5)), ir.Bool, 1},
		{"i32->bool -1", ir.Cast(ir.Bool, ir.LitI32(-1)), ir.Bool, 1},
		{"i32->bool 0", ir.Cast(ir.Bool, ir.LitI32(0)), ir.Bool, 0},
		{"f32->f32", ir.Cast(ir.F32, ir.LitF32(1.5)), ir.F32, f32bits(1.5)},
		// f32 min and max: NaN yields the other operand; zeros are ordered.
		{"min NaN first", ir.Min(nan, ir.LitF32(1)), ir.F32, f32bits(1)},
		{"min NaN second", ir.Min(ir.LitF32(1), nan), ir.F32, f32bits(1)},
		{"max NaN first", ir.Max(nan, ir.LitF32(2)), ir.F32, f32bits(2)},
		{"max NaN second", ir.Max(ir.LitF32(-2), nan), ir.F32, f32bits(-2)},
		{"min -0 +0", ir.Min(negZ, posZ), ir.F32, signBit},
		{"min +0 -0", ir.Min(posZ, negZ), ir.F32, signBit},
		{"max -0 +0", ir.Max(negZ, posZ), ir.F32, 0},
		{"max +0 -0", ir.Max(posZ, negZ), ir.F32, 0},
		{"min", ir.Min(ir.LitF32(-1), ir.LitF32(2)), ir.F32, f32bits(-1)},
		{"max inf", ir.Max(negInf, posInf), ir.F32, f32bits(float32(math.Inf(1)))},
		// Signed zeros and IEEE division.
		{"neg +0", ir.Neg(posZ), ir.F32, signBit},
		{"0 * -1", ir.Mul(posZ, ir.LitF32(-1)), ir.F32, signBit},
		{"-0 + -0", ir.Add(negZ, negZ), ir.F32, signBit},
		{"+0 - +0", ir.Sub(posZ, posZ), ir.F32, 0},
		{"-0 + +0", ir.Add(negZ, posZ), ir.F32, 0},
		{"abs -0", ir.Abs(negZ), ir.F32, 0},
		{"abs -inf", ir.Abs(negInf), ir.F32, f32bits(float32(math.Inf(1)))},
		{"1 / +0", ir.Div(ir.LitF32(1), posZ), ir.F32, f32bits(float32(math.Inf(1)))},
		{"1 / -0", ir.Div(ir.LitF32(1), negZ), ir.F32, f32bits(float32(math.Inf(-1)))},
		{"floor -0.5", ir.Floor(ir.LitF32(-0.5)), ir.F32, f32bits(-1)},
		{"ceil -0.5", ir.Ceil(ir.LitF32(-0.5)), ir.F32, signBit},
		{"sqrt 2", ir.Sqrt(ir.LitF32(2)), ir.F32, f32bits(float32(math.Sqrt(2)))},
		{"sqrt -1", ir.Cast(ir.U32, ir.Ne(ir.Sqrt(ir.LitF32(-1)), ir.Sqrt(ir.LitF32(-1)))), ir.U32, 1},
		{"exp 0", ir.Exp(posZ), ir.F32, f32bits(1)},
		{"log 1", ir.Log(ir.LitF32(1)), ir.F32, 0},
		{"sin 0", ir.Sin(posZ), ir.F32, 0},
		{"cos 0", ir.Cos(posZ), ir.F32, f32bits(1)},
		// Comparisons: ordered with NaN except ne; -0 == +0.
		{"eq -0 +0", ir.Eq(negZ, posZ), ir.Bool, 1},
		{"eq NaN NaN", ir.Eq(nan, nan), ir.Bool, 0},
		{"ne NaN NaN", ir.Ne(nan, nan), ir.Bool, 1},
		{"lt NaN", ir.Lt(nan, ir.LitF32(1)), ir.Bool, 0},
		{"ge NaN", ir.Ge(nan, ir.LitF32(1)), ir.Bool, 0},
		{"gt f32", ir.Gt(ir.LitF32(2), ir.LitF32(1)), ir.Bool, 1},
		{"le f32", ir.Le(ir.LitF32(2), ir.LitF32(2)), ir.Bool, 1},
		{"lt i32 signed", ir.Lt(ir.LitI32(-1), ir.LitI32(1)), ir.Bool, 1},
		{"lt u32 unsigned", ir.Lt(ir.LitU32(0xFFFFFFFF), ir.LitU32(1)), ir.Bool, 0},
		{"gt i32", ir.Gt(ir.LitI32(1), ir.LitI32(-1)), ir.Bool, 1},
		{"ge u32", ir.Ge(ir.LitU32(1), ir.LitU32(0xFFFFFFFF)), ir.Bool, 0},
		{"le i32", ir.Le(minI, ir.LitI32(math.MaxInt32)), ir.Bool, 1},
		{"eq bool", ir.Eq(ir.LitBool(true), ir.LitBool(true)), ir.Bool, 1},
		{"ne u32", ir.Ne(ir.LitU32(1), ir.LitU32(2)), ir.Bool, 1},
		{"land", ir.LAnd(ir.LitBool(true), ir.LitBool(false)), ir.Bool, 0},
		{"lor", ir.LOr(ir.LitBool(true), ir.LitBool(false)), ir.Bool, 1},
		{"select true", ir.Select(ir.LitBool(true), ir.LitI32(-1), ir.LitI32(2)), ir.I32, i32(-1)},
		{"select false", ir.Select(ir.LitBool(false), ir.LitI32(-1), ir.LitI32(2)), ir.I32, 2},
		// NaN payloads survive moves and sign operations.
		{"neg NaN keeps payload", ir.Neg(ir.Literal{Type: ir.F32, Bits: 0x7FC00123}), ir.F32, 0xFFC00123},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := eval(t, tc.e, tc.typ); got != tc.want {
				t.Errorf("got %#x (%v), want %#x (%v)", got, math.Float32frombits(got), tc.want, math.Float32frombits(tc.want))
			}
		})
	}
}

// The product 97 * (172961 * 2^-24) is exactly 1 + 2^-24, half an f32 ulp above 1,
// and 1549 * (10831 * 2^-24) is exactly 1 + 3*2^-24. A tiny addend decides the
// rounding of the fused result, while a rounded product loses it.
func TestFmaFusedAndUnfused(t *testing.T) {
	a1, b1 := ir.LitF32(97), ir.Mul(ir.LitF32(172961), pow2(-24))
	a3, b3 := ir.LitF32(1549), ir.Mul(ir.LitF32(10831), pow2(-24))
	one := float32(1)
	up := math.Nextafter32(one, 2)
	upup := math.Nextafter32(up, 2)
	tests := []struct {
		name    string
		a, b, c ir.Expr
		fused   float32
		unfused float32
	}{
		// Exact 1 + 2^-24 + 2^-80: just above the tie, so fused rounds up. A float64
		// FMA rounded to f32 lands on the tie and gives 1.
		{"above tie", a1, b1, pow2(-80), up, one},
		// Exact 1 + 3*2^-24 - 2^-80: just below the tie, so fused rounds down. A float64
		// FMA rounded to f32 lands on the tie and rounds to even, 1 + 2^-22.
		{"below tie", a3, b3, ir.Neg(pow2(-80)), up, upup},
		// (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 fused, 0 when the product is rounded.
		{"cancellation", ir.Add(ir.LitF32(1), pow2(-12)), ir.Add(ir.LitF32(1), pow2(-12)), ir.Neg(ir.Add(ir.LitF32(1), pow2(-11))),
			float32(math.Ldexp(1, -24)), 0},
		// 3e38 * 2 overflows f32 when rounded but not inside the fused operation.
		{"no intermediate overflow", ir.LitF32(3e38), ir.LitF32(2), ir.LitF32(-3e38), 3e38, float32(math.Inf(1))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := math.Float32frombits(eval(t, ir.Fma(tc.a, tc.b, tc.c), ir.F32)); got != tc.fused {
				t.Errorf("fma = %v (%#x), want %v", got, math.Float32bits(got), tc.fused)
			}
			if got := math.Float32frombits(eval(t, ir.Add(ir.Mul(tc.a, tc.b), tc.c), ir.F32)); got != tc.unfused {
				t.Errorf("add(mul) = %v (%#x), want %v (never contracted)", got, math.Float32bits(got), tc.unfused)
			}
		})
	}
}
