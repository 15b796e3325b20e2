package ptx

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
)

// Expressions never branch: every IR rule is done with predicates and selects, so
// an expression is straight-line code at the current point.

// f32 bit patterns and constants the emitter uses.
const (
	f32SignBit = 0x80000000
	f32AbsMask = 0x7FFFFFFF
	f32Log2E   = 0x3FB8AA3B // log2(e) rounded to f32
	f32Ln2     = 0x3F317218 // ln(2) rounded to f32
	f32Pi      = 0x40490FDB // π rounded to f32
	invTwoPi   = 0x3E22F983 // 1/(2π) rounded to f32
	// The three parts of 2π for the Cody-Waite reduction, 2π ≈ twoPi1 + twoPi2 +
	// twoPi3: twoPi1 = 6.28125 has 8 significant bits, so k·twoPi1 is exact for
	// every multiple k below 2^16; twoPi2 is 2π - twoPi1 rounded to f32 and twoPi3
	// what remains, rounded.
	twoPi1 = 0x40C90000
	twoPi2 = 0x3AFDAA22
	twoPi3 = 0x2D34611A
)

func (e *emitter) expr(x ir.Expr) (value, error) {
	switch x := x.(type) {
	case ir.Literal:
		if !x.Type.Valid() {
			return value{}, fmt.Errorf("literal of invalid type %d. Fix: use bool, i32, u32, f32, f16 or bf16", x.Type)
		}
		return e.constant(x), nil
	case ir.LocalRef:
		l, ok := e.scopes.Lookup(x.Name)
		if !ok {
			return value{}, fmt.Errorf("local %q is not in scope. Fix: declare it with let or var before this use", x.Name)
		}
		if l.variable {
			if l.konst {
				// A var never assigned, holding a constant.
				return l.value, nil
			}
			// Read in place: the instruction that uses the value comes before any
			// assignment, and what keeps it copies it (settle).
			return value{reg: l.reg, t: l.t, rng: l.rng, mutable: true}, nil
		}
		return l.value, nil
	case ir.UniformRef:
		v, ok := e.uniforms[x.Name]
		if !ok {
			return value{}, fmt.Errorf("uniform %q is not declared. Fix: declare it in uniforms", x.Name)
		}
		return v, nil
	case ir.BitcastExpr:
		v, err := e.expr(x.X)
		if err != nil {
			return value{}, err
		}
		if !v.t.IsNumeric() || !x.To.IsNumeric() {
			return value{}, fmt.Errorf("bitcast from %s to %s has no PTX form. Fix: bitcast between i32, u32 and f32", v.t, x.To)
		}
		// Every 32-bit value lives in a .b32 register: the bits are already there.
		r := ranges.Unknown()
		if v.t.IsInteger() && x.To.IsInteger() {
			r = v.rng
		}
		return e.ranged(value{reg: v.reg, t: x.To}, r), nil
	case ir.SubgroupExpr:
		return e.subgroup(x)
	case ir.ParamRef:
		l, ok := e.params[x.Name]
		if !ok {
			return value{}, fmt.Errorf("parameter %q is not declared. Fix: declare it in params", x.Name)
		}
		return e.constant(l), nil
	case ir.BuiltinRef:
		return e.builtinValue(x.Kind, x.Axis)
	case ir.LoadExpr:
		return e.load(x)
	case ir.LenExpr:
		a, ok := e.arrays[x.Buffer]
		if !ok || a.shared {
			return value{}, fmt.Errorf("len: %q is not a buffer. Fix: use len on a buffer", x.Buffer)
		}
		return value{reg: a.count, t: ir.U32}, nil
	case ir.UnaryExpr:
		return e.unary(x)
	case ir.BinaryExpr:
		return e.binary(x)
	case ir.FmaExpr:
		return e.fma(x)
	case ir.SelectExpr:
		return e.selectExpr(x)
	case ir.CastExpr:
		return e.cast(x)
	}
	return value{}, fmt.Errorf("expression %T has no PTX form. Fix: build expressions with the ir package's types", x)
}

