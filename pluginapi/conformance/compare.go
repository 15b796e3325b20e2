package conformance

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Report summarises one comparison of a backend's outputs with the reference.
type Report struct {
	// Bound is what f32 elements were held to (BoundFor the program).
	Bound Bound
	// Outputs is the number of output buffers compared; Elements the number of
	// elements in them.
	Outputs, Elements int
	// MaxULP is the largest distance, in units in the last place, seen between an
	// f32 output element and its reference, within the bound or not. Element pairs
	// that count as equal without being bit-identical (NaN and NaN, zero or
	// subnormal on both sides) count as 0; a NaN opposite a number is a mismatch and
	// does not count.
	MaxULP uint64
	// Mismatches is the number of elements outside the bound.
	Mismatches int
}

// maxExamples is how many mismatching elements an error describes.
const maxExamples = 3

// Compare checks a backend's outputs (got) against the CPU reference's (want) for
// program p, with DESIGN.md's rules: one buffer per write or read_write buffer in
// binding order, equal byte lengths, integer elements bit-exact, f32 elements
// within BoundFor(p). The error names the program, the bound, how many elements
// differ, and the first few with both values. The Report is filled in either way;
// CLI verification reports its MaxULP.
func Compare(p *ir.Program, got, want [][]byte) (Report, error) {
	rep := Report{Bound: BoundFor(p)}
	outs := p.Outputs()
	if len(got) != len(outs) || len(want) != len(outs) {
		return rep, fmt.Errorf("conformance: program %q has %d output buffers, the backend returned %d and the reference %d",
			p.Name, len(outs), len(got), len(want))
	}
	var examples []string
	for i, binding := range outs {
		decl := bufferAt(p, binding)
		g, w := got[i], want[i]
		if len(g) != len(w) {
			return rep, fmt.Errorf("conformance: program %q: output %q is %d bytes, the reference %d bytes",
				p.Name, decl.Name, len(g), len(w))
		}
		if len(w)%4 != 0 {
			return rep, fmt.Errorf("conformance: program %q: output %q is %d bytes, not whole 4-byte elements",
				p.Name, decl.Name, len(w))
		}
		rep.Outputs++
		for off := 0; off < len(w); off += 4 {
			rep.Elements++
			gb, wb := binary.LittleEndian.Uint32(g[off:]), binary.LittleEndian.Uint32(w[off:])
			var ulp uint64
			var ok bool
			if decl.Type == ir.F32 {
				var comparable bool
				ulp, comparable, ok = rep.Bound.accepts(gb, wb)
				if comparable {
					rep.MaxULP = max(rep.MaxULP, ulp)
				}
			} else {
				ok = gb == wb
			}
			if ok {
				continue
			}
			rep.Mismatches++
			if len(examples) < maxExamples {
				examples = append(examples, describe(decl, off/4, gb, wb, ulp))
			}
		}
	}
	if rep.Mismatches > 0 {
		return rep, fmt.Errorf("conformance: program %q: %d of %d output elements differ from the CPU reference beyond the bound (f32: %s; integers: bit-exact): %s",
			p.Name, rep.Mismatches, rep.Elements, rep.Bound, strings.Join(examples, "; "))
	}
	return rep, nil
}

// bufferAt returns the declaration of the buffer at binding.
func bufferAt(p *ir.Program, binding uint32) ir.BufferDecl {
	for _, d := range p.Buffers {
		if d.Binding == binding {
			return d
		}
	}
	return ir.BufferDecl{}
}

func describe(d ir.BufferDecl, index int, got, want uint32, ulp uint64) string {
	s := fmt.Sprintf("%s[%d]: got %s, want %s", d.Name, index, format(d.Type, got), format(d.Type, want))
	if d.Type == ir.F32 && !isNaN(got) && !isNaN(want) {
		s += fmt.Sprintf(" (%d ULP apart)", ulp)
	}
	return s
}

// format writes an element of type t with its bit pattern.
func format(t ir.Type, bits uint32) string {
	switch t {
	case ir.F32:
		return fmt.Sprintf("%g (0x%08x)", math.Float32frombits(bits), bits)
	case ir.I32:
		return fmt.Sprintf("%d (0x%08x)", int32(bits), bits)
	}
	return fmt.Sprintf("%d (0x%08x)", bits, bits)
}

// accepts compares one f32 element with its reference. ulp is their distance;
// comparable is false when a NaN faces a number (no distance); ok reports whether
// the element is within the bound.
func (b Bound) accepts(got, want uint32) (ulp uint64, comparable, ok bool) {
	switch gn, wn := isNaN(got), isNaN(want); {
	case gn && wn:
		return 0, true, true
	case gn || wn:
		return 0, false, false
	}
	if flushable(got) && flushable(want) {
		return 0, true, true
	}
	ulp = ulpDistance(got, want)
	limit := b.ULP
	if b.Exp {
		limit += expExtraULP(want)
	}
	if ulp <= limit {
		return ulp, true, true
	}
	g, w := float64(math.Float32frombits(got)), float64(math.Float32frombits(want))
	if b.Abs > 0 && !math.IsInf(g, 0) && !math.IsInf(w, 0) && math.Abs(g-w) <= b.Abs {
		return ulp, true, true
	}
	return ulp, true, false
}

// expExtraULP is exp's 2·|x| ULP with x estimated as ln|want|, capped where exp
// saturates.
func expExtraULP(want uint32) uint64 {
	x := math.Abs(math.Log(math.Abs(float64(math.Float32frombits(want)))))
	if math.IsNaN(x) || x > maxExpArg {
		x = maxExpArg
	}
	return uint64(math.Ceil(2 * x))
}

func isNaN(bits uint32) bool { return bits&0x7F800000 == 0x7F800000 && bits&0x007FFFFF != 0 }

// flushable reports whether bits is a zero or a subnormal, which a backend that
// flushes denormals may turn into a zero of either sign.
func flushable(bits uint32) bool { return bits&0x7F800000 == 0 }

// ulpDistance is the number of representable f32 values between a and b (neither
// NaN); +0 and -0 are 0 apart.
func ulpDistance(a, b uint32) uint64 {
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
