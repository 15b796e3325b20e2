package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// Element is a Go type a buffer's elements are read and written as: float32,
// int32 and uint32 for the IR's f32, i32 and u32 (and u32 or i32 for bool),
// and uint16 for the raw bits of 2-byte storage: half.Float16 for f16 and
// half.BFloat16 for bf16 (IR v1.2; Float16s and BFloat16s convert float32
// values), or plain uint16 bits for either. Types derived from them (type
// Celsius float32) are elements too.
type Element interface {
	~float32 | ~int32 | ~uint32 | ~uint16
}

// elementSize is the size in bytes of one T.
func elementSize[T Element]() int {
	var zero T
	return int(reflect.TypeOf(zero).Size())
}

// elementKind is T's underlying kind, for errors and type checks.
func elementKind[T Element]() reflect.Kind {
	var zero T
	return reflect.TypeOf(zero).Kind()
}

// Bytes encodes xs as the little-endian bytes a buffer holds, whatever the
// host's byte order; floats keep their exact bits (NaN payloads, -0).
func Bytes[T Element](xs []T) []byte {
	out := make([]byte, elementSize[T]()*len(xs))
	switch elementKind[T]() {
	case reflect.Float32:
		for i, x := range xs {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(x)))
		}
	case reflect.Int32:
		for i, x := range xs {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(x)))
		}
	case reflect.Uint32:
		for i, x := range xs {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
		}
	default:
		for i, x := range xs {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(x))
		}
	}
	return out
}

// Values decodes little-endian buffer bytes into Ts. A length that is not a
// whole number of Ts is an error.
func Values[T Element](b []byte) ([]T, error) {
	size := elementSize[T]()
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%d bytes are not a whole number of %d-byte %s elements. Fix: decode the buffer as the type it holds", len(b), size, elementKind[T]())
	}
	out := make([]T, len(b)/size)
	decodeInto(out, b)
	return out, nil
}