// load reads target[index] through a predicated ld into a zeroed register, so an
// out-of-bounds load reads nothing and gives 0 (false for bool).
func (e *emitter) load(x ir.LoadExpr) (value, error) {
	a, err := e.target(x.Target, "load")
	if err != nil {
		return value{}, err
	}
	index, err := e.typedValue(x.Index, ir.U32, "the load index")
	if err != nil {
		return value{}, err
	}
	word := e.r()
	ok := e.guarded(e.inBounds(a, index))
	addr, space := e.address(a, index.reg)
	if a.nc {
		space = "global.nc"
	}
	// A 16-bit element is zero-extended into its .b32 register.
	kind := "b32"
	if a.elem.Is16Bit() {
		kind = "u16"
	}
	if ok == "" {
		e.inst("ld.%s.%s %s, [%s]", space, kind, word, addr)
	} else {
		e.inst("mov.b32 %s, 0", word)
		e.inst("@%s ld.%s.%s %s, [%s]", ok, space, kind, word, addr)
	}
	if a.elem == ir.Bool {
		p := e.p()
		e.inst("setp.ne.u32 %s, %s, 0", p, word)
		return value{reg: p, t: ir.Bool, rng: ranges.Bool()}, nil
	}
	return value{reg: word, t: a.elem}, nil
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
	if cond.konst {
		if cond.lit.Bits&1 != 0 {
			return a, nil
		}
		return b, nil
	}
	r := ranges.Select(cond.rng, a.rng, b.rng)
	if a.t == ir.Bool {
		return e.ranged(value{reg: e.selPred(cond.reg, a.reg, b.reg), t: ir.Bool}, r), nil
	}
	d := e.r()
	e.inst("selp.b32 %s, %s, %s, %s", d, a.reg, b.reg, cond.reg)
	return e.ranged(value{reg: d, t: a.t}, r), nil
}

// selPred is cond ? a : b on predicates: (cond and a) or (not cond and b).
func (e *emitter) selPred(cond, a, b string) string {
	t1, nc, t2, d := e.p(), e.p(), e.p(), e.p()
	e.inst("and.pred %s, %s, %s", t1, cond, a)
	e.inst("not.pred %s, %s", nc, cond)
	e.inst("and.pred %s, %s, %s", t2, nc, b)
	e.inst("or.pred %s, %s, %s", d, t1, t2)
	return d
}

func unsupported(what string, t ir.Type) error {
	return fmt.Errorf("%s on %s has no PTX form. Fix: use an operand type the operator accepts (see the ir package's operator docs)", what, t)
}

// op1 emits "opcode d, a" into a fresh .b32 register.
func (e *emitter) op1(opcode, a string) string {
	d := e.r()
	e.inst("%s %s, %s", opcode, d, a)
	return d
}

// op2 emits "opcode d, a, b" into a fresh .b32 register.
func (e *emitter) op2(opcode, a, b string) string {
	d := e.r()
	e.inst("%s %s, %s, %s", opcode, d, a, b)
	return d
}

// pred2 emits "setp.cmp d, a, b" into a fresh predicate.
func (e *emitter) pred2(cmp, a, b string) string {
	d := e.p()
	e.inst("setp.%s %s, %s, %s", cmp, d, a, b)
	return d
}

// sel emits "selp.b32 d, a, b, p" (p ? a : b).
func (e *emitter) sel(a, b, p string) string {
	d := e.r()
	e.inst("selp.b32 %s, %s, %s, %s", d, a, b, p)
	return d
}

