package verify_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/verify"
)

// A backend that evaluates fma as a rounded multiply then an add returns 0 for
// (1+2^-23)·(1+2^-23) - (1+2^-22), where the fused result is 2^-46: Outputs runs
// the program's unfused variant on the reference and accepts it.
func ExampleOutputs() {
	b := ir.NewBuilder("example.fma", 1, 1, 1)
	x := b.Buffer("x", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	b.Store(out, ir.LitU32(0), ir.Fma(ir.Load(x, ir.LitU32(0)), ir.Load(x, ir.LitU32(0)), ir.Load(x, ir.LitU32(1))))
	p := b.MustBuild()

	input := make([]byte, 8)
	binary.LittleEndian.PutUint32(input, 0x3F800001) // 1 + 2^-23
	binary.LittleEndian.PutUint32(input[4:], math.Float32bits(-(1 + 0x1p-22)))
	reference := func(q *ir.Program) ([][]byte, error) {
		return interp.Run(context.Background(), q, interp.Options{},
			interp.Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{input, nil}, OutputCounts: []uint32{0, 1}})
	}
	unfused := [][]byte{make([]byte, 4)} // +0
	report, err := verify.Outputs(p, unfused, reference)
	// The reference and its three variants (unfused, flushed, both).
	fmt.Println(err, report.References, report.MaxULP)
	// Output: <nil> 4 0
}

// Variants names what a backend may do differently from the reference.
func ExampleVariants() {
	b := ir.NewBuilder("example.variants", 1, 1, 1)
	out := b.Buffer("out", ir.F32, ir.ReadWrite)
	v := b.Let("v", ir.Load(out, ir.LitU32(0)))
	b.Store(out, ir.LitU32(0), ir.Fma(v, v, ir.LitF32(1)))
	for _, v := range verify.Variants(b.MustBuild()) {
		fmt.Println(v.Name)
	}
	// Output:
	// unfused fma
	// flushed denormals
	// unfused fma, flushed denormals
}
