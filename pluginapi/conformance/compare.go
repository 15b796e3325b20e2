package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// Report summarises one comparison of a backend's outputs with the reference.
type Report struct {
	// Bound is what f32 elements were held to (kernels.BoundFor the program).
	Bound kernels.Bound
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
	// Mismatches is the number of elements that match no reference.
	Mismatches int
}

// maxExamples is how many mismatching elements an error describes.
const maxExamples = 3

// Compare checks a backend's outputs (got) against accepted references (refs: the
// CPU reference's outputs for p and, optionally, those of p's Variants) with
// docs/design.md's rules: one buffer per write or read_write buffer in binding
// order, byte lengths equal to the references', integer elements equal to the
// same element of some reference, f32 elements within kernels.BoundFor(p) of the
// same element of some reference (kernels.Bound.Element). The error names the
// program, the bound, how many elements differ, and the first few with both
// values. The Report is filled in either way; CLI verification reports its
// MaxULP. Verify is Compare with the variants run only when needed.
func Compare(p *ir.Program, got [][]byte, refs ...[][]byte) (Report, error) {
	rep := Report{Bound: kernels.BoundFor(p), References: len(refs)}
	outs := p.Outputs()
	if len(refs) == 0 {
		return rep, fmt.Errorf("conformance: program %q: no reference outputs to compare with", p.Name)
	}
	if len(got) != len(outs) {
		return rep, fmt.Errorf("conformance: program %q has %d output buffers, the backend returned %d",
			p.Name, len(outs), len(got))
	}
	for _, ref := range refs {
		if len(ref) != len(outs) {
			return rep, fmt.Errorf("conformance: program %q has %d output buffers, the reference returned %d",
				p.Name, len(outs), len(ref))
		}
	}
	var examples []string
	for i, binding := range outs {
		decl := p.Buffers[binding]
		g := got[i]
		for _, ref := range refs {
			if len(ref[i]) != len(refs[0][i]) {
				return rep, fmt.Errorf("conformance: program %q: output %q of the references differ in length (%d and %d bytes)",
					p.Name, decl.Name, len(refs[0][i]), len(ref[i]))
			}
		}
		w0 := refs[0][i]
		if len(g) != len(w0) {
			return rep, fmt.Errorf("conformance: program %q: output %q is %d bytes, the reference %d bytes",
				p.Name, decl.Name, len(g), len(w0))
		}
		if len(w0)%4 != 0 {
			return rep, fmt.Errorf("conformance: program %q: output %q is %d bytes, not whole 4-byte elements",
				p.Name, decl.Name, len(w0))
		}
		rep.Outputs++
		for off := 0; off < len(w0); off += 4 {
			rep.Elements++
			gb := binary.LittleEndian.Uint32(g[off:])
			var best kernels.Verdict
			for k, ref := range refs {
				v := element(decl.Type, rep.Bound, gb, binary.LittleEndian.Uint32(ref[i][off:]))
				if k == 0 || better(v, best) {
					best = v
				}
			}
			if best.Measured && decl.Type == ir.F32 {
				rep.MaxULP = max(rep.MaxULP, best.ULP)
			}
			if best.OK {
				continue
			}
			rep.Mismatches++
			if len(examples) < maxExamples {
				examples = append(examples, describe(decl, off/4, gb, binary.LittleEndian.Uint32(w0[off:]), best))
			}
		}
	}
	if rep.Mismatches > 0 {
		refNote := ""
		if len(refs) > 1 {
			refNote = fmt.Sprintf(" and its %d accepted variants (unfused fma, flushed denormals)", len(refs)-1)
		}
		return rep, fmt.Errorf("conformance: program %q: %d of %d output elements differ from the CPU reference%s beyond the bound (f32: %s; integers: bit-exact): %s",
			p.Name, rep.Mismatches, rep.Elements, refNote, rep.Bound, strings.Join(examples, "; "))
	}
	return rep, nil
}

// element compares one element of type t: integers and bools bit for bit, f32
// under b.
func element(t ir.Type, b kernels.Bound, got, want uint32) kernels.Verdict {
	if t == ir.F32 {
		return b.Element(got, want)
	}
	return kernels.Verdict{OK: got == want, Measured: true}
}

// better reports whether verdict a is a closer match than b: accepted over
// rejected, measured over NaN against a number, then fewer ULP.
func better(a, b kernels.Verdict) bool {
	if a.OK != b.OK {
		return a.OK
	}
	if a.Measured != b.Measured {
		return a.Measured
	}
	return a.ULP < b.ULP
}

func describe(d ir.BufferDecl, index int, got, want uint32, v kernels.Verdict) string {
	s := fmt.Sprintf("%s[%d]: got %s, want %s", d.Name, index, kernels.Format(d.Type, got), kernels.Format(d.Type, want))
	if d.Type == ir.F32 && v.Measured {
		s += fmt.Sprintf(" (%d ULP apart)", v.ULP)
	}
	return s
}

// Reference runs a program on the CPU reference with the launch under test and
// returns its outputs: the kit runs the interpreter, the CLI dispatches to cpu-ref.
type Reference func(p *ir.Program) ([][]byte, error)

// Verify compares got with the reference's outputs for p and, when they differ,
// with the outputs of each of p's Variants too (Compare with all of them), so
// that a backend that evaluates fma unfused or flushes denormals passes while
// the common case costs one reference run.
func Verify(p *ir.Program, got [][]byte, ref Reference) (Report, error) {
	want, err := ref(p)
	if err != nil {
		return Report{Bound: kernels.BoundFor(p)}, fmt.Errorf("conformance: program %q: the CPU reference failed: %w", p.Name, err)
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
			return rep, errors.Join(err, fmt.Errorf("conformance: program %q: the CPU reference failed on the %s variant: %w", p.Name, v.Name, verr))
		}
		refs = append(refs, out)
	}
	return Compare(p, got, refs...)
}

// MatchOracle runs case c of p on the CPU reference interpreter (c's
// specialization, workgroup size, grid, inputs and uniforms) and compares got
// with its outputs (Compare; no variant is accepted). Emitter tests use it to
// hold a simulated module to the oracle.
func MatchOracle(p *ir.Program, c kernels.Case, got [][]byte) error {
	want, err := interp.Run(context.Background(), p, interp.Options{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize},
		interp.Launch{Grid: c.Grid, Inputs: clone(c.Inputs), OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		return fmt.Errorf("conformance: program %q: the CPU reference failed: %w", p.Name, err)
	}
	_, err = Compare(p, got, want)
	return err
}
