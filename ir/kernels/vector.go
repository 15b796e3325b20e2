package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// vectorWG is the workgroup width of the elementwise kernels.
const vectorWG = 256

// vectorSizes are the sizes worth testing for one-dimensional kernels of vectorWG
// lanes: empty, one element, primes, exact multiples of the workgroup, a large size.
func vectorSizes() []int { return []int{0, 1, 7, 61, 256, 257, 1021, 4096, 100_000} }

func vectorAdd() Kernel {
	return Kernel{
		Name:    "vector_add",
		OpID:    "kiln.vector.add.f32",
		Doc:     "out[i] = a[i] + b[i] on f32; size is the number of elements",
		Sizes:   vectorSizes(),
		Program: vectorAddProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, vectorWG), 1, 1},
				Inputs:       [][]byte{F32Bytes(randomF32(rng, size)), F32Bytes(randomF32(rng, size)), nil},
				OutputCounts: []uint32{0, 0, uint32(size)},
			}
		},
		Reference: func(c Case) [][]byte {
			a, b := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
			out := make([]float32, c.OutputCounts[2])
			for i := range out {
				out[i] = a[i] + b[i]
			}
			return [][]byte{F32Bytes(out)}
		},
		// One correctly rounded add per element, as in the reference.
		Check: exact(ir.F32, "out"),
	}
}

func vectorAddProgram() *ir.Program {
	b := ir.NewBuilder("kiln.vector.add.f32", vectorWG, 1, 1)
	x := b.Buffer("a", ir.F32, ir.Read)
	y := b.Buffer("b", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(ir.Load(x, i), ir.Load(y, i)))
	})
	return b.MustBuild()
}

// saxpyDefaultA is the default of saxpy's parameter a.
const saxpyDefaultA = 2.0

func saxpy() Kernel {
	return Kernel{
		Name:    "saxpy",
		OpID:    "kiln.vector.saxpy.f32",
		Doc:     "y[i] = a*x[i] + y[i] on f32, a a parameter (default 2, set at random by cases); size is the number of elements",
		Sizes:   vectorSizes(),
		Program: saxpyProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			c := Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, vectorWG), 1, 1},
				Inputs:       [][]byte{F32Bytes(randomF32(rng, size)), F32Bytes(randomF32(rng, size))},
				OutputCounts: []uint32{0, 0},
			}
			c.Spec.Set("a", ir.SpecF32(8*rng.Float32()-4))
			return c
		},
		Reference: func(c Case) [][]byte {
			a := specF32(c, "a", saxpyDefaultA)
			x, y := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
			for i := range y {
				// The conversion rounds the product, so Go never fuses it into an FMA.
				y[i] = float32(a*x[i]) + y[i]
			}
			return [][]byte{F32Bytes(y)}
		},
		// A rounded multiply then a rounded add, never contracted, as in the reference.
		Check: exact(ir.F32, "y"),
	}
}

func saxpyProgram() *ir.Program {
	b := ir.NewBuilder("kiln.vector.saxpy.f32", vectorWG, 1, 1)
	a := b.Param("a", ir.F32, ir.LitF32(saxpyDefaultA))
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
	})
	return b.MustBuild()
}

// randomF32 draws n values uniformly from [-1, 1).
func randomF32(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 2*rng.Float32() - 1
	}
	return out
}

// randomU32 draws n values uniformly from all of u32.
func randomU32(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = rng.Uint32()
	}
	return out
}
