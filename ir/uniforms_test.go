package ir

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func uniformProgram() *Program {
	b := NewBuilder("kiln.test.uniforms", 1, 1, 1)
	b.Uniform("m", U32)
	b.Uniform("bias", I32)
	b.Uniform("scale", F32)
	return b.MustBuild()
}

func TestEncodeUniformsLayout(t *testing.T) {
	p := uniformProgram()
	got, err := EncodeUniforms(p, map[string]Literal{"scale": LitF32(1.5), "m": LitU32(0x01020304), "bias": LitI32(-2)})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x04, 0x03, 0x02, 0x01, 0xfe, 0xff, 0xff, 0xff, 0x00, 0x00, 0xc0, 0x3f}
	if !bytes.Equal(got, want) || p.UniformBytes() != 12 {
		t.Fatalf("uniform block % x, want % x (declaration order, little-endian)", got, want)
	}
	vals, err := DecodeUniforms(p, got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vals, []Literal{LitU32(0x01020304), LitI32(-2), LitF32(1.5)}) {
		t.Fatalf("DecodeUniforms gave %v", vals)
	}
	empty, err := EncodeUniforms(codecSaxpy(), nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("a program without uniforms has an empty block, got %x (%v)", empty, err)
	}
}

func TestEncodeUniformsRejects(t *testing.T) {
	p := uniformProgram()
	all := func() map[string]Literal {
		return map[string]Literal{"m": LitU32(1), "bias": LitI32(1), "scale": LitF32(1)}
	}
	for name, c := range map[string]struct {
		change func(map[string]Literal)
		want   string
	}{
		"missing": {func(m map[string]Literal) { delete(m, "bias") }, `uniform "bias" of kiln.test.uniforms has no value`},
		"unknown": {func(m map[string]Literal) { m["k"] = LitU32(1) }, `uniform "k" is not declared`},
		"type":    {func(m map[string]Literal) { m["m"] = LitI32(1) }, `uniform "m" is u32, got a i32 value`},
	} {
		v := all()
		c.change(v)
		_, err := EncodeUniforms(p, v)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix: ") {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
	for _, n := range []int{0, 11, 13} {
		if err := CheckUniforms(p, make([]byte, n)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("got %d", n)) {
			t.Errorf("CheckUniforms accepts %d bytes: %v", n, err)
		}
		if _, err := DecodeUniforms(p, make([]byte, n)); err == nil {
			t.Errorf("DecodeUniforms accepts %d bytes", n)
		}
	}
}

func TestParseLiteral(t *testing.T) {
	for _, c := range []struct {
		t    Type
		text string
		want Literal
	}{
		{U32, "5", LitU32(5)},
		{U32, "0xffffffff", LitU32(math.MaxUint32)},
		{I32, "-2147483648", LitI32(math.MinInt32)},
		{I32, "0b101", LitI32(5)},
		{F32, "2.5", LitF32(2.5)},
		{F32, "-0", Literal{Type: F32, Bits: 0x80000000}},
		{F32, "inf", Literal{Type: F32, Bits: 0x7f800000}},
		{F32, "nan", Literal{Type: F32, Bits: defaultNaNBits}},
		{Bool, "true", LitBool(true)},
	} {
		got, err := ParseLiteral(c.t, c.text)
		if err != nil || got != c.want {
			t.Errorf("ParseLiteral(%s, %q) = %v, %v; want %v", c.t, c.text, got, err, c.want)
		}
	}
	for _, c := range []struct {
		t    Type
		text string
	}{{U32, "-1"}, {U32, "4294967296"}, {I32, "2147483648"}, {F32, "1e39"}, {F32, "x"}, {Bool, "1"}, {0, "1"}} {
		if _, err := ParseLiteral(c.t, c.text); err == nil || !strings.Contains(err.Error(), "Fix: ") {
			t.Errorf("ParseLiteral(%s, %q) accepted it or lacks a Fix: %v", c.t, c.text, err)
		}
	}
}

func ExampleEncodeUniforms() {
	b := NewBuilder("example.scale", 64, 1, 1)
	n := b.Uniform("n", U32)
	x := b.Buffer("x", F32, ReadWrite)
	i := b.Let("i", GlobalID(0))
	b.If(Lt(i, n), func(then *Block) { then.Store(x, i, Mul(Load(x, i), LitF32(2))) })
	prog := b.MustBuild()

	block, err := EncodeUniforms(prog, map[string]Literal{"n": LitU32(1000)})
	fmt.Printf("% x %v\n", block, err)
	// Output: e8 03 00 00 <nil>
}
