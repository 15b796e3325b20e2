package edgetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// Case is one program of the table and its launch.
type Case struct {
	Name   string
	Prog   *ir.Program
	Launch kernels.Case
	// Match compares element i of output out (in binding order) with the
	// oracle's; nil means bit for bit, any NaN equal to any NaN.
	Match func(out, i int, got, want uint32) bool
	// Want, when set, is the outputs the case must give, computed with ir/half
	// (the IR v1.2 cases): Reference returns them, and OracleAgrees checks them
	// against the oracle.
	Want [][]byte
}

// Reference returns the case's expected outputs: Want when set, else the CPU
// reference interpreter's.
func (c Case) Reference(ctx context.Context) ([][]byte, error) {
	if c.Want != nil {
		return c.Want, nil
	}
	return c.oracle(ctx)
}

// OracleAgrees runs a case with Want on the CPU reference interpreter and
// returns the differences from Want under the case's rule; the error is the
// oracle's.
func (c Case) OracleAgrees(ctx context.Context) ([]string, error) {
	got, err := c.oracle(ctx)
	if err != nil {
		return nil, err
	}
	return c.Compare(got, c.Want), nil
}

func (c Case) oracle(ctx context.Context) ([][]byte, error) {
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
		decl := c.Prog.Buffers[outs[k]]
		name, size := decl.Name, int(decl.Type.Size())
		if c.Match == nil && decl.Type.Is16Bit() {
			match = func(_, _ int, g, w uint32) bool { return Exact16(decl.Type, g, w) }
		}
		if len(got[k]) != len(want[k]) {
			bad = append(bad, fmt.Sprintf("output %s: %d bytes, want %d", name, len(got[k]), len(want[k])))
			continue
		}
		for i := 0; i+size <= len(got[k]); i += size {
			g, w := element(got[k][i:], size), element(want[k][i:], size)
			if match(k, i/size, g, w) {
				continue
			}
			if len(bad) == 8 {
				return bad
			}
			var ins []string
			for b, in := range c.Launch.Inputs {
				n := int(c.Prog.Buffers[b].Type.Size())
				if j := i / size * n; j+n <= len(in) {
					ins = append(ins, fmt.Sprintf("%#08x", element(in[j:], n)))
				}
			}
			bad = append(bad, fmt.Sprintf("%s[%d]: got %#08x, want %#08x (inputs at that index %v)", name, i/size, g, w, ins))
		}
	}
	return bad
}

// element reads a little-endian element of size bytes (2 or 4).
func element(b []byte, size int) uint32 {
	if size == 2 {
		return uint32(binary.LittleEndian.Uint16(b))
	}
	return binary.LittleEndian.Uint32(b)
}

func isInf(bits uint32) bool { return bits&0x7FFFFFFF == 0x7F800000 }

// Exact is the bit-exact rule: equal bits, or both NaN.
func Exact(got, want uint32) bool { return got == want || verify.IsNaN(got) && verify.IsNaN(want) }

// withinULP accepts got within n ULP of want; NaN and infinities must match.
func withinULP(got, want uint32, n uint64) bool {
	switch {
	case verify.IsNaN(want) || verify.IsNaN(got):
		return verify.IsNaN(want) && verify.IsNaN(got)
	case isInf(want) || isInf(got):
		return got == want
	}
	return verify.ULP(got, want) <= n
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
				return !verify.IsNaN(got) && f32(got) <= math.Log(0x1p-126)
			case x >= 0.5 && x <= 2 && !verify.IsNaN(got):
				return math.Abs(f32(got)-f32(want)) < 0x1p-21
			}
			return withinULP(got, want, 3)
		}
	case ir.OpSin, ir.OpCos:
		return func(_, i int, got, want uint32) bool {
			x := math.Abs(f32(xs[i]))
			switch {
			case verify.IsNaN(want) || verify.IsNaN(got):
				return verify.IsNaN(want) && verify.IsNaN(got)
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
