package vk

/*
#include <stdlib.h>
#include "kiln_vk.h"
*/
import "C"

import (
	"slices"
	"sync"
	"unsafe"
)

// DeviceType is a VkPhysicalDeviceType.
type DeviceType uint32

// The physical device types.
const (
	DeviceTypeOther         DeviceType = C.VK_PHYSICAL_DEVICE_TYPE_OTHER
	DeviceTypeIntegratedGPU DeviceType = C.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
	DeviceTypeDiscreteGPU   DeviceType = C.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
	DeviceTypeVirtualGPU    DeviceType = C.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU
	DeviceTypeCPU           DeviceType = C.VK_PHYSICAL_DEVICE_TYPE_CPU
)

// String names the type as kiln reports it ("discrete-gpu", "cpu").
func (t DeviceType) String() string {
	switch t {
	case DeviceTypeIntegratedGPU:
		return "integrated-gpu"
	case DeviceTypeDiscreteGPU:
		return "discrete-gpu"
	case DeviceTypeVirtualGPU:
		return "virtual-gpu"
	case DeviceTypeCPU:
		return "cpu"
	}
	return "other"
}

// ShaderStageFlags is a VkShaderStageFlags mask.
type ShaderStageFlags uint32

// StageCompute is VK_SHADER_STAGE_COMPUTE_BIT.
const StageCompute ShaderStageFlags = C.VK_SHADER_STAGE_COMPUTE_BIT

// SubgroupFeatureFlags is a VkSubgroupFeatureFlags mask.
type SubgroupFeatureFlags uint32

// The subgroup operation classes.
const (
	SubgroupBasic      SubgroupFeatureFlags = C.VK_SUBGROUP_FEATURE_BASIC_BIT
	SubgroupArithmetic SubgroupFeatureFlags = C.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT
	SubgroupShuffle    SubgroupFeatureFlags = C.VK_SUBGROUP_FEATURE_SHUFFLE_BIT
)

// Limits are the VkPhysicalDeviceLimits a compute backend uses.
type Limits struct {
	MaxComputeWorkGroupCount       [3]uint32
	MaxComputeWorkGroupSize        [3]uint32
	MaxComputeWorkGroupInvocations uint32
	MaxComputeSharedMemorySize     uint32
	MaxStorageBufferRange          uint32
	MaxPushConstantsSize           uint32
	// MinStorageBufferOffsetAlignment is what a storage descriptor's offset must
	// be a multiple of; NonCoherentAtomSize the granule of flushes and
	// invalidations of non-coherent memory.
	MinStorageBufferOffsetAlignment uint64
	NonCoherentAtomSize             uint64
	TimestampComputeAndGraphics     bool
	// TimestampPeriod is the number of nanoseconds per timestamp tick.
	TimestampPeriod float32
}

// Subgroup is VkPhysicalDeviceSubgroupProperties.
type Subgroup struct {
	Size       uint32
	Stages     ShaderStageFlags
	Operations SubgroupFeatureFlags
}

// Driver is VkPhysicalDeviceDriverProperties (Vulkan 1.2).
type Driver struct {
	// Name and Info are the driver's name ("llvmpipe") and version text ("Mesa
	// 22.3.6 (LLVM 15.0.6)").
	Name, Info string
}

// Properties describes a physical device.
type Properties struct {
	APIVersion        Version
	DriverVersion     uint32
	VendorID          uint32
	DeviceID          uint32
	Type              DeviceType
	Name              string
	PipelineCacheUUID [16]byte
	Limits            Limits
	Subgroup          Subgroup
	// Driver is nil when the device or the instance is older than Vulkan 1.2.
	Driver *Driver
	// FloatControls is nil when the device has neither Vulkan 1.2 (with an
	// instance of 1.2) nor VK_KHR_shader_float_controls.
	FloatControls *FloatControls
	// SubgroupSizeControl is nil when the device has neither Vulkan 1.3 (with an
	// instance of 1.3) nor VK_EXT_subgroup_size_control.
	SubgroupSizeControl *SubgroupSizeControl
	// DeviceUUID is VkPhysicalDeviceIDProperties.deviceUUID (Vulkan 1.1): the
	// same for a device whatever order the driver lists it in; zero when the
	// device is older.
	DeviceUUID [16]byte
	// MinImportedHostPointerAlignment is what the address and size of imported
	// host memory must be multiples of; 0 without VK_EXT_external_memory_host.
	MinImportedHostPointerAlignment uint64
}

