package ranges

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/kiln-dev/kiln/ir"
)

// Range is the closed interval [Lo, Hi] of 32-bit patterns in unsigned order.
// The zero Range is Unknown.
type Range struct {
	lo, hi uint32
	// set is false for Unknown, so the zero value claims nothing.
	set bool
}

// signBit is the i32 sign bit; x ^ signBit maps signed order onto unsigned order.
const signBit = 0x80000000

// Unknown is the range of every 32-bit pattern.
func Unknown() Range { return Range{} }

// Exact is the range holding v alone.
func Exact(v uint32) Range { return Range{lo: v, hi: v, set: true} }

// Between is [lo, hi]; it is Unknown when lo > hi or the interval holds every
// pattern.
func Between(lo, hi uint32) Range {
	if lo > hi || lo == 0 && hi == math.MaxUint32 {
		return Unknown()
	}
	return Range{lo: lo, hi: hi, set: true}
}

// Bool is the range of a bool: [0, 1] unless the value is known.
func Bool() Range { return Between(0, 1) }

// Lo is the least pattern in r.
func (r Range) Lo() uint32 { return r.lo }

// Hi is the greatest pattern in r.
func (r Range) Hi() uint32 {
	if !r.set {
		return math.MaxUint32
	}
	return r.hi
}

// Const returns the value of an exact range.
func (r Range) Const() (uint32, bool) { return r.lo, r.set && r.lo == r.hi }

// Known reports whether r is narrower than Unknown.
func (r Range) Known() bool { return r.set }

// Below reports whether every value in r is less than n (unsigned): an index in
// r is in bounds for n elements.
func (r Range) Below(n uint32) bool { return r.set && r.hi < n }

// Contains reports whether v lies in r.
func (r Range) Contains(v uint32) bool { return r.lo <= v && v <= r.Hi() }

// String writes r as [lo, hi], or "unknown".
func (r Range) String() string {
	if !r.set {
		return "unknown"
	}
	return fmt.Sprintf("[%d, %d]", r.lo, r.hi)
}

// Union is the least range holding both a and b (a select's result).
func Union(a, b Range) Range {
	if !a.set || !b.set {
		return Unknown()
	}
	return Between(min(a.lo, b.lo), max(a.hi, b.hi))
}

// Select is the range of cond ? a : b for a bool cond in the range cond.
func Select(cond, a, b Range) Range {
	if v, ok := truth(cond); ok {
		if v {
			return a
		}
		return b
	}
	return Union(a, b)
}

// truth is the known value of a bool range.
func truth(r Range) (value, known bool) {
	switch {
	case r.set && r.hi == 0:
		return false, true
	case r.set && r.lo >= 1:
		return true, true
	}
	return false, false
}

// boolRange is the range of a comparison's result: exact when known.
func boolRange(v, known bool) Range {
	switch {
	case !known:
		return Bool()
	case v:
		return Exact(1)
	}
	return Exact(0)
}

// block makes [lo, hi], two 64-bit sums or differences, a range when both lie in
// the same 2^32 block, where taking them mod 2^32 keeps their order; otherwise
// the result may have wrapped between them and is Unknown.
func block(lo, hi int64) Range {
	if lo>>32 != hi>>32 {
		return Unknown()
	}
	return Between(uint32(lo), uint32(hi))
}

// biased maps an i32 range onto the unsigned order of x ^ signBit, in which
// signed comparisons are unsigned ones; a range straddling 0x7FFFFFFF and
// 0x80000000 (from non-negative to negative) has no interval image and is
// Unknown. It is its own inverse.
func biased(r Range) Range {
	if !r.set || r.lo < signBit && r.hi >= signBit {
		return Unknown()
	}
	return Between(r.lo^signBit, r.hi^signBit)
}

// nonNegative reports whether every i32 in r is at least 0, where i32 and u32
// operators agree.
func nonNegative(r Range) bool { return r.set && r.hi < signBit }

// ones is the least 2^k - 1 at or above x.
func ones(x uint32) uint32 { return uint32(1<<bits.Len32(x) - 1) }

// ordered is the range of r in the order of type t: biased for i32.
func ordered(t ir.Type, r Range) Range {
	if t == ir.I32 {
		return biased(r)
	}
	return r
}

