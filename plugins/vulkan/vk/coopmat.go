package vk

/*
#include <stdlib.h>
#include "coopmat.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"unsafe"
)

// The extensions of the cooperative-matrix path (see docs/design.md, "Vulkan",
// "Cooperative matrices").
const (
	// ExtCooperativeMatrix is VK_KHR_cooperative_matrix: subgroup-scope
	// matrices on the device's matrix units.
	ExtCooperativeMatrix = "VK_KHR_cooperative_matrix"
	// ExtShaderBFloat16 is VK_KHR_shader_bfloat16: a bf16 SPIR-V type, usable
	// as a cooperative matrix's component type.
	ExtShaderBFloat16 = "VK_KHR_shader_bfloat16"
	// ExtCooperativeMatrix2 is VK_NV_cooperative_matrix2: workgroup-scope
	// matrices of flexible sizes and tensor-addressed loads and stores.
	ExtCooperativeMatrix2 = "VK_NV_cooperative_matrix2"
)

// ComponentType is a VkComponentTypeKHR, a cooperative matrix's element type.
type ComponentType uint32

// The component types kiln names (values of the Vulkan registry).
const (
	ComponentFloat16  ComponentType = 0
	ComponentFloat32  ComponentType = 1
	ComponentFloat64  ComponentType = 2
	ComponentSInt8    ComponentType = 3
	ComponentSInt16   ComponentType = 4
	ComponentSInt32   ComponentType = 5
	ComponentSInt64   ComponentType = 6
	ComponentUInt8    ComponentType = 7
	ComponentUInt16   ComponentType = 8
	ComponentUInt32   ComponentType = 9
	ComponentUInt64   ComponentType = 10
	ComponentBFloat16 ComponentType = 1000141000
)

var componentNames = map[ComponentType]string{
	ComponentFloat16: "f16", ComponentFloat32: "f32", ComponentFloat64: "f64",
	ComponentSInt8: "s8", ComponentSInt16: "s16", ComponentSInt32: "s32", ComponentSInt64: "s64",
	ComponentUInt8: "u8", ComponentUInt16: "u16", ComponentUInt32: "u32", ComponentUInt64: "u64",
	ComponentBFloat16: "bf16",
}

// String names the type as kiln prints it ("f16", "bf16"), or its number.
func (c ComponentType) String() string {
	if n, ok := componentNames[c]; ok {
		return n
	}
	return fmt.Sprintf("component(%d)", uint32(c))
}

// Scope is a VkScopeKHR.
type Scope uint32

// The scopes.
const (
	ScopeDevice      Scope = 1
	ScopeWorkgroup   Scope = 2
	ScopeSubgroup    Scope = 3
	ScopeQueueFamily Scope = 5
)

// String names the scope ("subgroup").
func (s Scope) String() string {
	switch s {
	case ScopeDevice:
		return "device"
	case ScopeWorkgroup:
		return "workgroup"
	case ScopeSubgroup:
		return "subgroup"
	case ScopeQueueFamily:
		return "queue-family"
	}
	return fmt.Sprintf("scope(%d)", uint32(s))
}

// CoopMatrixProperties is one VkCooperativeMatrixPropertiesKHR: the device
// multiplies an M×K A by a K×N B and adds an M×N C giving an M×N Result, of
// those component types, at that scope.
type CoopMatrixProperties struct {
	M, N, K              uint32
	A, B, C, Result      ComponentType
	SaturatingAccumulate bool
	Scope                Scope
}

// String is "16x16x16 f16*f16+f32=f32 subgroup".
func (p CoopMatrixProperties) String() string {
	s := fmt.Sprintf("%dx%dx%d %s*%s+%s=%s %s", p.M, p.N, p.K, p.A, p.B, p.C, p.Result, p.Scope)
	if p.SaturatingAccumulate {
		s += " saturating"
	}
	return s
}

// CoopMatrixSupport is what a device offers for cooperative matrices.
type CoopMatrixSupport struct {
	// Extension: the device lists VK_KHR_cooperative_matrix; Feature: its
	// cooperativeMatrix feature is supported.
	Extension, Feature bool
	// VulkanMemoryModel: the vulkanMemoryModel feature (Vulkan 1.2), which
	// SPIR-V modules with cooperative matrices must use.
	VulkanMemoryModel bool
	// VulkanMemoryModelDeviceScope: vulkanMemoryModelDeviceScope, for
	// device-scope atomics in such modules.
	VulkanMemoryModelDeviceScope bool
	// BFloat16: VK_KHR_shader_bfloat16 with shaderBFloat16Type and
	// shaderBFloat16CooperativeMatrix, so bf16 matrices can be declared.
	BFloat16 bool
	// CooperativeMatrix2: the device lists VK_NV_cooperative_matrix2;
	// Matrix2 is then what it offers (the NV path: see docs/design.md,
	// "Cooperative matrices").
	CooperativeMatrix2 bool
	Matrix2            CoopMatrix2
	// Properties is vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR's list
	// (empty without the extension).
	Properties []CoopMatrixProperties
}

// CoopMatrix2 is a device's VK_NV_cooperative_matrix2: its features, limits
// and flexible-dimension combinations
// (vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV).
type CoopMatrix2 struct {
	WorkgroupScope, FlexibleDimensions, Reductions, Conversions bool
	PerElementOperations, TensorAddressing, BlockLoads          bool
	MaxWorkgroupSize, MaxDimension, ReservedSharedMemory        uint32
	Flexible                                                    []CoopMatrixFlexible
}

// CoopMatrixFlexible is one VkCooperativeMatrixFlexibleDimensionsPropertiesNV:
// M, N and K are granularities (any multiple runs), at Invocations
// invocations a workgroup for workgroup scope.
type CoopMatrixFlexible struct {
	CoopMatrixProperties
	Invocations uint32
}

// String is "16x16x16 f16*f16+f32=f32 workgroup at 128 invocations".
func (f CoopMatrixFlexible) String() string {
	return fmt.Sprintf("%s at %d invocations", f.CoopMatrixProperties, f.Invocations)
}

// String lists the features, limits and combinations in one line.
func (m CoopMatrix2) String() string {
	s := fmt.Sprintf("workgroup scope %v, flexible dimensions %v, tensor addressing %v, block loads %v; max workgroup %d, max dimension %d, reserved shared memory %d; flexible:",
		m.WorkgroupScope, m.FlexibleDimensions, m.TensorAddressing, m.BlockLoads, m.MaxWorkgroupSize, m.MaxDimension, m.ReservedSharedMemory)
	for i, f := range m.Flexible {
		if i > 0 {
			s += ","
		}
		s += " " + f.String()
	}
	return s
}

// Usable reports whether cooperative matrices can be enabled and used: the
// extension, its feature and the memory model are there and the device lists
// at least one combination.
func (s CoopMatrixSupport) Usable() bool {
	return s.Extension && s.Feature && s.VulkanMemoryModel && len(s.Properties) > 0
}

// String lists the support in one line: "none", or the combinations.
func (s CoopMatrixSupport) String() string {
	if !s.Usable() {
		return "none"
	}
	out := ""
	for i, p := range s.Properties {
		if i > 0 {
			out += ", "
		}
		out += p.String()
	}
	return out
}

// CooperativeMatrices reads the device's cooperative-matrix support. A device
// without VK_KHR_cooperative_matrix (lavapipe) reports none: the zero
// CoopMatrixSupport and no error.
func (p PhysicalDevice) CooperativeMatrices() (CoopMatrixSupport, error) {
	var s CoopMatrixSupport
	exts, err := p.Extensions()
	if err != nil {
		return s, err
	}
	s.Extension = slices.Contains(exts, ExtCooperativeMatrix)
	s.CooperativeMatrix2 = slices.Contains(exts, ExtCooperativeMatrix2)
	hasBF16 := slices.Contains(exts, ExtShaderBFloat16)
	memoryModel := p.version() >= Version12
	var f C.kiln_coop_features
	C.kiln_coop_get_features(p.inst.in, p.pd, cbool(s.Extension), cbool(hasBF16), cbool(memoryModel), &f)
	s.Feature = f.cooperative_matrix != 0
	s.VulkanMemoryModel = f.vulkan_memory_model != 0
	s.VulkanMemoryModelDeviceScope = f.vulkan_memory_model_device_scope != 0
	s.BFloat16 = f.bfloat16_type != 0 && f.bfloat16_cooperative_matrix != 0
	if s.CooperativeMatrix2 {
		if s.Matrix2, err = p.coopMatrix2(); err != nil {
			return s, err
		}
	}
	if !s.Extension {
		return s, nil
	}
	var n C.uint32_t
	if err := check("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", C.kiln_coop_properties(p.inst.in, p.pd, 0, nil, &n)); err != nil {
		return s, err
	}
	if n == 0 {
		return s, nil
	}
	props := make([]C.VkCooperativeMatrixPropertiesKHR, n)
	if err := check("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", C.kiln_coop_properties(p.inst.in, p.pd, n, &props[0], &n)); err != nil {
		return s, err
	}
	for _, cp := range props[:n] {
		s.Properties = append(s.Properties, CoopMatrixProperties{
			M: uint32(cp.MSize), N: uint32(cp.NSize), K: uint32(cp.KSize),
			A: ComponentType(cp.AType), B: ComponentType(cp.BType), C: ComponentType(cp.CType), Result: ComponentType(cp.ResultType),
			SaturatingAccumulate: cp.saturatingAccumulation != 0, Scope: Scope(cp.scope),
		})
	}
	return s, nil
}

// coopMatrix2 reads VK_NV_cooperative_matrix2's features, limits and list.
func (p PhysicalDevice) coopMatrix2() (CoopMatrix2, error) {
	var f C.kiln_coop2_features_nv
	var props C.kiln_coop2_properties_nv
	var n C.uint32_t
	const fn = "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"
	if err := check(fn, C.kiln_coop2_get(p.inst.in, p.pd, &f, &props, 0, nil, &n)); err != nil {
		return CoopMatrix2{}, err
	}
	m := CoopMatrix2{
		WorkgroupScope: f.workgroup_scope != 0, FlexibleDimensions: f.flexible_dimensions != 0, Reductions: f.reductions != 0,
		Conversions: f.conversions != 0, PerElementOperations: f.per_element_operations != 0, TensorAddressing: f.tensor_addressing != 0,
		BlockLoads: f.block_loads != 0, MaxWorkgroupSize: uint32(props.workgroup_scope_max_workgroup_size),
		MaxDimension: uint32(props.flexible_dimensions_max_dimension), ReservedSharedMemory: uint32(props.workgroup_scope_reserved_shared_memory),
	}
	if n == 0 {
		return m, nil
	}
	list := make([]C.kiln_coop2_flexible_nv, n)
	if err := check(fn, C.kiln_coop2_get(p.inst.in, p.pd, &f, &props, n, &list[0], &n)); err != nil {
		return m, err
	}
	for _, x := range list[:n] {
		m.Flexible = append(m.Flexible, CoopMatrixFlexible{CoopMatrixProperties: CoopMatrixProperties{
			M: uint32(x.m_granularity), N: uint32(x.n_granularity), K: uint32(x.k_granularity),
			A: ComponentType(x.a_type), B: ComponentType(x.b_type), C: ComponentType(x.c_type), Result: ComponentType(x.result_type),
			SaturatingAccumulate: x.saturating_accumulation != 0, Scope: Scope(x.scope),
		}, Invocations: uint32(x.workgroup_invocations)})
	}
	return m, nil
}

// CoopMatrixEnable says which cooperative-matrix features CreateDevice
// enables; the caller also lists the extensions (ExtCooperativeMatrix,
// ExtShaderBFloat16) in DeviceOptions.Extensions.
type CoopMatrixEnable struct {
	// Matrix enables cooperativeMatrix, MemoryModel vulkanMemoryModel (with
	// vulkanMemoryModelDeviceScope when DeviceScope), BFloat16
	// shaderBFloat16Type (and shaderBFloat16CooperativeMatrix with Matrix).
	Matrix, MemoryModel, DeviceScope, BFloat16 bool
	// WorkgroupScope, FlexibleDimensions and TensorAddressing enable those
	// features of VK_NV_cooperative_matrix2 (the caller lists
	// ExtCooperativeMatrix2); set them only where the device has them.
	WorkgroupScope, FlexibleDimensions, TensorAddressing bool
}

// chain points co.next at the feature structs e enables and returns the C
// memory to free after vkCreateDevice (nil when e enables nothing).
func (e CoopMatrixEnable) chain(co *C.kiln_device_options) unsafe.Pointer {
	var mem unsafe.Pointer
	var nv *C.kiln_coop2_features_nv
	if e.WorkgroupScope || e.FlexibleDimensions || e.TensorAddressing {
		nv = &C.kiln_coop2_features_nv{workgroup_scope: C.VkBool32(cbool(e.WorkgroupScope)),
			flexible_dimensions: C.VkBool32(cbool(e.FlexibleDimensions)), tensor_addressing: C.VkBool32(cbool(e.TensorAddressing))}
	}
	co.next = C.kiln_coop_chain(cbool(e.Matrix), cbool(e.MemoryModel), cbool(e.MemoryModel && e.DeviceScope), cbool(e.BFloat16), nv, &mem)
	return mem
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
