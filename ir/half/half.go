package half

import "math"

// Float16 is an IEEE 754 binary16 value, held as its bits: 1 sign bit, 5 exponent
// bits (bias 15) and 10 fraction bits.
type Float16 uint16

// BFloat16 is a bfloat16 value, held as its bits: float32's sign and 8 exponent
// bits with 7 fraction bits (the upper half of a float32).
type BFloat16 uint16

// format describes a binary floating-point format narrower than float64.
type format struct {
	precision uint // significand bits, the hidden bit included
	emin      int  // exponent of the smallest normal number
	emax      int  // exponent of the largest finite number
	expBits   uint
}

var (
	binary16 = format{precision: 11, emin: -14, emax: 15, expBits: 5}
	bfloat16 = format{precision: 8, emin: -126, emax: 127, expBits: 8}
)

// NewFloat16 rounds x to the nearest binary16 value, ties to even.
func NewFloat16(x float32) Float16 {
	b := math.Float32bits(x)
	sign := uint32(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	if exp <= 0 || exp >= 31 { // zero, subnormal, overflow, inf or NaN: the general rounding
		return Float16(binary16.round(float64(x)))
	}
	// A normal binary16 exponent: keep 10 of the 23 fraction bits, ties to even;
	// a carry out of the fraction steps the exponent (to inf past the largest).
	mant := b & 0x7fffff
	h := uint32(exp)<<10 | mant>>13
	if rest := mant & 0x1fff; rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
		h++
	}
	return Float16(sign | h)
}

// Float16FromFloat64 rounds x to the nearest binary16 value, ties to even, in one
// rounding (no pass through float32).
func Float16FromFloat64(x float64) Float16 { return Float16(binary16.round(x)) }

// NewBFloat16 rounds x to the nearest bfloat16 value, ties to even.
func NewBFloat16(x float32) BFloat16 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 { // inf or NaN
		return BFloat16(bfloat16.round(float64(x)))
	}
	// bfloat16 is float32's upper half: round the lower half away, ties to
	// even; a carry steps the exponent (to inf past the largest).
	return BFloat16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BFloat16FromFloat64 rounds x to the nearest bfloat16 value, ties to even, in one
// rounding.
func BFloat16FromFloat64(x float64) BFloat16 { return BFloat16(bfloat16.round(x)) }

// Float64 returns h's value exactly.
func (h Float16) Float64() float64 { return binary16.value(uint16(h)) }

// Float32 returns h's value exactly.
func (h Float16) Float32() float32 {
	if e := uint32(h>>10) & 0x1f; e != 0 && e != 31 { // normal: rebias the exponent
		return math.Float32frombits(uint32(h&0x8000)<<16 | (e+127-15)<<23 | uint32(h&0x3ff)<<13)
	}
	if h.IsNaN() {
		return math.Float32frombits(uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(h&0x3ff)<<13)
	}
	return float32(h.Float64())
}

// IsNaN reports whether h is a NaN.
func (h Float16) IsNaN() bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

// Float64 returns b's value exactly.
func (b BFloat16) Float64() float64 { return float64(b.Float32()) }

// Float32 returns b's value exactly: its bits are the upper half of a float32.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// IsNaN reports whether b is a NaN.
func (b BFloat16) IsNaN() bool { return b&0x7f80 == 0x7f80 && b&0x7f != 0 }

// round encodes the value of x rounded to f, ties to even.
func (f format) round(x float64) uint16 {
	fracBits := f.precision - 1
	expMask := uint16(1)<<f.expBits - 1
	var sign uint16
	if math.Signbit(x) {
		sign = 1 << (15)
		x = -x
	}
	switch {
	case math.IsNaN(x):
		return sign | expMask<<fracBits | 1<<(fracBits-1)
	case x == 0:
		return sign
	}
	_, e := math.Frexp(x) // x = m * 2^e, m in [0.5, 1)
	exp := e - 1
	if exp < f.emin {
		exp = f.emin
	}
	quantum := math.Ldexp(1, exp-int(fracBits))
	r := math.RoundToEven(x/quantum) * quantum
	if r >= math.Ldexp(1, f.emax+1) {
		return sign | expMask<<fracBits
	}
	if r == 0 {
		return sign
	}
	_, e = math.Frexp(r)
	exp = e - 1
	if exp < f.emin { // subnormal: the biased exponent field is 0
		return sign | uint16(r/math.Ldexp(1, f.emin-int(fracBits)))
	}
	frac := uint16(r/math.Ldexp(1, exp-int(fracBits))) &^ (1 << fracBits)
	bias := f.emax
	return sign | uint16(exp+bias)<<fracBits | frac
}

// value decodes bits of format f exactly.
func (f format) value(bits uint16) float64 {
	fracBits := f.precision - 1
	expMask := uint16(1)<<f.expBits - 1
	neg := bits&0x8000 != 0
	exp := int(bits >> fracBits & expMask)
	frac := bits & (1<<fracBits - 1)
	var v float64
	switch {
	case exp == int(expMask) && frac == 0:
		v = math.Inf(1)
	case exp == int(expMask):
		v = math.NaN()
	case exp == 0:
		v = math.Ldexp(float64(frac), f.emin-int(fracBits))
	default:
		v = math.Ldexp(float64(frac|1<<fracBits), exp-f.emax-int(fracBits))
	}
	if neg {
		return -v
	}
	return v
}

// Add returns a+b correctly rounded to binary16 (the sum of two binary16 values is
// exact in float64, so one rounding follows).
func Add(a, b Float16) Float16 { return Float16FromFloat64(a.Float64() + b.Float64()) }

// Sub returns a−b correctly rounded to binary16.
func Sub(a, b Float16) Float16 { return Float16FromFloat64(a.Float64() - b.Float64()) }

// Mul returns a·b correctly rounded to binary16 (the product is exact in float64).
func Mul(a, b Float16) Float16 { return Float16FromFloat64(a.Float64() * b.Float64()) }

// Div returns a/b correctly rounded to binary16: float64 carries more than twice
// binary16's precision plus two bits, so rounding its correctly rounded quotient
// again gives the correctly rounded binary16 quotient.
func Div(a, b Float16) Float16 { return Float16FromFloat64(a.Float64() / b.Float64()) }

// Sqrt returns √a correctly rounded to binary16 (by the same argument as Div).
func Sqrt(a Float16) Float16 { return Float16FromFloat64(math.Sqrt(a.Float64())) }

// FMA returns a·b+c with a single rounding to binary16. The product is exact in
// float64; the sum is rounded to odd in float64 (53 ≥ 11+2 bits), so its rounding
// to binary16 equals the rounding of the exact value.
func FMA(a, b, c Float16) Float16 {
	p, z := a.Float64()*b.Float64(), c.Float64()
	s := p + z
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return Float16FromFloat64(s)
	}
	bb := s - p
	err := (p - (s - bb)) + (z - bb)
	if err != 0 && math.Float64bits(s)&1 == 0 {
		s = math.Nextafter(s, math.Copysign(math.Inf(1), err))
	}
	return Float16FromFloat64(s)
}
