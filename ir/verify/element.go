package verify

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// Bound is how far an f32 element may be from its reference. It is kiln's one
// float comparison: the conformance kit, the corpus checks and `kiln run
// --verify` all compare through Bound.Element (see docs/design.md, "Conformance
// kit"). Whatever the bound, these rules hold first:
//
//   - equal bits match, and any NaN matches any NaN; a NaN never matches a number;
//   - a denormal may have been flushed: a zero of either sign matches a nonzero
//     denormal (either side), and a zero result matches a reference of exactly
//     ±2^-126, which a device that detects tininess before rounding flushes;
//   - otherwise, unless the bound is exact, the element must be within ULP units in
//     the last place (+0 and -0 are 0 apart, so an inexact bound does not ask for
//     the sign of a zero), or,
//     for finite values, within Abs + Rel·|want| (Abs only where |want| ≤
//     AbsBelow, when AbsBelow is set).
//
// The zero Bound is bit-exact apart from NaN payloads and flushed denormals.
type Bound struct {
	// ULP is the largest accepted distance in units in the last place.
	ULP uint64
	// Exp adds exp's 2·|x| ULP to ULP, with |x| estimated from the reference
	// element as |ln|want||.
	Exp bool
	// Abs and Rel accept finite elements with |got - want| ≤ Abs + Rel·|want|.
	Abs, Rel float64
	// AbsBelow, when positive, limits Abs to references with |want| ≤ AbsBelow.
	AbsBelow float64
	// ULP16 is the largest accepted distance for f16 and bf16 elements, in
	// units in the last place of their own type (IR v1.2); zero is bit-exact.
	// ULP, Abs and Rel apply to f32 elements only.
	ULP16 uint64
	// Ops names the operations the bound was derived from, sorted (BoundFor).
	Ops []string
}

// Exact reports whether the bound demands equal elements (up to NaN payloads and
// flushed denormals).
func (b Bound) Exact() bool {
	return b.ULP == 0 && !b.Exp && b.Abs == 0 && b.Rel == 0 && b.ULP16 == 0
}

// String describes the bound: "bit-exact", "3 ULP (div, sqrt)", "3 ULP or
// 0.00048828125 absolute (sin)".
func (b Bound) String() string {
	if b.Exact() {
		return "bit-exact"
	}
	var parts []string
	if b.ULP > 0 || b.Exp {
		s := fmt.Sprintf("%d ULP", b.ULP)
		if b.Exp {
			s += " + 2·|x| ULP"
		}
		parts = append(parts, s)
	}
	if b.Abs > 0 || b.Rel > 0 {
		var s string
		switch {
		case b.Rel == 0:
			s = fmt.Sprintf("%g absolute", b.Abs)
		case b.Abs == 0:
			s = fmt.Sprintf("%g·|want|", b.Rel)
		default:
			s = fmt.Sprintf("%g + %g·|want|", b.Abs, b.Rel)
		}
		if b.AbsBelow > 0 {
			s += fmt.Sprintf(" where |want| ≤ %g", b.AbsBelow)
		}
		parts = append(parts, s)
	}
	s := strings.Join(parts, " or ")
	if b.ULP16 > 0 {
		if s == "" {
			s = "f32 bit-exact"
		}
		s += fmt.Sprintf("; f16/bf16 %d ULP", b.ULP16)
	}
	if len(b.Ops) > 0 {
		s += " (" + strings.Join(b.Ops, ", ") + ")"
	}
	return s
}

// Verdict is the outcome of comparing one f32 element with its reference.
type Verdict struct {
	// OK reports whether the element is accepted.
	OK bool
	// ULP is the distance between the two, in units in the last place; 0 for
	// pairs that match by rule (NaN and NaN, a flushed denormal).
	ULP uint64
	// Measured is false when no distance exists: a NaN facing a number.
	Measured bool
}

// Element compares one f32 element (its bits) with its reference under b.
func (b Bound) Element(got, want uint32) Verdict {
	if got == want {
		return Verdict{OK: true, Measured: true}
	}
	switch gn, wn := IsNaN(got), IsNaN(want); {
	case gn && wn:
		return Verdict{OK: true, Measured: true}
	case gn || wn:
		return Verdict{}
	}
	if flushed(got, want) || flushed(want, got) {
		return Verdict{OK: true, Measured: true}
	}
	ulp := ULP(got, want)
	limit := b.ULP
	if b.Exp {
		limit += expExtraULP(want)
	}
	if limit > 0 && ulp <= limit {
		return Verdict{OK: true, ULP: ulp, Measured: true}
	}
	g, w := float64(math.Float32frombits(got)), float64(math.Float32frombits(want))
	if math.IsInf(g, 0) || math.IsInf(w, 0) {
		return Verdict{ULP: ulp, Measured: true}
	}
	abs := b.Abs
	if b.AbsBelow > 0 && math.Abs(w) > b.AbsBelow {
		abs = 0
	}
	ok := (abs > 0 || b.Rel > 0) && math.Abs(g-w) <= abs+b.Rel*math.Abs(w)
	return Verdict{OK: ok, ULP: ulp, Measured: true}
}

// smallestNormalBits is the bit pattern of 2^-126 without its sign.
const smallestNormalBits = 0x00800000

