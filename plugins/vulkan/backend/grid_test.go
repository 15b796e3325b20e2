package backend

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

// builtinRecorder writes, for every invocation, the 15 values of global_id,
// local_id, workgroup_id, num_workgroups and workgroup_size on every axis, then
// (with subgroups) subgroup_size and subgroup_invocation_id, to out at 15 (17)
// times its linear global index, and counts the invocations in count[0].
func builtinRecorder(wg [3]uint32, subgroups bool) *ir.Program {
	b := ir.NewBuilder("test.grid.builtins", wg[0], wg[1], wg[2])
	out := b.Buffer("out", ir.U32, ir.Write)
	count := b.Buffer("count", ir.U32, ir.ReadWrite)
	size := func(a uint8) ir.Expr { return ir.Mul(ir.NumWorkgroups(a), ir.WorkgroupSize(a)) }
	idx := b.Let("idx", ir.Add(ir.GlobalID(0), ir.Mul(size(0), ir.Add(ir.GlobalID(1), ir.Mul(size(1), ir.GlobalID(2))))))
	stride := uint32(15)
	if subgroups {
		stride = 17
	}
	base := b.Let("base", ir.Mul(idx, ir.LitU32(stride)))
	var values []ir.Expr
	for _, kind := range []func(uint8) ir.Expr{ir.GlobalID, ir.LocalID, ir.WorkgroupID, ir.NumWorkgroups, ir.WorkgroupSize} {
		for a := range uint8(3) {
			values = append(values, kind(a))
		}
	}
	if subgroups {
		values = append(values, ir.SubgroupSize(), ir.SubgroupInvocationID())
	}
	for k, v := range values {
		b.Store(out, ir.Add(base, ir.LitU32(uint32(k))), v)
	}
	b.Atomic(ir.AtomicAdd, count, ir.LitU32(0), ir.LitU32(1))
	return b.MustBuild()
}

// closedForm is what builtinRecorder (without subgroups) writes over grid, by the
// definitions of the builtins: out, then count.
func closedForm(wg, grid [3]uint32) [][]byte {
	size := [3]uint32{wg[0] * grid[0], wg[1] * grid[1], wg[2] * grid[2]}
	out := make([]uint32, 0, 15*size[0]*size[1]*size[2])
	for z := range size[2] {
		for y := range size[1] {
			for x := range size[0] {
				gid := [3]uint32{x, y, z}
				var local, group [3]uint32
				for a := range 3 {
					local[a], group[a] = gid[a]%wg[a], gid[a]/wg[a]
				}
				for _, v := range [][3]uint32{gid, local, group, grid, wg} {
					out = append(out, v[:]...)
				}
			}
		}
	}
	return [][]byte{words(out), words([]uint32{size[0] * size[1] * size[2]})}
}

// maxSplitAxis is the largest per-axis workgroup limit the grid test goes
// beyond: a device that launches more (NVIDIA: 2^31 - 1 on x) cannot be given a
// larger grid on that axis within a u32 global_id and the test's memory.
const maxSplitAxis = 1 << 20

// TestGridBeyondTheWorkgroupCountLimit runs, on each axis whose
// maxComputeWorkGroupCount is at most maxSplitAxis, a grid one workgroup beyond
// it (several launches in one command buffer), with a workgroup of the device's
// subgroup size, and checks every builtin of every invocation and that each ran
// once: on x against the oracle, with the subgroup builtins where the device has
// them; on y and z (where the oracle runs one workgroup at a time, too slowly for
// the suite) against the builtins' definitions.
func TestGridBeyondTheWorkgroupCountLimit(t *testing.T) {
	b := newTestBackend(t)
	a := b.adapters.List()[0]
	lim := a.props.Limits.MaxComputeWorkGroupCount
	subgroups := a.target.Subgroups&spirv.SubgroupBasic != 0
	sg := max(a.props.Subgroup.Size, 1)
	wg := [3]uint32{sg, 1, 1}
	tested := 0
	for axis := range 3 {
		if lim[axis] > maxSplitAxis {
			t.Logf("axis %d: the device launches %d workgroups at once; no larger grid fits the test", axis, lim[axis])
			continue
		}
		tested++
		grid := [3]uint32{1, 1, 1}
		grid[axis] = lim[axis] + 1
		oracle := axis == 0
		t.Run(fmt.Sprintf("grid%v", grid), func(t *testing.T) {
			withSubgroups := oracle && subgroups
			p := builtinRecorder(wg, withSubgroups)
			stride := uint32(15)
			if withSubgroups {
				stride = 17
			}
			n := stride * wg[0] * grid[0] * grid[1] * grid[2]
			inputs, counts := [][]byte{nil, make([]byte, 4)}, []uint32{n}
			want := closedForm(wg, grid)
			if oracle {
				opts := interp.Options{}
				if withSubgroups {
					opts.SubgroupSize = sg
				}
				var err error
				if want, err = interp.Run(context.Background(), p, opts, interp.Launch{Grid: grid, Inputs: inputs, OutputCounts: counts}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := run(t, b, p, ir.SpecMap{}, [3]uint32{}, grid, inputs, counts)
			if err != nil {
				t.Fatal(err)
			}
			if spirv.LaunchCount(grid, lim) < 2 {
				t.Fatalf("grid %v fits in one launch", grid)
			}
			for i := range want {
				if !bytes.Equal(res.Outputs[i], want[i]) {
					got, exp := wordsOf(res.Outputs[i]), wordsOf(want[i])
					for k := range exp {
						if k >= len(got) || got[k] != exp[k] {
							t.Fatalf("output %d word %d (invocation %d, value %d) differs: want %d", i, k, k/int(stride), k%int(stride), exp[k])
						}
					}
				}
			}
		})
	}
	if tested == 0 {
		t.Skipf("the device launches %v workgroups at once on every axis", lim)
	}
}
