package spirv

import (
	"iter"

	"github.com/kiln-dev/kiln/ir"
)

// Grids of any size. A device launches at most maxComputeWorkGroupCount
// workgroups per axis in one vkCmdDispatch (65,535 on many devices), while an IR
// grid may be as large as a u32 global_id allows. The backend therefore runs a
// logical grid as several launches, each a box of at most the limit per axis, and
// the module computes the logical builtins from the physical ones and the grid
// words of the launch, which the backend pushes before each launch:
//
//	workgroup_id[a]  = WorkgroupId[a] + base[a]
//	num_workgroups[a] = grid[a]
//	global_id[a]     = workgroup_id[a] * workgroup_size[a] + local_id[a]
//
// local_id, workgroup_size and the subgroup builtins do not depend on the
// workgroup's place in the grid. See docs/design.md, "Grids and buffers of any
// size".

// GridWordCount is the number of u32 grid words in the push constants, at
// Module.GridOffset: the launch's base workgroup on x, y and z, then the logical
// grid on x, y and z.
const GridWordCount = 6

// Launch is one vkCmdDispatch of a logical grid: Count workgroups per axis,
// the first of which is logical workgroup Base.
type Launch struct{ Base, Count [3]uint32 }

// Words returns the grid words of launch l of the logical grid: l.Base, then
// grid, in the order of Module.GridOffset.
func (l Launch) Words(grid [3]uint32) [GridWordCount]uint32 {
	return [GridWordCount]uint32{l.Base[0], l.Base[1], l.Base[2], grid[0], grid[1], grid[2]}
}

// Launches yields the launches that cover grid with at most limit workgroups per
// axis each, x fastest: one launch when grid fits the limit, and nothing for a
// grid with a zero axis. A zero limit on an axis counts as 1.
func Launches(grid, limit [3]uint32) iter.Seq[Launch] {
	return func(yield func(Launch) bool) {
		if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
			return
		}
		lim := limit
		for a := range lim {
			lim[a] = max(lim[a], 1)
		}
		var l Launch
		for z := uint64(0); z < uint64(grid[2]); z += uint64(lim[2]) {
			for y := uint64(0); y < uint64(grid[1]); y += uint64(lim[1]) {
				for x := uint64(0); x < uint64(grid[0]); x += uint64(lim[0]) {
					l.Base = [3]uint32{uint32(x), uint32(y), uint32(z)}
					for a := range 3 {
						l.Count[a] = min(grid[a]-l.Base[a], lim[a])
					}
					if !yield(l) {
						return
					}
				}
			}
		}
	}
}

// LaunchCount is the number of launches Launches yields for grid and limit.
func LaunchCount(grid, limit [3]uint32) uint64 {
	n := uint64(1)
	for a := range 3 {
		l := uint64(max(limit[a], 1))
		n *= (uint64(grid[a]) + l - 1) / l
	}
	return n
}

// pushLayout is where the parts of a module's push-constant block lie, in bytes:
// the element counts at 0 (4 per buffer), the uniforms after them (4 each), an
// 8-byte-aligned buffer device address for each addressed binding, then the grid
// words, which end the block when the module reads them.
type pushLayout struct {
	uniforms, grid uint32
	addresses      map[uint32]uint32 // binding -> offset of its address
}

// layoutOf lays out p's push constants with the bindings whose bits are set in
// addressed reached through buffer device addresses, in binding order.
func layoutOf(p *ir.Program, addressed uint64) pushLayout {
	l := pushLayout{uniforms: 4 * uint32(len(p.Buffers)), addresses: map[uint32]uint32{}}
	end := l.uniforms + 4*uint32(len(p.Uniforms))
	for b := range uint32(len(p.Buffers)) {
		if b >= 64 || addressed&(1<<b) == 0 {
			continue
		}
		end = (end + 7) &^ 7
		l.addresses[b] = end
		end += 8
	}
	l.grid = end
	return l
}

// gridWord returns grid word i (see GridWordCount), loaded once in the entry
// block.
func (e *emitter) gridWord(i uint8) uint32 {
	k := hoistKey{grid: i + 1}
	if id, ok := e.hoisted[k]; ok {
		return id
	}
	e.gridUsed = true
	ptr := e.id()
	e.preamble = appendInst(e.preamble, opAccessChain, e.pointer(storagePushConstant, e.u32()), ptr,
		e.pushVar, e.cu32(e.gridMember), e.cu32(uint32(i)))
	id := e.id()
	e.preamble = appendInst(e.preamble, opLoad, e.u32(), id, ptr)
	e.dynamic[id] = true
	e.hoisted[k] = id
	return id
}

// logicalBuiltin returns the logical value of workgroup_id, num_workgroups or
// global_id on axis from the physical builtins and the grid words, computed once
// in the entry block.
func (e *emitter) logicalBuiltin(kind ir.BuiltinKind, axis uint8) (uint32, error) {
	k := hoistKey{kind: kind, axis: axis}
	if id, ok := e.hoisted[k]; ok {
		return id, nil
	}
	var id uint32
	switch kind {
	case ir.NumWorkgroupsBuiltin:
		return e.gridWord(3 + axis), nil
	case ir.WorkgroupIDBuiltin:
		phys, err := e.physical(ir.WorkgroupIDBuiltin, axis)
		if err != nil {
			return 0, err
		}
		id = e.id()
		e.preamble = appendInst(e.preamble, opIAdd, e.u32(), id, phys, e.gridWord(axis))
	default: // global_id
		wgID, err := e.logicalBuiltin(ir.WorkgroupIDBuiltin, axis)
		if err != nil {
			return 0, err
		}
		local, err := e.physical(ir.LocalIDBuiltin, axis)
		if err != nil {
			return 0, err
		}
		scaled := e.id()
		e.preamble = appendInst(e.preamble, opIMul, e.u32(), scaled, wgID, e.cu32(e.wg[axis]))
		id = e.id()
		e.preamble = appendInst(e.preamble, opIAdd, e.u32(), id, scaled, local)
	}
	e.dynamic[id] = true
	e.hoisted[k] = id
	return id, nil
}