// Binary is the range of x op y for x in a and y in b, operands of type t (the
// result is bool for comparisons, land and lor). f32 arithmetic is Unknown.
func Binary(op ir.BinaryOp, t ir.Type, a, b Range) Range {
	if t == ir.F32 {
		if op.IsComparison() {
			return Bool()
		}
		return Unknown()
	}
	if x, ok := a.Const(); ok {
		if y, ok := b.Const(); ok {
			if v, ok := Eval(op, t, x, y); ok {
				return Exact(v)
			}
		}
	}
	if t == ir.Bool {
		return binaryBool(op, a, b)
	}
	switch op {
	case ir.OpAdd:
		if !a.set || !b.set {
			return Unknown()
		}
		return block(int64(a.lo)+int64(b.lo), int64(a.hi)+int64(b.hi))
	case ir.OpSub:
		if !a.set || !b.set {
			return Unknown()
		}
		return block(int64(a.lo)-int64(b.hi), int64(a.hi)-int64(b.lo))
	case ir.OpMul:
		if uint64(a.Hi())*uint64(b.Hi()) > math.MaxUint32 {
			return Unknown()
		}
		return Between(a.lo*b.lo, a.Hi()*b.Hi())
	case ir.OpDiv, ir.OpRem:
		if t == ir.I32 && (!nonNegative(a) || !nonNegative(b)) {
			return Unknown()
		}
		if op == ir.OpDiv {
			return divide(a, b)
		}
		return remainder(a, b)
	case ir.OpMin, ir.OpMax:
		x, y := ordered(t, a), ordered(t, b)
		r := Between(min(x.lo, y.lo), min(x.Hi(), y.Hi()))
		if op == ir.OpMax {
			r = Between(max(x.lo, y.lo), max(x.Hi(), y.Hi()))
		}
		return ordered(t, r)
	case ir.OpAnd:
		return Between(0, min(a.Hi(), b.Hi()))
	case ir.OpOr:
		return Between(max(a.lo, b.lo), ones(max(a.Hi(), b.Hi())))
	case ir.OpXor:
		return Between(0, ones(max(a.Hi(), b.Hi())))
	case ir.OpShl, ir.OpShr:
		return shift(op, t, a, b)
	case ir.OpEq, ir.OpNe:
		disjoint := a.set && b.set && (a.hi < b.lo || b.hi < a.lo)
		return boolRange(op == ir.OpNe, disjoint)
	case ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe:
		return compare(op, ordered(t, a), ordered(t, b))
	}
	return Unknown()
}

// divide is the unsigned quotient's range, with x / 0 = 0.
func divide(a, b Range) Range {
	switch {
	case b.set && b.hi == 0:
		return Exact(0)
	case b.lo == 0:
		// x / y <= x for y >= 1, and x / 0 = 0.
		return Between(0, a.Hi())
	}
	return Between(a.lo/b.Hi(), a.Hi()/b.lo)
}

// remainder is the unsigned remainder's range, with x % 0 = 0.
func remainder(a, b Range) Range {
	switch {
	case b.set && b.hi == 0:
		return Exact(0)
	case b.lo > 0 && a.Hi() < b.lo:
		// x < y: x % y = x.
		return a
	}
	return Between(0, min(a.Hi(), b.Hi()-1))
}

// shift is the range of a shl or shr, whose amount is taken mod 32.
func shift(op ir.BinaryOp, t ir.Type, a, b Range) Range {
	s := Between(0, 31)
	if b.set && b.lo>>5 == b.hi>>5 {
		s = Between(b.lo&31, b.hi&31)
	}
	if op == ir.OpShl {
		if uint64(a.Hi())<<s.hi > math.MaxUint32 {
			return Unknown()
		}
		return Between(a.lo<<s.lo, a.Hi()<<s.hi)
	}
	if t == ir.I32 && !nonNegative(a) {
		return Unknown()
	}
	return Between(a.lo>>s.hi, a.Hi()>>s.lo)
}

// compare decides an ordering comparison of ranges in unsigned order.
func compare(op ir.BinaryOp, a, b Range) Range {
	switch op {
	case ir.OpLt:
		return compare(ir.OpGt, b, a)
	case ir.OpLe:
		return compare(ir.OpGe, b, a)
	case ir.OpGt:
		// a > b for sure when a.lo > b.hi; never when a.hi <= b.lo.
		switch {
		case a.set && b.set && a.lo > b.hi:
			return Exact(1)
		case a.Hi() <= b.lo:
			return Exact(0)
		}
	case ir.OpGe:
		switch {
		case a.lo >= b.Hi():
			return Exact(1)
		case a.set && b.set && a.hi < b.lo:
			return Exact(0)
		}
	}
	return Bool()
}

