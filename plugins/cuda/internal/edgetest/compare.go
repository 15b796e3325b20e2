package edgetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// Case is one program of the table and its launch.
type Case struct {
	Name   string
	Prog   *ir.Program
	Launch kernels.Case
	// Match compares element i of output out (in binding order) with the
	// oracle's; nil means bit for bit, any NaN equal to any NaN.
	Match func(out, i int, got, want uint32) bool
}

// Reference runs the case on the CPU reference interpreter.
func (c Case) Reference(ctx context.Context) ([][]byte, error) {
	return interp.Run(ctx, c.Prog, interp.Options{WorkgroupSize: c.Launch.WorkgroupSize, Spec: c.Launch.Spec},
		interp.Launch{Grid: c.Launch.Grid, Inputs: c.Launch.Inputs, OutputCounts: c.Launch.OutputCounts, Uniforms: c.Launch.Uniforms})
}

// Compare checks got against the oracle's outputs want under the case's rule and
// returns a description of the first mismatches (at most 8), or nil.
func (c Case) Compare(got, want [][]byte) []string {
	match := c.Match
	if match == nil {
		match = func(_, _ int, g, w uint32) bool { return Exact(g, w) }
	}
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%d outputs, want %d", len(got), len(want))}
	}
	outs := c.Prog.Outputs()
	var bad []string
	for k := range got {
		name := c.Prog.Buffers[outs[k]].Name
		if len(got[k]) != len(want[k]) {
			bad = append(bad, fmt.Sprintf("output %s: %d bytes, want %d", name, len(got[k]), len(want[k])))
			continue
		}
		for i := 0; i+4 <= len(got[k]); i += 4 {
			g, w := binary.LittleEndian.Uint32(got[k][i:]), binary.LittleEndian.Uint32(want[k][i:])
			if match(k, i/4, g, w) {
				continue
			}
			if len(bad) == 8 {
				return bad
			}
			var ins []string
			for _, in := range c.Launch.Inputs {
				if i+4 <= len(in) {
					ins = append(ins, fmt.Sprintf("%#08x", binary.LittleEndian.Uint32(in[i:])))
				}
			}
			bad = append(bad, fmt.Sprintf("%s[%d]: got %#08x, want %#08x (inputs at that index %v)", name, i/4, g, w, ins))
		}
	}
	return bad
}

// IsNaN reports whether bits is an f32 NaN.
func IsNaN(bits uint32) bool { return bits&0x7FFFFFFF > 0x7F800000 }

func isInf(bits uint32) bool { return bits&0x7FFFFFFF == 0x7F800000 }

// Exact is the bit-exact rule: equal bits, or both NaN.
func Exact(got, want uint32) bool { return got == want || IsNaN(got) && IsNaN(want) }

// ULPs is the distance between two non-NaN f32 values in units in the last place
// (the zeros are 0 apart).
func ULPs(a, b uint32) uint64 {
	ord := func(x uint32) int64 {
		if x&0x80000000 != 0 {
			return -int64(x & 0x7FFFFFFF)
		}
		return int64(x)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

// withinULP accepts got within n ULP of want; NaN and infinities must match.
func withinULP(got, want uint32, n uint64) bool {
	switch {
	case IsNaN(want) || IsNaN(got):
		return IsNaN(want) && IsNaN(got)
	case isInf(want) || isInf(got):
		return got == want
	}
	return ULPs(got, want) <= n
}

func f32(bits uint32) float64 { return float64(math.Float32frombits(bits)) }

// transcendental returns the rule for exp, log, sin or cos applied to the inputs
// xs (nil for any other operator):
//   - exp within 3 + 2·|x| ULP (Vulkan's bound, which ex2.approx keeps);
//   - log within 2^-21 absolute on [0.5, 2] and 3 ULP elsewhere; of a positive
//     denormal anything from -inf to log of the smallest normal;
//   - sin and cos within 2^-19 absolute on [-π, π] and 2^-16 up to |x| = 10^4,
//     which the emitter's argument reduction keeps; beyond, only |result| <= 1.
func transcendental(op ir.UnaryOp, xs []uint32) func(out, i int, got, want uint32) bool {
	switch op {
	case ir.OpExp:
		return func(_, i int, got, want uint32) bool {
			return withinULP(got, want, uint64(3+2*min(math.Abs(f32(xs[i])), 1e9)))
		}
	case ir.OpLog:
		return func(_, i int, got, want uint32) bool {
			x := f32(xs[i])
			switch {
			case xs[i]&0x7F800000 == 0 && x > 0:
				return !IsNaN(got) && f32(got) <= math.Log(0x1p-126)
			case x >= 0.5 && x <= 2 && !IsNaN(got):
				return math.Abs(f32(got)-f32(want)) < 0x1p-21
			}
			return withinULP(got, want, 3)
		}
	case ir.OpSin, ir.OpCos:
		return func(_, i int, got, want uint32) bool {
			x := math.Abs(f32(xs[i]))
			switch {
			case IsNaN(want) || IsNaN(got):
				return IsNaN(want) && IsNaN(got)
			case x <= math.Pi:
				return math.Abs(f32(got)-f32(want)) <= 0x1p-19
			case x <= 1e4:
				return math.Abs(f32(got)-f32(want)) <= 0x1p-16
			}
			return math.Abs(f32(got)) <= 1
		}
	}
	return nil
}
