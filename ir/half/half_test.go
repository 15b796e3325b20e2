package half

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refRound rounds the exact value x (a big.Float) to f with math/big, the oracle's
// oracle: an independent rounding by arbitrary precision.
func refRound(f format, x *big.Float) float64 {
	if x.Sign() == 0 {
		v, _ := x.Float64()
		return v
	}
	exp := x.MantExp(nil) - 1
	if exp < f.emin {
		// Subnormal range: the quantum is fixed; scale, round to an integer, scale back.
		scaled := new(big.Float).SetPrec(400).SetMantExp(x, -(f.emin - int(f.precision-1)))
		r := new(big.Float).SetPrec(400).SetInt(roundHalfEven(scaled))
		v, _ := r.SetMantExp(r, f.emin-int(f.precision-1)).Float64()
		return v
	}
	r := new(big.Float).SetPrec(f.precision).SetMode(big.ToNearestEven).Set(x)
	v, _ := r.Float64()
	if math.Abs(v) >= math.Ldexp(1, f.emax+1) {
		return math.Copysign(math.Inf(1), v)
	}
	return v
}

// roundHalfEven rounds x to an integer, ties to even.
func roundHalfEven(x *big.Float) *big.Int {
	fl, _ := x.Int(nil) // toward zero
	rem := new(big.Float).Sub(x, new(big.Float).SetInt(fl))
	half := big.NewFloat(0.5)
	if x.Sign() < 0 {
		rem.Neg(rem)
	}
	step := big.NewInt(1)
	if x.Sign() < 0 {
		step.Neg(step)
	}
	switch rem.Cmp(half) {
	case 1:
		fl.Add(fl, step)
	case 0:
		if fl.Bit(0) == 1 {
			fl.Add(fl, step)
		}
	}
	return fl
}

func TestFloat16RoundTripsEveryValue(t *testing.T) {
	checkEveryValueRoundTrips(t, NewFloat16, func(b int, h Float16) {
		if float64(h.Float32()) != h.Float64() {
			t.Fatalf("%#04x: Float32 %v, Float64 %v", b, h.Float32(), h.Float64())
		}
	})
}

func TestBFloat16RoundTripsEveryValue(t *testing.T) {
	checkEveryValueRoundTrips(t, NewBFloat16, func(b int, h BFloat16) {
		if bfloat16.value(uint16(b)) != h.Float64() {
			t.Fatalf("%#04x: generic decode %v, Float32 %v", b, bfloat16.value(uint16(b)), h.Float64())
		}
	})
}

// checkEveryValueRoundTrips checks that each of the 65536 values of H converts
// to float32 and back (through fromFloat32) to itself, a NaN to a NaN, and calls
// also on each value that is not a NaN.
func checkEveryValueRoundTrips[H interface {
	~uint16
	Float32() float32
	IsNaN() bool
}](t *testing.T, fromFloat32 func(float32) H, also func(b int, h H)) {
	t.Helper()
	for b := 0; b < 1<<16; b++ {
		h := H(b)
		back := fromFloat32(h.Float32())
		if h.IsNaN() {
			if !back.IsNaN() {
				t.Fatalf("%#04x: NaN became %#04x", b, back)
			}
			continue
		}
		if back != h {
			t.Fatalf("%#04x -> %v -> %#04x", b, h.Float32(), back)
		}
		also(b, h)
	}
}

func TestConversionsMatchArbitraryPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		x := math.Float32frombits(r.Uint32())
		if x != x || math.IsInf(float64(x), 0) {
			continue
		}
		exact := new(big.Float).SetFloat64(float64(x))
		if got, want := NewFloat16(x).Float64(), refRound(binary16, exact); got != want && !(got == 0 && want == 0) {
			t.Fatalf("f16(%v [%#08x]) = %v, want %v", x, math.Float32bits(x), got, want)
		}
		if got, want := NewBFloat16(x).Float64(), refRound(bfloat16, exact); got != want && !(got == 0 && want == 0) {
			t.Fatalf("bf16(%v [%#08x]) = %v, want %v", x, math.Float32bits(x), got, want)
		}
	}
}