// flushed reports whether zero is a zero that a device flushing denormals may give
// where other is: a nonzero denormal, or ±2^-126 (a result that was denormal
// before rounding).
func flushed(zero, other uint32) bool {
	if zero&0x7FFFFFFF != 0 {
		return false
	}
	mag := other & 0x7FFFFFFF
	return mag != 0 && mag <= smallestNormalBits
}

// maxExpArg caps exp's |x| estimate: beyond it an f32 exp is 0 or infinite.
const maxExpArg = 104

// expExtraULP is exp's 2·|x| ULP with x estimated as ln|want|, capped where exp
// saturates.
func expExtraULP(want uint32) uint64 {
	x := math.Abs(math.Log(math.Abs(float64(math.Float32frombits(want)))))
	if math.IsNaN(x) || x > maxExpArg {
		x = maxExpArg
	}
	return uint64(math.Ceil(2 * x))
}

// IsNaN reports whether bits is an f32 NaN.
func IsNaN(bits uint32) bool { return bits&0x7FFFFFFF > 0x7F800000 }

// ULP is the distance between a and b in units in the last place: the number of
// representable f32 values between them (neither NaN); +0 and -0 are 0 apart.
func ULP(a, b uint32) uint64 {
	d := ordered(a) - ordered(b)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

// ordered maps f32 bits onto integers in the order of the values they encode.
func ordered(bits uint32) int64 {
	if bits&0x80000000 != 0 {
		return -int64(bits & 0x7FFFFFFF)
	}
	return int64(bits)
}

// Format writes an element of type t with its bit pattern: "1.5 (0x3fc00000)";
// f16 and bf16 elements (IR v1.2) in their low 16 bits: "1.5 (0x3e00)".
func Format(t ir.Type, bits uint32) string {
	switch t {
	case ir.F32:
		return fmt.Sprintf("%g (0x%08x)", math.Float32frombits(bits), bits)
	case ir.F16, ir.BF16:
		return fmt.Sprintf("%g (0x%04x)", Value(t, bits), bits&0xFFFF)
	case ir.I32:
		return fmt.Sprintf("%d (0x%08x)", int32(bits), bits)
	}
	return fmt.Sprintf("%d (0x%08x)", bits, bits)
}

// Element16 compares one f16 or bf16 element (t; the bits in the low 16 bits of
// got and want) with its reference under b (IR v1.2), with Element's rules in
// the element's own format: equal bits match, any NaN matches any NaN and never
// a number, a zero of either sign matches a nonzero subnormal of t or ±(t's
// smallest normal) (a flushed denormal), and otherwise the two must be at most
// b.ULP16 units in the last place of t apart (+0 and -0 are 0 apart). Any other
// t compares bit for bit.
func (b Bound) Element16(t ir.Type, got, want uint32) Verdict {
	f, ok := formats16[t]
	if !ok {
		return Verdict{OK: got == want, Measured: true}
	}
	g, w := uint16(got), uint16(want)
	if g == w {
		return Verdict{OK: true, Measured: true}
	}
	switch gn, wn := f.isNaN(g), f.isNaN(w); {
	case gn && wn:
		return Verdict{OK: true, Measured: true}
	case gn || wn:
		return Verdict{}
	}
	if f.flushed(g, w) || f.flushed(w, g) {
		return Verdict{OK: true, Measured: true}
	}
	ulp := ULP16(g, w)
	return Verdict{OK: b.ULP16 > 0 && ulp <= b.ULP16, ULP: ulp, Measured: true}
}

// format16 describes a 16-bit float format by its exponent field.
type format16 struct{ expMask, fracMask uint16 }

var formats16 = map[ir.Type]format16{
	ir.F16:  {expMask: 0x7C00, fracMask: 0x03FF},
	ir.BF16: {expMask: 0x7F80, fracMask: 0x007F},
}

func (f format16) isNaN(bits uint16) bool { return bits&f.expMask == f.expMask && bits&f.fracMask != 0 }

// flushed reports whether zero is a zero a device flushing denormals may give
// where other is: a nonzero subnormal, or ± the smallest normal.
func (f format16) flushed(zero, other uint16) bool {
	if zero&0x7FFF != 0 {
		return false
	}
	mag := other & 0x7FFF
	return mag != 0 && mag <= f.fracMask+1
}

// ULP16 is the distance between two f16 values, or two bf16 values, in units in
// the last place of their type (neither NaN): both formats order their bits as
// sign and magnitude, as f32 does. +0 and -0 are 0 apart.
func ULP16(a, b uint16) uint64 {
	// Moving the sign to bit 31 keeps the magnitude, and so the order ULP counts.
	wide := func(bits uint16) uint32 { return uint32(bits&0x8000)<<16 | uint32(bits&0x7FFF) }
	return ULP(wide(a), wide(b))
}

// Value is the value of an element of float type t: f32, or f16 or bf16 in the
// low 16 bits.
func Value(t ir.Type, bits uint32) float64 {
	switch t {
	case ir.F16:
		return half.Float16(bits).Float64()
	case ir.BF16:
		return half.BFloat16(bits).Float64()
	}
	return float64(math.Float32frombits(bits))
}
