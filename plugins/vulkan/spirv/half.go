package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// IR v1.2's 16-bit floats (see docs/design.md, "IR v1.2", and "Vulkan", "16-bit
// types"):
//
//   - f16 values are SPIR-V 16-bit floats (capability Float16, the device's
//     shaderFloat16). add, sub and mul are OpFAdd/OpFSub/OpFMul on them,
//     NoContraction, and fma is a rounded multiply then an add (one of the two
//     forms the IR accepts). div and sqrt run in f32 on the exactly widened
//     operands and round the result to f16 (within 1 ULP). neg, abs, min and max
//     work on the bits, as for f32; comparisons compare the exactly widened
//     values in f32.
//   - bf16 values are u32 values holding the 16-bit pattern in their low half:
//     bf16 has no arithmetic, and no SPIR-V bf16 type is needed.
//   - Casts from f32 round to nearest even in integer operations on the bits
//     (f32ToF16Bits, f32ToBF16Bits), so they are the same on every driver
//     whatever its default conversion rounding: overflow gives ±inf, NaN stays
//     NaN (quiet, sign kept), f16 subnormals are kept. f16 to f32 is
//     OpFConvert (exact); bf16 to f32 shifts the bits into the top half.
//   - Buffers of f16 and bf16 hold 2-byte elements (capability
//     StorageBuffer16BitAccess, the device's storageBuffer16BitAccess): f16
//     elements are 16-bit floats, bf16 elements 16-bit unsigned integers
//     converted to and from the u32 value (OpUConvert). Shared arrays (and
//     workgroup matrices) of f16 hold 16-bit floats (allowed by Float16), of
//     bf16 16-bit integers where the device has shaderInt16 (capability Int16)
//     and one u32 word per element elsewhere, so no workgroup 16-bit layout is
//     needed.

// The capabilities, and the extension, of 16-bit types.
const (
	capabilityFloat16                  = 9
	capabilityInt16                    = 22
	capabilityStorageBuffer16BitAccess = 4433
	extension16BitStorage              = "SPV_KHR_16bit_storage"
	opFConvert                         = 115
	opUConvert                         = 113
	opCompositeConstruct               = 80
)

// f16 bit patterns.
const (
	f16SignBit  = 0x8000
	f16AbsMask  = 0x7fff
	f16Infinity = 0x7c00
)

// f16 returns the 16-bit float type, recording an error when the target lacks
// shaderFloat16.
func (e *emitter) f16() uint32 {
	if !e.target.Float16 {
		e.fail(fmt.Errorf("f16 values need 16-bit float arithmetic (shaderFloat16), which the device does not support. Fix: run the program on a device whose profile reports f16, or use f32"))
	}
	e.capability(capabilityFloat16)
	return e.typ(typeKey{op: opTypeFloat, a: 16}, 16)
}

// u16 returns the 16-bit unsigned integer type, used only for bf16 buffer
// elements.
func (e *emitter) u16() uint32 { return e.typ(typeKey{op: opTypeInt, a: 16}, 16, 0) }

func (e *emitter) half2() uint32 {
	h := e.f16()
	return e.typ(typeKey{op: opTypeVector, a: h, b: 2}, h, 2)
}

// storage16 records that the module has buffers of 2-byte elements, or an
// error when the target lacks 16-bit storage.
func (e *emitter) storage16(t ir.Type) {
	if !e.target.Storage16 {
		e.fail(fmt.Errorf("buffers of %s need 16-bit storage buffer access (storageBuffer16BitAccess), which the device does not support. Fix: run the program on a device whose profile reports %s, or use f32 buffers", t, t))
	}
	e.capability(capabilityStorageBuffer16BitAccess)
}

// int16 records that the module needs 16-bit integers anywhere, for the bf16
// buffer name reached through a device address, or an error when the target
// lacks them.
func (e *emitter) int16(name string) {
	if !e.target.Int16 {
		e.fail(fmt.Errorf("bf16 buffer %q is larger than a descriptor binds, and reaching it through a device address needs 16-bit integers (shaderInt16), which the device does not support. Fix: bind at most maxStorageBufferRange bytes to it", name))
	}
	e.capability(capabilityInt16)
}

// memType is the SPIR-V type of one element of a in memory: a 2-byte type for
// 16-bit buffers, the value's type otherwise.
func (e *emitter) memType(a array) uint32 {
	if e.narrowBF16(a) {
		return e.u16()
	}
	return e.scalar(a.elem)
}

