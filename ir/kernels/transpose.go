package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// transposeWG is the side of the transpose's square workgroup.
const transposeWG = 16

func transpose() Kernel {
	return Kernel{
		Name:    "transpose",
		OpID:    "kiln.matrix.transpose.f32",
		Doc:     "output (cols×rows) = transpose of input (rows×cols), row-major f32, rows and cols parameters; size n is rows = n, cols = n+3",
		Sizes:   []int{0, 1, 7, 16, 17, 31, 64, 100},
		Program: transposeProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			rows, cols := size, size+3
			c := Case{
				Size:         size,
				Grid:         [3]uint32{cover(cols, transposeWG), cover(rows, transposeWG), 1},
				Inputs:       [][]byte{F32Bytes(randomF32(rng, rows*cols)), nil},
				OutputCounts: []uint32{0, uint32(rows * cols)},
			}
			c.Spec.Set("rows", ir.SpecU32(uint32(rows)))
			c.Spec.Set("cols", ir.SpecU32(uint32(cols)))
			return c
		},
		Reference: func(c Case) [][]byte {
			rows, cols := int(specU32(c, "rows", 1)), int(specU32(c, "cols", 1))
			in := BytesF32(c.Inputs[0])
			out := make([]float32, c.OutputCounts[1])
			for r := range rows {
				for col := range cols {
					out[col*rows+r] = in[r*cols+col]
				}
			}
			return [][]byte{F32Bytes(out)}
		},
		// A copy: every element keeps its bits.
		Check: exact(ir.F32, "output"),
	}
}

// transposeProgram runs one invocation per input element: axis 0 walks the
// columns, axis 1 the rows.
func transposeProgram() *ir.Program {
	b := ir.NewBuilder("kiln.matrix.transpose.f32", transposeWG, transposeWG, 1)
	rows := b.Param("rows", ir.U32, ir.LitU32(1))
	cols := b.Param("cols", ir.U32, ir.LitU32(1))
	input := b.Buffer("input", ir.F32, ir.Read)
	output := b.Buffer("output", ir.F32, ir.Write)
	col := b.Let("col", ir.GlobalID(0))
	row := b.Let("row", ir.GlobalID(1))
	b.If(ir.LAnd(ir.Lt(row, rows), ir.Lt(col, cols)), func(then *ir.Block) {
		then.Store(output, ir.Add(ir.Mul(col, rows), row), ir.Load(input, ir.Add(ir.Mul(row, cols), col)))
	})
	return b.MustBuild()
}
