package ranges

import (
	"math/bits"

	"github.com/kiln-dev/kiln/ir"
)

// Eval computes x op y for constants of type t (i32, u32 or bool) with the IR's
// exact semantics; ok is false for f32 and for operators the type lacks.
func Eval(op ir.BinaryOp, t ir.Type, x, y uint32) (v uint32, ok bool) {
	b := func(c bool) (uint32, bool) {
		if c {
			return 1, true
		}
		return 0, true
	}
	if t == ir.Bool {
		p, q := x&1 != 0, y&1 != 0
		switch op {
		case ir.OpLAnd:
			return b(p && q)
		case ir.OpLOr:
			return b(p || q)
		case ir.OpEq:
			return b(p == q)
		case ir.OpNe:
			return b(p != q)
		}
		return 0, false
	}
	if !t.IsInteger() {
		return 0, false
	}
	signed := t == ir.I32
	less := x < y
	if signed {
		less = int32(x) < int32(y)
	}
	switch op {
	case ir.OpAdd:
		return x + y, true
	case ir.OpSub:
		return x - y, true
	case ir.OpMul:
		return x * y, true
	case ir.OpDiv:
		switch {
		case y == 0:
			return 0, true
		case signed && y == ^uint32(0):
			return -x, true // MIN / -1 = MIN
		case signed:
			return uint32(int32(x) / int32(y)), true
		}
		return x / y, true
	case ir.OpRem:
		switch {
		case y == 0, signed && y == ^uint32(0):
			return 0, true
		case signed:
			return uint32(int32(x) % int32(y)), true
		}
		return x % y, true
	case ir.OpMin:
		if less {
			return x, true
		}
		return y, true
	case ir.OpMax:
		if less {
			return y, true
		}
		return x, true
	case ir.OpAnd:
		return x & y, true
	case ir.OpOr:
		return x | y, true
	case ir.OpXor:
		return x ^ y, true
	case ir.OpShl:
		return x << (y & 31), true
	case ir.OpShr:
		if signed {
			return uint32(int32(x) >> (y & 31)), true
		}
		return x >> (y & 31), true
	case ir.OpEq:
		return b(x == y)
	case ir.OpNe:
		return b(x != y)
	case ir.OpLt:
		return b(less)
	case ir.OpLe:
		return b(less || x == y)
	case ir.OpGt:
		return b(!less && x != y)
	case ir.OpGe:
		return b(!less)
	}
	return 0, false
}

// EvalUnary computes op x for a constant of type t (i32, u32 or bool) with the
// IR's exact semantics; ok is false for f32 and for operators the type lacks.
func EvalUnary(op ir.UnaryOp, t ir.Type, x uint32) (v uint32, ok bool) {
	if t == ir.Bool {
		if op == ir.OpNot {
			return (x & 1) ^ 1, true
		}
		return 0, false
	}
	if !t.IsInteger() {
		return 0, false
	}
	switch op {
	case ir.OpNeg:
		return -x, true
	case ir.OpNot:
		return ^x, true
	case ir.OpAbs:
		if t == ir.I32 && int32(x) < 0 {
			return -x, true // abs(MIN) = MIN
		}
		if t == ir.I32 {
			return x, true
		}
	case ir.OpClz:
		return uint32(bits.LeadingZeros32(x)), true
	case ir.OpPopcount:
		return uint32(bits.OnesCount32(x)), true
	}
	return 0, false
}
