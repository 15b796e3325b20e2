package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
)

// Expressions never branch: every IR v1 rule is done with selects, so an expression
// is straight-line code in the current block.

// f32 bit patterns the emitter tests against.
const (
	f32SignBit  = 0x80000000
	f32AbsMask  = 0x7fffffff
	f32Infinity = 0x7f800000
	f32Two126   = 0x7e800000 // 2^126, the top of Vulkan's OpFDiv precision range
)

func (e *emitter) expr(x ir.Expr) (value, error) {
	switch x := x.(type) {
	case ir.Literal:
		return e.literal(x), nil
	case ir.LocalRef:
		l, ok := e.scopes.Lookup(x.Name)
		if !ok {
			return value{}, fmt.Errorf("local %q is not in scope. Fix: declare it with let or var before this use", x.Name)
		}
		if l.variable {
			if c, ok := l.rng.Const(); ok {
				// A var no assign sets, holding a constant.
				return e.literal(ir.Literal{Type: l.t, Bits: c}), nil
			}
			t := e.scalar(l.t)
			return value{id: e.op(opLoad, t, l.id), t: l.t, rng: l.rng}, nil
		}
		return l.value, nil
	case ir.ParamRef:
		p, ok := e.params[x.Name]
		if !ok {
			return value{}, fmt.Errorf("parameter %q is not declared. Fix: declare it in params", x.Name)
		}
		return p, nil
	case ir.BuiltinRef:
		id, err := e.builtin(x.Kind, x.Axis)
		return e.ranged(value{id: id, t: ir.U32}, e.builtinRange(x.Kind, x.Axis)), err
	case ir.LoadExpr:
		return e.load(x)
	case ir.LenExpr:
		a, ok := e.arrays[x.Buffer]
		if !ok || a.shared {
			return value{}, fmt.Errorf("len: %q is not a buffer. Fix: use len on a buffer", x.Buffer)
		}
		return value{id: e.count(a), t: ir.U32}, nil
	case ir.UnaryExpr:
		return e.unary(x)
	case ir.BinaryExpr:
		return e.binary(x)
	case ir.FmaExpr:
		first, err := e.expr(x.A)
		if err != nil {
			return value{}, err
		}
		if first.t != ir.F16 && first.t != ir.F32 {
			return value{}, unsupported("fma", first.t)
		}
		args := [3]uint32{first.id}
		for i, a := range []ir.Expr{x.B, x.C} {
			id, err := e.typed(a, first.t, "an fma operand")
			if err != nil {
				return value{}, err
			}
			args[i+1] = id
		}
		if first.t == ir.F16 {
			// A rounded multiply, then an add: one of the two results IR v1.2
			// accepts for an f16 fma.
			return value{id: e.hop(opFAdd, e.hop(opFMul, args[0], args[1]), args[2]), t: ir.F16}, nil
		}
		return value{id: e.ext(e.f32(), glslFma, args[:]...), t: ir.F32}, nil
	case ir.SelectExpr:
		return e.selectExpr(x)
	case ir.CastExpr:
		return e.cast(x)
	case ir.BitcastExpr:
		return e.bitcast(x)
	case ir.UniformRef:
		return e.uniformValue(x.Name)
	case ir.SubgroupExpr:
		return e.subgroup(x)
	}
	return value{}, fmt.Errorf("expression %T has no SPIR-V form. Fix: build expressions with the ir package's types", x)
}

// ext calls a GLSL.std.450 instruction.
func (e *emitter) ext(resultType, inst uint32, args ...uint32) uint32 {
	return e.op(opExtInst, resultType, append([]uint32{e.glslSet(), inst}, args...)...)
}

// fop is an f32 arithmetic instruction decorated NoContraction, so no driver fuses
// it with a neighbour into an FMA.
func (e *emitter) fop(opcode, a, b uint32) uint32 {
	id := e.op(opcode, e.f32(), a, b)
	e.decorate(id, decorationNoContraction)
	return id
}