func TestConversionEdges(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want Float16
	}{
		{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {-65520, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {1, 0x3c00}, {float32(math.Copysign(0, -1)), 0x8000},
		{1 + 1.0/2048, 0x3c00},                     // tie between 1 and 1+2^-10: even is 1
		{1 + 3.0/2048, 0x3c02},                     // tie: rounds up to the even fraction
		{math.Float32frombits(0x33800000), 0x0001}, // 2^-24, smallest subnormal
		{math.Float32frombits(0x33000000), 0x0000}, // 2^-25: tie to even (0)
		{math.Float32frombits(0x33000001), 0x0001}, // just above the tie
		{6.1035156e-05, 0x0400},                    // 2^-14, smallest normal
	} {
		if got := NewFloat16(c.in); got != c.want {
			t.Errorf("NewFloat16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   uint32
		want BFloat16
	}{
		{0x3f808000, 0x3f80}, // tie: even
		{0x3f818000, 0x3f82}, // tie: up to even
		{0x7f7fffff, 0x7f80}, // max float32 rounds to inf
		{0x7f7f7fff, 0x7f7f},
		{0x00000001, 0x0000}, // tiny subnormal
		{0x00008000, 0x0000}, // tie at the subnormal quantum: even (0)
		{0x00018000, 0x0002},
	} {
		if got := NewBFloat16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("NewBFloat16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if !NewFloat16(float32(math.NaN())).IsNaN() || !NewBFloat16(math.Float32frombits(0x7fffffff)).IsNaN() {
		t.Fatal("NaN did not stay NaN")
	}
	if !math.IsNaN(float64(Float16(0x7e00).Float32())) || !math.IsNaN(float64(BFloat16(0xffc1).Float32())) {
		t.Fatal("a NaN decoded to a number")
	}
}

func TestArithmeticIsCorrectlyRounded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	exact := func(f func(a, b, c *big.Float) *big.Float, a, b, c Float16) float64 {
		z := f(new(big.Float).SetPrec(400).SetFloat64(a.Float64()), new(big.Float).SetPrec(400).SetFloat64(b.Float64()), new(big.Float).SetPrec(400).SetFloat64(c.Float64()))
		return refRound(binary16, z)
	}
	pick := func() Float16 {
		for {
			h := Float16(r.Uint32())
			if !h.IsNaN() && h&0x7c00 != 0x7c00 {
				return h
			}
		}
	}
	for i := 0; i < 100000; i++ {
		a, b, c := pick(), pick(), pick()
		check := func(name string, got Float16, want float64) {
			t.Helper()
			if g := got.Float64(); g != want && !(g == 0 && want == 0) && !(math.IsNaN(g) && math.IsNaN(want)) {
				t.Fatalf("%s(%#04x, %#04x, %#04x) = %v, want %v", name, a, b, c, g, want)
			}
		}
		p := new(big.Float).SetPrec(400)
		check("add", Add(a, b), exact(func(x, y, _ *big.Float) *big.Float { return p.Add(x, y) }, a, b, c))
		check("sub", Sub(a, b), exact(func(x, y, _ *big.Float) *big.Float { return p.Sub(x, y) }, a, b, c))
		check("mul", Mul(a, b), exact(func(x, y, _ *big.Float) *big.Float { return p.Mul(x, y) }, a, b, c))
		check("fma", FMA(a, b, c), exact(func(x, y, z *big.Float) *big.Float { return p.Add(p.Mul(x, y), z) }, a, b, c))
		if b.Float64() != 0 {
			check("div", Div(a, b), exact(func(x, y, _ *big.Float) *big.Float { return p.Quo(x, y) }, a, b, c))
		}
		if a.Float64() > 0 {
			check("sqrt", Sqrt(a), exact(func(x, _, _ *big.Float) *big.Float { return p.Sqrt(x) }, a, b, c))
		}
	}
}

// TestFMARoundsOnce pins the single rounding of FMA: 1.5 · 0.6669921875 is exactly
// 1+2^-11, a binary16 tie, so the smallest subnormal added or subtracted decides the
// result, which a rounded multiply then add would lose.
func TestFMARoundsOnce(t *testing.T) {
	a, b := NewFloat16(1.5), NewFloat16(683.0/1024)
	tiny := Float16(0x0001)
	for _, c := range []struct {
		c    Float16
		want Float16
	}{{tiny, 0x3c01}, {tiny | 0x8000, 0x3c00}, {0, 0x3c00}} {
		if got := FMA(a, b, c.c); got != c.want {
			t.Errorf("fma(1.5, 683/1024, %#04x) = %#04x, want %#04x", c.c, got, c.want)
		}
	}
	if Add(Mul(a, b), tiny) != 0x3c00 {
		t.Fatal("the unfused form should lose the tiny addend here; the test no longer pins FMA")
	}
}