// narrowBF16 reports whether a holds bf16 elements as 16-bit integers: in
// buffers always, in workgroup memory where the target has Int16 (elsewhere
// one u32 word each).
func (e *emitter) narrowBF16(a array) bool {
	return a.elem == ir.BF16 && (!a.shared || e.target.Int16)
}

// workgroupElemBytes is the size of one element of type t in workgroup memory:
// f16 2 bytes, bf16 2 bytes where the target has Int16 (4 elsewhere), the
// others (bool included) 4.
func (e *emitter) workgroupElemBytes(t ir.Type) uint32 {
	if t == ir.F16 || t == ir.BF16 && e.target.Int16 {
		return 2
	}
	return 4
}

// bits16 is the bits of an f16 value in the low half of a u32 (the value
// paired with a zero and the pair reinterpreted: component 0 is the low half).
func (e *emitter) bits16(x uint32) uint32 {
	pair := e.op(opCompositeConstruct, e.half2(), x, e.constant(ir.Literal{Type: ir.F16}))
	return e.op(opBitcast, e.u32(), pair)
}

// half16 is the f16 whose bits are the low half of the u32 bits.
func (e *emitter) half16(bits uint32) uint32 {
	return e.op(opCompositeExtract, e.f16(), e.op(opBitcast, e.half2(), bits), 0)
}

// widen is an f16 converted exactly to f32.
func (e *emitter) widen(x uint32) uint32 { return e.op(opFConvert, e.f32(), x) }

// narrow is an f32 rounded to nearest even to f16.
func (e *emitter) narrow(x uint32) uint32 { return e.half16(e.f32ToF16Bits(e.bitsOf(x))) }

// f32ToF16Bits rounds the f32 with bits x to the nearest f16, ties to even, in
// integer operations, and returns its bits: NaN stays a quiet NaN with its sign
// and top payload bits, values from 65520 up become infinity, values below
// 2^-14 become subnormals (or zero).
func (e *emitter) f32ToF16Bits(x uint32) uint32 {
	u, b := e.u32(), e.bool()
	sign := e.op(opBitwiseAnd, u, e.op(opShiftRightLogical, u, x, e.cu32(16)), e.cu32(f16SignBit))
	a := e.op(opBitwiseAnd, u, x, e.cu32(f32AbsMask))
	// Normal results: rebias the exponent and round off 13 bits; a carry
	// moves into the exponent, up to infinity.
	rebiased := e.op(opISub, u, a, e.cu32(0x38000000))
	odd := e.op(opBitwiseAnd, u, e.op(opShiftRightLogical, u, a, e.cu32(13)), e.cu32(1))
	normal := e.op(opShiftRightLogical, u, e.op(opIAdd, u, e.op(opIAdd, u, rebiased, e.cu32(0xfff)), odd), e.cu32(13))
	// Subnormal results: the significand with its hidden bit, shifted right by
	// 126 - exponent (14 to 24), rounded to nearest even.
	exp := e.op(opShiftRightLogical, u, a, e.cu32(23))
	mant := e.op(opBitwiseOr, u, e.op(opBitwiseAnd, u, a, e.cu32(0x7fffff)), e.cu32(0x800000))
	tiny := e.op(opULessThan, b, exp, e.cu32(102)) // below 2^-25: rounds to zero
	// The shift stays within 14..24 on every path (the others are selected
	// away), so no shift is by the width or more.
	small := e.op(opULessThan, b, a, e.cu32(0x38800000))
	shift := e.sel(u, small, e.ext(u, glslUMin, e.op(opISub, u, e.cu32(126), exp), e.cu32(24)), e.cu32(24))
	q := e.op(opShiftRightLogical, u, mant, shift)
	rem := e.op(opISub, u, mant, e.op(opShiftLeftLogical, u, q, shift))
	halfway := e.op(opShiftLeftLogical, u, e.cu32(1), e.op(opISub, u, shift, e.cu32(1)))
	up := e.op(opLogicalOr, b, e.op(opUGreaterThan, b, rem, halfway),
		e.op(opLogicalAnd, b, e.op(opIEqual, b, rem, halfway), e.op(opINotEqual, b, e.op(opBitwiseAnd, u, q, e.cu32(1)), e.cu32(0))))
	sub := e.op(opIAdd, u, q, e.sel(u, up, e.cu32(1), e.cu32(0)))
	sub = e.sel(u, tiny, e.cu32(0), sub)
	r := e.sel(u, small, sub, normal)
	r = e.sel(u, e.op(opUGreaterThanEqual, b, a, e.cu32(0x477ff000)), e.cu32(f16Infinity), r)
	nan := e.op(opBitwiseOr, u, e.cu32(0x7e00), e.op(opBitwiseAnd, u, e.op(opShiftRightLogical, u, a, e.cu32(13)), e.cu32(0x3ff)))
	r = e.sel(u, e.isNaN(x), nan, r)
	return e.op(opBitwiseOr, u, sign, r)
}

