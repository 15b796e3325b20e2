package kernels

import (
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/kiln-dev/kiln/ir"
)

// matmulTile is the default tile depth and workgroup side: 16×16 invocations, each
// k-step of the loop covering 16 columns of a and rows of b.
const matmulTile = 16

// matmulShared is the element count of each shared tile: a workgroup of X×Y
// invocations stages a Y×tile block of a and a tile×X block of b, so any tile
// with tile·X ≤ matmulShared and tile·Y ≤ matmulShared fits. X·Y is at most
// ir.MaxInvocations, so every tile up to min(X, Y) does.
const matmulShared = ir.MaxInvocations

// matmulTiles are the tile depths a tuner may try.
var matmulTiles = []uint32{4, 8, 16}

// matmulFlops is 2·m·n·k for a matmul case.
func matmulFlops(c Case) float64 {
	u := BytesU32(c.Uniforms)
	return 2 * float64(u[0]) * float64(u[1]) * float64(u[2])
}

func matmul() Kernel {
	inv := func(c Case) [3]uint32 { return [3]uint32{uint32(c.Size + 2), uint32(c.Size), 1} }
	return Kernel{
		Name: "matmul",
		OpID: "kiln.matrix.matmul.f32",
		Doc: "c (m×n) = a (m×k) · b (k×n), row-major f32; m, n, k are uniforms, so one compile serves every shape; " +
			"shared tiles of depth tile (parameter, default 16, tunable 4, 8, 16) for any tile up to the workgroup's sides; " +
			"size s is m = s, k = s+1, n = s+2",
		Sizes:       []int{0, 1, 7, 16, 17, 32, 61, 100},
		Program:     matmulProgram,
		Invocations: inv,
		Flops:       matmulFlops,
		NewCase: func(rng *rand.Rand, size int) Case {
			m, k, n := size, size+1, size+2
			return withInvocations(Case{
				Size:         size,
				Inputs:       [][]byte{F32Bytes(randomF32(rng, m*k)), F32Bytes(randomF32(rng, k*n)), nil},
				OutputCounts: []uint32{0, 0, uint32(m * n)},
				Uniforms:     U32Bytes([]uint32{uint32(m), uint32(n), uint32(k)}),
			}, inv, [3]uint32{matmulTile, matmulTile, 1})
		},
		Reference: matmulReference,
		// Every element is acc = acc + a·b over e = 0, 1, ..., k-1 with a rounded
		// multiply and a rounded add, as in the reference. The tiles' zero padding
		// adds +0 products, which leave acc unchanged: acc starts at +0 and a sum
		// of round-to-nearest adds is -0 only when both addends are.
		Check: exact(ir.F32, "c"),
	}
}

// matmulReference is c = a·b of a matmul case, each element summed over e in
// order with a rounded multiply and a rounded add. It walks e in the middle
// loop (each element still sees e = 0, 1, …, k-1 in order, so the result is
// the same bits) so it reads b row by row, and it splits the rows of c across
// goroutines: tuning a 4096³ matmul checks against it.
func matmulReference(c Case) [][]byte {
	u := BytesU32(c.Uniforms)
	out := make([]float32, c.OutputCounts[2])
	matmulInto(out, BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1]), int(u[0]), int(u[1]), int(u[2]))
	return [][]byte{F32Bytes(out)}
}

// matmulInto adds a·b (a m×k, b k×n, row-major) into out (m×n), each element
// summed over e in order with a rounded multiply and a rounded add, rows split
// across goroutines.
func matmulInto(out, a, b []float32, m, n, k int) {
	rows := func(from, to int) {
		for row := from; row < to; row++ {
			acc := out[row*n : row*n+n]
			for e := range k {
				x := a[row*k+e]
				for col, y := range b[e*n : e*n+n] {
					// The conversion rounds the product, so Go never fuses it into an FMA.
					acc[col] += float32(x * y)
				}
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), max(m*n*k/(1<<20), 1), m)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows(m*w/workers, m*(w+1)/workers)
		}()
	}
	wg.Wait()
}

// matmulOperands declares the operands every matmul program takes, in this
// order: the u32 uniforms m, n and k (c is m×n, a m×k, b k×n), the read buffers
// a and b of element type t, and the f32 write buffer c.
func matmulOperands(b *ir.Builder, t ir.Type) (m, n, k ir.Expr, a, bm, c string) {
	m, n, k = b.Uniform("m", ir.U32), b.Uniform("n", ir.U32), b.Uniform("k", ir.U32)
	return m, n, k, b.Buffer("a", t, ir.Read), b.Buffer("b", t, ir.Read), b.Buffer("c", ir.F32, ir.Write)
}