func (e *emitter) unary(x ir.UnaryExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	r := ranges.Unknown()
	if !v.t.IsFloat() {
		r = ranges.Unary(x.Op, v.t, v.rng)
	}
	if c, ok := r.Const(); ok && !v.t.IsFloat() {
		return e.constant(ir.Literal{Type: v.t, Bits: c}), nil
	}
	out := func(reg string) (value, error) { return e.ranged(value{reg: reg, t: v.t}, r), nil }
	switch {
	case x.Op == ir.OpNeg && v.t.IsInteger():
		return out(e.op1("neg.s32", v.reg))
	case x.Op == ir.OpNeg && v.t == ir.F32:
		return out(e.op2("xor.b32", v.reg, hex(f32SignBit)))
	case x.Op == ir.OpNot && v.t == ir.Bool:
		d := e.p()
		e.inst("not.pred %s, %s", d, v.reg)
		return out(d)
	case x.Op == ir.OpNot && v.t.IsInteger():
		return out(e.op1("not.b32", v.reg))
	case x.Op == ir.OpAbs && v.t == ir.I32:
		neg := e.pred2("lt.s32", v.reg, "0")
		return out(e.sel(e.op1("neg.s32", v.reg), v.reg, neg))
	case x.Op == ir.OpAbs && v.t == ir.F32:
		return out(e.op2("and.b32", v.reg, hex(f32AbsMask)))
	case x.Op == ir.OpNeg && v.t == ir.F16:
		return out(e.op2("xor.b32", v.reg, hex(f16SignBit)))
	case x.Op == ir.OpAbs && v.t == ir.F16:
		return out(e.op2("and.b32", v.reg, hex(f16AbsMask)))
	case x.Op == ir.OpSqrt && v.t == ir.F16:
		return out(e.viaF32("sqrt.rn.f32", v.reg))
	case x.Op == ir.OpClz && v.t.IsInteger():
		return out(e.op1("clz.b32", v.reg))
	case x.Op == ir.OpPopcount && v.t.IsInteger():
		return out(e.op1("popc.b32", v.reg))
	case v.t == ir.F32:
		switch x.Op {
		case ir.OpSqrt:
			return out(e.op1("sqrt.rn.f32", v.reg))
		case ir.OpExp:
			return out(e.op1("ex2.approx.f32", e.op2("mul.rn.f32", v.reg, fimm(f32Log2E))))
		case ir.OpLog:
			return out(e.op2("mul.rn.f32", e.op1("lg2.approx.f32", v.reg), fimm(f32Ln2)))
		case ir.OpSin:
			return out(e.op1("sin.approx.f32", e.reduce(v.reg)))
		case ir.OpCos:
			return out(e.op1("cos.approx.f32", e.reduce(v.reg)))
		case ir.OpFloor:
			return out(e.op1("cvt.rmi.f32.f32", v.reg))
		case ir.OpCeil:
			return out(e.op1("cvt.rpi.f32.f32", v.reg))
		case ir.OpTrunc:
			return out(e.op1("cvt.rzi.f32.f32", v.reg))
		case ir.OpRound:
			return out(e.op1("cvt.rni.f32.f32", v.reg))
		}
	}
	return value{}, unsupported("unary operator "+x.Op.String(), v.t)
}

// reduce returns x when |x| <= π, and otherwise x - k·2π with k the nearest
// integer to x/2π, subtracted in three parts (Cody-Waite) so the result keeps its
// precision for |x| up to about 10^5.
func (e *emitter) reduce(x string) string {
	k := e.op1("cvt.rni.f32.f32", e.op2("mul.rn.f32", x, fimm(invTwoPi)))
	r := x
	for _, part := range []uint32{twoPi1, twoPi2, twoPi3} {
		d := e.r()
		e.inst("fma.rn.f32 %s, %s, %s, %s", d, k, fimm(part^f32SignBit), r)
		r = d
	}
	small := e.pred2("le.f32", e.op2("and.b32", x, hex(f32AbsMask)), fimm(f32Pi))
	return e.sel(x, r, small)
}

