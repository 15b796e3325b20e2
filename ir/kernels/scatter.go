package kernels

import (
	"math"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// scatterWG is the workgroup width of the scatter-add.
const scatterWG = 128

func scatterAdd() Kernel {
	return Kernel{
		Name: "scatter_add",
		OpID: "kiln.scatter.add.f32",
		Doc: "bins[index[i] % len(bins)] += value[i] on f32, each add a compare-exchange loop on the bin's bits " +
			"(an f32 atomic add); size is the number of values, scattered over size/8+1 bins",
		Sizes:   vectorSizes(),
		Program: scatterAddProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			bins := size/8 + 1
			index := make([]uint32, size)
			value := make([]float32, size)
			for i := range index {
				index[i] = rng.Uint32()
				// Small integers: every order of adding them gives the same sum
				// exactly, so the order the atomics happen in does not show.
				value[i] = float32(rng.IntN(17) - 8)
			}
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, scatterWG), 1, 1},
				Inputs:       [][]byte{U32Bytes(index), F32Bytes(value), nil},
				OutputCounts: []uint32{0, 0, uint32(bins)},
			}
		},
		Reference: func(c Case) [][]byte {
			index, value := BytesU32(c.Inputs[0]), BytesF32(c.Inputs[1])
			bins := make([]float32, c.OutputCounts[2])
			for i, k := range index {
				bins[k%uint32(len(bins))] += value[i]
			}
			out := make([]uint32, len(bins))
			for i, v := range bins {
				out[i] = math.Float32bits(v)
			}
			return [][]byte{U32Bytes(out)}
		},
		// Partial sums of at most 100 000 integers of magnitude at most 8 stay below
		// 2^24, so every one is exact: bit-exact comparison holds in any order.
		Check: exact(ir.U32, "bins"),
	}
}

// scatterAddProgram adds each value to its bin with compare-exchange: guess the
// bin's bits (first 0.0, then what the failed exchange returned), compute
// guess + value, and exchange if the bin still holds the guess. The bins are a u32
// buffer holding f32 bits, since atomics work on integer elements.
func scatterAddProgram() *ir.Program {
	b := ir.NewBuilder("kiln.scatter.add.f32", scatterWG, 1, 1)
	index := b.Buffer("index", ir.U32, ir.Read)
	value := b.Buffer("value", ir.F32, ir.Read)
	bins := b.Buffer("bins", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(index)), func(then *ir.Block) {
		bin := then.Let("bin", ir.Rem(ir.Load(index, i), ir.Len(bins)))
		v := then.Let("v", ir.Load(value, i))
		guess := then.Var("guess", ir.U32, ir.Bitcast(ir.U32, ir.LitF32(0)))
		then.While(ir.LitBool(true), func(loop *ir.Block) {
			want := loop.Let("want", ir.Bitcast(ir.U32, ir.Add(ir.Bitcast(ir.F32, guess), v)))
			old := loop.AtomicCAS(bins, bin, guess, want, "old")
			loop.If(ir.Eq(old, guess), func(done *ir.Block) { done.Break() })
			loop.Assign("guess", old)
		})
	})
	return b.MustBuild()
}
