package interp

import (
	"math"
	"math/bits"

	"github.com/kiln-dev/kiln/ir"
)

// A lane loop computes one operation for a run of lanes: d[i] = op(x[i], y[i]). The
// slices all have the same length (the caller slices them to the lane range). The
// frequent operations have their own loop; the rest go through a scalar function.

type binLoop func(d, x, y []uint32)

type unLoop func(d, x []uint32)

func addInt(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a + y[i]
	}
}

func subInt(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a - y[i]
	}
}

func mulInt(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a * y[i]
	}
}

func addF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(f32(a) + f32(y[i]))
	}
}

func subF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(f32(a) - f32(y[i]))
	}
}

func mulF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(f32(a) * f32(y[i]))
	}
}

func divF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(f32(a) / f32(y[i]))
	}
}

func andBits(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a & y[i]
	}
}

func orBits(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a | y[i]
	}
}

func xorBits(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a ^ y[i]
	}
}

func shlInt(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a << (y[i] & 31)
	}
}

func shrU32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = a >> (y[i] & 31)
	}
}

func shrI32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = uint32(int32(a) >> (y[i] & 31))
	}
}

func eqBits(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(a == y[i])
	}
}

func neBits(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(a != y[i])
	}
}

func eqF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(f32(a) == f32(y[i]))
	}
}

func neF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(f32(a) != f32(y[i]))
	}
}

func ltU32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(a < y[i])
	}
}

func leU32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(a <= y[i])
	}
}

func ltI32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(int32(a) < int32(y[i]))
	}
}

func leI32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(int32(a) <= int32(y[i]))
	}
}

func ltF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(f32(a) < f32(y[i]))
	}
}

func leF32(d, x, y []uint32) {
	y, d = y[:len(x)], d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(f32(a) <= f32(y[i]))
	}
}

// swapped turns lt into gt and le into ge: x > y is y < x.
func swapped(f binLoop) binLoop {
	return func(d, x, y []uint32) { f(d, y, x) }
}

// scalarBin builds a lane loop from a scalar operation.
func scalarBin(op func(x, y uint32) uint32) binLoop {
	return func(d, x, y []uint32) {
		y, d = y[:len(x)], d[:len(x)]
		for i, a := range x {
			d[i] = op(a, y[i])
		}
	}
}

func minI32(x, y uint32) uint32 {
	if int32(x) < int32(y) {
		return x
	}
	return y
}

func maxI32(x, y uint32) uint32 {
	if int32(x) > int32(y) {
		return x
	}
	return y
}

// binaryLoop returns the lane loop of op on operands of type t, or nil when IR v1
// does not define op on t.
func binaryLoop(op ir.BinaryOp, t ir.Type) binLoop {
	isInt := t.IsInteger()
	switch {
	case t == ir.F32:
		return binaryF32(op)
	case t == ir.F16:
		return binaryF16(op)
	case t == ir.BF16:
		return nil // bf16 is a storage type
	case isInt:
		if f := binaryInt(op, t == ir.I32); f != nil {
			return f
		}
	}
	switch op {
	case ir.OpEq:
		return eqBits
	case ir.OpNe:
		return neBits
	case ir.OpLAnd:
		if t == ir.Bool {
			return andBits
		}
	case ir.OpLOr:
		if t == ir.Bool {
			return orBits
		}
	}
	return nil
}

func binaryF32(op ir.BinaryOp) binLoop {
	switch op {
	case ir.OpAdd:
		return addF32
	case ir.OpSub:
		return subF32
	case ir.OpMul:
		return mulF32
	case ir.OpDiv:
		return divF32
	case ir.OpMin:
		return scalarBin(minF32)
	case ir.OpMax:
		return scalarBin(maxF32)
	case ir.OpEq:
		return eqF32
	case ir.OpNe:
		return neF32
	case ir.OpLt:
		return ltF32
	case ir.OpLe:
		return leF32
	case ir.OpGt:
		return swapped(ltF32)
	case ir.OpGe:
		return swapped(leF32)
	}
	return nil
}

func binaryInt(op ir.BinaryOp, signed bool) binLoop {
	switch op {
	case ir.OpAdd:
		return addInt
	case ir.OpSub:
		return subInt
	case ir.OpMul:
		return mulInt
	case ir.OpAnd:
		return andBits
	case ir.OpOr:
		return orBits
	case ir.OpXor:
		return xorBits
	case ir.OpShl:
		return shlInt
	}
	if signed {
		switch op {
		case ir.OpDiv:
			return scalarBin(divI32)
		case ir.OpRem:
			return scalarBin(remI32)
		case ir.OpMin:
			return scalarBin(minI32)
		case ir.OpMax:
			return scalarBin(maxI32)
		case ir.OpShr:
			return shrI32
		case ir.OpLt:
			return ltI32
		case ir.OpLe:
			return leI32
		case ir.OpGt:
			return swapped(ltI32)
		case ir.OpGe:
			return swapped(leI32)
		}
		return nil
	}
	switch op {
	case ir.OpDiv:
		return scalarBin(divU32)
	case ir.OpRem:
		return scalarBin(remU32)
	case ir.OpMin:
		return scalarBin(func(x, y uint32) uint32 { return min(x, y) })
	case ir.OpMax:
		return scalarBin(func(x, y uint32) uint32 { return max(x, y) })
	case ir.OpShr:
		return shrU32
	case ir.OpLt:
		return ltU32
	case ir.OpLe:
		return leU32
	case ir.OpGt:
		return swapped(ltU32)
	case ir.OpGe:
		return swapped(leU32)
	}
	return nil
}

