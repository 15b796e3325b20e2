package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
)

// reduceWG is the workgroup width of the reductions, and the size of their shared
// scratch array: a workgroup-size override must be a power of two at most reduceWG.
const reduceWG = 256

// reduceTolerance bounds the error of a workgroup partial. Cases draw inputs (and
// so products of inputs) of magnitude at most 1, and a partial adds at most
// reduceWG = 2^8 of them. The kernel's pairwise tree has depth 8 and every level
// rounds once (the dot product also rounds each product), so with u = 2^-24 its
// error is at most 9·u·256 ≈ 1.4e-4, while the reference sums in float64 and
// rounds once. 2^-12 ≈ 2.4e-4 covers both with room; a lost or doubled element of
// the random inputs is almost always far larger.
const reduceTolerance = 1.0 / 4096

func reduceSum() Kernel {
	return reduction("reduce_sum", "kiln.reduce.sum.f32",
		"partials[w] = sum of input[w*256 : (w+1)*256] on f32 by a shared-memory tree, one partial per workgroup; size is the number of elements",
		reduceSumProgram, 1, func(x [][]float32, i int) float64 { return float64(x[0][i]) })
}

func reduceSumProgram() *ir.Program {
	b := ir.NewBuilder("kiln.reduce.sum.f32", reduceWG, 1, 1)
	input := b.Buffer("input", ir.F32, ir.Read)
	partials := b.Buffer("partials", ir.F32, ir.Write)
	scratch := b.Shared("scratch", ir.F32, reduceWG)
	lid := b.Let("lid", ir.LocalID(0))
	gid := b.Let("gid", ir.GlobalID(0))
	b.Store(scratch, lid, ir.Select(ir.Lt(gid, ir.Len(input)), ir.Load(input, gid), ir.LitF32(0)))
	treeSum(&b.Block, scratch, lid, partials)
	return b.MustBuild()
}

func dot() Kernel {
	return reduction("dot", "kiln.reduce.dot.f32",
		"partials[w] = sum of a[i]*b[i] over i in [w*256, (w+1)*256) on f32 by a shared-memory tree, one partial per workgroup; size is the length of a and b",
		dotProgram, 2, func(x [][]float32, i int) float64 { return float64(x[0][i]) * float64(x[1][i]) })
}

// reduction is a kernel that sums term(x, i) over its f32 input vectors x into
// one partial per workgroup of reduceWG elements.
func reduction(name, opID, doc string, program func() *ir.Program, vectors int, term func(x [][]float32, i int) float64) Kernel {
	return Kernel{
		Name:    name,
		OpID:    opID,
		Doc:     doc,
		Sizes:   vectorSizes(),
		Program: program,
		NewCase: func(rng *rand.Rand, size int) Case {
			grid := cover(size, reduceWG)
			c := Case{Size: size, Grid: [3]uint32{grid, 1, 1}, OutputCounts: make([]uint32, vectors+1)}
			for range vectors {
				c.Inputs = append(c.Inputs, F32Bytes(randomF32(rng, size)))
			}
			c.Inputs = append(c.Inputs, nil)
			c.OutputCounts[vectors] = grid
			return c
		},
		Reference: func(c Case) [][]byte {
			x := make([][]float32, vectors)
			for v := range x {
				x[v] = BytesF32(c.Inputs[v])
			}
			return [][]byte{F32Bytes(partialSums(c, len(x[0]), func(i int) float64 { return term(x, i) }))}
		},
		Check: within(ir.F32, verify.Bound{Abs: reduceTolerance}, "partials"),
	}
}

func dotProgram() *ir.Program {
	b := ir.NewBuilder("kiln.reduce.dot.f32", reduceWG, 1, 1)
	x := b.Buffer("a", ir.F32, ir.Read)
	y := b.Buffer("b", ir.F32, ir.Read)
	partials := b.Buffer("partials", ir.F32, ir.Write)
	scratch := b.Shared("scratch", ir.F32, reduceWG)
	lid := b.Let("lid", ir.LocalID(0))
	gid := b.Let("gid", ir.GlobalID(0))
	b.Store(scratch, lid, ir.Select(ir.Lt(gid, ir.Len(x)),
		ir.Mul(ir.Load(x, gid), ir.Load(y, gid)), ir.LitF32(0)))
	treeSum(&b.Block, scratch, lid, partials)
	return b.MustBuild()
}

// treeSum adds up the workgroup's values in the shared array scratch, one per lane
// lid, by halving a stride from half the workgroup down to 1 with a barrier after
// every step, and stores the sum at partials[workgroup id].
func treeSum(b *ir.Block, scratch string, lid ir.Expr, partials string) {
	b.Barrier()
	stride := b.Var("stride", ir.U32, ir.Shr(ir.WorkgroupSize(0), ir.LitU32(1)))
	b.While(ir.Gt(stride, ir.LitU32(0)), func(loop *ir.Block) {
		loop.If(ir.Lt(lid, stride), func(then *ir.Block) {
			then.Store(scratch, lid, ir.Add(ir.Load(scratch, lid), ir.Load(scratch, ir.Add(lid, stride))))
		})
		loop.Barrier()
		loop.Assign("stride", ir.Shr(stride, ir.LitU32(1)))
	})
	b.If(ir.Eq(lid, ir.LitU32(0)), func(then *ir.Block) {
		then.Store(partials, ir.WorkgroupID(0), ir.Load(scratch, ir.LitU32(0)))
	})
}

// partialSums is the reference of a reduction over n terms: one float64 sum of
// term(i) per workgroup of c's dispatch, rounded once to f32.
func partialSums(c Case, n int, term func(i int) float64) []float32 {
	wg := int(workgroupSize(c, [3]uint32{reduceWG, 1, 1})[0])
	out := make([]float32, c.OutputCounts[len(c.OutputCounts)-1])
	for w := range out {
		var sum float64
		for i := w * wg; i < min(n, (w+1)*wg); i++ {
			sum += term(i)
		}
		out[w] = float32(sum)
	}
	return out
}
