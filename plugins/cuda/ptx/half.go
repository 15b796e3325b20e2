package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The 16-bit floats of IR v1.2. An f16 or bf16 value lives in a .b32 register
// like every other 32-bit value, holding its bits zero-extended, so locals,
// selects, predicated assignments and unrolled loops treat it as they treat an
// f32. It is loaded and stored as 16 bits (ld.u16 zero-extends into the
// register, st.b16 writes its low half). The f16 instructions, which take
// 16-bit registers, run on a .b16 copy (%h, cvt.u16.u32) whose result is
// zero-extended back (cvt.u32.u16): plain register moves (whether ptxas folds
// them away is not measured).
//
//   - f16 add, sub, mul and fma are add.rn.f16, sub.rn.f16, mul.rn.f16 and
//     fma.rn.f16: correctly rounded, never contracted.
//   - f16 div and sqrt go through f32: the operands convert exactly, div.rn.f32 or
//     sqrt.rn.f32 rounds once, cvt.rn.f16.f32 rounds again. f32 carries 24 bits,
//     at least 2·11 + 2, so the second rounding never changes the correctly
//     rounded f16 result (double rounding is innocuous for +, −, ×, ÷ and √ when
//     p' ≥ 2p + 2; Figueroa, 1995).
//   - f16 neg and abs flip or clear bit 15; min and max are the f32 selects on the
//     bit patterns, with setp.*.f16 comparisons; comparisons are ordered except ne
//     (setp.neu.f16).
//   - f32 to f16 is cvt.rn.f16.f32 (to nearest even, overflow to ±inf, subnormal
//     results kept); f16 to f32 is cvt.f32.f16, exact.
//   - f32 to bf16 is cvt.rn.bf16.f32 on sm_80 and later; on sm_70, which lacks
//     it, an integer round to nearest even of the f32 bits (a NaN keeps its
//     upper half with the quiet bit set). bf16 to f32 shifts the bits up by 16.

// 16-bit constants the emitter uses.
const (
	f16SignBit = 0x8000
	f16AbsMask = 0x7FFF
	// f32QuietBitHigh is an f32's quiet-NaN bit as it lies in the upper half.
	f32QuietBitHigh = 0x0040
)

// h returns a fresh .b16 register.
func (e *emitter) h() string { e.nh++; return fmt.Sprintf("%%h%d", e.nh) }

// half copies the 16 bits of a .b32 register to a fresh .b16 register.
func (e *emitter) half(reg string) string {
	d := e.h()
	e.inst("cvt.u16.u32 %s, %s", d, reg)
	return d
}

// widen zero-extends a .b16 register into a fresh .b32 register.
func (e *emitter) widen(h string) string {
	d := e.r()
	e.inst("cvt.u32.u16 %s, %s", d, h)
	return d
}

// narrow16 emits "opcode d, src" with d a fresh .b16 register.
func (e *emitter) narrow16(opcode, src string) string {
	d := e.h()
	e.inst("%s %s, %s", opcode, d, src)
	return d
}

// viaF32 computes an f16 operation as opcode on f32 (operands converted
// exactly), rounding the result back to f16.
func (e *emitter) viaF32(opcode string, regs ...string) string {
	args := make([]any, 0, len(regs)+1)
	d := e.r()
	args = append(args, d)
	for _, reg := range regs {
		args = append(args, e.op1("cvt.f32.f16", e.half(reg)))
	}
	format := "%s %s"
	for range regs {
		format += ", %s"
	}
	e.inst(format, append([]any{opcode}, args...)...)
	return e.widen(e.narrow16("cvt.rn.f16.f32", d))
}

// f16op2 emits an f16 instruction "opcode d, a, b" on .b16 copies of a and b.
func (e *emitter) f16op2(opcode, a, b string) string {
	d := e.h()
	e.inst("%s %s, %s, %s", opcode, d, e.half(a), e.half(b))
	return e.widen(d)
}