func (e *emitter) binary(x ir.BinaryExpr) (value, error) {
	a, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	b, err := e.expr(x.Y)
	if err != nil {
		return value{}, err
	}
	if b.t != a.t {
		return value{}, fmt.Errorf("the second operand of %s has type %s, want %s. Fix: run ir.Validate and correct the program", x.Op, b.t, a.t)
	}
	rt := a.t
	if x.Op.IsComparison() {
		rt = ir.Bool
	}
	// Ranges describe integers and bools: a float operation's result has none
	// (a comparison's is a bool's), and nothing about floats folds.
	r := ranges.Unknown()
	switch {
	case !a.t.IsFloat():
		r = ranges.Binary(x.Op, a.t, a.rng, b.rng)
	case rt == ir.Bool:
		r = ranges.Bool()
	}
	if c, ok := r.Const(); ok && !a.t.IsFloat() {
		return e.constant(ir.Literal{Type: rt, Bits: c}), nil
	}
	if a.t == ir.I32 || a.t == ir.U32 {
		if v, ok := e.simplifyInt(x.Op, a, b); ok {
			return v, nil
		}
	}
	if a.t == ir.Bool {
		if v, ok := e.simplifyBool(x.Op, a, b); ok {
			return v, nil
		}
	}
	var reg string
	switch {
	case (x.Op == ir.OpDiv || x.Op == ir.OpRem) && a.t.IsInteger() && plainDivisor(a.t, b.rng):
		reg = e.plainDivRem(x.Op == ir.OpDiv, a.t, a.reg, b)
	case a.t == ir.Bool:
		reg, err = e.binaryBool(x.Op, a.reg, b.reg)
	case a.t == ir.I32, a.t == ir.U32:
		reg, err = e.binaryInt(x.Op, a.t, a.reg, b.reg)
	case a.t == ir.F32:
		reg, err = e.binaryF32(x.Op, a.reg, b.reg)
	case a.t == ir.F16:
		reg, err = e.binaryF16(x.Op, a.reg, b.reg)
	default:
		err = unsupported("binary operator "+x.Op.String(), a.t)
	}
	if err != nil {
		return value{}, err
	}
	return e.ranged(value{reg: reg, t: rt}, r), nil
}

func (e *emitter) binaryBool(op ir.BinaryOp, a, b string) (string, error) {
	d := e.p()
	switch op {
	case ir.OpLAnd:
		e.inst("and.pred %s, %s, %s", d, a, b)
	case ir.OpLOr:
		e.inst("or.pred %s, %s, %s", d, a, b)
	case ir.OpNe:
		e.inst("xor.pred %s, %s, %s", d, a, b)
	case ir.OpEq:
		ne := d
		d = e.p()
		e.inst("xor.pred %s, %s, %s", ne, a, b)
		e.inst("not.pred %s, %s", d, ne)
	default:
		return "", unsupported("binary operator "+op.String(), ir.Bool)
	}
	return d, nil
}

// binaryInt lowers integer operators. Division and remainder never divide by zero
// or compute MIN / -1, whose PTX results are unspecified; shift amounts are
// masked to 0..31.
func (e *emitter) binaryInt(op ir.BinaryOp, t ir.Type, a, b string) (string, error) {
	sign := "u32"
	if t == ir.I32 {
		sign = "s32"
	}
	switch op {
	case ir.OpAdd:
		return e.op2("add.u32", a, b), nil
	case ir.OpSub:
		return e.op2("sub.u32", a, b), nil
	case ir.OpMul:
		return e.op2("mul.lo.u32", a, b), nil
	case ir.OpAnd:
		return e.op2("and.b32", a, b), nil
	case ir.OpOr:
		return e.op2("or.b32", a, b), nil
	case ir.OpXor:
		return e.op2("xor.b32", a, b), nil
	case ir.OpMin:
		return e.op2("min."+sign, a, b), nil
	case ir.OpMax:
		return e.op2("max."+sign, a, b), nil
	case ir.OpShl:
		return e.op2("shl.b32", a, e.op2("and.b32", b, "31")), nil
	case ir.OpShr:
		return e.op2("shr."+sign, a, e.op2("and.b32", b, "31")), nil
	case ir.OpEq:
		return e.pred2("eq.u32", a, b), nil
	case ir.OpNe:
		return e.pred2("ne.u32", a, b), nil
	case ir.OpLt:
		return e.pred2("lt."+sign, a, b), nil
	case ir.OpLe:
		return e.pred2("le."+sign, a, b), nil
	case ir.OpGt:
		return e.pred2("gt."+sign, a, b), nil
	case ir.OpGe:
		return e.pred2("ge."+sign, a, b), nil
	case ir.OpDiv, ir.OpRem:
		if t == ir.I32 {
			return e.signedDivRem(op == ir.OpDiv, a, b), nil
		}
		return e.unsignedDivRem(op == ir.OpDiv, a, b), nil
	}
	return "", unsupported("binary operator "+op.String(), t)
}

