package backend

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// coopState is what an adapter uses of the device's cooperative matrices
// (VK_KHR_cooperative_matrix; see docs/design.md, "Vulkan", "Cooperative
// matrices"): the features its logical device enables and the device's
// support as read.
type coopState struct {
	support vk.CoopMatrixSupport
	enable  vk.CoopMatrixEnable
}

// nvChoice is what Config.MatrixPath asks of the NV path: "nv" staged
// operands, "nv-direct" operands loaded straight from the buffers,
// "nv-tensor" through tensor layouts where they can be; anything
// else (the default, "khr") keeps the KHR path, which ran as fast or faster
// on the H200 (docs/design.md, "Cooperative matrices").
func nvChoice(matrixPath string) (spirv.NVLoads, bool) {
	switch matrixPath {
	case "nv":
		return spirv.NVStaged, true
	case "nv-direct":
		return spirv.NVDirect, true
	case "nv-tensor":
		return spirv.NVTensor, true
	}
	return spirv.NVStaged, false
}

// useCoop reads the device's cooperative matrices and, where the emitter can
// use them (spirv.SelectCoop: 16×16×16 f16 or bf16 with f32 accumulators at
// subgroup scope, the memory model), puts them in the target, enables them on
// the logical device and claims tensor cores in the profile; where the device
// also has VK_NV_cooperative_matrix2's workgroup scope, flexible dimensions and
// tensor addressing (spirv.SelectCoopNV) and matrixPath (Config.MatrixPath)
// asks for the NV path (nvChoice), it enables those and the NV path. A device without them
// (lavapipe) keeps every matrix on the scalar path.
func (a *adapter) useCoop(matrixPath string) {
	s, err := a.pd.CooperativeMatrices()
	if err != nil {
		a.info.Note = joinNote(a.info.Note, fmt.Sprintf("cooperative matrices unreadable (%v): scalar matrix path", err))
		return
	}
	a.coop.support = s
	if !s.Usable() || a.props.APIVersion < vk.Version12 {
		return
	}
	t := spirv.SelectCoop(coopShapes(s.Properties), a.features.ShaderFloat16, s.BFloat16, a.features.ShaderInt16,
		a.props.Subgroup.Size, s.VulkanMemoryModelDeviceScope)
	if !t.F16 && !t.BF16 {
		return
	}
	a.target.Coop = t
	a.coop.enable = vk.CoopMatrixEnable{Matrix: true, MemoryModel: true, DeviceScope: s.VulkanMemoryModelDeviceScope, BFloat16: t.BF16}
	a.enable = append(a.enable, vk.ExtCooperativeMatrix)
	if t.BF16 {
		a.enable = append(a.enable, vk.ExtShaderBFloat16)
	}
	a.info.Profile.SupportsTensorCores = true
	loads, useNV := nvChoice(matrixPath)
	if !s.CooperativeMatrix2 || !useNV {
		return
	}
	m := s.Matrix2
	nv := spirv.SelectCoopNV(coopFlexShapes(m.Flexible), m.WorkgroupScope, m.FlexibleDimensions, m.TensorAddressing, m.MaxDimension,
		m.ReservedSharedMemory, t)
	if !nv.Usable() {
		return
	}
	nv.Loads = loads
	a.target.Coop.NV = nv
	a.coop.enable.WorkgroupScope, a.coop.enable.FlexibleDimensions, a.coop.enable.TensorAddressing = true, true, true
	a.enable = append(a.enable, vk.ExtCooperativeMatrix2)
}

// coopFlexShapes converts the device's VK_NV_cooperative_matrix2 list to the
// emitter's.
func coopFlexShapes(list []vk.CoopMatrixFlexible) []spirv.CoopFlexShape {
	shapes := make([]vk.CoopMatrixProperties, len(list))
	for i, f := range list {
		shapes[i] = f.CoopMatrixProperties
	}
	out := make([]spirv.CoopFlexShape, len(list))
	for i, s := range coopShapes(shapes) {
		out[i] = spirv.CoopFlexShape{CoopShape: s, Workgroup: list[i].Scope == vk.ScopeWorkgroup, Invocations: list[i].Invocations}
	}
	return out
}

// coopShapes converts the device's list to the emitter's.
func coopShapes(props []vk.CoopMatrixProperties) []spirv.CoopShape {
	types := map[vk.ComponentType]ir.Type{vk.ComponentFloat16: ir.F16, vk.ComponentBFloat16: ir.BF16, vk.ComponentFloat32: ir.F32}
	out := make([]spirv.CoopShape, 0, len(props))
	for _, p := range props {
		out = append(out, spirv.CoopShape{M: p.M, N: p.N, K: p.K, A: types[p.A], B: types[p.B], C: types[p.C], Result: types[p.Result],
			Subgroup: p.Scope == vk.ScopeSubgroup})
	}
	return out
}

// joinNote appends note to an adapter's note.
func joinNote(have, note string) string {
	if have == "" {
		return note
	}
	return have + "; " + note
}
