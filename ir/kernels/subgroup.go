package kernels

import (
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// subgroupWG is the workgroup width of the subgroup reduction; every subgroup size
// up to 64 divides it.
const subgroupWG = 64

func subgroupSum() Kernel {
	return Kernel{
		Name: "subgroup_sum",
		OpID: "kiln.reduce.subgroup_sum.u32",
		Doc: "sum[0] = the wrapping sum and max[0] = the maximum of x (u32), reduced per subgroup with subgroup_add and " +
			"subgroup_max and then across subgroups by one atomic per subgroup; any subgroup size; size is the number of elements",
		Sizes:   vectorSizes(),
		Program: subgroupSumProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			return Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, subgroupWG), 1, 1},
				Inputs:       [][]byte{U32Bytes(randomU32(rng, size)), nil, nil},
				OutputCounts: []uint32{0, 0, 0},
			}
		},
		Reference: func(c Case) [][]byte {
			var sum, mx uint32
			for _, v := range BytesU32(c.Inputs[0]) {
				sum += v
				mx = max(mx, v)
			}
			return [][]byte{U32Bytes([]uint32{sum}), U32Bytes([]uint32{mx})}
		},
		Check: exact(ir.U32, "sum", "max"),
	}
}

// subgroupSumProgram reduces in two steps: every lane loads its element (0 beyond
// the input, so the subgroup operations run in uniform control flow with no
// guard), each subgroup reduces with subgroup_add and subgroup_max, and its lane 0
// adds the subgroup's results to the totals atomically.
func subgroupSumProgram() *ir.Program {
	b := ir.NewBuilder("kiln.reduce.subgroup_sum.u32", subgroupWG, 1, 1)
	x := b.Buffer("x", ir.U32, ir.Read)
	sum := b.FixedBuffer("sum", ir.U32, ir.Write, 1)
	mx := b.FixedBuffer("max", ir.U32, ir.Write, 1)
	v := b.Let("v", ir.Load(x, ir.GlobalID(0)))
	s := b.Let("s", ir.SubgroupAdd(v))
	m := b.Let("m", ir.SubgroupMax(v))
	b.If(ir.Eq(ir.SubgroupInvocationID(), ir.LitU32(0)), func(then *ir.Block) {
		then.Atomic(ir.AtomicAdd, sum, ir.LitU32(0), s)
		then.Atomic(ir.AtomicMax, mx, ir.LitU32(0), m)
	})
	return b.MustBuild()
}
