package interp

import "math"

// This file holds the per-value semantics of IR v1 (see docs/design.md, "IR
// v1"). Every value travels as its 32-bit pattern: f32 as its
// IEEE-754 bits, i32 as two's complement, bool as 0 or 1.

// signBit is the sign bit of an f32 and the bits of i32 MIN.
const signBit = 0x80000000

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

func bitsOf(v float32) uint32 { return math.Float32bits(v) }

func boolBits(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// divI32 is i32 division: x/0 = 0 and MIN/-1 = MIN (Go's own result for the latter).
func divI32(x, y uint32) uint32 {
	if y == 0 {
		return 0
	}
	return uint32(int32(x) / int32(y))
}

// remI32 is i32 remainder with the sign of the dividend: x%0 = 0, MIN%-1 = 0.
func remI32(x, y uint32) uint32 {
	if y == 0 {
		return 0
	}
	return uint32(int32(x) % int32(y))
}

func divU32(x, y uint32) uint32 {
	if y == 0 {
		return 0
	}
	return x / y
}

func remU32(x, y uint32) uint32 {
	if y == 0 {
		return 0
	}
	return x % y
}

// minF32 and maxF32 return the other operand when one is NaN, NaN when both are,
// and order the zeros: min(-0, +0) = -0, max(-0, +0) = +0.
func minF32(x, y uint32) uint32 { return minMaxBits(f32(x), f32(y), x, y, signBit, false) }

func maxF32(x, y uint32) uint32 { return minMaxBits(f32(x), f32(y), x, y, signBit, true) }

// minMaxBits is min (max where wantMax) of the float bit patterns x and y whose
// values are a and b; sign is their format's sign bit. Of two equal values (the
// zeros) min prefers the negative, max the positive.
func minMaxBits[F float32 | float64](a, b F, x, y, sign uint32, wantMax bool) uint32 {
	switch {
	case a != a:
		return y
	case b != b:
		return x
	case a == b && wantMax:
		return x & (y | ^sign)
	case a == b:
		return x | y&sign
	case (a < b) != wantMax:
		return x
	}
	return y
}

// f32ToI32 truncates toward zero and saturates to [MIN, MAX]; NaN gives 0.
func f32ToI32(x uint32) uint32 {
	v := f32(x)
	switch {
	case v != v:
		return 0
	case v >= 2147483648:
		return math.MaxInt32
	case v <= -2147483648:
		return signBit
	}
	return uint32(int32(v))
}

// f32ToU32 truncates toward zero and saturates to [0, MAX]; NaN gives 0.
func f32ToU32(x uint32) uint32 {
	v := f32(x)
	switch {
	case v != v, v < 0: // below zero saturates; (-1, 0) truncates to zero anyway
		return 0
	case v >= 4294967296:
		return math.MaxUint32
	}
	return uint32(v)
}

// fmaF32 is a*b+c with a single rounding to f32. The product of two f32 values is
// exact in float64; the float64 sum is then rounded to odd (TwoSum gives its exact
// error, and an inexact sum with an even last bit is moved one unit toward the exact
// value), and rounding that to f32 is correct because float64 carries more than two
// extra bits (round-to-odd then round-to-nearest never double-rounds).
func fmaF32(a, b, c uint32) uint32 {
	p := float64(float64(f32(a)) * float64(f32(b))) // exact: 24+24 bits fit in 53
	cv := float64(f32(c))
	s := float64(p + cv)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return bitsOf(float32(s))
	}
	bb := float64(s - p)
	e := float64(float64(p-float64(s-bb)) + float64(cv-bb))
	if e != 0 {
		sb := math.Float64bits(s)
		if sb&1 == 0 {
			if (e > 0) == (s > 0) {
				sb++ // away from zero, toward the exact value
			} else {
				sb--
			}
			s = math.Float64frombits(sb)
		}
	}
	return bitsOf(float32(s))
}

// f32Unary applies a float64 function and rounds the result to f32. sqrt is then
// correctly rounded; exp, log, sin and cos are as accurate as Go's math package
// rounded once to f32 (well within the Vulkan precision bounds).
func f32Unary(f func(float64) float64, x uint32) uint32 {
	return bitsOf(float32(f(float64(f32(x)))))
}
