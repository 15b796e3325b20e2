package kernels

import (
	"math"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
)

// softmaxWG is the workgroup width of softmax: one workgroup per row, its lanes
// striding over the row's columns.
const softmaxWG = 64

// softmaxTolerance bounds softmax's error. exp is within (3 + 2|x|) ULP under the
// Vulkan precision rules, with |x| ≤ 8 here (inputs in [-4, 4), shifted by the row
// maximum), so each term is within 19 ULP ≈ 1.2e-6 relative; the sum of positive
// terms keeps that relative error plus 2^-24 per add (at most a few hundred adds
// deep in the strided partials), and the division adds 3 ULP. 2e-5 relative covers
// it with room; a wrong maximum, sum or element is far larger. The absolute 1e-9
// covers results so small that their ULP is coarse next to Rel·|want|.
var softmaxTolerance = verify.Bound{Abs: 1e-9, Rel: 2e-5}

func softmax() Kernel {
	return Kernel{
		Name: "softmax",
		OpID: "kiln.nn.softmax.f32",
		Doc: "y = softmax of each row of x (rows × cols, row-major f32): max, exp(x - max), sum, divide, with " +
			"shared-memory tree reductions, one workgroup per row; cols is a uniform; size s is rows = s, cols = 2s+1",
		Sizes:   []int{0, 1, 7, 64, 100},
		Program: softmaxProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			rows, cols := size, 2*size+1
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = 8*rng.Float32() - 4
			}
			return Case{
				Size:         size,
				Grid:         [3]uint32{uint32(rows), 1, 1},
				Inputs:       [][]byte{F32Bytes(x), nil},
				OutputCounts: []uint32{0, uint32(rows * cols)},
				Uniforms:     U32Bytes([]uint32{uint32(cols)}),
			}
		},
		Reference: func(c Case) [][]byte {
			cols := int(BytesU32(c.Uniforms)[0])
			x := BytesF32(c.Inputs[0])
			y := make([]float32, len(x))
			for r := 0; r+cols <= len(x) && cols > 0; r += cols {
				row := x[r : r+cols]
				mx := math.Inf(-1)
				for _, v := range row {
					mx = math.Max(mx, float64(v))
				}
				var sum float64
				for _, v := range row {
					sum += math.Exp(float64(v) - mx)
				}
				for j, v := range row {
					y[r+j] = float32(math.Exp(float64(v)-mx) / sum)
				}
			}
			return [][]byte{F32Bytes(y)}
		},
		Check: within(ir.F32, softmaxTolerance, "y"),
	}
}

// softmaxProgram runs one workgroup per row. Each lane reduces its strided columns
// to a partial maximum, the workgroup combines the partials in a shared-memory
// tree (a barrier after every level), and every lane reads the row's maximum; a
// barrier then frees the scratch array, and the same is done for the sum of
// exp(x - max); finally each lane writes its columns divided by the sum.
func softmaxProgram() *ir.Program {
	b := ir.NewBuilder("kiln.nn.softmax.f32", softmaxWG, 1, 1)
	cols := b.Uniform("cols", ir.U32)
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.Write)
	red := b.Shared("red", ir.F32, softmaxWG)
	lid := b.Let("lid", ir.LocalID(0))
	start := b.Let("start", ir.Mul(ir.WorkgroupID(0), cols))
	wg := ir.LitU32(softmaxWG)
	columns := func(name string, body func(k *ir.Block, at ir.Expr)) {
		b.For(name, ir.U32, lid, cols, wg, func(loop *ir.Block, j ir.Expr) {
			body(loop, loop.Let(name+"_at", ir.Add(start, j)))
		})
	}
	reduce := func(op func(x, y ir.Expr) ir.Expr) {
		b.Barrier()
		for s := uint32(softmaxWG / 2); s >= 1; s /= 2 {
			b.If(ir.Lt(lid, ir.LitU32(s)), func(then *ir.Block) {
				then.Store(red, lid, op(ir.Load(red, lid), ir.Load(red, ir.Add(lid, ir.LitU32(s)))))
			})
			b.Barrier()
		}
	}

	mx := b.Var("mx", ir.F32, ir.Literal{Type: ir.F32, Bits: math.Float32bits(float32(math.Inf(-1)))})
	columns("j", func(k *ir.Block, at ir.Expr) { k.Assign("mx", ir.Max(mx, ir.Load(x, at))) })
	b.Store(red, lid, mx)
	reduce(ir.Max)
	rowMax := b.Let("row_max", ir.Load(red, ir.LitU32(0)))
	b.Barrier()

	sum := b.Var("sum", ir.F32, ir.LitF32(0))
	columns("k", func(k *ir.Block, at ir.Expr) {
		k.Assign("sum", ir.Add(sum, ir.Exp(ir.Sub(ir.Load(x, at), rowMax))))
	})
	b.Store(red, lid, sum)
	reduce(ir.Add)
	total := b.Let("total", ir.Load(red, ir.LitU32(0)))

	columns("o", func(k *ir.Block, at ir.Expr) {
		k.Store(y, at, ir.Div(ir.Exp(ir.Sub(ir.Load(x, at), rowMax)), total))
	})
	return b.MustBuild()
}
