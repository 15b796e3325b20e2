package conformance

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func f32s(vals ...uint32) []byte {
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], v)
	}
	return out
}

func bits(f float32) uint32 { return math.Float32bits(f) }

// exactProgram outputs an f32 buffer "out" and a u32 buffer "n" using only exact
// operations; divProgram also divides in f32.
func exactProgram() *ir.Program {
	return program(func(b *ir.Builder) {
		b.Store("out", ir.LitU32(0), ir.Add(x(), x()))
	})
}

func divProgram() *ir.Program {
	return program(func(b *ir.Builder) {
		b.Store("out", ir.LitU32(0), ir.Div(x(), x()))
	})
}

func TestULPDistance(t *testing.T) {
	one := bits(1)
	cases := []struct {
		a, b uint32
		want uint64
	}{
		{one, one, 0},
		{one, one + 1, 1},
		{0x00000000, 0x80000000, 0}, // +0 and -0
		{0x00000001, 0x80000001, 2}, // smallest subnormals across zero
		{bits(math.MaxFloat32), 0x7F800000, 1},
		{bits(-1), bits(1), 2 * uint64(one)},
	}
	for _, c := range cases {
		if got := ulpDistance(c.a, c.b); got != c.want {
			t.Errorf("ulpDistance(%#x, %#x) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := ulpDistance(c.b, c.a); got != c.want {
			t.Errorf("ulpDistance(%#x, %#x) = %d, want %d (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestCompareExactProgram(t *testing.T) {
	p := exactProgram()
	one := bits(1)
	want := [][]byte{f32s(one, 0x7FC00000, 0x00000001, bits(-2)), f32s(5)}
	ok := [][]byte{f32s(one, 0x7FC01234, 0x80000000, bits(-2)), f32s(5)} // other NaN, flushed subnormal
	rep, err := Compare(p, ok, want)
	if err != nil {
		t.Fatalf("equal outputs rejected: %v", err)
	}
	if rep.Outputs != 2 || rep.Elements != 5 || rep.MaxULP != 0 || rep.Mismatches != 0 || !rep.Bound.Exact() {
		t.Errorf("report %+v", rep)
	}
	off := [][]byte{f32s(one+1, 0x7FC00000, 0, bits(-2)), f32s(5)}
	rep, err = Compare(p, off, want)
	if err == nil || rep.Mismatches != 1 || rep.MaxULP != 1 {
		t.Fatalf("1 ULP off a bit-exact program: report %+v, error %v", rep, err)
	}
	for _, s := range []string{`"t.bound"`, "out[0]", "1 ULP apart", "bit-exact"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
}

func TestCompareNaNAgainstNumberFails(t *testing.T) {
	p := exactProgram()
	rep, err := Compare(p, [][]byte{f32s(0x7FC00000), f32s(0)}, [][]byte{f32s(bits(1)), f32s(0)})
	if err == nil || rep.Mismatches != 1 {
		t.Fatalf("NaN for 1.0 accepted: %+v", rep)
	}
	if rep.MaxULP != 0 {
		t.Errorf("a NaN mismatch counted %d ULP", rep.MaxULP)
	}
}

func TestCompareIntegersAreExact(t *testing.T) {
	p := divProgram() // the f32 bound never loosens integer outputs
	_, err := Compare(p, [][]byte{f32s(0), f32s(6)}, [][]byte{f32s(0), f32s(5)})
	if err == nil || !strings.Contains(err.Error(), "n[0]: got 6") {
		t.Fatalf("integer 6 for 5 accepted or badly described: %v", err)
	}
}

func TestCompareDivWithin3ULP(t *testing.T) {
	p := divProgram()
	w := bits(1.5)
	want := [][]byte{f32s(w, w), f32s(0)}
	rep, err := Compare(p, [][]byte{f32s(w+3, w-2), f32s(0)}, want)
	if err != nil {
		t.Fatalf("3 ULP rejected: %v", err)
	}
	if rep.MaxULP != 3 {
		t.Errorf("MaxULP %d, want 3", rep.MaxULP)
	}
	if _, err := Compare(p, [][]byte{f32s(w+4, w), f32s(0)}, want); err == nil {
		t.Error("4 ULP accepted under a 3 ULP bound")
	}
}

func TestCompareAbsoluteBound(t *testing.T) {
	p := program(func(b *ir.Builder) { b.Store("out", ir.LitU32(0), ir.Sin(x())) })
	// Near zero a 2^-12 difference is millions of ULP but within sin's 2^-11.
	want := [][]byte{f32s(bits(1e-6)), f32s(0)}
	if _, err := Compare(p, [][]byte{f32s(bits(1e-6 + 0x1p-12)), f32s(0)}, want); err != nil {
		t.Errorf("sin within 2^-11 rejected: %v", err)
	}
	if _, err := Compare(p, [][]byte{f32s(bits(1e-6 + 0x1p-10)), f32s(0)}, want); err == nil {
		t.Error("sin 2^-10 off accepted")
	}
}

func TestCompareExpScalesWithArgument(t *testing.T) {
	p := program(func(b *ir.Builder) { b.Store("out", ir.LitU32(0), ir.Exp(x())) })
	w := bits(float32(math.Exp(20))) // x = 20: 3 + 40 ULP
	want := [][]byte{f32s(w), f32s(0)}
	if _, err := Compare(p, [][]byte{f32s(w + 43), f32s(0)}, want); err != nil {
		t.Errorf("exp(20) 43 ULP off rejected: %v", err)
	}
	if _, err := Compare(p, [][]byte{f32s(w + 44), f32s(0)}, want); err == nil {
		t.Error("exp(20) 44 ULP off accepted")
	}
}

func TestCompareShapeErrors(t *testing.T) {
	p := exactProgram()
	good := [][]byte{f32s(1), f32s(2)}
	for name, got := range map[string][][]byte{
		"missing output": {f32s(1)},
		"extra output":   {f32s(1), f32s(2), f32s(3)},
		"short buffer":   {f32s(), f32s(2)},
	} {
		if _, err := Compare(p, got, good); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := Compare(p, [][]byte{{1, 2, 3}, f32s(2)}, [][]byte{{1, 2, 3}, f32s(2)}); err == nil {
		t.Error("a 3-byte buffer accepted")
	}
}

func TestCompareReportsAtMostThreeExamples(t *testing.T) {
	p := exactProgram()
	nine := bits(9)
	want := [][]byte{f32s(bits(1), bits(2), bits(3), bits(4), bits(5)), f32s(0)}
	got := [][]byte{f32s(nine, nine, nine, nine, nine), f32s(0)}
	rep, err := Compare(p, got, want)
	if err == nil || rep.Mismatches != 5 {
		t.Fatalf("report %+v, error %v", rep, err)
	}
	if n := strings.Count(err.Error(), "out["); n != maxExamples {
		t.Errorf("error describes %d elements, want %d: %v", n, maxExamples, err)
	}
	if !strings.Contains(err.Error(), "5 of 6 output elements") {
		t.Errorf("error does not count the mismatches: %v", err)
	}
}

// FuzzCompare feeds arbitrary backend outputs to Compare, as a misbehaving plugin
// could: it must never panic, and it accepts only outputs shaped like the
// reference.
func FuzzCompare(f *testing.F) {
	p := divProgram()
	f.Add(f32s(bits(1)), f32s(5), f32s(bits(1)), f32s(5))
	f.Add([]byte{1, 2, 3}, []byte{}, f32s(0x7FC00000), f32s(1))
	f.Fuzz(func(t *testing.T, g0, g1, w0, w1 []byte) {
		rep, err := Compare(p, [][]byte{g0, g1}, [][]byte{w0, w1})
		if err == nil && (len(g0) != len(w0) || len(g1) != len(w1) || len(w0)%4 != 0 || len(w1)%4 != 0) {
			t.Fatalf("accepted outputs of %d and %d bytes for a reference of %d and %d", len(g0), len(g1), len(w0), len(w1))
		}
		if err == nil && rep.Mismatches != 0 {
			t.Fatalf("no error with %d mismatches", rep.Mismatches)
		}
	})
}