// setp16 emits "setp.cmp.f16 p, a, b" on .b16 copies.
func (e *emitter) setp16(cmp, a, b string) string {
	return e.pred2(cmp+".f16", e.half(a), e.half(b))
}

// binaryF16 lowers f16 operators (see the comment at the top of the file).
func (e *emitter) binaryF16(op ir.BinaryOp, a, b string) (string, error) {
	switch op {
	case ir.OpAdd:
		return e.f16op2("add.rn.f16", a, b), nil
	case ir.OpSub:
		return e.f16op2("sub.rn.f16", a, b), nil
	case ir.OpMul:
		return e.f16op2("mul.rn.f16", a, b), nil
	case ir.OpDiv:
		return e.viaF32("div.rn.f32", a, b), nil
	case ir.OpMin:
		return e.fminmax16(true, a, b), nil
	case ir.OpMax:
		return e.fminmax16(false, a, b), nil
	case ir.OpEq:
		return e.setp16("eq", a, b), nil
	case ir.OpNe:
		return e.setp16("neu", a, b), nil
	case ir.OpLt:
		return e.setp16("lt", a, b), nil
	case ir.OpLe:
		return e.setp16("le", a, b), nil
	case ir.OpGt:
		return e.setp16("gt", a, b), nil
	case ir.OpGe:
		return e.setp16("ge", a, b), nil
	}
	return "", unsupported("binary operator "+op.String(), ir.F16)
}

// fminmax16 is fminmax on f16 bit patterns.
func (e *emitter) fminmax16(isMin bool, x, y string) string {
	var takeY, tie string
	if isMin {
		takeY = e.setp16("lt", y, x)
		tie = e.op2("or.b32", x, e.op2("and.b32", y, hex(f16SignBit)))
	} else {
		takeY = e.setp16("lt", x, y)
		tie = e.op2("and.b32", x, e.op2("or.b32", y, hex(f16AbsMask)))
	}
	r := e.sel(y, tie, takeY)
	r = e.sel(x, r, e.setp16("nan", y, y))
	return e.sel(y, r, e.setp16("nan", x, x))
}

// fma lowers fma on f32 (fma.rn.f32) or f16 (fma.rn.f16).
func (e *emitter) fma(x ir.FmaExpr) (value, error) {
	first, err := e.expr(x.A)
	if err != nil {
		return value{}, err
	}
	t := first.t
	if t != ir.F32 && t != ir.F16 {
		return value{}, unsupported("fma", t)
	}
	args := [3]string{first.reg}
	for i, a := range []ir.Expr{x.B, x.C} {
		reg, err := e.typed(a, t, "an fma operand")
		if err != nil {
			return value{}, err
		}
		args[i+1] = reg
	}
	if t == ir.F16 {
		d := e.h()
		e.inst("fma.rn.f16 %s, %s, %s, %s", d, e.half(args[0]), e.half(args[1]), e.half(args[2]))
		return value{reg: e.widen(d), t: t}, nil
	}
	d := e.r()
	e.inst("fma.rn.f32 %s, %s, %s, %s", d, args[0], args[1], args[2])
	return value{reg: d, t: t}, nil
}

// toBF16 rounds an f32 to bf16, to nearest even: cvt.rn.bf16.f32 on sm_80 and
// later, else on the bits: add 0x7FFF plus the lowest kept bit and drop the low
// half (a carry into the exponent rounds up to the next binade or to infinity);
// a NaN keeps its upper half with the quiet bit set.
func (e *emitter) toBF16(x string) string {
	if e.arch.SM >= 80 {
		return e.widen(e.narrow16("cvt.rn.bf16.f32", x))
	}
	upper := e.op2("shr.u32", x, "16")
	lsb := e.op2("and.b32", upper, "1")
	rounded := e.op2("shr.u32", e.op2("add.u32", e.op2("add.u32", x, hex(0x7FFF)), lsb), "16")
	quiet := e.op2("or.b32", upper, hex(f32QuietBitHigh))
	return e.sel(quiet, rounded, e.pred2("nan.f32", x, x))
}