// f32ToBF16Bits rounds the f32 with bits x to the nearest bf16, ties to even:
// the top half after adding 0x7fff and the kept half's lowest bit (a carry
// reaches infinity from the largest finite values); NaN keeps its sign and top
// payload bits and is made quiet.
func (e *emitter) f32ToBF16Bits(x uint32) uint32 {
	u := e.u32()
	odd := e.op(opBitwiseAnd, u, e.op(opShiftRightLogical, u, x, e.cu32(16)), e.cu32(1))
	r := e.op(opShiftRightLogical, u, e.op(opIAdd, u, e.op(opIAdd, u, x, e.cu32(0x7fff)), odd), e.cu32(16))
	nan := e.op(opBitwiseOr, u, e.op(opShiftRightLogical, u, x, e.cu32(16)), e.cu32(0x40))
	return e.sel(u, e.isNaN(x), nan, r)
}

// bf16ToF32 is the f32 of a bf16's bits (exact).
func (e *emitter) bf16ToF32(bits uint32) uint32 {
	return e.floatOf(e.op(opShiftLeftLogical, e.u32(), bits, e.cu32(16)))
}

// binaryF16 lowers the f16 operators.
func (e *emitter) binaryF16(op ir.BinaryOp, a, b uint32) (uint32, error) {
	switch op {
	case ir.OpAdd, ir.OpSub, ir.OpMul:
		return e.hop(f32Arith[op], a, b), nil
	case ir.OpDiv:
		return e.narrow(e.fdiv(e.widen(a), e.widen(b))), nil
	case ir.OpMin, ir.OpMax:
		return e.hminmax(op == ir.OpMin, a, b), nil
	}
	if opcode, ok := f32Compare[op]; ok {
		return e.op(opcode, e.bool(), e.widen(a), e.widen(b)), nil
	}
	return 0, unsupported("binary operator "+op.String(), ir.F16)
}

// hop is an f16 arithmetic instruction decorated NoContraction.
func (e *emitter) hop(opcode, a, b uint32) uint32 {
	id := e.op(opcode, e.f16(), a, b)
	e.decorate(id, decorationNoContraction)
	return id
}

// hminmax is min or max of two f16 with fminmax's rules, on the bits moved to
// the top half of a u32, where they order as f32 bits do.
func (e *emitter) hminmax(isMin bool, x, y uint32) uint32 {
	u := e.u32()
	top := func(v uint32) uint32 { return e.op(opShiftLeftLogical, u, e.bits16(v), e.cu32(16)) }
	nan := func(bits uint32) uint32 {
		mag := e.op(opBitwiseAnd, u, bits, e.cu32(f32AbsMask))
		return e.op(opUGreaterThan, e.bool(), mag, e.cu32(f16Infinity<<16))
	}
	r := e.minmaxBits(isMin, top(x), top(y), nan)
	return e.half16(e.op(opShiftRightLogical, u, r, e.cu32(16)))
}

// unaryF16 lowers the f16 unary operators: neg and abs on the bits, sqrt in f32.
func (e *emitter) unaryF16(op ir.UnaryOp, x uint32) (uint32, error) {
	u := e.u32()
	switch op {
	case ir.OpNeg:
		return e.half16(e.op(opBitwiseXor, u, e.bits16(x), e.cu32(f16SignBit))), nil
	case ir.OpAbs:
		return e.half16(e.op(opBitwiseAnd, u, e.bits16(x), e.cu32(f16AbsMask))), nil
	case ir.OpSqrt:
		return e.narrow(e.ext(e.f32(), glslSqrt, e.widen(x))), nil
	}
	return 0, unsupported("unary operator "+op.String(), ir.F16)
}

// cast16 converts between f32 and f16 or bf16, the only casts IR v1.2 has for
// them.
func (e *emitter) cast16(from, to ir.Type, x uint32) (uint32, bool) {
	switch {
	case from == ir.F32 && to == ir.F16:
		return e.narrow(x), true
	case from == ir.F32 && to == ir.BF16:
		return e.f32ToBF16Bits(e.bitsOf(x)), true
	case from == ir.F16 && to == ir.F32:
		return e.widen(x), true
	case from == ir.BF16 && to == ir.F32:
		return e.bf16ToF32(x), true
	}
	return 0, false
}