// plainDivisor reports whether a divisor in r is never 0 (nor, for i32, -1), so
// that div and rem need none of the replacements below: PTX's div and rem then
// give the IR's results.
func plainDivisor(t ir.Type, r ranges.Range) bool {
	if t == ir.I32 {
		return r.Lo() >= 1 && r.Hi() < ^uint32(0)
	}
	return r.Lo() >= 1
}

// plainDivRem is PTX's div or rem, for a divisor plainDivisor accepts. A
// constant divisor is an immediate operand, which ptxas needs to turn the
// division into a multiply-high and shifts (from a register holding the same
// constant it emits the full reciprocal sequence); a u32 power of two is a
// shift or a mask.
func (e *emitter) plainDivRem(div bool, t ir.Type, x string, y value) string {
	opcode := "rem."
	if div {
		opcode = "div."
	}
	divisor := y.reg
	if c, ok := y.rng.Const(); ok {
		divisor = strconv.FormatUint(uint64(c), 10)
		if t == ir.I32 {
			divisor = strconv.FormatInt(int64(int32(c)), 10)
		}
		if t == ir.U32 && bits.OnesCount32(c) == 1 {
			if div {
				return e.op2("shr.u32", x, strconv.Itoa(bits.TrailingZeros32(c)))
			}
			return e.op2("and.b32", x, strconv.FormatUint(uint64(c-1), 10))
		}
	}
	if t == ir.I32 {
		return e.op2(opcode+"s32", x, divisor)
	}
	return e.op2(opcode+"u32", x, divisor)
}

// unsignedDivRem divides by the divisor, or by 1 when it is 0; the quotient is then
// replaced by 0 (x % 1 is already 0).
func (e *emitter) unsignedDivRem(div bool, x, y string) string {
	zero := e.pred2("eq.u32", y, "0")
	d := e.sel("1", y, zero)
	if !div {
		return e.op2("rem.u32", x, d)
	}
	return e.sel("0", e.op2("div.u32", x, d), zero)
}

// signedDivRem divides by the divisor, or by 1 when it is 0 or -1: x / -1 is the
// wrapping negation of x (MIN / -1 = MIN), x % -1 and x % 1 are 0, and a zero
// divisor gives 0. rem.s32 takes the sign of the dividend.
func (e *emitter) signedDivRem(div bool, x, y string) string {
	zero := e.pred2("eq.s32", y, "0")
	minus := e.pred2("eq.s32", y, "-1")
	special := e.p()
	e.inst("or.pred %s, %s, %s", special, zero, minus)
	d := e.sel("1", y, special)
	if !div {
		return e.op2("rem.s32", x, d)
	}
	q := e.sel(e.op1("neg.s32", x), e.op2("div.s32", x, d), minus)
	return e.sel("0", q, zero)
}