// decodeInto fills dst from the first len(dst) little-endian elements of b.
func decodeInto[T Element](dst []T, b []byte) {
	switch elementKind[T]() {
	case reflect.Float32:
		for i := range dst {
			dst[i] = T(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case reflect.Int32:
		for i := range dst {
			dst[i] = T(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case reflect.Uint32:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint32(b[4*i:]))
		}
	default:
		for i := range dst {
			dst[i] = T(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
}

// Upload writes xs to the start of bf (Buffer.Write of Bytes(xs)).
func Upload[T Element](ctx context.Context, bf *Buffer, xs []T) error {
	return bf.Write(ctx, 0, Bytes(xs))
}

// Download reads all of bf as Ts. A buffer whose size is not a whole number
// of Ts is an error.
func Download[T Element](ctx context.Context, bf *Buffer) ([]T, error) {
	size := elementSize[T]()
	if bf.Size()%int64(size) != 0 {
		return nil, fmt.Errorf("%s is not a whole number of %d-byte %s elements. Fix: download it as the type it holds", bf.Name(), size, elementKind[T]())
	}
	out := make([]T, bf.Size()/int64(size))
	return out, ReadInto(ctx, bf, out)
}

// ReadInto fills dst from the first len(dst) elements of bf, reusing the
// caller's slice across reads.
func ReadInto[T Element](ctx context.Context, bf *Buffer, dst []T) error {
	b := make([]byte, elementSize[T]()*len(dst))
	if err := bf.Read(ctx, 0, b); err != nil {
		return err
	}
	decodeInto(dst, b)
	return nil
}

// NamedInput is a buffer's input by the program's name for the buffer, with
// its Go element type, which the launch checks against the buffer's type.
// Input makes one; Work.Named carries them.
type NamedInput struct {
	name string
	data []byte
	size int
	kind reflect.Kind
	typ  reflect.Type
}

// Input is the input xs for the program's buffer name, for Work.Named.
func Input[T Element](name string, xs []T) NamedInput {
	var zero T
	return NamedInput{name: name, data: Bytes(xs), size: elementSize[T](), kind: elementKind[T](), typ: reflect.TypeOf(zero)}
}

// Name is the buffer's name in the program.
func (in NamedInput) Name() string { return in.name }

var (
	float16Type  = reflect.TypeOf(half.Float16(0))
	bfloat16Type = reflect.TypeOf(half.BFloat16(0))
)

// kindFits reports whether Go elements of type typ (of kind) may fill a buffer
// of IR type t: a 16-bit buffer takes uint16 bits, or half's type of its own
// format, never the other format's.
func kindFits(kind reflect.Kind, typ reflect.Type, t ir.Type) bool {
	switch t {
	case ir.F16:
		return kind == reflect.Uint16 && typ != bfloat16Type
	case ir.BF16:
		return kind == reflect.Uint16 && typ != float16Type
	case ir.F32:
		return kind == reflect.Float32
	case ir.I32:
		return kind == reflect.Int32
	case ir.U32:
		return kind == reflect.Uint32
	case ir.Bool:
		return kind == reflect.Uint32 || kind == reflect.Int32
	}
	return false
}

// goType names the Go element type for IR type t.
func goType(t ir.Type) string {
	switch t {
	case ir.F32:
		return "float32"
	case ir.I32:
		return "int32"
	case ir.Bool:
		return "uint32 (0 or 1)"
	case ir.F16:
		return "half.Float16"
	case ir.BF16:
		return "half.BFloat16"
	}
	return "uint32"
}

// placeNamed puts w.Named into inputs (by binding), checking each against
// prog: a known, readable buffer, given once, by name or by binding, with
// elements of its type.
func placeNamed(prog *ir.Program, named []NamedInput, inputs [][]byte) error {
	byName := make(map[string]ir.BufferDecl, len(prog.Buffers))
	for _, d := range prog.Buffers {
		byName[d.Name] = d
	}
	seen := make(map[string]bool, len(named))
	for _, in := range named {
		d, ok := byName[in.name]
		switch {
		case !ok:
			return fmt.Errorf("no buffer %q in the program; it has %s. Fix: name one of its buffers", in.name, bufferNames(prog))
		case seen[in.name]:
			return fmt.Errorf("buffer %s is named twice in Work.Named. Fix: give each buffer one input", in.name)
		case !d.Access.Readable():
			return fmt.Errorf("buffer %s (binding %d) is write-only; it takes no input. Fix: drop it from Work.Named and set its output count if it has no fixed count", d.Name, d.Binding)
		case int(d.Binding) < len(inputs) && inputs[d.Binding] != nil:
			return fmt.Errorf("buffer %s (binding %d) has an input both by name and by binding. Fix: give it in Work.Named or in Work.Inputs, not both", d.Name, d.Binding)
		case in.size != int(d.Type.Size()):
			return fmt.Errorf("buffer %s (binding %d) holds %d-byte %s elements, its input has %d-byte %s elements. Fix: pass []%s made with host.Input", d.Name, d.Binding, d.Type.Size(), d.Type, in.size, in.typ, goType(d.Type))
		case !kindFits(in.kind, in.typ, d.Type):
			return fmt.Errorf("buffer %s (binding %d) holds %s, its input is %s. Fix: pass []%s (or the raw bits by binding in Work.Inputs)", d.Name, d.Binding, d.Type, in.typ, goType(d.Type))
		case int(d.Binding) >= len(inputs):
			return fmt.Errorf("buffer %s has binding %d outside 0..%d. Fix: validate the program", d.Name, d.Binding, len(inputs)-1)
		}
		seen[in.name] = true
		inputs[d.Binding] = in.data
	}
	return nil
}

// bufferNames lists prog's buffer names for an error.
func bufferNames(prog *ir.Program) string {
	names := make([]string, 0, len(prog.Buffers))
	for _, d := range prog.Buffers {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Output returns the bytes of the output buffer name: a write or read_write
// buffer of the program the result ran.
func (r *Result) Output(name string) ([]byte, error) {
	_, data, err := r.output(name)
	return data, err
}

func (r *Result) output(name string) (ir.BufferDecl, []byte, error) {
	if r.prog == nil {
		return ir.BufferDecl{}, nil, &LaunchError{Program: "<unknown>", Detail: fmt.Sprintf("the result does not know its program, so it has no output %q. Fix: use a Result from Dispatch, or Outputs by position", name)}
	}
	var (
		decl  ir.BufferDecl
		found bool
	)
	for _, d := range r.prog.Buffers {
		if d.Name == name {
			decl, found = d, true
		}
	}
	if !found || !decl.Access.IsOutput() {
		var outs []string
		for _, d := range r.prog.Buffers {
			if d.Access.IsOutput() {
				outs = append(outs, d.Name)
			}
		}
		slices.Sort(outs)
		return decl, nil, &LaunchError{Program: r.prog.Name, Detail: fmt.Sprintf("no output buffer %q; the outputs are %s. Fix: name a write or read_write buffer", name, strings.Join(outs, ", "))}
	}
	i := slices.Index(r.prog.Outputs(), decl.Binding)
	if i < 0 || i >= len(r.Outputs) {
		return decl, nil, &LaunchError{Program: r.prog.Name, Detail: fmt.Sprintf("output buffer %s is missing from the result. Fix: use the Result Dispatch returned, unmodified", name)}
	}
	return decl, r.Outputs[i], nil
}

// OutputAs returns the output buffer name of r as Ts; T must be the buffer's
// element type (uint32 or int32 for bool).
func OutputAs[T Element](r *Result, name string) ([]T, error) {
	decl, data, err := r.output(name)
	if err != nil {
		return nil, err
	}
	var zero T
	typ := reflect.TypeOf(zero)
	if elementSize[T]() != int(decl.Type.Size()) || !kindFits(elementKind[T](), typ, decl.Type) {
		return nil, &LaunchError{Program: r.prog.Name, Detail: fmt.Sprintf("output buffer %s holds %s, not %s. Fix: read it as []%s", name, decl.Type, typ, goType(decl.Type))}
	}
	return Values[T](data)
}

// Float16s rounds xs to f16, to nearest even, for an f16 buffer (IR v1.2):
// host.Input("a", host.Float16s(xs)).
func Float16s(xs []float32) []half.Float16 {
	out := make([]half.Float16, len(xs))
	for i, x := range xs {
		out[i] = half.NewFloat16(x)
	}
	return out
}

// BFloat16s rounds xs to bf16, to nearest even, for a bf16 buffer (IR v1.2).
func BFloat16s(xs []float32) []half.BFloat16 {
	out := make([]half.BFloat16, len(xs))
	for i, x := range xs {
		out[i] = half.NewBFloat16(x)
	}
	return out
}

// Float32s converts 16-bit values (half.Float16 or half.BFloat16, as an
// output read with OutputAs) to float32, exactly.
func Float32s[T interface{ Float32() float32 }](xs []T) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = x.Float32()
	}
	return out
}
