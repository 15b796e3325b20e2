package vk

/*
#include <stdlib.h>
#include "kiln_vk.h"

// kiln_has_buffer_device_address reads VkPhysicalDeviceBufferDeviceAddressFeatures
// (Vulkan 1.2; the caller checks the version).
static uint32_t kiln_has_buffer_device_address(kiln_instance *in, VkPhysicalDevice pd) {
	VkPhysicalDeviceBufferDeviceAddressFeatures a = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES};
	kiln_read_features(in, pd, &a);
	return a.bufferDeviceAddress;
}

// kiln_allocate_addressable_memory allocates memory whose buffers have device
// addresses (VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT).
static VkResult kiln_allocate_addressable_memory(kiln_device *d, uint64_t size, uint32_t type_index, uint64_t *out) {
	VkMemoryAllocateFlagsInfo flags = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
	flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.pNext = &flags;
	ai.allocationSize = size;
	ai.memoryTypeIndex = type_index;
	KILN_RETURN_CREATED(d, VkDeviceMemory, vkAllocateMemory, ai, out);
}

// kiln_buffer_address is vkGetBufferDeviceAddress, or 0 on a device created
// without bufferDeviceAddress.
static uint64_t kiln_buffer_address(kiln_device *d, uint64_t b) {
	if (d->vkGetBufferDeviceAddress == NULL) {
		return 0;
	}
	VkBufferDeviceAddressInfo info = {VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
	info.buffer = KILN_HANDLE(VkBuffer, b);
	return d->vkGetBufferDeviceAddress(d->device, &info);
}
*/
import "C"

// Buffer device addresses (Vulkan 1.2's bufferDeviceAddress): a shader reaches a
// buffer through a 64-bit address instead of a descriptor, so one binding is not
// limited to maxStorageBufferRange. See docs/design.md, "Grids and buffers of any
// size".

// UsageDeviceAddress lets a buffer's device address be queried
// (VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT).
const UsageDeviceAddress BufferUsage = C.VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT

// BufferDeviceAddress reports whether the device supports the bufferDeviceAddress
// feature of Vulkan 1.2 (false on a device or instance older than 1.2).
func (p PhysicalDevice) BufferDeviceAddress() bool {
	if p.version() < Version12 {
		return false
	}
	return C.kiln_has_buffer_device_address(p.inst.in, p.pd) != 0
}

// AllocateAddressableMemory is AllocateMemory for buffers whose device address
// is queried (BufferAddress); the device must have been created with
// DeviceOptions.BufferDeviceAddress.
func (d *Device) AllocateAddressableMemory(size uint64, typeIndex uint32) (Memory, error) {
	var h C.uint64_t
	err := check("vkAllocateMemory", C.kiln_allocate_addressable_memory(d.d, C.uint64_t(size), C.uint32_t(typeIndex), &h))
	if err == nil {
		d.allocations.Add(1)
	}
	return Memory(h), err
}

// BufferAddress returns the device address of b, a buffer created with
// UsageDeviceAddress and bound to addressable memory; 0 on a device created
// without DeviceOptions.BufferDeviceAddress.
func (d *Device) BufferAddress(b Buffer) uint64 {
	return uint64(C.kiln_buffer_address(d.d, C.uint64_t(b)))
}