// sel is cond ? a : b. bools use OpSelect. f32 values are always blended on
// their bits (see blend), and i32 and u32 values are blended when neither is known
// to vary at run time (e.dynamic): Mesa's llvmpipe (22.3) rewrites an OpSelect of
// two constants by float patterns that take 0x80000000 for 0.0, so select(c,
// 0x80000000, 0x3f800000) gave 0 for a true c; an operand that only exists at run
// time keeps the select away from those patterns, and costs no blend on the hot
// paths (bounds checks select between a loaded value and 0).
func (e *emitter) sel(t, cond, a, b uint32) uint32 {
	switch {
	case t == e.bool():
		return e.op(opSelect, t, cond, a, b)
	case e.target.Float16 && t == e.f16():
		return e.half16(e.blend(e.u32(), cond, e.bits16(a), e.bits16(b)))
	case t == e.f32() || !e.dynamic[a] && !e.dynamic[b]:
		return e.blend(t, cond, a, b)
	}
	return e.op(opSelect, t, cond, a, b)
}

func (e *emitter) bitsOf(f uint32) uint32  { return e.op(opBitcast, e.u32(), f) }
func (e *emitter) floatOf(u uint32) uint32 { return e.op(opBitcast, e.f32(), u) }

// isNaN tests an f32's bits in the integer domain: Vulkan lets a driver assume that
// float operands are never NaN unless asked otherwise, but integer comparisons it
// must keep.
func (e *emitter) isNaN(bits uint32) uint32 {
	mag := e.op(opBitwiseAnd, e.u32(), bits, e.cu32(f32AbsMask))
	return e.op(opUGreaterThan, e.bool(), mag, e.cu32(f32Infinity))
}

// load reads target[index] from a clamped index (0 when out of bounds, an element
// that always exists: shared arrays have at least one element and the backend binds
// at least 4 bytes to every buffer) and selects 0 when index is out of bounds.
func (e *emitter) load(x ir.LoadExpr) (value, error) {
	a, err := e.lookupArray(x.Target, "load")
	if err != nil {
		return value{}, err
	}
	index, err := e.typedValue(x.Index, ir.U32, "the load index")
	if err != nil {
		return value{}, err
	}
	t := e.scalar(a.elem)
	r := ranges.Unknown()
	if a.elem == ir.Bool {
		r = ranges.Bool()
	}
	if e.provablyInBounds(a, index) {
		return value{id: e.loadFrom(a, index.id), t: a.elem, rng: r}, nil
	}
	zero := e.zero(a.elem)
	ok := e.inBounds(a, index.id)
	safe := e.sel(e.u32(), ok, index.id, e.cu32(0))
	v := e.loadFrom(a, safe)
	return value{id: e.sel(t, ok, v, zero), t: a.elem, rng: r}, nil
}

// loadFrom is the OpLoad of a[index], without a check, as a value: a bf16
// buffer's 16-bit element is widened to the u32 that holds a bf16 value.
func (e *emitter) loadFrom(a array, index uint32) uint32 {
	v := e.op(opLoad, e.memType(a), append([]uint32{e.elemPtr(a, index)}, access(a)...)...)
	if e.narrowBF16(a) {
		return e.op(opUConvert, e.u32(), v)
	}
	return v
}

func (e *emitter) selectExpr(x ir.SelectExpr) (value, error) {
	cond, err := e.typedValue(x.Cond, ir.Bool, "the select condition")
	if err != nil {
		return value{}, err
	}
	a, err := e.expr(x.A)
	if err != nil {
		return value{}, err
	}
	b, err := e.typedValue(x.B, a.t, "the select's second operand")
	if err != nil {
		return value{}, err
	}
	if c, ok := cond.rng.Const(); ok {
		if c != 0 {
			return a, nil
		}
		return b, nil
	}
	t := e.scalar(a.t)
	return e.ranged(value{id: e.sel(t, cond.id, a.id, b.id), t: a.t}, ranges.Select(cond.rng, a.rng, b.rng)), nil
}

// blend is cond ? a : b on a 32-bit type t, computed on the bits with a mask.
// NVIDIA's compiler turns an OpSelect of floats over their own comparison into
// fmin/fmax, which is wrong for NaN and signed zeros, and llvmpipe miscompiles
// some selects of constants (see sel); the bit blend is exact on every driver.
func (e *emitter) blend(t, cond, a, b uint32) uint32 {
	u := e.u32()
	bits := func(x uint32) uint32 {
		if t == u {
			return x
		}
		return e.op(opBitcast, u, x)
	}
	mask := e.op(opSelect, u, cond, e.cu32(0xFFFFFFFF), e.cu32(0))
	keepA := e.op(opBitwiseAnd, u, bits(a), mask)
	keepB := e.op(opBitwiseAnd, u, bits(b), e.op(opNot, u, mask))
	r := e.op(opBitwiseOr, u, keepA, keepB)
	if t == u {
		return r
	}
	return e.op(opBitcast, t, r)
}

