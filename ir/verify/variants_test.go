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

func TestVariantsOfExactPrograms(t *testing.T) {
	b := ir.NewBuilder("t.int", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	f := b.Let("f", ir.LitF32(1.5))
	b.Store(out, ir.LitU32(0), ir.Add(ir.Bitcast(ir.U32, ir.Select(ir.LitBool(true), f, f)), ir.Cast(ir.U32, f)))
	if vs := Variants(b.MustBuild()); len(vs) != 0 {
		t.Errorf("a program without f32 operations or fma has variants %v", vs)
	}
}

// TestFlushedVariantWhileCondition pins the rewriting of a while whose condition
// needs lets: they run before every test, so the loop runs exactly as often as
// the original, continue included.
func TestFlushedVariantWhileCondition(t *testing.T) {
	b := ir.NewBuilder("t.while", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	x := b.Var("x", ir.F32, ir.LitF32(1))
	n := b.Var("n", ir.U32, ir.LitU32(0))
	b.While(ir.Gt(ir.Mul(x, ir.LitF32(0.5)), ir.LitF32(0x1p-20)), func(loop *ir.Block) {
		loop.Assign("x", ir.Mul(x, ir.LitF32(0.5)))
		loop.Assign("n", ir.Add(n, ir.LitU32(1)))
		loop.If(ir.Eq(ir.Rem(n, ir.LitU32(2)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
		loop.Assign("n", ir.Add(n, ir.LitU32(100)))
	})
	b.Store(out, ir.LitU32(0), n)
	p := b.MustBuild()
	run := func(q *ir.Program) uint32 {
		outs, err := interp.Run(context.Background(), q, interp.Options{}, interp.Launch{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{1}})
		if err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
		return words32(outs[0])[0]
	}
	want := run(p)
	for _, v := range Variants(p) {
		if got := run(v.Program); got != want {
			t.Errorf("%s: %d, want %d", v.Name, got, want)
		}
	}
}

// TestFlushedVariantNamesNeverCollide pins that the lets the rewriting adds use a
// prefix no name of the program starts with.
func TestFlushedVariantNamesNeverCollide(t *testing.T) {
	b := ir.NewBuilder("t.names", 1, 1, 1)
	out := b.Buffer("kiln_flush1", ir.F32, ir.ReadWrite)
	x := b.Let("kiln_flush_2", ir.Load(out, ir.LitU32(0)))
	b.Store(out, ir.LitU32(0), ir.Mul(ir.Add(x, x), x))
	p := b.MustBuild()
	for _, v := range Variants(p) {
		if err := ir.Validate(v.Program); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	if prefix := freshPrefix(p); !strings.HasPrefix(prefix, "kiln_flush__") {
		t.Errorf("prefix %q is a prefix of a program name", prefix)
	}
}

// TestFlushedVariantFlushes pins the flushing itself on values the reference
// does not flush: a denormal operand is read as zero of its sign, a denormal
// result becomes zero, normal values, NaN and infinities pass, and moves keep
// denormals.
func TestFlushedVariantFlushes(t *testing.T) {
	b := ir.NewBuilder("t.flush", 1, 1, 1)
	in := b.Buffer("in", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	x := b.Let("x", ir.Load(in, ir.LitU32(0))) // -2^-140
	b.Store(out, ir.LitU32(0), ir.Mul(x, ir.LitF32(0x1p100)))
	b.Store(out, ir.LitU32(1), ir.Mul(ir.LitF32(0x1p-70), ir.LitF32(0x1p-70)))
	b.Store(out, ir.LitU32(2), ir.Add(ir.Load(in, ir.LitU32(1)), ir.LitF32(1)))
	b.Store(out, ir.LitU32(3), x)
	b.Store(out, ir.LitU32(4), ir.Select(ir.Lt(x, ir.LitF32(0)), ir.LitF32(1), ir.LitF32(2)))
	p := b.MustBuild()
	var flushed *ir.Program
	for _, v := range Variants(p) {
		if v.Name == "flushed denormals" {
			flushed = v.Program
		}
	}
	if flushed == nil {
		t.Fatal("no flushed variant")
	}
	inputs := [][]byte{f32s(math.Float32bits(-0x1p-140), 0x7FC00000), nil}
	outs, err := interp.Run(context.Background(), flushed, interp.Options{}, interp.Launch{Grid: [3]uint32{1, 1, 1}, Inputs: inputs, OutputCounts: []uint32{0, 5}})
	if err != nil {
		t.Fatal(err)
	}
	got := words32(outs[0])
	want := []uint32{0x80000000, 0, 0x7FC00000, math.Float32bits(-0x1p-140), math.Float32bits(2)}
	for i := range want {
		if got[i] != want[i] && !(IsNaN(got[i]) && IsNaN(want[i])) {
			t.Errorf("out[%d] = %#x, want %#x", i, got[i], want[i])
		}
	}
}

// words32 decodes little-endian buffer data.
func words32(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// TestFlushedVariantNamesAvoidMatricesAndUniforms pins that the prefix also
// avoids uniform and matrix names (IR v1.2: one namespace), and that f16
// arithmetic is flushed with f16's smallest normal.
func TestFlushedVariantNamesAvoidMatricesAndUniforms(t *testing.T) {
	b := ir.NewBuilder("t.names16", 32, 1, 1)
	out := b.Buffer("out", ir.F16, ir.ReadWrite)
	b.Uniform("kiln_flush", ir.U32)
	m := b.Matrix("kiln_flush_", ir.F16, 16, 16)
	b.MatrixFill(m, ir.LitF16(1))
	b.MatrixStore(m, out, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
	b.Store(out, ir.LitU32(0), ir.Add(ir.Load(out, ir.LitU32(0)), ir.LitF16(1)))
	p := b.MustBuild()
	if prefix := freshPrefix(p); !strings.HasPrefix(prefix, "kiln_flush__") {
		t.Errorf("prefix %q is a prefix of a uniform or matrix name", prefix)
	}
	vs := Variants(p)
	if len(vs) != 1 || vs[0].Name != "flushed denormals" {
		t.Fatalf("variants %v, want flushed denormals for f16 arithmetic", vs)
	}
	if err := ir.Validate(vs[0].Program); err != nil {
		t.Errorf("the flushed variant: %v", err)
	}
}
