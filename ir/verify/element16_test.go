package verify

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// TestElement16 pins the 16-bit comparison rules: any NaN for any NaN, a zero
// for a subnormal or ± the smallest normal of the element's own type, ULP16.
func TestElement16(t *testing.T) {
	exact, loose := Bound{}, Bound{ULP16: 1}
	for _, c := range []struct {
		name      string
		t         ir.Type
		got, want uint32
		b         Bound
		ok        bool
	}{
		{"equal", ir.F16, 0x3C00, 0x3C00, exact, true},
		{"other NaN", ir.F16, 0x7E01, 0xFE00, exact, true},
		{"NaN for inf", ir.F16, 0x7E00, 0x7C00, loose, false},
		{"-0 for +0", ir.F16, 0x8000, 0x0000, exact, false},
		{"flushed subnormal", ir.F16, 0x8000, 0x0001, exact, true},
		{"flushed smallest normal", ir.F16, 0x0000, 0x8400, exact, true},
		{"not flushed: twice the smallest normal", ir.F16, 0x0000, 0x0800, exact, false},
		{"1 ULP, exact", ir.F16, 0x3C01, 0x3C00, exact, false},
		{"1 ULP, ULP16 1", ir.F16, 0x3C01, 0x3C00, loose, true},
		{"2 ULP, ULP16 1", ir.F16, 0x3C02, 0x3C00, loose, false},
		{"across zero", ir.F16, 0x8001, 0x0000, loose, true},
		{"bf16 NaN", ir.BF16, 0x7FC1, 0xFFC0, exact, true},
		{"bf16 flushed", ir.BF16, 0x0000, 0x0080, exact, true},
		{"bf16 not flushed", ir.BF16, 0x0000, 0x0100, exact, false},
		// 0x7C01 is an f16 NaN but a bf16 number: the format decides.
		{"bf16 0x7C01 is a number", ir.BF16, 0x7C01, 0x7C02, exact, false},
	} {
		if v := c.b.Element16(c.t, c.got, c.want); v.OK != c.ok {
			t.Errorf("%s: Element16(%s, %#04x, %#04x) = %+v, want OK %v", c.name, c.t, c.got, c.want, v, c.ok)
		}
	}
}

// TestBuffers16 pins that 16-bit buffers are compared in 2-byte elements, with
// the element's index and value in the error.
func TestBuffers16(t *testing.T) {
	bufs := []Buffer{{Name: "h", Type: ir.F16}, {Name: "b", Type: ir.BF16}}
	want := [][]byte{u16s(0x3C00, 0x7E00, 0x0001), u16s(0x3F80, 0x4000, 0x4040)}
	got := [][]byte{u16s(0x3C00, 0x7C01, 0x8000), u16s(0x3F80, 0x4000, 0x4040)}
	rep, err := Buffers(bufs, Bound{}, got, want)
	if err != nil || rep.Elements != 6 {
		t.Fatalf("equal 16-bit outputs: %+v, %v", rep, err)
	}
	got[1] = u16s(0x3F80, 0x4000, 0x4041)
	rep, err = Buffers(bufs, Bound{}, got, want)
	if err == nil || rep.Mismatches != 1 || rep.MaxULP16 != 1 {
		t.Fatalf("1 ULP off in bf16: %+v, %v", rep, err)
	}
	if !strings.Contains(err.Error(), "output b[2]: got 3.015625 (0x4041), want 3 (0x4040)") {
		t.Errorf("error: %v", err)
	}
	if _, err := Buffers(bufs, Bound{}, [][]byte{u16s(1, 2), got[1]}, want); err == nil || !strings.Contains(err.Error(), "(2 elements)") {
		t.Errorf("a short 16-bit output: %v", err)
	}
	if _, err := Buffers(bufs[:1], Bound{}, [][]byte{{1, 2, 3}}, [][]byte{{1, 2, 3}}); err == nil || !strings.Contains(err.Error(), "whole 2-byte elements") {
		t.Errorf("an odd byte count: %v", err)
	}
}

// TestBoundForF16 pins the bound of f16 div and sqrt: 1 ULP of f16 for 16-bit
// outputs, 2^13 ULP for f32 ones; other inexact operations give 16-bit
// outputs 1 ULP, and programs without 16-bit types no ULP16.
func TestBoundForF16(t *testing.T) {
	build := func(e func(x ir.Expr) ir.Expr, t ir.Type) *ir.Program {
		b := ir.NewBuilder("t.f16", 1, 1, 1)
		b.Buffer("x", t, ir.Read)
		b.Buffer("out", t, ir.Write)
		b.Store("out", ir.LitU32(0), e(ir.Load("x", ir.LitU32(0))))
		return b.Program()
	}
	div := BoundFor(build(func(x ir.Expr) ir.Expr { return ir.Div(x, x) }, ir.F16))
	if div.ULP16 != 1 || div.ULP != 1<<13 || div.String() != "8192 ULP; f16/bf16 1 ULP (div.f16)" {
		t.Errorf("f16 div: %+v (%s)", div, div)
	}
	sqrt := BoundFor(build(func(x ir.Expr) ir.Expr { return ir.Sqrt(x) }, ir.F16))
	if sqrt.ULP16 != 1 {
		t.Errorf("f16 sqrt: %+v", sqrt)
	}
	add := BoundFor(build(func(x ir.Expr) ir.Expr { return ir.Add(x, x) }, ir.F16))
	if !add.Exact() {
		t.Errorf("f16 add: %+v, want bit-exact", add)
	}
	f32 := BoundFor(build(func(x ir.Expr) ir.Expr { return ir.Div(x, x) }, ir.F32))
	if f32.ULP16 != 0 || f32.ULP != 3 {
		t.Errorf("f32 div: %+v", f32)
	}
}
