package spirv

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// builtinRecorder is a program that writes, for every invocation, the 15 values
// of global_id, local_id, workgroup_id, num_workgroups and workgroup_size on
// every axis to out at 15 * its linear global index, and that count it at
// out[count] (an atomic add of 1 per invocation, into a read_write buffer).
func builtinRecorder(wg [3]uint32) *ir.Program {
	b := ir.NewBuilder("test.builtins", wg[0], wg[1], wg[2])
	out := b.Buffer("out", ir.U32, ir.Write)
	count := b.Buffer("count", ir.U32, ir.ReadWrite)
	kinds := []func(uint8) ir.Expr{ir.GlobalID, ir.LocalID, ir.WorkgroupID, ir.NumWorkgroups, ir.WorkgroupSize}
	size := func(a uint8) ir.Expr { return ir.Mul(ir.NumWorkgroups(a), ir.WorkgroupSize(a)) }
	idx := b.Let("idx", ir.Add(ir.GlobalID(0), ir.Mul(size(0), ir.Add(ir.GlobalID(1), ir.Mul(size(1), ir.GlobalID(2))))))
	base := b.Let("base", ir.Mul(idx, ir.LitU32(15)))
	for k, kind := range kinds {
		for a := range uint8(3) {
			b.Store(out, ir.Add(base, ir.LitU32(uint32(3*k)+uint32(a))), kind(a))
		}
	}
	b.Atomic(ir.AtomicAdd, count, ir.LitU32(0), ir.LitU32(1))
	return b.MustBuild()
}

// recorderCase is the launch of builtinRecorder over grid.
func recorderCase(p *ir.Program, grid [3]uint32) kernels.Case {
	n := uint32(15)
	for a := range 3 {
		n *= grid[a] * p.WorkgroupSize[a]
	}
	return kernels.Case{Grid: grid, Inputs: [][]byte{nil, make([]byte, 4)}, OutputCounts: []uint32{n}}
}

// TestGridBuiltinsAreLogical runs grids as several launches (small per-axis
// limits, and the real 65,535 of lavapipe with a grid beyond it) and checks every
// builtin against the oracle: each keeps its logical value, and every invocation
// runs exactly once. Both buffer paths are covered.
func TestGridBuiltinsAreLogical(t *testing.T) {
	val := spirvVal(t)
	cases := []struct {
		wg, grid, limit [3]uint32
		addressed       uint64
	}{
		{[3]uint32{2, 1, 2}, [3]uint32{7, 5, 3}, [3]uint32{2, 3, 1}, 0},
		{[3]uint32{1, 3, 1}, [3]uint32{5, 4, 3}, [3]uint32{3, 2, 2}, 0b11},
		{[3]uint32{4, 2, 1}, [3]uint32{3, 2, 2}, [3]uint32{65535, 65535, 65535}, 0b10},
		{[3]uint32{1, 1, 1}, [3]uint32{65537, 1, 2}, [3]uint32{65535, 65535, 65535}, 0},
	}
	for _, c := range cases {
		name := fmt.Sprintf("wg%v/grid%v/limit%v/addressed%b", c.wg, c.grid, c.limit, c.addressed)
		p := builtinRecorder(c.wg)
		m, err := EmitFor(p, Target{BufferAddresses: c.addressed})
		if err != nil {
			t.Fatal(err)
		}
		validate(t, val, name, m)
		kc := recorderCase(p, c.grid)
		want, err := interp.Run(context.Background(), p, interp.Options{}, interp.Launch{Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts})
		if err != nil {
			t.Fatal(err)
		}
		got, err := dispatchCase(p, m, kc, nil, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if launches := LaunchCount(c.grid, c.limit); c.limit[0] == 65535 && c.grid[0] > 65535 && launches < 2 {
			t.Errorf("%s: %d launches", name, launches)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: output %d differs from the oracle", name, i)
			}
		}
	}
}