// binaryBool is the range of a bool operator with operands not both known.
func binaryBool(op ir.BinaryOp, a, b Range) Range {
	x, xk := truth(a)
	y, yk := truth(b)
	switch op {
	case ir.OpLAnd:
		if xk && !x || yk && !y {
			return Exact(0)
		}
	case ir.OpLOr:
		if xk && x || yk && y {
			return Exact(1)
		}
	}
	return Bool()
}

// Unary is the range of op x for x in a of type t. f32 operators are Unknown.
func Unary(op ir.UnaryOp, t ir.Type, a Range) Range {
	if x, ok := a.Const(); ok {
		if v, ok := EvalUnary(op, t, x); ok {
			return Exact(v)
		}
	}
	switch {
	case t == ir.Bool && op == ir.OpNot:
		return Bool()
	case !t.IsInteger():
		return Unknown()
	}
	switch op {
	case ir.OpNeg:
		return Binary(ir.OpSub, t, Exact(0), a)
	case ir.OpNot:
		if !a.set {
			return Unknown()
		}
		return Between(^a.hi, ^a.lo)
	case ir.OpAbs:
		switch {
		case t != ir.I32:
		case nonNegative(a):
			return a
		case a.lo > signBit:
			// All negative and none MIN: abs is -x, in [-hi, -lo].
			return Between(-a.hi, -a.lo)
		}
	case ir.OpClz:
		return Between(uint32(bits.LeadingZeros32(a.Hi())), uint32(bits.LeadingZeros32(a.lo)))
	case ir.OpPopcount:
		lo := uint32(0)
		if a.lo > 0 {
			lo = 1
		}
		return Between(lo, uint32(bits.Len32(a.Hi())))
	}
	return Unknown()
}

// Cast is the range of a cast from type from to type to of a value in a: i32 and
// u32 keep the bits, bool becomes 0 or 1 and an integer becomes x != 0; a
// conversion from or to f32 is Unknown.
func Cast(from, to ir.Type, a Range) Range {
	switch {
	case from == to, from.IsInteger() && to.IsInteger():
		return a
	case from == ir.Bool && to.IsInteger():
		if v, ok := truth(a); ok {
			return boolRange(v, true)
		}
		return Bool()
	case from.IsInteger() && to == ir.Bool:
		return Binary(ir.OpNe, from, a, Exact(0))
	}
	return Unknown()
}

// Loop is the range of the variable of a for loop of type t (u32 or i32) inside
// its body, where from, to and step are the ranges of its bounds. The body runs
// only while var < to (signed for i32), so var stays below to's largest value;
// when var + step cannot wrap past it, var also never drops below from's least
// value. A loop whose body can never run gets Unknown. For i32 the same holds in
// the biased order (var ^ 0x80000000), where adding step's bits is the same
// wrapping add and the signed compare is unsigned.
func Loop(t ir.Type, from, to, step Range) Range {
	switch t {
	case ir.U32:
		return loopU32(from, to, step)
	case ir.I32:
		return biased(loopU32(biased(from), biased(to), step))
	}
	return Unknown()
}

func loopU32(from, to, step Range) Range {
	if to.set && to.hi == 0 {
		return Unknown()
	}
	last := to.Hi() - 1
	if uint64(last)+uint64(step.Hi()) > math.MaxUint32 {
		return Between(0, last)
	}
	return Between(from.lo, last)
}

// Assigned returns the names of the vars some assign statement in stmts (or in
// their nested blocks) sets. A var not among them keeps its initial value, and
// so its initial value's range.
func Assigned(stmts []ir.Stmt) map[string]bool {
	names := map[string]bool{}
	var walk func([]ir.Stmt)
	walk = func(stmts []ir.Stmt) {
		for _, s := range stmts {
			switch s := s.(type) {
			case ir.AssignStmt:
				names[s.Name] = true
			case ir.IfStmt:
				walk(s.Then)
				walk(s.Else)
			case ir.ForStmt:
				walk(s.Body)
			case ir.WhileStmt:
				walk(s.Body)
			}
		}
	}
	walk(stmts)
	return names
}

// Trips runs the variable of a for loop of type t over constant bounds as the
// loop would (compare, signed for i32, then a wrapping add) and returns how many
// iterations it makes, or false when that is more than limit.
func Trips(t ir.Type, from, to, step uint32, limit int) (int, bool) {
	less := func(v uint32) bool {
		if t == ir.I32 {
			return int32(v) < int32(to)
		}
		return v < to
	}
	n := 0
	for v := from; less(v); v += step {
		if n++; n > limit {
			return 0, false
		}
	}
	return n, true
}
