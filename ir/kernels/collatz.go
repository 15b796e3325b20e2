package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// collatzMaxSteps is the default step cap: no start value up to 10^6 needs more
// than 524 steps, but 0 never reaches 1 and a trajectory that wraps u32 may cycle.
const collatzMaxSteps = 1000

// collatzStarts are start values placed first in every case: 0 runs into the cap,
// 1 takes no step, 837799 takes the most steps below 10^6 (524), and 704511 climbs
// past 2^32, so its u32 trajectory wraps.
func collatzStarts() []uint32 { return []uint32{0, 1, 837799, 704511} }

// collatz's largest size is smaller than the elementwise kernels': its lanes run
// 100 to 500 loop iterations each.
func collatz() Kernel {
	return Kernel{
		Name:    "collatz",
		OpID:    "kiln.control.collatz.u32",
		Doc:     "steps[i] = Collatz steps from start[i] to 1 on wrapping u32, capped at max_steps (default 1000); size is the number of start values",
		Sizes:   []int{0, 1, 7, 61, 256, 257, 1021, 2048},
		Program: collatzProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			starts := make([]uint32, size)
			n := copy(starts, collatzStarts())
			for i := n; i < size; i++ {
				starts[i] = 1 + rng.Uint32N(1_000_000)
			}
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, vectorWG), 1, 1},
				Inputs:       [][]byte{U32Bytes(starts), nil},
				OutputCounts: []uint32{0, uint32(size)},
			}
		},
		Reference: func(c Case) [][]byte {
			limit := specU32(c, "max_steps", collatzMaxSteps)
			starts := BytesU32(c.Inputs[0])
			steps := make([]uint32, c.OutputCounts[1])
			for i := range steps {
				var v uint32
				if i < len(starts) {
					v = starts[i]
				}
				var count uint32
				for v != 1 && count < limit {
					if v%2 == 0 {
						v /= 2
					} else {
						v = 3*v + 1
					}
					count++
				}
				steps[i] = count
			}
			return [][]byte{U32Bytes(steps)}
		},
		Check: exact(ir.U32, "steps"),
	}
}

// collatzProgram is data-dependent control flow: an early return, a while loop
// whose trip count differs per lane, and a break at the cap.
func collatzProgram() *ir.Program {
	b := ir.NewBuilder("kiln.control.collatz.u32", vectorWG, 1, 1)
	limit := b.Param("max_steps", ir.U32, ir.LitU32(collatzMaxSteps))
	start := b.Buffer("start", ir.U32, ir.Read)
	steps := b.Buffer("steps", ir.U32, ir.Write)
	zero, one := ir.LitU32(0), ir.LitU32(1)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Ge(i, ir.Len(steps)), func(then *ir.Block) { then.Return() })
	v := b.Var("value", ir.U32, ir.Load(start, i))
	count := b.Var("count", ir.U32, zero)
	b.While(ir.Ne(v, one), func(loop *ir.Block) {
		loop.If(ir.Ge(count, limit), func(then *ir.Block) { then.Break() })
		loop.IfElse(ir.Eq(ir.And(v, one), zero), func(even *ir.Block) {
			even.Assign("value", ir.Shr(v, one))
		}, func(odd *ir.Block) {
			odd.Assign("value", ir.Add(ir.Mul(v, ir.LitU32(3)), one))
		})
		loop.Assign("count", ir.Add(count, one))
	})
	b.Store(steps, i, count)
	return b.MustBuild()
}
