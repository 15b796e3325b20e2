package ir

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// UniformBytes is the size of p's uniform block, the bytes each dispatch supplies
// for its uniforms: 4 per uniform.
func (p *Program) UniformBytes() int { return 4 * len(p.Uniforms) }

// EncodeUniforms packs the values of p's uniforms, given by name, into the uniform
// block a dispatch carries: uniform i's 32-bit value, little-endian, at byte 4*i, in
// declaration order (f32 as its IEEE-754 bits, i32 in two's complement). Every
// uniform needs a value of its own type; a name that is not a uniform is an error.
// A program without uniforms has an empty block. See docs/design.md, "IR v1.1".
func EncodeUniforms(p *Program, values map[string]Literal) ([]byte, error) {
	for name := range values {
		if _, ok := p.Uniform(name); !ok {
			return nil, fmt.Errorf("ir: uniform %q is not declared by %s. Fix: set one of: %s", name, p.Name, uniformNames(p))
		}
	}
	out := make([]byte, 0, p.UniformBytes())
	for _, u := range p.Uniforms {
		v, ok := values[u.Name]
		if !ok {
			return nil, fmt.Errorf("ir: uniform %q of %s has no value. Fix: give every uniform a value (%s)", u.Name, p.Name, uniformNames(p))
		}
		if v.Type != u.Type {
			return nil, fmt.Errorf("ir: uniform %q is %s, got a %s value. Fix: give it a %s value", u.Name, u.Type, v.Type, u.Type)
		}
		out = binary.LittleEndian.AppendUint32(out, v.Bits)
	}
	return out, nil
}

// CheckUniforms reports whether data is a uniform block for p: exactly UniformBytes
// bytes. Every 32-bit pattern is a valid i32, u32 or f32, so the length is all
// there is to check.
func CheckUniforms(p *Program, data []byte) error {
	if len(data) != p.UniformBytes() {
		return fmt.Errorf("ir: %s takes %d bytes of uniforms (%d uniforms of 4 bytes), got %d. Fix: pass the values of %s, packed by ir.EncodeUniforms",
			p.Name, p.UniformBytes(), len(p.Uniforms), len(data), uniformNames(p))
	}
	return nil
}

// DecodeUniforms returns the values in a uniform block of p, one per uniform in
// declaration order.
func DecodeUniforms(p *Program, data []byte) ([]Literal, error) {
	if err := CheckUniforms(p, data); err != nil {
		return nil, err
	}
	out := make([]Literal, len(p.Uniforms))
	for i, u := range p.Uniforms {
		out[i] = Literal{Type: u.Type, Bits: binary.LittleEndian.Uint32(data[4*i:])}
	}
	return out, nil
}

func uniformNames(p *Program) string {
	if len(p.Uniforms) == 0 {
		return "(none: the program declares no uniforms)"
	}
	names := make([]string, len(p.Uniforms))
	for i, u := range p.Uniforms {
		names[i] = u.Name + " " + u.Type.String()
	}
	return strings.Join(names, ", ")
}

// ParseLiteral reads text as a value of type t, as a command line writes it:
// bool "true" or "false"; i32 and u32 in decimal, or with a 0x, 0o or 0b prefix; f32
// as a decimal or hexadecimal floating-point number, "inf", "-inf" or "nan" (Go's
// strconv.ParseFloat forms, rounded to the nearest f32).
func ParseLiteral(t Type, text string) (Literal, error) {
	bad := func(err error) (Literal, error) {
		if ne, ok := err.(*strconv.NumError); ok {
			err = ne.Err
		}
		return Literal{}, fmt.Errorf("ir: %q is not a %s value (%v). Fix: write a %s value", text, t, err, t)
	}
	switch t {
	case Bool:
		switch text {
		case "true":
			return LitBool(true), nil
		case "false":
			return LitBool(false), nil
		}
		return bad(fmt.Errorf("want true or false"))
	case I32:
		v, err := strconv.ParseInt(text, 0, 32)
		if err != nil {
			return bad(err)
		}
		return LitI32(int32(v)), nil
	case U32:
		v, err := strconv.ParseUint(text, 0, 32)
		if err != nil {
			return bad(err)
		}
		return LitU32(uint32(v)), nil
	case F32:
		v, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return bad(err)
		}
		if math.IsNaN(v) {
			return Literal{Type: F32, Bits: defaultNaNBits}, nil
		}
		return LitF32(float32(v)), nil
	}
	return Literal{}, fmt.Errorf("ir: type %d has no values. Fix: use bool, i32, u32 or f32", t)
}