// TestLaunchesCoverTheGrid checks that the launches tile the grid exactly, each
// within the limit, x fastest, and that LaunchCount counts them.
func TestLaunchesCoverTheGrid(t *testing.T) {
	for _, c := range []struct{ grid, limit [3]uint32 }{
		{[3]uint32{7, 5, 3}, [3]uint32{2, 3, 1}},
		{[3]uint32{1, 1, 1}, [3]uint32{65535, 65535, 65535}},
		{[3]uint32{65536, 1, 1}, [3]uint32{65535, 65535, 65535}},
		{[3]uint32{4, 4, 4}, [3]uint32{0, 4, 4}},
		{[3]uint32{0, 4, 4}, [3]uint32{1, 1, 1}},
	} {
		seen := map[[3]uint32]int{}
		var prev *Launch
		n := uint64(0)
		for l := range Launches(c.grid, c.limit) {
			n++
			for a := range 3 {
				if l.Count[a] == 0 || l.Count[a] > max(c.limit[a], 1) {
					t.Errorf("grid %v limit %v: launch %+v exceeds the limit", c.grid, c.limit, l)
				}
			}
			if prev != nil && prev.Base[1] == l.Base[1] && prev.Base[2] == l.Base[2] && prev.Base[0] >= l.Base[0] {
				t.Errorf("grid %v limit %v: launch %+v after %+v is not x fastest", c.grid, c.limit, l, *prev)
			}
			prev = &l
			for z := l.Base[2]; z < l.Base[2]+l.Count[2]; z++ {
				for y := l.Base[1]; y < l.Base[1]+l.Count[1]; y++ {
					for x := l.Base[0]; x < l.Base[0]+l.Count[0]; x++ {
						seen[[3]uint32{x, y, z}]++
					}
				}
			}
			if w := l.Words(c.grid); w != [GridWordCount]uint32{l.Base[0], l.Base[1], l.Base[2], c.grid[0], c.grid[1], c.grid[2]} {
				t.Errorf("launch %+v: words %v", l, w)
			}
		}
		total := uint64(c.grid[0]) * uint64(c.grid[1]) * uint64(c.grid[2])
		if uint64(len(seen)) != total {
			t.Errorf("grid %v limit %v: %d workgroups covered, want %d", c.grid, c.limit, len(seen), total)
		}
		for id, k := range seen {
			if k != 1 || id[0] >= c.grid[0] || id[1] >= c.grid[1] || id[2] >= c.grid[2] {
				t.Errorf("grid %v limit %v: workgroup %v launched %d times", c.grid, c.limit, id, k)
			}
		}
		if total > 0 && LaunchCount(c.grid, c.limit) != n {
			t.Errorf("grid %v limit %v: LaunchCount %d, Launches yielded %d", c.grid, c.limit, LaunchCount(c.grid, c.limit), n)
		}
	}
}

// TestNoPhysicalGridBuiltins pins that a module whose grid words fit never reads
// the builtins whose physical value differs from the logical one:
// GlobalInvocationId and NumWorkgroups.
func TestNoPhysicalGridBuiltins(t *testing.T) {
	const builtInNumWorkgroups, builtInGlobalInvocationID = 24, 28
	for _, np := range append(allPrograms(t), namedProgram{"recorder", builtinRecorder([3]uint32{2, 2, 2})}) {
		m := mustEmit(t, np.name, np.prog)
		if m.Grid == GridPhysical {
			continue // TestGridModes
		}
		_, insts := decode(t, m.Words)
		for target, d := range decorations(insts) {
			if b, ok := d[decorationBuiltIn]; ok && (b[0] == builtInNumWorkgroups || b[0] == builtInGlobalInvocationID) {
				t.Errorf("%s: id %d is BuiltIn %d", np.name, target, b[0])
			}
		}
	}
}

// TestGridModes pins how a module reads the grid: GridFree without grid
// builtins, GridLogical with its words at the end of the block, and GridPhysical
// (the device's builtins, one launch) when the words would not fit in the push
// constants, whose builtins still match the oracle.
func TestGridModes(t *testing.T) {
	val := spirvVal(t)
	free := ir.NewBuilder("t.free", 1, 1, 1)
	free.Store(free.Buffer("out", ir.U32, ir.Write), ir.LitU32(0), ir.LocalID(0))
	if m := mustEmit(t, "free", free.MustBuild()); m.Grid != GridFree || m.PushConstantBytes != 4 {
		t.Errorf("no grid builtins: mode %d, %d push bytes", m.Grid, m.PushConstantBytes)
	}
	p := builtinRecorder([3]uint32{2, 1, 2})
	m := mustEmit(t, "logical", p)
	if m.Grid != GridLogical || m.GridOffset != 8 || m.PushConstantBytes != 8+4*GridWordCount {
		t.Errorf("recorder: mode %d, grid words at %d, %d push bytes", m.Grid, m.GridOffset, m.PushConstantBytes)
	}
	tight := fullTarget
	tight.MaxPushConstantBytes = 8 + 4*GridWordCount - 4
	m, err := EmitFor(p, tight)
	if err != nil {
		t.Fatal(err)
	}
	validate(t, val, "physical", m)
	if m.Grid != GridPhysical || m.PushConstantBytes != 8 {
		t.Errorf("recorder in %d bytes: mode %d, %d push bytes", tight.MaxPushConstantBytes, m.Grid, m.PushConstantBytes)
	}
	kc := recorderCase(p, [3]uint32{3, 2, 2})
	want, err := interp.Run(context.Background(), p, interp.Options{}, interp.Launch{Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dispatchCase(p, m, kc, nil, [3]uint32{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("physical grid: output %d differs from the oracle", i)
		}
	}
}
