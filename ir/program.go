package ir

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir/half"
)

// Type is the scalar type of a value, a buffer element, a shared array element, a
// matrix element or a parameter. IR v1 has four types and IR v1.2 adds the 16-bit
// floats F16 and BF16; none converts implicitly to another.
type Type uint8

// The IR v1 types. The zero Type is invalid, so a forgotten type is caught by Validate.
const (
	Bool Type = iota + 1
	I32
	U32
	F32
	// F16 is IEEE binary16 (IR v1.2): an arithmetic type, 2 bytes in memory.
	F16
	// BF16 is bfloat16 (IR v1.2): float32's sign and exponent with 7 fraction bits,
	// a storage and matrix type (load, store, cast, select), 2 bytes in memory.
	BF16
	typeEnd // one past the last type; keep it last
)

// Types lists every defined type in declaration order.
func Types() []Type { return enumValues(typeNames[:], Bool) }

var typeNames = [...]string{Bool: "bool", I32: "i32", U32: "u32", F32: "f32", F16: "f16", BF16: "bf16"}

// String returns the type's name as written in the JSON form ("f32").
func (t Type) String() string { return enumString(typeNames[:], Bool, t) }

// Valid reports whether t is one of the defined types.
func (t Type) Valid() bool { return t > 0 && t < typeEnd }

// IsInteger reports whether t is i32 or u32.
func (t Type) IsInteger() bool { return t == I32 || t == U32 }

// IsFloat reports whether t is f32, f16 or bf16.
func (t Type) IsFloat() bool { return t == F32 || t == F16 || t == BF16 }

// Is16Bit reports whether t is one of IR v1.2's 16-bit floats, f16 or bf16.
func (t Type) Is16Bit() bool { return t == F16 || t == BF16 }

// Size returns the bytes one element of type t takes in a buffer or shared array:
// 2 for f16 and bf16, 4 for the others (bool included).
func (t Type) Size() uint32 {
	if t.Is16Bit() {
		return 2
	}
	return 4
}

// IsNumeric reports whether t is i32, u32 or f32 (the IR v1 numeric types; f16's
// arithmetic is checked separately).
func (t Type) IsNumeric() bool { return t == I32 || t == U32 || t == F32 }

// ParseType turns a type name ("u32") into a Type.
func ParseType(name string) (Type, bool) { return parseEnum(typeNames[:], Bool, name) }

// Access says how a kernel may use a buffer.
type Access uint8

// Buffer access modes. Read buffers are inputs, Write buffers are outputs that start
// zero-filled, ReadWrite buffers are inputs that are also returned as outputs.
const (
	Read Access = iota + 1
	Write
	ReadWrite
	accessEnd
)

var accessNames = [...]string{Read: "read", Write: "write", ReadWrite: "read_write"}

// String returns the access mode's JSON name.
func (a Access) String() string { return enumString(accessNames[:], Read, a) }

// Valid reports whether a is one of the defined access modes.
func (a Access) Valid() bool { return a > 0 && a < accessEnd }

// ParseAccess turns an access name ("read_write") into an Access.
func ParseAccess(name string) (Access, bool) { return parseEnum(accessNames[:], Read, name) }

// Readable reports whether kernels may load from a buffer with this access.
func (a Access) Readable() bool { return a == Read || a == ReadWrite }

// Writable reports whether kernels may store to a buffer with this access.
func (a Access) Writable() bool { return a == Write || a == ReadWrite }

// IsOutput reports whether a buffer with this access is returned by a dispatch.
func (a Access) IsOutput() bool { return a.Writable() }

// Program is one compute kernel: a grid of workgroups of WorkgroupSize invocations,
// each running Body. See docs/design.md, "The program (IR)".
type Program struct {
	// Name is the stable op id, e.g. "kiln.vector.add.f32".
	Name string
	// WorkgroupSize is the number of invocations per workgroup on each axis.
	WorkgroupSize [3]uint32
	// SubgroupSize is the subgroup size the program requires (IR v1.1): a power of
	// two from 1 to MaxSubgroupSize, or 0 when the program runs with any size. See
	// docs/design.md, "IR v1.1".
	SubgroupSize uint32
	// Params are the specialization constants.
	Params []ParamDecl
	// Uniforms are the scalar inputs supplied with each dispatch (IR v1.1), in the
	// order of their values in a dispatch's uniform bytes (see EncodeUniforms).
	Uniforms []UniformDecl
	// Buffers are the storage buffers, with dense bindings 0..n-1.
	Buffers []BufferDecl
	// Shared are the workgroup-local arrays.
	Shared []SharedDecl
	// Matrices are the workgroup matrices (IR v1.2): tiles held by the workgroup as
	// a whole and used only by the matrix statements. See docs/design.md, "IR v1.2".
	Matrices []MatrixDecl
	// Body is run by every invocation.
	Body []Stmt
}

// ParamDecl declares a specialization constant with its default value.
type ParamDecl struct {
	Name    string
	Type    Type
	Default Literal
	// Candidates, when not empty, make the parameter a tunable: the values an
	// autotuner may try, the default among them. They are advice to tuners, not
	// part of the program's meaning, so the binary encoding (and so Digest)
	// leaves them out. See docs/design.md, "Autotune records".
	Candidates []Literal
}

// MaxCandidates is the most candidate values a parameter may declare.
const MaxCandidates = 64