// FloatControls is the part of VkPhysicalDeviceFloatControlsProperties kiln uses.
type FloatControls struct {
	// SignedZeroInfNanPreserveFloat32: 32-bit float operations can be made to
	// keep the sign of zero, infinities and NaN (SPIR-V SignedZeroInfNanPreserve).
	SignedZeroInfNanPreserveFloat32 bool
	// SignedZeroInfNanPreserveFloat16 is the same for 16-bit float operations.
	SignedZeroInfNanPreserveFloat16 bool
	// DenormPreserveFloat32: 32-bit float operations can be made to keep
	// denormals (SPIR-V DenormPreserve).
	DenormPreserveFloat32 bool
}

// SubgroupSizeControl is VkPhysicalDeviceSubgroupSizeControlProperties.
type SubgroupSizeControl struct {
	MinSubgroupSize, MaxSubgroupSize uint32
	// RequiredStages are the stages that can require a subgroup size.
	RequiredStages ShaderStageFlags
}

// Extension names kiln enables when the device's Vulkan version lacks them.
const (
	ExtFloatControls       = "VK_KHR_shader_float_controls"
	ExtSubgroupSizeControl = "VK_EXT_subgroup_size_control"
	// ExtExternalMemoryHost lets a device use host memory kiln already has
	// (Device.ImportHostMemory).
	ExtExternalMemoryHost = "VK_EXT_external_memory_host"
)

// Features are the device features kiln reports or uses.
type Features struct {
	// ShaderFloat16 is VkPhysicalDeviceShaderFloat16Int8Features.shaderFloat16;
	// false when the device or the instance is older than Vulkan 1.2.
	ShaderFloat16 bool
	// SubgroupSizeControl and ComputeFullSubgroups are
	// VkPhysicalDeviceSubgroupSizeControlFeatures; false without subgroup size
	// control (see Properties.SubgroupSizeControl).
	SubgroupSizeControl, ComputeFullSubgroups bool
	// StorageBuffer16BitAccess is VkPhysicalDevice16BitStorageFeatures'
	// storageBuffer16BitAccess (Vulkan 1.1): 16-bit types in storage buffers.
	StorageBuffer16BitAccess bool
	// ShaderInt16 is VkPhysicalDeviceFeatures' shaderInt16: 16-bit integers
	// anywhere (for bf16 buffers reached through device addresses).
	ShaderInt16 bool
}

// MemoryPropertyFlags is a VkMemoryPropertyFlags mask.
type MemoryPropertyFlags uint32

// The memory property bits.
const (
	MemoryDeviceLocal  MemoryPropertyFlags = C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
	MemoryHostVisible  MemoryPropertyFlags = C.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
	MemoryHostCoherent MemoryPropertyFlags = C.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
	MemoryHostCached   MemoryPropertyFlags = C.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
)

// MemoryType is one VkMemoryType.
type MemoryType struct {
	Flags MemoryPropertyFlags
	Heap  uint32
}

// MemoryHeap is one VkMemoryHeap; DeviceLocal is VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
type MemoryHeap struct {
	Size        uint64
	DeviceLocal bool
}

// MemoryProperties lists a device's memory types and heaps.
type MemoryProperties struct {
	Types []MemoryType
	Heaps []MemoryHeap
}

// QueueFlags is a VkQueueFlags mask.
type QueueFlags uint32

// QueueCompute is VK_QUEUE_COMPUTE_BIT.
const QueueCompute QueueFlags = C.VK_QUEUE_COMPUTE_BIT

// QueueFamily is one VkQueueFamilyProperties.
type QueueFamily struct {
	Flags              QueueFlags
	Count              uint32
	TimestampValidBits uint32
}

// PhysicalDevice is a VkPhysicalDevice of an instance.
type PhysicalDevice struct {
	inst *Instance
	pd   C.VkPhysicalDevice
	// exts keeps the device's extension list once read: describing a device
	// asks for it several times (Needs, Properties, Features).
	exts *extensionList
}

// extensionList is a device's extension names, read once.
type extensionList struct {
	once  sync.Once
	names []string
	err   error
}