func unsupported(what string, t ir.Type) error {
	return fmt.Errorf("%s on %s has no SPIR-V form. Fix: use an operand type the operator accepts (see the ir package's operator docs)", what, t)
}

func (e *emitter) unary(x ir.UnaryExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	if v.t == ir.F16 {
		id, err := e.unaryF16(x.Op, v.id)
		return value{id: id, t: v.t}, err
	}
	r := ranges.Unary(x.Op, v.t, v.rng)
	if c, ok := r.Const(); ok && !v.t.IsFloat() {
		return e.literal(ir.Literal{Type: v.t, Bits: c}), nil
	}
	t := e.scalar(v.t)
	out := func(id uint32) (value, error) { return e.ranged(value{id: id, t: v.t}, r), nil }
	switch {
	case x.Op == ir.OpNeg && v.t.IsInteger():
		return out(e.op(opSNegate, t, v.id))
	case x.Op == ir.OpNeg && v.t == ir.F32:
		return out(e.floatOf(e.op(opBitwiseXor, e.u32(), e.bitsOf(v.id), e.cu32(f32SignBit))))
	case x.Op == ir.OpNot && v.t == ir.Bool:
		return out(e.op(opLogicalNot, t, v.id))
	case x.Op == ir.OpNot && v.t.IsInteger():
		return out(e.op(opNot, t, v.id))
	case x.Op == ir.OpAbs && v.t == ir.I32:
		neg := e.op(opSLessThan, e.bool(), v.id, e.ci32(0))
		return out(e.sel(t, neg, e.op(opSNegate, t, v.id), v.id))
	case x.Op == ir.OpAbs && v.t == ir.F32:
		return out(e.floatOf(e.op(opBitwiseAnd, e.u32(), e.bitsOf(v.id), e.cu32(f32AbsMask))))
	case x.Op == ir.OpPopcount && v.t.IsInteger():
		return out(e.op(opBitCount, t, v.id))
	case x.Op == ir.OpClz && v.t.IsInteger():
		// FindUMsb is the index of the highest set bit, -1 (all ones) for 0, so
		// 31 - msb wraps to 32 for 0 and gives 0 for a negative i32.
		u := e.u32()
		msb := e.ext(u, glslFindUMsb, e.op(opBitcast, u, v.id))
		return out(e.op(opBitcast, t, e.op(opISub, u, e.cu32(31), msb)))
	case v.t == ir.F32:
		if inst, ok := f32UnaryExt[x.Op]; ok {
			return out(e.ext(t, inst, v.id))
		}
	}
	return value{}, unsupported("unary operator "+x.Op.String(), v.t)
}

func (e *emitter) binary(x ir.BinaryExpr) (value, error) {
	a, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	bv, err := e.typedValue(x.Y, a.t, "the second operand of "+x.Op.String())
	if err != nil {
		return value{}, err
	}
	rt := a.t
	if x.Op.IsComparison() {
		rt = ir.Bool
	}
	if a.t == ir.F16 {
		id, err := e.binaryF16(x.Op, a.id, bv.id)
		return value{id: id, t: rt}, err
	}
	r := ranges.Binary(x.Op, a.t, a.rng, bv.rng)
	if c, ok := r.Const(); ok && rt != ir.F32 {
		return e.literal(ir.Literal{Type: rt, Bits: c}), nil
	}
	if v, ok := identity(x.Op, a, bv); ok {
		return v, nil
	}
	b := bv.id
	t := e.scalar(a.t)
	var id uint32
	switch {
	case a.t == ir.U32 && (x.Op == ir.OpDiv || x.Op == ir.OpRem) && bv.rng.Lo() >= 1:
		// The divisor is never 0: OpUDiv and OpUMod give the IR's results.
		opcode := uint32(opUDiv)
		if x.Op == ir.OpRem {
			opcode = opUMod
		}
		id = e.op(opcode, t, a.id, b)
	case a.t == ir.Bool:
		id, err = e.binaryBool(x.Op, a.id, b)
	case a.t == ir.I32, a.t == ir.U32:
		id, err = e.binaryInt(x.Op, a.t, t, a.id, b)
	case a.t == ir.F32:
		id, err = e.binaryF32(x.Op, a.id, b)
	}
	if err != nil {
		return value{}, err
	}
	return e.ranged(value{id: id, t: rt}, r), nil
}

