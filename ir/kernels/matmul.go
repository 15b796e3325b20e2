package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// matmulTile is the default tile side. The workgroup is tile×tile and the shared
// tiles hold matmulTile² elements, so a dispatch that sets the tile parameter to t
// must also override the workgroup size to t×t×1, with t² ≤ matmulTile².
const matmulTile = 16

func matmul() Kernel {
	return Kernel{
		Name: "matmul",
		OpID: "kiln.matrix.matmul.f32",
		Doc: "c (m×n) = a (m×k) · b (k×n), row-major f32, with shared tiles of tile×tile (parameter, default 16; " +
			"another tile needs a matching workgroup override); size s is m = s, k = s+1, n = s+2",
		Sizes:   []int{0, 1, 7, 16, 17, 32, 61, 100},
		Program: matmulProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			m, k, n := size, size+1, size+2
			c := Case{
				Size:         size,
				Grid:         [3]uint32{cover(n, matmulTile), cover(m, matmulTile), 1},
				Inputs:       [][]byte{F32Bytes(randomF32(rng, m*k)), F32Bytes(randomF32(rng, k*n)), nil},
				OutputCounts: []uint32{0, 0, uint32(m * n)},
			}
			c.Spec.Set("m", ir.SpecU32(uint32(m)))
			c.Spec.Set("k", ir.SpecU32(uint32(k)))
			c.Spec.Set("n", ir.SpecU32(uint32(n)))
			return c
		},
		Reference: func(c Case) [][]byte {
			m, k, n := int(specU32(c, "m", 1)), int(specU32(c, "k", 1)), int(specU32(c, "n", 1))
			a, b := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
			out := make([]float32, c.OutputCounts[2])
			for row := range m {
				for col := range n {
					var acc float32
					for e := range k {
						// The conversion rounds the product, so Go never fuses it into an FMA.
						acc += float32(a[row*k+e] * b[e*n+col])
					}
					out[row*n+col] = acc
				}
			}
			return [][]byte{F32Bytes(out)}
		},
		// Every element is acc = acc + a·b over e = 0, 1, ..., k-1 with a rounded
		// multiply and a rounded add, as in the reference. The tiles' zero padding
		// adds +0 products, which leave acc unchanged: acc starts at +0 and a sum
		// of round-to-nearest adds is -0 only when both addends are.
		Check: exact(ir.F32, "c"),
	}
}

// matmulProgram gives each invocation one element of c (axis 0 the column, axis 1
// the row). The workgroup walks k one tile at a time: each lane loads one element
// of a's and of b's tile into shared memory (0 outside the matrices), and after a
// barrier every lane adds the tile's products in order.
func matmulProgram() *ir.Program {
	b := ir.NewBuilder("kiln.matrix.matmul.f32", matmulTile, matmulTile, 1)
	tile := b.Param("tile", ir.U32, ir.LitU32(matmulTile))
	m := b.Param("m", ir.U32, ir.LitU32(1))
	k := b.Param("k", ir.U32, ir.LitU32(1))
	n := b.Param("n", ir.U32, ir.LitU32(1))
	a := b.Buffer("a", ir.F32, ir.Read)
	bm := b.Buffer("b", ir.F32, ir.Read)
	c := b.Buffer("c", ir.F32, ir.Write)
	aTile := b.Shared("a_tile", ir.F32, matmulTile*matmulTile)
	bTile := b.Shared("b_tile", ir.F32, matmulTile*matmulTile)
	zero, one := ir.LitU32(0), ir.LitU32(1)

	col := b.Let("col", ir.GlobalID(0))
	row := b.Let("row", ir.GlobalID(1))
	tx := b.Let("tx", ir.LocalID(0))
	ty := b.Let("ty", ir.LocalID(1))
	slot := b.Let("slot", ir.Add(ir.Mul(ty, tile), tx))
	acc := b.Var("acc", ir.F32, ir.LitF32(0))
	tiles := b.Let("tiles", ir.Div(ir.Add(k, ir.Sub(tile, one)), tile))
	b.For("t", ir.U32, zero, tiles, one, func(loop *ir.Block, t ir.Expr) {
		base := loop.Let("base", ir.Mul(t, tile))
		aCol := loop.Let("a_col", ir.Add(base, tx))
		loop.Store(aTile, slot, ir.Select(ir.LAnd(ir.Lt(row, m), ir.Lt(aCol, k)),
			ir.Load(a, ir.Add(ir.Mul(row, k), aCol)), ir.LitF32(0)))
		bRow := loop.Let("b_row", ir.Add(base, ty))
		loop.Store(bTile, slot, ir.Select(ir.LAnd(ir.Lt(bRow, k), ir.Lt(col, n)),
			ir.Load(bm, ir.Add(ir.Mul(bRow, n), col)), ir.LitF32(0)))
		loop.Barrier()
		loop.For("e", ir.U32, zero, tile, one, func(inner *ir.Block, e ir.Expr) {
			product := ir.Mul(ir.Load(aTile, ir.Add(ir.Mul(ty, tile), e)), ir.Load(bTile, ir.Add(ir.Mul(e, tile), tx)))
			inner.Assign("acc", ir.Add(acc, product))
		})
		loop.Barrier()
	})
	b.If(ir.LAnd(ir.Lt(row, m), ir.Lt(col, n)), func(then *ir.Block) {
		then.Store(c, ir.Add(ir.Mul(row, n), col), acc)
	})
	return b.MustBuild()
}