// scalarUn builds a lane loop from a scalar operation.
func scalarUn(op func(x uint32) uint32) unLoop {
	return func(d, x []uint32) {
		d = d[:len(x)]
		for i, a := range x {
			d[i] = op(a)
		}
	}
}

// xorConst flips the bits of k in every lane: f32 neg (k = sign bit), bool not
// (k = 1) and integer not (k = all ones).
func xorConst(k uint32) unLoop {
	return func(d, x []uint32) {
		d = d[:len(x)]
		for i, a := range x {
			d[i] = a ^ k
		}
	}
}

func negInt(d, x []uint32) {
	d = d[:len(x)]
	for i, a := range x {
		d[i] = -a
	}
}

func absF32(d, x []uint32) {
	d = d[:len(x)]
	for i, a := range x {
		d[i] = a &^ signBit
	}
}

// absI32 keeps abs(MIN) = MIN (the negation wraps).
func absI32(x uint32) uint32 {
	if int32(x) < 0 {
		return -x
	}
	return x
}

// unaryLoop returns the lane loop of op on an operand of type t, or nil when IR v1
// does not define op on t.
func unaryLoop(op ir.UnaryOp, t ir.Type) unLoop {
	switch t {
	case ir.F16:
		return unaryF16(op)
	case ir.BF16:
		return nil // bf16 is a storage type
	}
	switch op {
	case ir.OpNeg:
		switch {
		case t == ir.F32:
			return xorConst(signBit)
		case t.IsInteger():
			return negInt
		}
	case ir.OpNot:
		switch {
		case t == ir.Bool:
			return xorConst(1)
		case t.IsInteger():
			return xorConst(math.MaxUint32)
		}
	case ir.OpAbs:
		switch t {
		case ir.F32:
			return absF32
		case ir.I32:
			return scalarUn(absI32)
		}
	case ir.OpClz:
		if t.IsInteger() {
			return scalarUn(func(x uint32) uint32 { return uint32(bits.LeadingZeros32(x)) })
		}
		return nil
	case ir.OpPopcount:
		if t.IsInteger() {
			return scalarUn(func(x uint32) uint32 { return uint32(bits.OnesCount32(x)) })
		}
		return nil
	}
	if t != ir.F32 {
		return nil
	}
	var f func(float64) float64
	switch op {
	case ir.OpSqrt:
		f = math.Sqrt
	case ir.OpExp:
		f = math.Exp
	case ir.OpLog:
		f = math.Log
	case ir.OpSin:
		f = math.Sin
	case ir.OpCos:
		f = math.Cos
	case ir.OpFloor:
		f = math.Floor
	case ir.OpCeil:
		f = math.Ceil
	case ir.OpTrunc:
		f = math.Trunc
	case ir.OpRound:
		f = math.RoundToEven
	default:
		return nil
	}
	return scalarUn(func(x uint32) uint32 { return f32Unary(f, x) })
}

func i32ToF32(d, x []uint32) {
	d = d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(float32(int32(a)))
	}
}

func u32ToF32(d, x []uint32) {
	d = d[:len(x)]
	for i, a := range x {
		d[i] = bitsOf(float32(a))
	}
}

func intToBool(d, x []uint32) {
	d = d[:len(x)]
	for i, a := range x {
		d[i] = boolBits(a != 0)
	}
}

// castLoop returns the lane loop converting from to to. identity is true when the
// bits do not change (same type, i32 and u32 reinterpretation, bool to an integer);
// ok is false for a cast the IR rejects.
func castLoop(from, to ir.Type) (f unLoop, identity, ok bool) {
	if from != to && (from.Is16Bit() || to.Is16Bit()) {
		f, ok := cast16(from, to)
		return f, false, ok
	}
	switch {
	case from == to, from.IsInteger() && to.IsInteger(), from == ir.Bool && to.IsInteger():
		return nil, true, from.Valid()
	case to == ir.Bool && from.IsInteger():
		return intToBool, false, true
	case to == ir.F32 && from == ir.I32:
		return i32ToF32, false, true
	case to == ir.F32 && from == ir.U32:
		return u32ToF32, false, true
	case from == ir.F32 && to == ir.I32:
		return scalarUn(f32ToI32), false, true
	case from == ir.F32 && to == ir.U32:
		return scalarUn(f32ToU32), false, true
	}
	return nil, false, false
}

func selectLanes(d, c, a, b []uint32) {
	a, b, d = a[:len(c)], b[:len(c)], d[:len(c)]
	for i, v := range c {
		if v != 0 {
			d[i] = a[i]
		} else {
			d[i] = b[i]
		}
	}
}

func fmaLanes(d, a, b, c []uint32) {
	b, c, d = b[:len(a)], c[:len(a)], d[:len(a)]
	for i, v := range a {
		d[i] = fmaF32(v, b[i], c[i])
	}
}