// Properties reads the device's properties, limits, subgroup properties and (on
// Vulkan 1.2) driver properties.
func (p PhysicalDevice) Properties() Properties {
	var kp C.kiln_props
	C.kiln_get_properties(p.inst.in, p.pd, C.uint32_t(p.inst.apiVersion), p.chain(), &kp)
	lim := kp.props.limits
	out := Properties{
		APIVersion:    Version(kp.props.apiVersion),
		DriverVersion: uint32(kp.props.driverVersion),
		VendorID:      uint32(kp.props.vendorID),
		DeviceID:      uint32(kp.props.deviceID),
		Type:          DeviceType(kp.props.deviceType),
		Name:          C.GoString(&kp.props.deviceName[0]),
		Limits: Limits{
			MaxComputeWorkGroupInvocations:  uint32(lim.maxComputeWorkGroupInvocations),
			MaxComputeSharedMemorySize:      uint32(lim.maxComputeSharedMemorySize),
			MaxStorageBufferRange:           uint32(lim.maxStorageBufferRange),
			MaxPushConstantsSize:            uint32(lim.maxPushConstantsSize),
			MinStorageBufferOffsetAlignment: uint64(lim.minStorageBufferOffsetAlignment),
			NonCoherentAtomSize:             uint64(lim.nonCoherentAtomSize),
			TimestampComputeAndGraphics:     lim.timestampComputeAndGraphics != 0,
			TimestampPeriod:                 float32(lim.timestampPeriod),
		},
		Subgroup: Subgroup{
			Size:       uint32(kp.subgroup.subgroupSize),
			Stages:     ShaderStageFlags(kp.subgroup.supportedStages),
			Operations: SubgroupFeatureFlags(kp.subgroup.supportedOperations),
		},
	}
	for i := range 3 {
		out.Limits.MaxComputeWorkGroupCount[i] = uint32(lim.maxComputeWorkGroupCount[i])
		out.Limits.MaxComputeWorkGroupSize[i] = uint32(lim.maxComputeWorkGroupSize[i])
	}
	for i := range out.PipelineCacheUUID {
		out.PipelineCacheUUID[i] = byte(kp.props.pipelineCacheUUID[i])
	}
	if kp.has_driver != 0 {
		out.Driver = &Driver{
			Name: C.GoString(&kp.driver.driverName[0]),
			Info: C.GoString(&kp.driver.driverInfo[0]),
		}
	}
	if kp.has_float_controls != 0 {
		out.FloatControls = &FloatControls{SignedZeroInfNanPreserveFloat32: kp.float_controls.shaderSignedZeroInfNanPreserveFloat32 != 0,
			SignedZeroInfNanPreserveFloat16: kp.float_controls.shaderSignedZeroInfNanPreserveFloat16 != 0,
			DenormPreserveFloat32:           kp.float_controls.shaderDenormPreserveFloat32 != 0}
	}
	if kp.has_id != 0 {
		for i := range out.DeviceUUID {
			out.DeviceUUID[i] = byte(kp.id.deviceUUID[i])
		}
	}
	if kp.has_external_host != 0 {
		out.MinImportedHostPointerAlignment = uint64(kp.external_host.minImportedHostPointerAlignment)
	}
	if kp.has_size_control != 0 {
		sc := kp.size_control
		out.SubgroupSizeControl = &SubgroupSizeControl{MinSubgroupSize: uint32(sc.minSubgroupSize),
			MaxSubgroupSize: uint32(sc.maxSubgroupSize), RequiredStages: ShaderStageFlags(sc.requiredSubgroupSizeStages)}
	}
	return out
}

// version is the Vulkan version kiln can use on the device: the lower of the
// device's and the instance's.
func (p PhysicalDevice) version() Version {
	var kp C.VkPhysicalDeviceProperties
	C.kiln_get_basic_properties(p.inst.in, p.pd, &kp)
	return min(Version(kp.apiVersion), p.inst.apiVersion)
}

// Needs reports which of the optional properties p has and which extensions
// must be enabled for them: float controls are core in Vulkan 1.2, subgroup size
// control in 1.3; below that the device extension provides them. Host memory
// import (VK_EXT_external_memory_host) is enabled wherever the device has it.
func (p PhysicalDevice) Needs() (floatControls, sizeControl bool, extensions []string) {
	floatControls, sizeControl, extensions, _ = p.needs()
	return floatControls, sizeControl, extensions
}

