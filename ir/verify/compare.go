package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Report summarises one comparison of outputs with their references.
type Report struct {
	// Bound is what f32 elements were held to (BoundFor the program, in Compare
	// and Outputs).
	Bound Bound
	// References is the number of accepted references compared with: 1, or more
	// when the outputs differed from the plain reference and the program's
	// Variants were run.
	References int
	// Outputs is the number of output buffers compared; Elements the number of
	// elements in them.
	Outputs, Elements int
	// MaxULP is the largest distance, in units in the last place, between an f32
	// output element and the nearest of its references, within the bound or not.
	// Pairs that match by rule (NaN and NaN, a flushed denormal) count as 0; a NaN
	// opposite a number is a mismatch and does not count.
	MaxULP uint64
	// MaxULP16 is MaxULP for f16 and bf16 output elements (IR v1.2), in units
	// in the last place of their own type.
	MaxULP16 uint64
	// Mismatches is the number of elements that match no reference.
	Mismatches int
}

// Buffer names one output buffer of a comparison and the type of its elements.
type Buffer struct {
	Name string
	Type ir.Type
}

// maxExamples is how many mismatching elements an error describes.
const maxExamples = 3

// Buffers compares outputs (got, one per buffer of bufs) with accepted
// references (refs, each shaped as got): byte lengths equal to the references',
// in whole elements (2 bytes for f16 and bf16, 4 for the others); integer
// elements equal to the same element of some reference, f32 elements within b of
// it (Bound.Element), f16 and bf16 elements within b's ULP16 (Bound.Element16). The error counts the
// elements that differ and describes the first few with both values and how far
// apart they are. The Report is filled in either way. The corpus checks its
// kernels' outputs against their plain-Go references with it.
func Buffers(bufs []Buffer, b Bound, got [][]byte, refs ...[][]byte) (Report, error) {
	return compare(bufs, b, "the reference", got, refs)
}

// Compare checks a backend's outputs (got) against accepted references (refs: the
// CPU reference's outputs for p and, optionally, those of p's Variants) with
// docs/design.md's rules: Buffers with one buffer per write or read_write buffer
// of p in binding order and the bound BoundFor(p). The error names the program,
// the bound, how many elements differ, and the first few with both values.
// Outputs is Compare with the variants run only when needed.
func Compare(p *ir.Program, got [][]byte, refs ...[][]byte) (Report, error) {
	var bufs []Buffer
	for _, binding := range p.Outputs() {
		d := p.Buffers[binding]
		bufs = append(bufs, Buffer{Name: d.Name, Type: d.Type})
	}
	rep, err := compare(bufs, BoundFor(p), "the CPU reference", got, refs)
	if err != nil {
		return rep, fmt.Errorf("program %q: %w", p.Name, err)
	}
	return rep, nil
}

// compare is Buffers; against names the references in the error.
func compare(bufs []Buffer, b Bound, against string, got [][]byte, refs [][][]byte) (Report, error) {
	rep := Report{Bound: b, References: len(refs)}
	if err := checkShapes(bufs, got, refs); err != nil {
		return rep, err
	}
	var examples []string
	for i, buf := range bufs {
		g, w0 := got[i], refs[0][i]
		rep.Outputs++
		size := int(elementSize(buf.Type))
		for off := 0; off < len(w0); off += size {
			rep.Elements++
			gb := word(g[off:], size)
			var best Verdict
			for k, ref := range refs {
				v := element(buf.Type, b, gb, word(ref[i][off:], size))
				if k == 0 || better(v, best) {
					best = v
				}
			}
			switch {
			case !best.Measured:
			case buf.Type == ir.F32:
				rep.MaxULP = max(rep.MaxULP, best.ULP)
			case buf.Type.Is16Bit():
				rep.MaxULP16 = max(rep.MaxULP16, best.ULP)
			}
			if best.OK {
				continue
			}
			rep.Mismatches++
			if len(examples) < maxExamples {
				examples = append(examples, describe(buf, off/size, gb, word(w0[off:], size), best))
			}
		}
	}
	if rep.Mismatches > 0 {
		refNote := ""
		if len(refs) > 1 {
			refNote = fmt.Sprintf(" and its %d accepted variants (unfused fma, flushed denormals)", len(refs)-1)
		}
		return rep, fmt.Errorf("%d of %d output elements differ from %s%s beyond the bound (floats: %s; integers: bit-exact): %s",
			rep.Mismatches, rep.Elements, against, refNote, b, strings.Join(examples, "; "))
	}
	return rep, nil
}

