package verify

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
)

// f32s and u16s are their values as little-endian bytes.
func f32s(vals ...uint32) []byte { return le(vals) }
func u16s(vals ...uint16) []byte { return le(vals) }

func le[T uint16 | uint32](vals []T) []byte {
	out, _ := binary.Append([]byte{}, binary.LittleEndian, vals)
	return out
}

func bits(f float32) uint32 { return math.Float32bits(f) }

// twoOutputs builds a program t.compare with an f32 input "x", an f32 output
// "out" and a u32 output "n"; body stores into them.
func twoOutputs(body func(b *ir.Builder)) *ir.Program { return threeBuffers("t.compare", body) }

// threeBuffers is twoOutputs's program named name.
func threeBuffers(name string, body func(b *ir.Builder)) *ir.Program {
	b := ir.NewBuilder(name, 1, 1, 1)
	b.Buffer("x", ir.F32, ir.Read)
	b.Buffer("out", ir.F32, ir.Write)
	b.Buffer("n", ir.U32, ir.ReadWrite)
	body(b)
	return b.Program()
}

func loadX(i uint32) ir.Expr { return ir.Load("x", ir.LitU32(i)) }

func exactProgram() *ir.Program {
	return twoOutputs(func(b *ir.Builder) { b.Store("out", ir.LitU32(0), ir.Add(loadX(0), loadX(0))) })
}

func divProgram() *ir.Program {
	return twoOutputs(func(b *ir.Builder) { b.Store("out", ir.LitU32(0), ir.Div(loadX(0), loadX(0))) })
}

