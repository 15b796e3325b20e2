package vk

/*
#include "kiln_vk.h"
*/
import "C"

import "unsafe"

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
	TimestampComputeAndGraphics    bool
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
}

// Features are the device features kiln reports.
type Features struct {
	// ShaderFloat16 is VkPhysicalDeviceShaderFloat16Int8Features.shaderFloat16;
	// false when the device or the instance is older than Vulkan 1.2.
	ShaderFloat16 bool
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

// MemoryHeap is one VkMemoryHeap.
type MemoryHeap struct {
	Size uint64
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
}

// Properties reads the device's properties, limits, subgroup properties and (on
// Vulkan 1.2) driver properties.
func (p PhysicalDevice) Properties() Properties {
	var kp C.kiln_props
	C.kiln_get_properties(p.inst.in, p.pd, C.uint32_t(p.inst.apiVersion), &kp)
	lim := kp.props.limits
	out := Properties{
		APIVersion:    Version(kp.props.apiVersion),
		DriverVersion: uint32(kp.props.driverVersion),
		VendorID:      uint32(kp.props.vendorID),
		DeviceID:      uint32(kp.props.deviceID),
		Type:          DeviceType(kp.props.deviceType),
		Name:          C.GoString(&kp.props.deviceName[0]),
		Limits: Limits{
			MaxComputeWorkGroupInvocations: uint32(lim.maxComputeWorkGroupInvocations),
			MaxComputeSharedMemorySize:     uint32(lim.maxComputeSharedMemorySize),
			MaxStorageBufferRange:          uint32(lim.maxStorageBufferRange),
			MaxPushConstantsSize:           uint32(lim.maxPushConstantsSize),
			TimestampComputeAndGraphics:    lim.timestampComputeAndGraphics != 0,
			TimestampPeriod:                float32(lim.timestampPeriod),
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
	return out
}

// Features reads the device's features.
func (p PhysicalDevice) Features() Features {
	var f16 C.uint32_t
	C.kiln_get_features(p.inst.in, p.pd, C.uint32_t(p.inst.apiVersion), &f16)
	return Features{ShaderFloat16: f16 != 0}
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
		out.Heaps = append(out.Heaps, MemoryHeap{Size: uint64(h.size)})
	}
	return out
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

// Extensions lists the names of the device's extensions.
func (p PhysicalDevice) Extensions() ([]string, error) {
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

// CreateDevice creates a logical device with one queue of queueFamily.
func (p PhysicalDevice) CreateDevice(queueFamily uint32) (*Device, error) {
	var d *C.kiln_device
	var missing *C.char
	r := C.kiln_create_device(p.inst.in, p.pd, C.uint32_t(queueFamily), &d, &missing)
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