// identity simplifies x+0, 0+x, x-0, x*1 and 1*x on integers to x.
func identity(op ir.BinaryOp, a, b value) (value, bool) {
	is := func(v value, c uint32) bool {
		k, ok := v.rng.Const()
		return ok && k == c && v.t.IsInteger()
	}
	switch {
	case (op == ir.OpAdd || op == ir.OpSub) && is(b, 0), op == ir.OpMul && is(b, 1):
		return a, true
	case op == ir.OpAdd && is(a, 0), op == ir.OpMul && is(a, 1):
		return b, true
	}
	return value{}, false
}

func (e *emitter) binaryBool(op ir.BinaryOp, a, b uint32) (uint32, error) {
	opcode, ok := boolBinary[op]
	if !ok {
		return 0, unsupported("binary operator "+op.String(), ir.Bool)
	}
	return e.op(opcode, e.bool(), a, b), nil
}

// binaryInt lowers integer operators. Division and remainder never trap (a zero
// divisor gives 0) and avoid OpSDiv/OpSRem, whose results Vulkan leaves undefined
// for negative operands; shift amounts are masked to 0..31.
func (e *emitter) binaryInt(op ir.BinaryOp, it ir.Type, t, a, b uint32) (uint32, error) {
	signed := it == ir.I32
	pick := func(s, u uint32) uint32 {
		if signed {
			return s
		}
		return u
	}
	if opcode, ok := intBinary[op]; ok {
		return e.op(opcode, t, a, b), nil
	}
	if opcodes, ok := intCompare[op]; ok {
		return e.op(pick(opcodes[1], opcodes[0]), e.bool(), a, b), nil
	}
	switch op {
	case ir.OpDiv, ir.OpRem:
		if signed {
			return e.signedDivRem(op == ir.OpDiv, a, b), nil
		}
		return e.unsignedDivRem(op == ir.OpDiv, a, b), nil
	case ir.OpMin:
		return e.ext(t, pick(glslSMin, glslUMin), a, b), nil
	case ir.OpMax:
		return e.ext(t, pick(glslSMax, glslUMax), a, b), nil
	case ir.OpShl, ir.OpShr:
		mask := e.constant(ir.Literal{Type: it, Bits: 31})
		amount := e.op(opBitwiseAnd, t, b, mask)
		opcode := uint32(opShiftLeftLogical)
		if op == ir.OpShr {
			opcode = pick(opShiftRightArithmetic, opShiftRightLogical)
		}
		return e.op(opcode, t, a, amount), nil
	}
	return 0, unsupported("binary operator "+op.String(), it)
}

// unsignedDivRem divides by the divisor, or by 1 when it is 0; the quotient is then
// replaced by 0 (x % 1 is already 0).
func (e *emitter) unsignedDivRem(div bool, x, y uint32) uint32 {
	u := e.u32()
	isZero := e.op(opIEqual, e.bool(), y, e.cu32(0))
	d := e.sel(u, isZero, e.cu32(1), y)
	if !div {
		return e.op(opUMod, u, x, d)
	}
	return e.sel(u, isZero, e.cu32(0), e.op(opUDiv, u, x, d))
}

// signedDivRem works on magnitudes as u32 (|MIN| is 2^31, exact in u32) and puts the
// sign back: the quotient is negative when the signs differ, the remainder has the
// dividend's sign. MIN / -1 = 2^31 reinterpreted = MIN and MIN % -1 = 0 fall out of
// that; a zero divisor gives 0.
func (e *emitter) signedDivRem(div bool, x, y uint32) uint32 {
	u, i := e.u32(), e.i32()
	magnitude := func(v uint32) (neg, mag uint32) {
		neg = e.op(opSLessThan, e.bool(), v, e.ci32(0))
		return neg, e.op(opBitcast, u, e.sel(i, neg, e.op(opSNegate, i, v), v))
	}
	xNeg, ux := magnitude(x)
	yNeg, uy := magnitude(y)
	isZero := e.op(opIEqual, e.bool(), uy, e.cu32(0))
	d := e.sel(u, isZero, e.cu32(1), uy)
	if !div {
		r := e.op(opBitcast, i, e.op(opUMod, u, ux, d))
		return e.sel(i, xNeg, e.op(opSNegate, i, r), r)
	}
	q := e.op(opBitcast, i, e.op(opUDiv, u, ux, d))
	signed := e.sel(i, e.op(opLogicalNotEqual, e.bool(), xNeg, yNeg), e.op(opSNegate, i, q), q)
	return e.sel(i, isZero, e.ci32(0), signed)
}