func (p PhysicalDevice) needs() (floatControls, sizeControl bool, extensions []string, externalHost bool) {
	v := p.version()
	exts, _ := p.Extensions()
	has := func(name string) bool {
		for _, e := range exts {
			if e == name {
				return true
			}
		}
		return false
	}
	floatControls = v >= Version12 || has(ExtFloatControls)
	if v < Version12 && floatControls {
		extensions = append(extensions, ExtFloatControls)
	}
	sizeControl = v >= Version13 || has(ExtSubgroupSizeControl)
	if v < Version13 && sizeControl {
		extensions = append(extensions, ExtSubgroupSizeControl)
	}
	if externalHost = has(ExtExternalMemoryHost); externalHost {
		extensions = append(extensions, ExtExternalMemoryHost)
	}
	return floatControls, sizeControl, extensions, externalHost
}

func (p PhysicalDevice) chain() C.kiln_chain {
	fc, sc, _, eh := p.needs()
	return C.kiln_chain{float_controls: cbool(fc), size_control: cbool(sc), external_host: cbool(eh)}
}

// Features reads the device's features.
func (p PhysicalDevice) Features() Features {
	var f16, sc, full, s16, i16 C.uint32_t
	C.kiln_get_features(p.inst.in, p.pd, C.uint32_t(p.inst.apiVersion), p.chain(), &f16, &sc, &full, &s16, &i16)
	return Features{ShaderFloat16: f16 != 0, SubgroupSizeControl: sc != 0, ComputeFullSubgroups: full != 0,
		StorageBuffer16BitAccess: s16 != 0, ShaderInt16: i16 != 0}
}

// MemoryProperties reads the device's memory types and heaps.
func (p PhysicalDevice) MemoryProperties() MemoryProperties {
	var m C.VkPhysicalDeviceMemoryProperties
	C.kiln_get_memory_properties(p.inst.in, p.pd, &m)
	var out MemoryProperties
	for _, t := range m.memoryTypes[:m.memoryTypeCount] {
		out.Types = append(out.Types, MemoryType{Flags: MemoryPropertyFlags(t.propertyFlags), Heap: uint32(t.heapIndex)})
	}
	for _, h := range m.memoryHeaps[:m.memoryHeapCount] {
		out.Heaps = append(out.Heaps, MemoryHeap{Size: uint64(h.size), DeviceLocal: h.flags&C.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT != 0})
	}
	return out
}

// MemoryBudgetExtension is the device extension MemoryBudget needs.
const MemoryBudgetExtension = "VK_EXT_memory_budget"

// HeapBudget is one heap's VK_EXT_memory_budget reading: how much memory this
// process may use from the heap (other processes' use and the driver's
// reckoning taken into account), and how much it uses.
type HeapBudget struct {
	Budget, Usage uint64
}

// MemoryBudget reads every heap's budget and usage, in the order of
// MemoryProperties' heaps; ok is false when the device lacks
// VK_EXT_memory_budget (MemoryBudgetExtension).
func (p PhysicalDevice) MemoryBudget() (heaps []HeapBudget, ok bool) {
	exts, err := p.Extensions()
	if err != nil || !slices.Contains(exts, MemoryBudgetExtension) {
		return nil, false
	}
	var budget, usage [C.VK_MAX_MEMORY_HEAPS]C.VkDeviceSize
	C.kiln_get_memory_budget(p.inst.in, p.pd, &budget[0], &usage[0])
	n := len(p.MemoryProperties().Heaps)
	for i := range n {
		heaps = append(heaps, HeapBudget{Budget: uint64(budget[i]), Usage: uint64(usage[i])})
	}
	return heaps, true
}

// QueueFamilies lists the device's queue families.
func (p PhysicalDevice) QueueFamilies() []QueueFamily {
	var n C.uint32_t
	C.kiln_get_queue_families(p.inst.in, p.pd, &n, nil)
	if n == 0 {
		return nil
	}
	props := make([]C.VkQueueFamilyProperties, n)
	C.kiln_get_queue_families(p.inst.in, p.pd, &n, &props[0])
	out := make([]QueueFamily, 0, n)
	for _, q := range props[:n] {
		out = append(out, QueueFamily{
			Flags:              QueueFlags(q.queueFlags),
			Count:              uint32(q.queueCount),
			TimestampValidBits: uint32(q.timestampValidBits),
		})
	}
	return out
}

