package vk

/*
#include "kiln_vk.h"

// kiln_has_host_query_reset reads VkPhysicalDeviceHostQueryResetFeatures
// (Vulkan 1.2; the caller checks the version).
static uint32_t kiln_has_host_query_reset(kiln_instance *in, VkPhysicalDevice pd) {
	VkPhysicalDeviceHostQueryResetFeatures r = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES};
	kiln_read_features(in, pd, &r);
	return r.hostQueryReset;
}

// kiln_reset_queries_on_host is vkResetQueryPool; it returns 0 on a device
// created without hostQueryReset, which has no such function loaded.
static int kiln_reset_queries_on_host(kiln_device *d, uint64_t pool, uint32_t first, uint32_t count) {
	if (d->vkResetQueryPool == NULL) {
		return 0;
	}
	d->vkResetQueryPool(d->device, KILN_HANDLE(VkQueryPool, pool), first, count);
	return 1;
}
*/
import "C"

// Host query reset (Vulkan 1.2's hostQueryReset): the host resets timestamp
// queries before a submission instead of recording vkCmdResetQueryPool into
// it, which on NVIDIA's driver saves about 5 µs of every small submission. See
// docs/design.md, "Vulkan".

// HostQueryReset reports whether the device supports the hostQueryReset
// feature of Vulkan 1.2 (false on a device or instance older than 1.2).
func (p PhysicalDevice) HostQueryReset() bool {
	if p.version() < Version12 {
		return false
	}
	return C.kiln_has_host_query_reset(p.inst.in, p.pd) != 0
}

// ResetQueriesOnHost resets count queries of pool from first, on the host; no
// command buffer that writes them may be pending. It reports false, resetting
// nothing, on a device created without DeviceOptions.HostQueryReset.
func (d *Device) ResetQueriesOnHost(pool QueryPool, first, count uint32) bool {
	if C.kiln_reset_queries_on_host(d.d, C.uint64_t(pool), C.uint32_t(first), C.uint32_t(count)) == 0 {
		return false
	}
	d.hostResets.Add(1)
	return true
}
