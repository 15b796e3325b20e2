package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// scanWG is the workgroup width of the scan and the size of its shared array: a
// workgroup-size override must be at most scanWG wide.
const scanWG = 256

func exclusiveScan() Kernel {
	return Kernel{
		Name:    "exclusive_scan",
		OpID:    "kiln.scan.exclusive.u32",
		Doc:     "output[i] = sum of input over i's workgroup segment of 256 up to but excluding i, on u32 (wrapping); size is the number of elements",
		Sizes:   vectorSizes(),
		Program: exclusiveScanProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, scanWG), 1, 1},
				Inputs:       [][]byte{U32Bytes(randomU32(rng, size)), nil},
				OutputCounts: []uint32{0, uint32(size)},
			}
		},
		Reference: func(c Case) [][]byte {
			wg := int(workgroupSize(c, [3]uint32{scanWG, 1, 1})[0])
			in := BytesU32(c.Inputs[0])
			out := make([]uint32, c.OutputCounts[1])
			var sum uint32
			for i := range out {
				if i%wg == 0 {
					sum = 0
				}
				out[i] = sum
				if i < len(in) {
					sum += in[i]
				}
			}
			return [][]byte{U32Bytes(out)}
		},
		Check: exact(ir.U32, "output"),
	}
}

// exclusiveScanProgram scans each workgroup's segment in shared memory with the
// Hillis-Steele doubling steps (an inclusive scan, each step reading then writing
// between barriers) and shifts it by one lane to make it exclusive.
func exclusiveScanProgram() *ir.Program {
	b := ir.NewBuilder("kiln.scan.exclusive.u32", scanWG, 1, 1)
	input := b.Buffer("input", ir.U32, ir.Read)
	output := b.Buffer("output", ir.U32, ir.Write)
	scan := b.Shared("scan", ir.U32, scanWG)
	lid := b.Let("lid", ir.LocalID(0))
	gid := b.Let("gid", ir.GlobalID(0))
	zero, one := ir.LitU32(0), ir.LitU32(1)
	b.Store(scan, lid, ir.Select(ir.Lt(gid, ir.Len(input)), ir.Load(input, gid), zero))
	b.Barrier()
	offset := b.Var("offset", ir.U32, one)
	b.While(ir.Lt(offset, ir.WorkgroupSize(0)), func(loop *ir.Block) {
		// Lanes below offset read their own slot and discard it, so no lane
		// indexes scan out of bounds (strict mode reports that).
		has := loop.Let("has", ir.Ge(lid, offset))
		left := loop.Let("left", ir.Select(has, ir.Load(scan, ir.Select(has, ir.Sub(lid, offset), lid)), zero))
		loop.Barrier()
		loop.Store(scan, lid, ir.Add(ir.Load(scan, lid), left))
		loop.Barrier()
		loop.Assign("offset", ir.Shl(offset, one))
	})
	b.If(ir.Lt(gid, ir.Len(output)), func(then *ir.Block) {
		then.Store(output, gid, ir.Select(ir.Gt(lid, zero), ir.Load(scan, ir.Sub(ir.Max(lid, one), one)), zero))
	})
	return b.MustBuild()
}
