package backend

import (
	"encoding/binary"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// maxLaunches bounds the vkCmdDispatch calls one logical grid may take: 2^17
// covers a 2^32-invocation x axis at workgroup size 1 on a device that launches
// 65,535 workgroups per axis.
const maxLaunches = 1 << 17

// launchLimit is the most workgroups per axis one launch of p may have: the
// device's maxComputeWorkGroupCount, or the whole grid for a module that reads
// the device's grid builtins (spirv.GridPhysical), which runs as one launch.
func (p *pipeline) launchLimit(grid [3]uint32) [3]uint32 {
	if p.gridMode == spirv.GridPhysical {
		return grid
	}
	return p.d.a.props.Limits.MaxComputeWorkGroupCount
}

// checkLaunches rejects a grid that the pipeline cannot launch on this device:
// beyond maxComputeWorkGroupCount on an axis for a spirv.GridPhysical module
// (whose grid words did not fit in the push constants), or more than maxLaunches
// launches.
func (p *pipeline) checkLaunches(grid [3]uint32) error {
	limit := p.d.a.props.Limits.MaxComputeWorkGroupCount
	if p.gridMode == spirv.GridPhysical {
		for axis, g := range grid {
			if g > limit[axis] {
				return pluginapi.Rejected("vulkan: program %q: grid %v exceeds adapter %d's maxComputeWorkGroupCount %v on axis %d, and its buffers and uniforms leave no room in the %d bytes of push constants for the words that split a grid. Fix: launch at most %d workgroups on that axis, or use fewer buffers and uniforms",
					p.prog.Name, grid, p.d.a.index, limit, axis, p.d.a.props.Limits.MaxPushConstantsSize, limit[axis])
			}
		}
		return nil
	}
	if n := spirv.LaunchCount(grid, limit); n > maxLaunches {
		return pluginapi.Rejected("vulkan: program %q: grid %v needs %d launches of at most %v workgroups on adapter %d, more than %d. Fix: use a larger workgroup size or a smaller grid",
			p.prog.Name, grid, n, limit, p.d.a.index, maxLaunches)
	}
	return nil
}

// dispatchGrid records the logical grid into cb as the launches of
// spirv.Launches under the pipeline's launch limit: before each, the push
// constants (with the launch's grid words at p.grid for a spirv.GridLogical
// module), then vkCmdDispatch of its workgroup counts. The launches need no
// barrier between them: like the workgroups of one dispatch, they are
// independent. push holds the counts, uniforms and addresses and is p.push bytes
// long; its grid words are overwritten. See docs/design.md, "Grids and buffers of
// any size".
func (p *pipeline) dispatchGrid(cb vk.CommandBuffer, push []byte, grid [3]uint32) {
	pushed := false
	for l := range spirv.Launches(grid, p.launchLimit(grid)) {
		if p.gridMode == spirv.GridLogical {
			words := l.Words(grid)
			for i, w := range words {
				binary.LittleEndian.PutUint32(push[p.grid+4*uint32(i):], w)
			}
			pushed = false
		}
		if !pushed && len(push) > 0 {
			cb.PushConstants(p.layout, push)
			pushed = true
		}
		cb.Dispatch(l.Count[0], l.Count[1], l.Count[2])
	}
}
