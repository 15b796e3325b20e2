package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// Tolerance bounds the accepted difference between an f32 output element and its
// reference: |got - want| ≤ Abs + Rel·|want|.
type Tolerance struct {
	Abs, Rel float64
}

// CompareExact compares one output buffer with its reference bit for bit, as
// elements of type t (i32, u32 or f32); for f32 any NaN equals any NaN. The error
// names the buffer, the first differing index, and both values.
func CompareExact(buffer string, t ir.Type, got, want []byte) error {
	if err := sameLength(buffer, got, want); err != nil {
		return err
	}
	for i := 0; i+4 <= len(want); i += 4 {
		g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:])
		if g == w || t == ir.F32 && isNaN(g) && isNaN(w) {
			continue
		}
		return fmt.Errorf("output %s[%d]: got %s, want %s (bit-exact comparison)",
			buffer, i/4, format(t, g), format(t, w))
	}
	return nil
}

// CompareF32 compares one f32 output buffer with its reference within tol. A NaN
// reference accepts only NaN, an infinite one only the same infinity. The error
// names the buffer, the first element out of bounds, and both values.
func CompareF32(buffer string, got, want []byte, tol Tolerance) error {
	if err := sameLength(buffer, got, want); err != nil {
		return err
	}
	for i := 0; i+4 <= len(want); i += 4 {
		gb, wb := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(want[i:])
		g := float64(math.Float32frombits(gb))
		w := float64(math.Float32frombits(wb))
		switch {
		case math.IsNaN(w) && math.IsNaN(g), g == w:
			continue
		case math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(g):
			// A NaN or an infinity on one side only is never within a tolerance.
		case math.Abs(g-w) <= tol.Abs+tol.Rel*math.Abs(w):
			continue
		}
		return fmt.Errorf("output %s[%d]: got %s, want %s (difference %g, allowed %g + %g·|want|)",
			buffer, i/4, format(ir.F32, gb), format(ir.F32, wb), math.Abs(g-w), tol.Abs, tol.Rel)
	}
	return nil
}

func sameLength(buffer string, got, want []byte) error {
	if len(got)%4 != 0 || len(want)%4 != 0 {
		return fmt.Errorf("output %s: got %d bytes, want %d: not whole 4-byte elements", buffer, len(got), len(want))
	}
	if len(got) != len(want) {
		return fmt.Errorf("output %s: got %d bytes (%d elements), want %d bytes (%d elements)",
			buffer, len(got), len(got)/4, len(want), len(want)/4)
	}
	return nil
}

func isNaN(bits uint32) bool { return math.IsNaN(float64(math.Float32frombits(bits))) }

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

// checkOutputs returns a Check for a kernel whose outputs, in binding order, are
// named names; it compares each output with cmp.
func checkOutputs(cmp func(buffer string, got, want []byte) error, names ...string) func(got, want [][]byte) error {
	return func(got, want [][]byte) error {
		if len(got) != len(names) || len(want) != len(names) {
			return fmt.Errorf("got %d output buffers and %d reference buffers, want %d (%v)",
				len(got), len(want), len(names), names)
		}
		for i, name := range names {
			if err := cmp(name, got[i], want[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// exact is a Check comparing every output bit for bit as elements of type t.
func exact(t ir.Type, names ...string) func(got, want [][]byte) error {
	return checkOutputs(func(buffer string, got, want []byte) error {
		return CompareExact(buffer, t, got, want)
	}, names...)
}

// within is a Check comparing every f32 output within tol.
func within(tol Tolerance, names ...string) func(got, want [][]byte) error {
	return checkOutputs(func(buffer string, got, want []byte) error {
		return CompareF32(buffer, got, want, tol)
	}, names...)
}
