package interp

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// scaleProgram is out[i] = in[i] * n + out[i] for i < len(in), n a uniform:
// it reads its write-side buffer, so a cleared buffer would show.
func scaleProgram(t *testing.T) *ir.Program {
	t.Helper()
	b := ir.NewBuilder("test.bound.scale", 64, 1, 1)
	n := b.Uniform("n", ir.U32)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(in)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(ir.Mul(ir.Load(in, i), n), ir.Load(out, i)))
	})
	return b.MustBuild()
}

func TestRunBoundWritesInPlace(t *testing.T) {
	p := scaleProgram(t)
	k, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	block, err := ir.EncodeUniforms(p, map[string]ir.Literal{"n": ir.LitU32(3)})
	if err != nil {
		t.Fatal(err)
	}
	in, out := u32Bytes(1, 2, 3), u32Bytes(10, 20, 30, 40)
	if err := k.RunBound(context.Background(), [3]uint32{1, 1, 1}, block, [][]byte{in, out}); err != nil {
		t.Fatal(err)
	}
	// out is the caller's own memory: written in place, and the element the
	// kernel did not store (i = 3) keeps its bytes.
	if want := u32Bytes(13, 26, 39, 40); string(out) != string(want) {
		t.Errorf("out = %v, want %v", out, want)
	}
	// Unaligned memory is converted and written back.
	raw := make([]byte, 17)
	copy(raw[1:], u32Bytes(1, 1, 1, 1))
	if err := k.RunBound(context.Background(), [3]uint32{1, 1, 1}, block, [][]byte{u32Bytes(5, 5, 5, 5), raw[1:]}); err != nil {
		t.Fatal(err)
	}
	if want := u32Bytes(16, 16, 16, 16); string(raw[1:]) != string(want) {
		t.Errorf("unaligned out = %v, want %v", raw[1:], want)
	}
}

func TestRunBoundRefuses(t *testing.T) {
	p := scaleProgram(t)
	k, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := ir.EncodeUniforms(p, map[string]ir.Literal{"n": ir.LitU32(1)})
	ctx := context.Background()
	cases := map[string]struct {
		uniforms []byte
		bufs     [][]byte
	}{
		"one buffer short":      {block, [][]byte{u32Bytes(1)}},
		"length not a multiple": {block, [][]byte{u32Bytes(1), make([]byte, 6)}},
		"no uniform block":      {nil, [][]byte{u32Bytes(1), u32Bytes(1)}},
	}
	for name, c := range cases {
		if err := k.RunBound(ctx, [3]uint32{1, 1, 1}, c.uniforms, c.bufs); err == nil {
			t.Errorf("%s: ran", name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := k.RunBound(cancelled, [3]uint32{1, 1, 1}, block, [][]byte{u32Bytes(1), u32Bytes(1)}); err == nil {
		t.Error("ran under a cancelled context")
	}
}

// BenchmarkRunBoundOneElement is the interpreter's share of a 1-element
// dispatch over resident memory.
func BenchmarkRunBoundOneElement(b *testing.B) {
	bld := ir.NewBuilder("bench.increment.f32", 256, 1, 1)
	buf := bld.Buffer("buf", ir.F32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	k, err := Compile(bld.MustBuild(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	mem := [][]byte{make([]byte, 4)}
	ctx := context.Background()
	for range b.N {
		if err := k.RunBound(ctx, [3]uint32{1, 1, 1}, nil, mem); err != nil {
			b.Fatal(err)
		}
	}
}
