package interp

import (
	"context"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// This file holds the tests' own model of the 16-bit formats, written without
// ir/half: values decoded from the bit fields by hand, and rounding by searching
// the sorted finite values of the format for the nearest one with math/big.

// v12Compile compiles an IR v1.2 program through Compile, which validates it.
func v12Compile(p *ir.Program, opts Options) (*Kernel, error) { return Compile(p, opts) }

// v12Run compiles p with v12Compile and runs it under a generous deadline.
func v12Run(p *ir.Program, opts Options, l Launch) ([][]byte, error) {
	k, err := v12Compile(p, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return k.Run(ctx, l)
}

// dynamicRun runs a program that ir.Validate rejects (the test checks that it
// does) with the interpreter's own compiler, to reach the run-time checks that
// stand behind validation.
func dynamicRun(t testing.TB, p *ir.Program, opts Options, l Launch) ([][]byte, error) {
	t.Helper()
	if err := ir.Validate(p); err == nil {
		t.Fatalf("ir.Validate accepts %s; the test means a program it rejects", p.Name)
	}
	k, err := compile(p, opts)
	if err != nil {
		t.Fatalf("compile %s: %v", p.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return k.Run(ctx, l)
}

func mustRun12(t testing.TB, p *ir.Program, opts Options, l Launch) [][]byte {
	t.Helper()
	outs, err := v12Run(p, opts, l)
	if err != nil {
		t.Fatalf("run %s: %v", p.Name, err)
	}
	return outs
}

func u16Bytes(v ...uint16) []byte { return kernels.U16Bytes(v) }

func bytesU16(b []byte) []uint16 { return kernels.BytesU16(b) }

// refFormat is a 16-bit float format as the tests model it.
type refFormat struct {
	name     string
	expBits  uint
	fracBits uint
}

var (
	refF16  = refFormat{name: "f16", expBits: 5, fracBits: 10}
	refBF16 = refFormat{name: "bf16", expBits: 8, fracBits: 7}
)

func (f refFormat) bias() int       { return 1<<(f.expBits-1) - 1 }
func (f refFormat) infBits() uint16 { return uint16(1<<f.expBits-1) << f.fracBits }
func (f refFormat) isNaN(b uint16) bool {
	return b&0x7FFF > f.infBits()
}

// value decodes b from its fields: (-1)^s · 2^(e-bias) · 1.f, subnormal when e = 0.
func (f refFormat) value(b uint16) float64 {
	e := int(b>>f.fracBits) & (1<<f.expBits - 1)
	frac := float64(b & (1<<f.fracBits - 1))
	var v float64
	switch {
	case e == 1<<f.expBits-1 && frac == 0:
		v = math.Inf(1)
	case e == 1<<f.expBits-1:
		v = math.NaN()
	case e == 0:
		v = math.Ldexp(frac, 1-f.bias()-int(f.fracBits))
	default:
		v = math.Ldexp(frac+float64(int(1)<<f.fracBits), e-f.bias()-int(f.fracBits))
	}
	if b&0x8000 != 0 {
		v = -v
	}
	return v
}

// mag is the magnitude of the non-negative pattern b as a big.Float; the pattern
// of infinity stands for 2^(emax+1), the overflow threshold of rounding.
func (f refFormat) mag(b int) *big.Float {
	if b == int(f.infBits()) {
		return new(big.Float).SetMantExp(big.NewFloat(1), f.bias()+1)
	}
	return new(big.Float).SetFloat64(f.value(uint16(b)))
}

// round rounds the exact value x (finite) to the format, to nearest with ties to
// the even pattern; neg gives a zero its sign.
func (f refFormat) round(x *big.Float, neg bool) uint16 {
	var sign uint16
	if x.Sign() < 0 || (x.Sign() == 0 && neg) {
		sign = 0x8000
	}
	a := new(big.Float).Abs(x)
	top := int(f.infBits())
	if a.Cmp(f.mag(top)) >= 0 {
		return sign | f.infBits()
	}
	lo, hi := 0, top // mag(lo) <= a < mag(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if f.mag(mid).Cmp(a) <= 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	d1 := new(big.Float).Sub(a, f.mag(lo))
	d2 := new(big.Float).Sub(f.mag(hi), a)
	switch c := d1.Cmp(d2); {
	case c < 0:
		return sign | uint16(lo)
	case c > 0:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(hi)
}

// fromFloat64 rounds a float64 (NaN, infinities and signed zeros included).
func (f refFormat) fromFloat64(v float64) uint16 {
	switch {
	case math.IsNaN(v):
		return f.infBits() | 1<<(f.fracBits-1)
	case math.IsInf(v, 1):
		return f.infBits()
	case math.IsInf(v, -1):
		return 0x8000 | f.infBits()
	}
	return f.round(new(big.Float).SetFloat64(v), math.Signbit(v))
}

// same reports whether got is want, any NaN matching any NaN.
func (f refFormat) same(got, want uint16) bool {
	if f.isNaN(want) {
		return f.isNaN(got)
	}
	return got == want
}

func bigOf(v float64) *big.Float { return new(big.Float).SetPrec(400).SetFloat64(v) }

// refF16Op is the expected f16 result of op on a, b (and c for fma): the exact
// result from math/big rounded once, IEEE special cases from float64 arithmetic
// (exact on these inputs), and a zero's sign from float64 too.
func refF16Op(op string, a, b, c uint16) uint16 {
	x, y, z := refF16.value(a), refF16.value(b), refF16.value(c)
	var r64 float64
	switch op {
	case "add":
		r64 = x + y
	case "sub":
		r64 = x - y
	case "mul":
		r64 = x * y
	case "div":
		r64 = x / y
	case "sqrt":
		r64 = math.Sqrt(x)
	case "fma":
		r64 = math.FMA(x, y, z)
	}
	special := math.IsNaN(r64) || math.IsInf(x, 0) || math.IsInf(y, 0) || math.IsInf(z, 0) || math.IsNaN(x) ||
		math.IsNaN(y) || math.IsNaN(z) || (op == "div" && y == 0)
	if special {
		return refF16.fromFloat64(r64)
	}
	exact := new(big.Float).SetPrec(400)
	switch op {
	case "add":
		exact.Add(bigOf(x), bigOf(y))
	case "sub":
		exact.Sub(bigOf(x), bigOf(y))
	case "mul":
		exact.Mul(bigOf(x), bigOf(y))
	case "div":
		exact.Quo(bigOf(x), bigOf(y))
	case "sqrt":
		exact.Sqrt(bigOf(x))
	case "fma":
		exact.Add(new(big.Float).SetPrec(400).Mul(bigOf(x), bigOf(y)), bigOf(z))
	}
	return refF16.round(exact, math.Signbit(r64))
}

// refRound32 rounds a big.Float to f32 (no overflow or underflow in the tests
// that use it), as a reference for f32 sums independent of Go's float32.
func refRound32(x *big.Float) float32 {
	r := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(x)
	v, _ := r.Float32()
	return v
}
