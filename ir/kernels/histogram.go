package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// histogramBins is the number of bins: a value v counts in bin v & 255.
const histogramBins = 256

func histogram() Kernel {
	return Kernel{
		Name:    "histogram",
		OpID:    "kiln.histogram.u32",
		Doc:     "bins[v & 255] counts the u32 values v, through per-workgroup shared histograms and atomics; size is the number of values",
		Sizes:   vectorSizes(),
		Program: histogramProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, vectorWG), 1, 1},
				Inputs:       [][]byte{U32Bytes(randomU32(rng, size)), nil},
				OutputCounts: []uint32{0, 0},
			}
		},
		Reference: func(c Case) [][]byte {
			bins := make([]uint32, histogramBins)
			for _, v := range BytesU32(c.Inputs[0]) {
				bins[v%histogramBins]++
			}
			return [][]byte{U32Bytes(bins)}
		},
		Check: exact(ir.U32, "bins"),
	}
}

// histogramProgram clears a shared histogram, counts each lane's value into it with
// shared atomics, then adds its non-zero bins into the global bins with buffer
// atomics. Lanes stride over the bins by the workgroup width, so any workgroup size
// works.
func histogramProgram() *ir.Program {
	b := ir.NewBuilder("kiln.histogram.u32", vectorWG, 1, 1)
	values := b.Buffer("values", ir.U32, ir.Read)
	bins := b.FixedBuffer("bins", ir.U32, ir.Write, histogramBins)
	local := b.Shared("local_bins", ir.U32, histogramBins)
	lid := b.Let("lid", ir.LocalID(0))
	eachBin := func(blk *ir.Block, name string, body func(*ir.Block, ir.Expr)) {
		blk.For(name, ir.U32, lid, ir.LitU32(histogramBins), ir.WorkgroupSize(0), body)
	}
	eachBin(&b.Block, "clear", func(loop *ir.Block, bin ir.Expr) {
		loop.Store(local, bin, ir.LitU32(0))
	})
	b.Barrier()
	gid := b.Let("gid", ir.GlobalID(0))
	b.If(ir.Lt(gid, ir.Len(values)), func(then *ir.Block) {
		then.Atomic(ir.AtomicAdd, local, ir.And(ir.Load(values, gid), ir.LitU32(histogramBins-1)), ir.LitU32(1))
	})
	b.Barrier()
	eachBin(&b.Block, "bin", func(loop *ir.Block, bin ir.Expr) {
		count := loop.Let("count", ir.Load(local, bin))
		loop.If(ir.Ne(count, ir.LitU32(0)), func(then *ir.Block) {
			then.Atomic(ir.AtomicAdd, bins, bin, count)
		})
	})
	return b.MustBuild()
}
