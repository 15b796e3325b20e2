package host

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// sixteenBit is a program with an f16 and a bf16 input and an f16 output (IR
// v1.2), unvalidated: plan only reads its declarations.
func sixteenBit() *ir.Program {
	b := ir.NewBuilder("t.16bit", 64, 1, 1)
	b.Buffer("h", ir.F16, ir.Read)
	b.Buffer("bf", ir.BF16, ir.Read)
	b.Buffer("out", ir.F16, ir.Write)
	return b.Program()
}

// TestPlan16BitBuffers pins that 16-bit buffers take 2-byte elements: inputs
// of an odd element count, named inputs of half.Float16 and half.BFloat16 (or
// uint16 bits), and output sizes of 2 bytes per element; and that one format's
// values are refused for the other's buffer.
func TestPlan16BitBuffers(t *testing.T) {
	p := sixteenBit()
	w := Work{
		Grid:         [3]uint32{1, 1, 1},
		Named:        []NamedInput{Input("h", Float16s([]float32{1, 2.5, -0.5})), Input("bf", []uint16{0x3F80})},
		OutputCounts: []uint32{0, 0, 3},
	}
	req, sizes, err := plan(p, [3]uint32{}, w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Inputs[0], []byte{0x00, 0x3C, 0x00, 0x41, 0x00, 0xB8}) || !reflect.DeepEqual(sizes, []int{6}) {
		t.Fatalf("inputs %x, sizes %v", req.Inputs, sizes)
	}
	for name, c := range map[string]struct {
		w    Work
		want string
	}{
		"bf16 values for f16": {Work{Named: []NamedInput{Input("h", BFloat16s([]float32{1}))}}, "holds f16, its input is half.BFloat16. Fix: pass []half.Float16"},
		"f32 for bf16":        {Work{Named: []NamedInput{Input("bf", []float32{1})}}, "holds 2-byte bf16 elements, its input has 4-byte float32 elements"},
		"odd bytes":           {Work{Inputs: [][]byte{{1, 2, 3}}}, "(binding 0, f16) is 3 bytes, not a whole number of 2-byte elements"},
	} {
		_, _, err := plan(p, [3]uint32{}, c.w)
		var le *LaunchError
		if !errors.As(err, &le) || !strings.Contains(le.Detail, c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	res := &Result{prog: p, Outputs: [][]byte{{0x00, 0x3C, 0x00, 0xC0}}}
	out, err := OutputAs[half.Float16](res, "out")
	if err != nil || !reflect.DeepEqual(Float32s(out), []float32{1, -2}) {
		t.Errorf("OutputAs[half.Float16] = %v, %v", out, err)
	}
	if _, err := OutputAs[half.BFloat16](res, "out"); err == nil {
		t.Error("an f16 output read as bf16")
	}
	if _, err := OutputAs[float32](res, "out"); err == nil {
		t.Error("an f16 output read as float32")
	}
}

// TestDispatch16BitThroughCPURef pins 16-bit buffers of an odd element count
// end to end through a real plugin (cpu-ref, resident buffers): 2n-byte
// bindings, a write buffer's zero fill on whole words, 2-byte outputs, typed
// inputs and outputs.
func TestDispatch16BitThroughCPURef(t *testing.T) {
	b := ir.NewBuilder("t.add.f16", 64, 1, 1)
	x := b.Buffer("x", ir.F16, ir.Read)
	y := b.Buffer("y", ir.BF16, ir.Read)
	o := b.Buffer("out", ir.F16, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(o)), func(then *ir.Block) {
		then.Store(o, i, ir.Add(ir.Load(x, i), ir.Cast(ir.F16, ir.Cast(ir.F32, ir.Load(y, i)))))
	})
	p := b.MustBuild()
	h := openHost(t, "cpuref")
	res, err := h.Dispatch(context.Background(), p, Launch{Backend: "cpu-ref", Work: Work{
		Invocations:  [3]uint32{7, 1, 1},
		Named:        []NamedInput{Input(x, Float16s([]float32{1, 2, 3, 0.5, -1, 65504, 1e-7})), Input(y, BFloat16s([]float32{1, 1, 1, 1, 1, 8, 0}))},
		OutputCounts: []uint32{0, 0, 7},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := OutputAs[half.Float16](res, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{2, 3, 4, 1.5, 0, 65504, half.NewFloat16(1e-7).Float32()}
	if got := Float32s(out); !reflect.DeepEqual(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
}