func TestCompareExactProgram(t *testing.T) {
	p := exactProgram()
	one := bits(1)
	want := [][]byte{f32s(one, 0x7FC00000, 0x00000001, bits(-2)), f32s(5)}
	ok := [][]byte{f32s(one, 0x7FC01234, 0x80000000, bits(-2)), f32s(5)} // other NaN, flushed denormal
	rep, err := Compare(p, ok, want)
	if err != nil {
		t.Fatalf("equal outputs rejected: %v", err)
	}
	if rep.Outputs != 2 || rep.Elements != 5 || rep.MaxULP != 0 || rep.Mismatches != 0 || !rep.Bound.Exact() || rep.References != 1 {
		t.Errorf("report %+v", rep)
	}
	off := [][]byte{f32s(one+1, 0x7FC00000, 0, bits(-2)), f32s(5)}
	rep, err = Compare(p, off, want)
	if err == nil || rep.Mismatches != 1 || rep.MaxULP != 1 {
		t.Fatalf("1 ULP off a bit-exact program: report %+v, error %v", rep, err)
	}
	for _, s := range []string{`"t.compare"`, "out[0]", "1 ULP apart", "bit-exact", "differ from the CPU reference"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
	if _, err := Compare(p, [][]byte{f32s(0x80000000), f32s(0)}, [][]byte{f32s(0), f32s(0)}); err == nil {
		t.Error("-0 for +0 accepted in a bit-exact program")
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

func TestCompareAnyReferenceMatches(t *testing.T) {
	p := exactProgram()
	a := [][]byte{f32s(bits(1), bits(2)), f32s(7)}
	b := [][]byte{f32s(bits(3), bits(4)), f32s(8)}
	// Each element may match a different reference.
	rep, err := Compare(p, [][]byte{f32s(bits(3), bits(2)), f32s(8)}, a, b)
	if err != nil || rep.References != 2 {
		t.Fatalf("elements matching one reference each rejected: %+v, %v", rep, err)
	}
	_, err = Compare(p, [][]byte{f32s(bits(5), bits(2)), f32s(7)}, a, b)
	if err == nil || !strings.Contains(err.Error(), "1 accepted variants") {
		t.Errorf("an element matching neither reference accepted, or the error does not say variants were tried: %v", err)
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
	if _, err := Compare(p, good); err == nil {
		t.Error("no reference accepted")
	}
	if _, err := Compare(p, good, good, [][]byte{f32s(1, 2), f32s(2)}); err == nil {
		t.Error("references of different lengths accepted")
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

// interpReference is a Reference for a one-workgroup launch of inputs.
func interpReference(inputs [][]byte, counts []uint32) Reference {
	return func(p *ir.Program) ([][]byte, error) {
		return interp.Run(context.Background(), p, interp.Options{}, interp.Launch{Grid: [3]uint32{1, 1, 1}, Inputs: cloneAll(inputs), OutputCounts: counts})
	}
}

// TestOutputsAcceptsUnfusedFma pins that an fma evaluated as a rounded multiply
// then add is accepted, though it is hundreds of millions of ULP from the fused
// result: (1+2^-23)² - (1+2^-22) is 2^-46 fused and 0 unfused.
func TestOutputsAcceptsUnfusedFma(t *testing.T) {
	p := twoOutputs(func(b *ir.Builder) {
		b.Store("out", ir.LitU32(0), ir.Fma(loadX(0), loadX(0), loadX(1)))
	})
	a := math.Float32frombits(0x3F800001)
	inputs := [][]byte{f32s(bits(a), bits(-(1 + 0x1p-22))), nil, f32s(0)}
	ref := interpReference(inputs, []uint32{0, 1, 0})
	fused := [][]byte{f32s(bits(0x1p-46)), f32s(0)}
	unfused := [][]byte{f32s(0), f32s(0)}
	if _, err := Compare(p, unfused, fused); err == nil {
		t.Fatal("the test is void: the unfused result matches the fused reference by itself")
	}
	for name, got := range map[string][][]byte{"fused": fused, "unfused": unfused} {
		rep, err := Outputs(p, got, ref)
		if err != nil {
			t.Errorf("%s fma rejected: %v", name, err)
		}
		if rep.MaxULP != 0 {
			t.Errorf("%s fma: MaxULP %d, want 0 (it matches one reference exactly)", name, rep.MaxULP)
		}
	}
	if _, err := Outputs(p, [][]byte{f32s(bits(0x1p-45)), f32s(0)}, ref); err == nil {
		t.Error("2^-45, neither the fused nor the unfused result, accepted")
	}
}

// TestOutputsAcceptsFlushedDenormals pins that results of flushed denormal inputs
// and intermediates are accepted: x·2^100 of the denormal x = 2^-140 is 2^-40, or
// 0 on a device that flushes x; (y·2^-30)·2^30 of y = 2^-100 is y, or 0 when the
// denormal product is flushed.
func TestOutputsAcceptsFlushedDenormals(t *testing.T) {
	p := twoOutputs(func(b *ir.Builder) {
		b.Store("out", ir.LitU32(0), ir.Mul(loadX(0), ir.LitF32(0x1p100)))
		b.Store("out", ir.LitU32(1), ir.Mul(ir.Mul(loadX(1), ir.LitF32(0x1p-30)), ir.LitF32(0x1p30)))
		b.Store("out", ir.LitU32(2), ir.Mul(loadX(1), ir.LitF32(2)))
		b.Store("n", ir.LitU32(0), ir.Cast(ir.U32, ir.Eq(loadX(0), ir.LitF32(0))))
	})
	inputs := [][]byte{f32s(bits(0x1p-140), bits(0x1p-100)), nil, f32s(7)}
	ref := interpReference(inputs, []uint32{0, 3, 0})
	y2 := bits(0x1p-99)
	exact := [][]byte{f32s(bits(0x1p-40), bits(0x1p-100), y2), f32s(0)}
	flushing := [][]byte{f32s(0, 0, y2), f32s(1)} // x == 0 holds once x is flushed
	if _, err := Compare(p, flushing, exact); err == nil {
		t.Fatal("the test is void: the flushed results match the exact reference by themselves")
	}
	for name, got := range map[string][][]byte{"exact": exact, "flushing": flushing} {
		if _, err := Outputs(p, got, ref); err != nil {
			t.Errorf("%s device rejected: %v", name, err)
		}
	}
	for name, got := range map[string][][]byte{
		"one ULP off":             {f32s(bits(0x1p-40)+1, bits(0x1p-100), y2), f32s(0)},
		"a normal result zeroed":  {f32s(bits(0x1p-40), bits(0x1p-100), 0), f32s(0)},
		"x == 0 without flushing": {f32s(bits(0x1p-40), bits(0x1p-100), y2), f32s(2)},
	} {
		if _, err := Outputs(p, got, ref); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// cloneAll copies bufs, which the interpreter may write.
func cloneAll(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		out[i] = append([]byte(nil), b...)
	}
	return out
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
