package ptx

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// dispatchOn is dispatchCase for a module emitted for target.
func dispatchOn(target Target, p *ir.Program, c kernels.Case, uniformBlock []byte) ([][]byte, error) {
	m, err := Emit(p, Options{Target: target, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize, NonCoherentReads: true})
	if err != nil {
		return nil, err
	}
	return runModule(m, p, c, uniformBlock)
}

// TestSixteenBitMemory pins 2-byte elements: buffers of an odd element count,
// loads past the end giving 0 and stores past it writing nothing, element
// counts from len, and f16 and bf16 shared arrays of odd counts.
func TestSixteenBitMemory(t *testing.T) {
	b := ir.NewBuilder("memory16", 16, 1, 1)
	in := b.Buffer("in", ir.F16, ir.Read)
	out := b.Buffer("out", ir.BF16, ir.ReadWrite)
	n := b.Buffer("n", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.F16, 5)
	sb := b.Shared("sb", ir.BF16, 3)
	i := b.Let("i", ir.LocalID(0))
	b.Store(sh, i, ir.Load(in, i))
	b.Store(sb, i, ir.Cast(ir.BF16, ir.Cast(ir.F32, ir.Load(in, ir.Add(i, ir.LitU32(1))))))
	b.Barrier()
	sum := ir.Add(ir.Cast(ir.F32, ir.Load(sh, ir.Sub(ir.LitU32(4), i))), ir.Cast(ir.F32, ir.Load(sb, ir.Sub(ir.LitU32(2), i))))
	b.Store(out, ir.Add(i, ir.LitU32(2)), ir.Cast(ir.BF16, sum))
	b.If(ir.Eq(i, ir.LitU32(0)), func(k *ir.Block) {
		k.Store(n, ir.LitU32(0), ir.Len(in))
		k.Store(n, ir.LitU32(1), ir.Len(out))
	})
	p := b.Program()
	inputs := []float32{1.5, -2, 0.25, 1000, 3.5, -0.125, 7}
	var inBits []uint32
	for _, v := range inputs {
		inBits = append(inBits, uint32(half.NewFloat16(v)))
	}
	outBits := []uint32{0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777, 0x0888, 0x0999}
	got, err := dispatchCase(p, kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{edgetest.Encode(ir.F16, inBits), edgetest.Encode(ir.BF16, outBits), nil},
		OutputCounts: []uint32{0, 0, 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f16 := func(j uint32) float32 {
		if j >= uint32(len(inputs)) {
			return 0
		}
		return half.Float16(inBits[j]).Float32()
	}
	want := append([]uint32(nil), outBits...)
	for i := uint32(0); i < 16; i++ {
		var s float32
		if 4-i < 5 {
			s += f16(4 - i)
		}
		if 2-i < 3 {
			s += half.BFloat16(half.NewBFloat16(f16(3 - i))).Float32()
		}
		if i+2 < uint32(len(want)) {
			want[i+2] = uint32(half.NewBFloat16(s))
		}
	}
	if !bytes.Equal(got[0], edgetest.Encode(ir.BF16, want)) {
		t.Errorf("out = % x, want % x", got[0], edgetest.Encode(ir.BF16, want))
	}
	if !bytes.Equal(got[1], edgetest.Encode(ir.U32, []uint32{7, 9})) {
		t.Errorf("len = % x, want 7 and 9", got[1])
	}
}

// TestBF16CastByTarget: f32 to bf16 is cvt.rn.bf16.f32 on sm_80 and integer
// rounding on sm_70; the edge table's casts give the same bits on both.
func TestBF16CastByTarget(t *testing.T) {
	for _, c := range edgetest.HalfCases() {
		if c.Name != "cast.f32.bf16" {
			continue
		}
		for _, target := range []Target{{SM: 70}, {SM: 80}} {
			m, err := Emit(c.Prog, Options{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(m.Text, "cvt.rn.bf16.f32"); has != (target.SM >= 80) {
				t.Errorf("%s: cvt.rn.bf16.f32 in the module: %v", target, has)
			}
			got, err := dispatchOn(target, c.Prog, c.Launch, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, msg := range c.Compare(got, c.Want) {
				t.Errorf("%s: %s", target, msg)
			}
		}
		return
	}
	t.Fatal("the edge table has no cast.f32.bf16 row")
}