// binaryF32 lowers f32 operators: add, sub and mul with an explicit rounding mode
// (never contracted), IEEE div; comparisons ordered except ne.
func (e *emitter) binaryF32(op ir.BinaryOp, a, b string) (string, error) {
	switch op {
	case ir.OpAdd:
		return e.op2("add.rn.f32", a, b), nil
	case ir.OpSub:
		return e.op2("sub.rn.f32", a, b), nil
	case ir.OpMul:
		return e.op2("mul.rn.f32", a, b), nil
	case ir.OpDiv:
		return e.op2("div.rn.f32", a, b), nil
	case ir.OpMin:
		return e.fminmax(true, a, b), nil
	case ir.OpMax:
		return e.fminmax(false, a, b), nil
	case ir.OpEq:
		return e.pred2("eq.f32", a, b), nil
	case ir.OpNe:
		return e.pred2("neu.f32", a, b), nil
	case ir.OpLt:
		return e.pred2("lt.f32", a, b), nil
	case ir.OpLe:
		return e.pred2("le.f32", a, b), nil
	case ir.OpGt:
		return e.pred2("gt.f32", a, b), nil
	case ir.OpGe:
		return e.pred2("ge.f32", a, b), nil
	}
	return "", unsupported("binary operator "+op.String(), ir.F32)
}

// fminmax gives min or max with IR v1's rules as selects on the bit patterns: a
// NaN operand yields the other operand (NaN when both are), and of two equal
// operands min takes the negative sign (min(-0, +0) = -0) and max the positive one.
func (e *emitter) fminmax(isMin bool, x, y string) string {
	var takeY, tie string
	if isMin {
		// x when x <= y: or-ing y's sign into x changes nothing unless x == y,
		// when it picks -0 over +0.
		takeY = e.pred2("lt.f32", y, x)
		tie = e.op2("or.b32", x, e.op2("and.b32", y, hex(f32SignBit)))
	} else {
		takeY = e.pred2("lt.f32", x, y)
		tie = e.op2("and.b32", x, e.op2("or.b32", y, hex(f32AbsMask)))
	}
	r := e.sel(y, tie, takeY)
	r = e.sel(x, r, e.pred2("nan.f32", y, y))
	return e.sel(y, r, e.pred2("nan.f32", x, x))
}

// cast converts with IR v1's rules: u32<->i32 keep the bits, bool<->int select 0/1
// and compare with 0, int->f32 rounds to nearest even, f32->int truncates and
// saturates with NaN -> 0.
func (e *emitter) cast(x ir.CastExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	from, to := v.t, x.To
	r := ranges.Cast(from, to, v.rng)
	if c, ok := r.Const(); ok && !to.IsFloat() && !from.IsFloat() {
		return e.constant(ir.Literal{Type: to, Bits: c}), nil
	}
	out := func(reg string) (value, error) { return e.ranged(value{reg: reg, t: to}, r), nil }
	switch {
	case from == to, from.IsInteger() && to.IsInteger():
		return out(v.reg)
	case from == ir.Bool && to.IsInteger():
		return out(e.sel("1", "0", v.reg))
	case from.IsInteger() && to == ir.Bool:
		return out(e.pred2("ne.u32", v.reg, "0"))
	case from == ir.I32 && to == ir.F32:
		return out(e.op1("cvt.rn.f32.s32", v.reg))
	case from == ir.U32 && to == ir.F32:
		return out(e.op1("cvt.rn.f32.u32", v.reg))
	case from == ir.F32 && to.IsInteger():
		kind := "u32"
		if to == ir.I32 {
			kind = "s32"
		}
		notNaN := e.sel("0", v.reg, e.pred2("nan.f32", v.reg, v.reg))
		return out(e.op1("cvt.rzi."+kind+".f32", notNaN))
	case from == ir.F32 && to == ir.F16:
		return out(e.widen(e.narrow16("cvt.rn.f16.f32", v.reg)))
	case from == ir.F16 && to == ir.F32:
		return out(e.op1("cvt.f32.f16", e.half(v.reg)))
	case from == ir.F32 && to == ir.BF16:
		return out(e.toBF16(v.reg))
	case from == ir.BF16 && to == ir.F32:
		// bf16 is the upper half of an f32, and the register's upper bits are 0.
		return out(e.op2("shl.b32", v.reg, "16"))
	}
	return value{}, fmt.Errorf("cast from %s to %s has no PTX form. Fix: cast bool and f32 through u32", from, to)
}