// binaryF32 lowers f32 operators: arithmetic is NoContraction; comparisons are
// ordered except ne, which is unordered (true with a NaN operand).
func (e *emitter) binaryF32(op ir.BinaryOp, a, b uint32) (uint32, error) {
	if opcode, ok := f32Arith[op]; ok {
		return e.fop(opcode, a, b), nil
	}
	if opcode, ok := f32Compare[op]; ok {
		return e.op(opcode, e.bool(), a, b), nil
	}
	switch op {
	case ir.OpDiv:
		return e.fdiv(a, b), nil
	case ir.OpMin:
		return e.fminmax(true, a, b), nil
	case ir.OpMax:
		return e.fminmax(false, a, b), nil
	}
	return 0, unsupported("binary operator "+op.String(), ir.F32)
}

// fdiv keeps the divisor inside the range where Vulkan bounds OpFDiv's error
// (|y| <= 2^126): a larger divisor and the dividend are both scaled by 1/4 first,
// which is exact (up to denormals, which may flush anyway) and leaves the quotient
// unchanged. Without it a reciprocal-based divide returns 0 for x/y with both near
// the top of the f32 range.
func (e *emitter) fdiv(x, y uint32) uint32 {
	mag := e.op(opBitwiseAnd, e.u32(), e.bitsOf(y), e.cu32(f32AbsMask))
	big := e.op(opUGreaterThan, e.bool(), mag, e.cu32(f32Two126))
	scale := e.sel(e.f32(), big, e.cf32(0.25), e.cf32(1))
	return e.fop(opFDiv, e.fop(opFMul, x, scale), e.fop(opFMul, y, scale))
}

// fminmax gives min or max with IR v1's rules entirely on bit patterns, so that
// no driver assumption about NaN or signed zeros, and no compiler that recognizes
// a float min or max in the code (Mesa's llvmpipe turned the float-compare form
// into a wrong -0 for min(1, -0) of constants), can change it: a NaN operand
// yields the other operand (NaN when both are); otherwise the operands compare by
// orderedBits, in which -0 is below +0, so min(-0, +0) = -0 and max(-0, +0) = +0.
func (e *emitter) fminmax(isMin bool, x, y uint32) uint32 {
	return e.floatOf(e.minmaxBits(isMin, e.bitsOf(x), e.bitsOf(y), e.isNaN))
}

// minmaxBits is fminmax on the bits of two floats laid out as f32's (sign in
// bit 31, then the magnitude), with isNaN testing such bits.
func (e *emitter) minmaxBits(isMin bool, xb, yb uint32, isNaN func(uint32) uint32) uint32 {
	u := e.u32()
	xo, yo := e.orderedBits(xb), e.orderedBits(yb)
	takeY := e.op(opSLessThan, e.bool(), yo, xo)
	if !isMin {
		takeY = e.op(opSLessThan, e.bool(), xo, yo)
	}
	r := e.sel(u, takeY, yb, xb)
	r = e.sel(u, isNaN(yb), xb, r)
	return e.sel(u, isNaN(xb), yb, r)
}

// orderedBits maps the bits of a non-NaN f32 to an i32 that orders like the
// value, with -0 just below +0: a negative value's magnitude bits are flipped
// (bits ^ 0x7fffffff), a positive value's bits stay.
func (e *emitter) orderedBits(bits uint32) uint32 {
	return e.orderedI32(e.op(opBitcast, e.i32(), bits))
}

// orderedI32 is orderedBits on an i32 holding the bits; it is its own inverse.
func (e *emitter) orderedI32(s uint32) uint32 {
	i := e.i32()
	neg := e.op(opShiftRightArithmetic, i, s, e.ci32(31))
	return e.op(opBitwiseXor, i, s, e.op(opBitwiseAnd, i, neg, e.ci32(f32AbsMask)))
}