// matmulProgram gives each invocation one element of c (axis 0 the column, axis 1
// the row) and walks k one tile at a time. For each tile the workgroup's X·Y
// invocations stage, in strided loops, the Y×tile block of a its rows need and
// the tile×X block of b its columns need (0 outside the matrices), then after a
// barrier every invocation adds its tile of products in order, and a second
// barrier frees the tiles for the next step. The shapes m, n and k are uniforms,
// read per dispatch; the tile depth is a specialization parameter.
func matmulProgram() *ir.Program {
	b := ir.NewBuilder("kiln.matrix.matmul.f32", matmulTile, matmulTile, 1)
	tile := b.Tunable("tile", ir.U32, ir.LitU32(matmulTile), u32Literals(matmulTiles)...)
	m, n, k, a, bm, c := matmulOperands(b, ir.F32)
	aTile := b.Shared("a_tile", ir.F32, matmulShared)
	bTile := b.Shared("b_tile", ir.F32, matmulShared)
	zero, one := ir.LitU32(0), ir.LitU32(1)

	wx := b.Let("wx", ir.WorkgroupSize(0))
	wy := b.Let("wy", ir.WorkgroupSize(1))
	col := b.Let("col", ir.GlobalID(0))
	row := b.Let("row", ir.GlobalID(1))
	tx := b.Let("tx", ir.LocalID(0))
	ty := b.Let("ty", ir.LocalID(1))
	lane := b.Let("lane", ir.Add(ir.Mul(ty, wx), tx))
	threads := b.Let("threads", ir.Mul(wx, wy))
	row0 := b.Let("row0", ir.Mul(ir.WorkgroupID(1), wy))
	col0 := b.Let("col0", ir.Mul(ir.WorkgroupID(0), wx))
	acc := b.Var("acc", ir.F32, ir.LitF32(0))
	tiles := b.Let("tiles", ir.Div(ir.Add(k, ir.Sub(tile, one)), tile))
	b.For("t", ir.U32, zero, tiles, one, func(loop *ir.Block, t ir.Expr) {
		base := loop.Let("base", ir.Mul(t, tile))
		loop.For("sa", ir.U32, lane, ir.Mul(wy, tile), threads, func(fill *ir.Block, s ir.Expr) {
			r := fill.Let("ar", ir.Add(row0, ir.Div(s, tile)))
			e := fill.Let("ac", ir.Add(base, ir.Rem(s, tile)))
			fill.Store(aTile, s, ir.Select(ir.LAnd(ir.Lt(r, m), ir.Lt(e, k)),
				ir.Load(a, ir.Add(ir.Mul(r, k), e)), ir.LitF32(0)))
		})
		loop.For("sb", ir.U32, lane, ir.Mul(tile, wx), threads, func(fill *ir.Block, s ir.Expr) {
			e := fill.Let("br", ir.Add(base, ir.Div(s, wx)))
			cc := fill.Let("bc", ir.Add(col0, ir.Rem(s, wx)))
			fill.Store(bTile, s, ir.Select(ir.LAnd(ir.Lt(e, k), ir.Lt(cc, n)),
				ir.Load(bm, ir.Add(ir.Mul(e, n), cc)), ir.LitF32(0)))
		})
		loop.Barrier()
		loop.For("e", ir.U32, zero, tile, one, func(inner *ir.Block, e ir.Expr) {
			product := ir.Mul(ir.Load(aTile, ir.Add(ir.Mul(ty, tile), e)), ir.Load(bTile, ir.Add(ir.Mul(e, wx), tx)))
			inner.Assign("acc", ir.Add(acc, product))
		})
		loop.Barrier()
	})
	b.If(ir.LAnd(ir.Lt(row, m), ir.Lt(col, n)), func(then *ir.Block) {
		then.Store(c, ir.Add(ir.Mul(row, n), col), acc)
	})
	return b.MustBuild()
}

// u32Literals turns values into u32 literals, for candidate lists.
func u32Literals(values []uint32) []ir.Literal {
	out := make([]ir.Literal, len(values))
	for i, v := range values {
		out[i] = ir.LitU32(v)
	}
	return out
}
