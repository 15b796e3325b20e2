package interp

import (
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// The 16-bit floats of IR v1.2 (see docs/design.md, "IR v1.2"). A register holds
// an f16 or bf16 value as its 16 bits in the low half of the word, the high half
// zero. f16 arithmetic is ir/half's, correctly rounded in binary16 (never through
// float32 and a second rounding); bf16 has no arithmetic.

// signBit16 is the sign bit of an f16 or bf16.
const signBit16 = 0x8000

func f16(bits uint32) half.Float16 { return half.Float16(bits) }

func f16Value(bits uint32) float64 { return f16(bits).Float64() }

// minF16 and maxF16 follow minF32 and maxF32: NaN gives the other operand, and
// min(-0, +0) = -0, max(-0, +0) = +0.
func minF16(x, y uint32) uint32 { return minMaxBits(f16Value(x), f16Value(y), x, y, signBit16, false) }

func maxF16(x, y uint32) uint32 { return minMaxBits(f16Value(x), f16Value(y), x, y, signBit16, true) }

// f16Compare builds an IEEE comparison of f16 values (false with NaN, but ne).
func f16Compare(cmp func(a, b float64) bool) binLoop {
	return scalarBin(func(x, y uint32) uint32 { return boolBits(cmp(f16Value(x), f16Value(y))) })
}

// f16Arith builds a lane loop from one of ir/half's operations.
func f16Arith(op func(a, b half.Float16) half.Float16) binLoop {
	return scalarBin(func(x, y uint32) uint32 { return uint32(op(f16(x), f16(y))) })
}

// binaryF16 returns the lane loop of op on f16 operands, nil where IR v1.2 does
// not define it.
func binaryF16(op ir.BinaryOp) binLoop {
	switch op {
	case ir.OpAdd:
		return f16Arith(half.Add)
	case ir.OpSub:
		return f16Arith(half.Sub)
	case ir.OpMul:
		return f16Arith(half.Mul)
	case ir.OpDiv:
		return f16Arith(half.Div)
	case ir.OpMin:
		return scalarBin(minF16)
	case ir.OpMax:
		return scalarBin(maxF16)
	case ir.OpEq:
		return f16Compare(func(a, b float64) bool { return a == b })
	case ir.OpNe:
		return f16Compare(func(a, b float64) bool { return a != b })
	case ir.OpLt:
		return f16Compare(func(a, b float64) bool { return a < b })
	case ir.OpLe:
		return f16Compare(func(a, b float64) bool { return a <= b })
	case ir.OpGt:
		return f16Compare(func(a, b float64) bool { return a > b })
	case ir.OpGe:
		return f16Compare(func(a, b float64) bool { return a >= b })
	}
	return nil
}

// unaryF16 returns the lane loop of op on an f16 operand: neg and abs change the
// sign bit only (NaN payloads kept), sqrt is correctly rounded.
func unaryF16(op ir.UnaryOp) unLoop {
	switch op {
	case ir.OpNeg:
		return xorConst(signBit16)
	case ir.OpAbs:
		return scalarUn(func(x uint32) uint32 { return x &^ signBit16 })
	case ir.OpSqrt:
		return scalarUn(func(x uint32) uint32 { return uint32(half.Sqrt(f16(x))) })
	}
	return nil
}

func fmaF16Lanes(d, a, b, c []uint32) {
	b, c, d = b[:len(a)], c[:len(a)], d[:len(a)]
	for i, v := range a {
		d[i] = uint32(half.FMA(f16(v), f16(b[i]), f16(c[i])))
	}
}

// toF32 converts a value of type t (f32, f16 or bf16) to f32 bits, exactly.
func toF32(t ir.Type, x uint32) uint32 {
	switch t {
	case ir.F16:
		return bitsOf(f16(x).Float32())
	case ir.BF16:
		return bitsOf(half.BFloat16(x).Float32())
	}
	return x
}

// fromF32 rounds f32 bits to type t (f32, f16 or bf16) as cast does: to nearest
// even, overflow to ±inf, NaN to NaN, subnormal results kept.
func fromF32(t ir.Type, x uint32) uint32 {
	switch t {
	case ir.F16:
		return uint32(half.NewFloat16(f32(x)))
	case ir.BF16:
		return uint32(half.NewBFloat16(f32(x)))
	}
	return x
}

// cast16 returns the lane loop of a cast between f32 and a 16-bit float; ok is
// false for the casts IR v1.2 rejects (every other one involving f16 or bf16).
func cast16(from, to ir.Type) (f unLoop, ok bool) {
	switch {
	case from == ir.F32 && to.Is16Bit():
		return scalarUn(func(x uint32) uint32 { return fromF32(to, x) }), true
	case from.Is16Bit() && to == ir.F32:
		return scalarUn(func(x uint32) uint32 { return toF32(from, x) }), true
	}
	return nil, false
}