// cast converts with IR v1's rules: u32<->i32 keep the bits, bool<->int select 0/1
// and compare with 0, int->f32 converts (correctly rounded, see the package doc),
// f32->int truncates and saturates with NaN -> 0.
func (e *emitter) cast(x ir.CastExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	from := v.t
	if from == x.To {
		return v, nil
	}
	if from.Is16Bit() || x.To.Is16Bit() {
		if id, ok := e.cast16(from, x.To, v.id); ok {
			return value{id: id, t: x.To}, nil
		}
		return value{}, fmt.Errorf("cast from %s to %s has no SPIR-V form. Fix: cast f16 and bf16 only to and from f32", from, x.To)
	}
	r := ranges.Cast(from, x.To, v.rng)
	if c, ok := r.Const(); ok && x.To != ir.F32 {
		return e.literal(ir.Literal{Type: x.To, Bits: c}), nil
	}
	to := e.scalar(x.To)
	out := func(id uint32) (value, error) { return e.ranged(value{id: id, t: x.To}, r), nil }
	switch {
	case from.IsInteger() && x.To.IsInteger():
		return out(e.op(opBitcast, to, v.id))
	case from == ir.Bool && x.To.IsInteger():
		one := e.constant(ir.Literal{Type: x.To, Bits: 1})
		zero := e.zero(x.To)
		return out(e.sel(to, v.id, one, zero))
	case from.IsInteger() && x.To == ir.Bool:
		zero := e.zero(from)
		return out(e.op(opINotEqual, to, v.id, zero))
	case from == ir.I32 && x.To == ir.F32:
		return out(e.op(opConvertSToF, to, v.id))
	case from == ir.U32 && x.To == ir.F32:
		return out(e.op(opConvertUToF, to, v.id))
	case from == ir.F32 && x.To == ir.I32:
		return out(e.f32ToI32(v.id))
	case from == ir.F32 && x.To == ir.U32:
		return out(e.f32ToU32(v.id))
	}
	return value{}, fmt.Errorf("cast from %s to %s has no SPIR-V form. Fix: cast bool and f32 through u32", from, x.To)
}

// f32ToI32 converts only values inside (-2^31, 2^31), where truncation fits, and
// selects MAX at or above 2^31, MIN at or below -2^31 and 0 for NaN (tested on the
// bits, last, so it wins whatever the float comparisons make of a NaN).
func (e *emitter) f32ToI32(v uint32) uint32 {
	b, i := e.bool(), e.i32()
	nan := e.isNaN(e.bitsOf(v))
	hi := e.op(opFOrdGreaterThanEqual, b, v, e.cf32(1<<31))
	lo := e.op(opFOrdLessThanEqual, b, v, e.cf32(-(1 << 31)))
	outside := e.op(opLogicalOr, b, e.op(opLogicalOr, b, hi, lo), nan)
	c := e.op(opConvertFToS, i, e.sel(e.f32(), outside, e.cf32(0), v))
	r := e.sel(i, hi, e.ci32(1<<31-1), c)
	r = e.sel(i, lo, e.ci32(-1<<31), r)
	return e.sel(i, nan, e.ci32(0), r)
}

// f32ToU32 converts only values inside [0, 2^32), selects 0xFFFFFFFF at or above
// 2^32 and 0 below zero and for NaN (values in (-1, 0) truncate to 0 anyway).
func (e *emitter) f32ToU32(v uint32) uint32 {
	b, u := e.bool(), e.u32()
	nan := e.isNaN(e.bitsOf(v))
	hi := e.op(opFOrdGreaterThanEqual, b, v, e.cf32(1<<32))
	neg := e.op(opFOrdLessThan, b, v, e.cf32(0))
	outside := e.op(opLogicalOr, b, e.op(opLogicalOr, b, hi, neg), nan)
	c := e.op(opConvertFToU, u, e.sel(e.f32(), outside, e.cf32(0), v))
	r := e.sel(u, hi, e.cu32(0xFFFFFFFF), c)
	return e.sel(u, nan, e.cu32(0), r)
}

// bitcast reinterprets the bits of an i32, u32 or f32 as another of them.
func (e *emitter) bitcast(x ir.BitcastExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	if !v.t.IsNumeric() || !x.To.IsNumeric() {
		return value{}, fmt.Errorf("bitcast from %s to %s has no SPIR-V form. Fix: bitcast between i32, u32 and f32", v.t, x.To)
	}
	if v.t == x.To {
		return v, nil
	}
	r := ranges.Unknown()
	if v.t.IsInteger() && x.To.IsInteger() {
		r = v.rng
	}
	if c, ok := r.Const(); ok {
		return e.literal(ir.Literal{Type: x.To, Bits: c}), nil
	}
	t := e.scalar(x.To)
	return value{id: e.op(opBitcast, t, v.id), t: x.To, rng: r}, nil
}