// Extensions lists the names of the device's extensions. They are read from the
// driver once per PhysicalDevices call.
func (p PhysicalDevice) Extensions() ([]string, error) {
	if p.exts == nil {
		return p.readExtensions()
	}
	p.exts.once.Do(func() { p.exts.names, p.exts.err = p.readExtensions() })
	return slices.Clone(p.exts.names), p.exts.err
}

// readExtensions asks the driver for the device's extension names.
func (p PhysicalDevice) readExtensions() ([]string, error) {
	for {
		var n C.uint32_t
		if err := check("vkEnumerateDeviceExtensionProperties", C.kiln_enumerate_device_extensions(p.inst.in, p.pd, &n, nil)); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		props := make([]C.VkExtensionProperties, n)
		r := C.kiln_enumerate_device_extensions(p.inst.in, p.pd, &n, &props[0])
		if r == C.VK_INCOMPLETE {
			continue
		}
		if err := check("vkEnumerateDeviceExtensionProperties", r); err != nil {
			return nil, err
		}
		out := make([]string, 0, n)
		for _, e := range props[:n] {
			out = append(out, C.GoString(&e.extensionName[0]))
		}
		return out, nil
	}
}

// DeviceOptions are the extensions and features a device is created with.
type DeviceOptions struct {
	// Extensions are device extension names to enable (see Needs).
	Extensions []string
	// Cooperative enables the cooperative-matrix features (coopmat.go).
	Cooperative CoopMatrixEnable
	// SubgroupSizeControl and ComputeFullSubgroups enable those features (the
	// device must support them: Features).
	SubgroupSizeControl, ComputeFullSubgroups bool
	// BufferDeviceAddress enables bufferDeviceAddress (the device must support
	// it: PhysicalDevice.BufferDeviceAddress).
	BufferDeviceAddress bool
	// HostQueryReset enables hostQueryReset (the device must support it:
	// PhysicalDevice.HostQueryReset), for Device.ResetQueriesOnHost.
	HostQueryReset bool
	// ShaderFloat16 and StorageBuffer16BitAccess enable those features (the
	// device must support them: Features), for IR v1.2's f16 and bf16.
	ShaderFloat16, StorageBuffer16BitAccess bool
	// ShaderInt16 enables shaderInt16 (the device must support it: Features).
	ShaderInt16 bool
}

// CreateDevice creates a logical device with one queue of queueFamily.
func (p PhysicalDevice) CreateDevice(queueFamily uint32, opts DeviceOptions) (*Device, error) {
	var d *C.kiln_device
	var missing *C.char
	var co C.kiln_device_options
	if len(opts.Extensions) > 0 {
		names := (**C.char)(C.calloc(C.size_t(len(opts.Extensions)), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		defer C.free(unsafe.Pointer(names))
		list := unsafe.Slice(names, len(opts.Extensions))
		for i, e := range opts.Extensions {
			list[i] = C.CString(e)
			defer C.free(unsafe.Pointer(list[i]))
		}
		co.extensions = names
		co.n_extensions = C.uint32_t(len(opts.Extensions))
	}
	if mem := opts.Cooperative.chain(&co); mem != nil {
		defer C.free(mem)
	}
	co.size_control = cbool(opts.SubgroupSizeControl)
	co.full_subgroups = cbool(opts.ComputeFullSubgroups)
	co.device_address = cbool(opts.BufferDeviceAddress)
	co.host_query_reset = cbool(opts.HostQueryReset)
	co.float16 = cbool(opts.ShaderFloat16)
	co.storage16 = cbool(opts.StorageBuffer16BitAccess)
	co.int16 = cbool(opts.ShaderInt16)
	r := C.kiln_create_device(p.inst.in, p.pd, C.uint32_t(queueFamily), co, &d, &missing)
	if missing != nil {
		return nil, &MissingFunctionError{Name: C.GoString(missing)}
	}
	if err := check("vkCreateDevice", r); err != nil {
		return nil, err
	}
	return &Device{d: d}, nil
}

// bytesOf views words as their host-order bytes.
func bytesOf(words []uint32) []byte {
	if len(words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*4)
}