// checkShapes checks that got and every reference have one buffer per output,
// of equal lengths in whole elements.
func checkShapes(bufs []Buffer, got [][]byte, refs [][][]byte) error {
	if len(refs) == 0 {
		return errors.New("no reference outputs to compare with")
	}
	if len(got) != len(bufs) {
		return fmt.Errorf("%d output buffers (%s), got %d", len(bufs), names(bufs), len(got))
	}
	for _, ref := range refs {
		if len(ref) != len(bufs) {
			return fmt.Errorf("%d output buffers (%s), the reference has %d", len(bufs), names(bufs), len(ref))
		}
	}
	for i, buf := range bufs {
		w0 := refs[0][i]
		for _, ref := range refs {
			if len(ref[i]) != len(w0) {
				return fmt.Errorf("output %s of the references differ in length (%d and %d bytes)", buf.Name, len(w0), len(ref[i]))
			}
		}
		size := elementSize(buf.Type)
		if len(got[i]) != len(w0) {
			return fmt.Errorf("output %s: got %d bytes (%d elements), want %d bytes (%d elements)",
				buf.Name, len(got[i]), len(got[i])/size, len(w0), len(w0)/size)
		}
		if len(w0)%size != 0 {
			return fmt.Errorf("output %s: %d bytes, not whole %d-byte elements", buf.Name, len(w0), size)
		}
	}
	return nil
}

func names(bufs []Buffer) string {
	var s []string
	for _, b := range bufs {
		s = append(s, b.Name)
	}
	return strings.Join(s, ", ")
}

// element compares one element of type t: integers and bools bit for bit, f32
// under b, f16 and bf16 under b's ULP16.
func element(t ir.Type, b Bound, got, want uint32) Verdict {
	switch {
	case t == ir.F32:
		return b.Element(got, want)
	case t.Is16Bit():
		return b.Element16(t, got, want)
	}
	return Verdict{OK: got == want, Measured: true}
}

// elementSize is the byte size of an element of type t in a buffer: 2 for f16
// and bf16, 4 for the others.
func elementSize(t ir.Type) int {
	if t.Is16Bit() {
		return 2
	}
	return 4
}

// word reads a little-endian element of size bytes (2 or 4).
func word(b []byte, size int) uint32 {
	if size == 2 {
		return uint32(binary.LittleEndian.Uint16(b))
	}
	return binary.LittleEndian.Uint32(b)
}

// better reports whether verdict a is a closer match than b: accepted over
// rejected, measured over NaN against a number, then fewer ULP.
func better(a, b Verdict) bool {
	if a.OK != b.OK {
		return a.OK
	}
	if a.Measured != b.Measured {
		return a.Measured
	}
	return a.ULP < b.ULP
}

// describe writes one mismatching element: "output out[3]: got 1.0000001 (0x3f800001),
// want 1 (0x3f800000) (1 ULP apart, difference 1.1920929e-07)".
func describe(b Buffer, index int, got, want uint32, v Verdict) string {
	s := fmt.Sprintf("output %s[%d]: got %s, want %s", b.Name, index, Format(b.Type, got), Format(b.Type, want))
	if !b.Type.IsFloat() {
		return s
	}
	if !v.Measured {
		return s + " (NaN against a number)"
	}
	d := math.Abs(Value(b.Type, got) - Value(b.Type, want))
	return s + fmt.Sprintf(" (%d ULP apart, difference %g)", v.ULP, d)
}

// Reference runs a program on the CPU reference with the launch under test and
// returns its outputs: the conformance kit runs the interpreter, the CLI
// dispatches to cpu-ref.
type Reference func(p *ir.Program) ([][]byte, error)

// Outputs compares got with the reference's outputs for p and, when they differ,
// with the outputs of each of p's Variants too (Compare with all of them), so
// that a backend that evaluates fma unfused or flushes denormals passes while
// the common case costs one reference run.
func Outputs(p *ir.Program, got [][]byte, ref Reference) (Report, error) {
	want, err := ref(p)
	if err != nil {
		return Report{Bound: BoundFor(p)}, fmt.Errorf("program %q: the CPU reference failed: %w", p.Name, err)
	}
	rep, err := Compare(p, got, want)
	variants := Variants(p)
	if err == nil || len(variants) == 0 || rep.Mismatches == 0 {
		// Passed, nothing else to accept, or a shape error no variant changes.
		return rep, err
	}
	refs := [][][]byte{want}
	for _, v := range variants {
		out, verr := ref(v.Program)
		if verr != nil {
			return rep, errors.Join(err, fmt.Errorf("program %q: the CPU reference failed on the %s variant: %w", p.Name, v.Name, verr))
		}
		refs = append(refs, out)
	}
	return Compare(p, got, refs...)
}