// Tunables returns the parameters that declare candidates, in declaration order.
func (p *Program) Tunables() []ParamDecl {
	var out []ParamDecl
	for _, d := range p.Params {
		if len(d.Candidates) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// UniformDecl declares a uniform: a scalar of type i32, u32 or f32 whose value every
// dispatch supplies (push constants on Vulkan, kernel parameters on CUDA). Unlike a
// parameter it has no default and does not change the compiled program.
type UniformDecl struct {
	Name string
	Type Type
}

// BufferDecl declares a storage buffer.
type BufferDecl struct {
	Name    string
	Binding uint32
	Type    Type
	Access  Access
	// Count fixes the element count; 0 means the dispatch decides it.
	Count uint32
}

// SharedDecl declares a workgroup-shared array of Count elements.
type SharedDecl struct {
	Name  string
	Type  Type
	Count uint32
}

// MatrixDecl declares a workgroup matrix of Rows×Cols elements of Type (f16, bf16
// or f32). Rows and Cols are multiples of 16, at most MaxMatrixDim.
type MatrixDecl struct {
	Name       string
	Type       Type
	Rows, Cols uint32
}

// Bytes returns the matrix's size in bytes.
func (m MatrixDecl) Bytes() uint32 { return m.Rows * m.Cols * m.Type.Size() }

// Limits on workgroup matrices (IR v1.2): each side a multiple of MatrixDimStep and
// at most MaxMatrixDim; all of a program's matrices together at most MaxMatrixBytes.
// DESIGN.md first said 64 KiB; that caps a workgroup's tile at about 128×96 f32,
// which measured 54% of cuBLAS bf16 on an H200 against 70% for a 256×128×64 tile
// (176 KiB of matrices), so the limit admits that tile. See docs/design.md, "IR v1.2:
// spellings and validation".
const (
	MatrixDimStep  = 16
	MaxMatrixDim   = 256
	MaxMatrixBytes = 192 << 10
)

// Matrix returns the matrix declaration named name.
func (p *Program) Matrix(name string) (MatrixDecl, bool) {
	for _, m := range p.Matrices {
		if m.Name == name {
			return m, true
		}
	}
	return MatrixDecl{}, false
}

// Buffer returns the buffer declaration named name.
func (p *Program) Buffer(name string) (BufferDecl, bool) {
	for _, b := range p.Buffers {
		if b.Name == name {
			return b, true
		}
	}
	return BufferDecl{}, false
}

// Param returns the parameter declaration named name.
func (p *Program) Param(name string) (ParamDecl, bool) {
	for _, d := range p.Params {
		if d.Name == name {
			return d, true
		}
	}
	return ParamDecl{}, false
}

// ParamValues returns every parameter's value under spec: the value spec sets,
// the default otherwise. A name spec sets that p does not declare, or a value of
// another type, is an error. Backends that fold parameters into their code as
// constants use it.
func (p *Program) ParamValues(spec SpecMap) (map[string]Literal, error) {
	vals := make(map[string]Literal, len(p.Params))
	for _, d := range p.Params {
		vals[d.Name] = d.Default
	}
	for _, name := range spec.Names() {
		d, ok := p.Param(name)
		if !ok {
			return nil, fmt.Errorf("no parameter %q to specialize. Fix: specialize only declared parameters", name)
		}
		v, _ := spec.Get(name)
		l, ok := v.Literal()
		if !ok || l.Type != d.Type {
			return nil, fmt.Errorf("parameter %q is %s but the specialization value is %s. Fix: pass a %s value", name, d.Type, v, d.Type)
		}
		vals[name] = l
	}
	return vals, nil
}

// Uniform returns the uniform declaration named name.
func (p *Program) Uniform(name string) (UniformDecl, bool) {
	for _, u := range p.Uniforms {
		if u.Name == name {
			return u, true
		}
	}
	return UniformDecl{}, false
}

// Outputs returns the bindings of the buffers a dispatch returns, in binding order.
func (p *Program) Outputs() []uint32 {
	var out []uint32
	for b := uint32(0); int(b) < len(p.Buffers); b++ {
		for _, d := range p.Buffers {
			if d.Binding == b && d.Access.IsOutput() {
				out = append(out, b)
			}
		}
	}
	return out
}

// GridFor returns the number of workgroups on each axis needed to cover invocations
// with workgroups of size wg (ceil on each axis). An axis with a zero workgroup size
// gets zero workgroups.
func GridFor(invocations, wg [3]uint32) [3]uint32 {
	var g [3]uint32
	for i := range g {
		if wg[i] == 0 {
			continue
		}
		g[i] = uint32((uint64(invocations[i]) + uint64(wg[i]) - 1) / uint64(wg[i]))
	}
	return g
}

// Literal is a typed constant. Bits holds the value's bit pattern: the IEEE-754 bits
// for f32 (so NaN payloads survive), the 16 bits of an f16 or bf16 in the low half,
// two's complement for i32, 0 or 1 for bool.
type Literal struct {
	Type Type
	Bits uint32
}

// F32 returns the literal's value as a float32.
func (l Literal) F32() float32 { return math.Float32frombits(l.Bits) }

// Float32 returns the value of an f32, f16 or bf16 literal as a float32 (exact).
func (l Literal) Float32() float32 {
	switch l.Type {
	case F16:
		return half.Float16(l.Bits).Float32()
	case BF16:
		return half.BFloat16(l.Bits).Float32()
	}
	return math.Float32frombits(l.Bits)
}

// I32 returns the literal's value as an int32.
func (l Literal) I32() int32 { return int32(l.Bits) }

// Bool returns the literal's value as a bool.
func (l Literal) Bool() bool { return l.Bits != 0 }
