package interp

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFma is a*b+c computed exactly and rounded once to f32 (nearest even).
func exactFma(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// The tie cases must defeat the naive float64 FMA, or they would not test fmaF32.
func TestFmaCasesDefeatDoubleRounding(t *testing.T) {
	b1 := float32(172961 * math.Ldexp(1, -24))
	b3 := float32(10831 * math.Ldexp(1, -24))
	tiny := float32(math.Ldexp(1, -80))
	cases := []struct{ a, b, c float32 }{{97, b1, tiny}, {1549, b3, -tiny}}
	for _, tc := range cases {
		naive := float32(math.FMA(float64(tc.a), float64(tc.b), float64(tc.c)))
		want := exactFma(tc.a, tc.b, tc.c)
		if naive == want {
			t.Errorf("fma(%v, %v, %v): naive double rounding already gives %v; the case tests nothing", tc.a, tc.b, tc.c, want)
		}
		if got := f32(fmaF32(bitsOf(tc.a), bitsOf(tc.b), bitsOf(tc.c))); got != want {
			t.Errorf("fmaF32(%v, %v, %v) = %v, want %v", tc.a, tc.b, tc.c, got, want)
		}
	}
}

// randomF32 favours values whose products and sums round in interesting ways: close
// exponents, few significant bits, occasional subnormals and specials.
func randomF32(rng *rand.Rand) float32 {
	switch rng.IntN(10) {
	case 0:
		return float32(math.Ldexp(float64(rng.IntN(1<<24)), -149+rng.IntN(30)))
	case 1:
		return [...]float32{0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32}[rng.IntN(6)]
	}
	m := float64(rng.IntN(1<<24) | 1<<23)
	if rng.IntN(2) == 0 {
		m = -m
	}
	return float32(math.Ldexp(m, rng.IntN(40)-43))
}

func TestFmaMatchesExactRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		a, b := randomF32(rng), randomF32(rng)
		c := randomF32(rng)
		if rng.IntN(2) == 0 {
			c = -a * b // near-cancellation
			c = math.Nextafter32(c, float32(rng.NormFloat64()))
		}
		got := f32(fmaF32(bitsOf(a), bitsOf(b), bitsOf(c)))
		p := float64(a) * float64(b)
		if math.IsNaN(p) || math.IsInf(p, 0) || math.IsInf(float64(c), 0) || math.IsNaN(float64(c)) {
			want := float32(p + float64(c))
			if math.IsNaN(float64(want)) != math.IsNaN(float64(got)) || (!math.IsNaN(float64(want)) && want != got) {
				t.Fatalf("fma(%v, %v, %v) = %v, want %v", a, b, c, got, want)
			}
			continue
		}
		want := exactFma(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("fma(%v, %v, %v) = %v (%#x), want %v (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}
