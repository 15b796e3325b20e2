/*
 * The C side of package vk: function-pointer tables filled through
 * vkGetInstanceProcAddr / vkGetDeviceProcAddr after dlopen("libvulkan.so.1"), and
 * small trampolines that build Vulkan's create-info structs on the C stack and call
 * through those pointers. Non-dispatchable handles cross to Go as uint64_t, so Go
 * never holds a pointer-typed value that a driver may have filled with a small
 * integer.
 */
#ifndef KILN_VK_H
#define KILN_VK_H

#define VK_NO_PROTOTYPES
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <vulkan/vulkan.h>

#define KILN_GLOBAL_FNS(X)                   \
	X(vkCreateInstance)                      \
	X(vkEnumerateInstanceLayerProperties)    \
	X(vkEnumerateInstanceExtensionProperties)

#define KILN_INSTANCE_FNS(X)                  \
	X(vkDestroyInstance)                      \
	X(vkEnumeratePhysicalDevices)             \
	X(vkGetPhysicalDeviceProperties)          \
	X(vkGetPhysicalDeviceProperties2)         \
	X(vkGetPhysicalDeviceFeatures2)           \
	X(vkGetPhysicalDeviceMemoryProperties)    \
	X(vkGetPhysicalDeviceMemoryProperties2)   \
	X(vkGetPhysicalDeviceQueueFamilyProperties) \
	X(vkEnumerateDeviceExtensionProperties)   \
	X(vkCreateDevice)                         \
	X(vkGetDeviceProcAddr)

#define KILN_DEBUG_FNS(X)                  \
	X(vkCreateDebugUtilsMessengerEXT)      \
	X(vkDestroyDebugUtilsMessengerEXT)

#define KILN_DEVICE_FNS(X)                 \
	X(vkDestroyDevice)                     \
	X(vkGetDeviceQueue)                    \
	X(vkDeviceWaitIdle)                    \
	X(vkCreateBuffer)                      \
	X(vkDestroyBuffer)                     \
	X(vkGetBufferMemoryRequirements)       \
	X(vkAllocateMemory)                    \
	X(vkFreeMemory)                        \
	X(vkBindBufferMemory)                  \
	X(vkMapMemory)                         \
	X(vkUnmapMemory)                       \
	X(vkFlushMappedMemoryRanges)           \
	X(vkInvalidateMappedMemoryRanges)      \
	X(vkCreateShaderModule)                \
	X(vkDestroyShaderModule)               \
	X(vkCreateDescriptorSetLayout)         \
	X(vkDestroyDescriptorSetLayout)        \
	X(vkCreatePipelineLayout)              \
	X(vkDestroyPipelineLayout)             \
	X(vkCreatePipelineCache)               \
	X(vkDestroyPipelineCache)              \
	X(vkGetPipelineCacheData)              \
	X(vkCreateComputePipelines)            \
	X(vkDestroyPipeline)                   \
	X(vkCreateDescriptorPool)              \
	X(vkDestroyDescriptorPool)             \
	X(vkAllocateDescriptorSets)            \
	X(vkUpdateDescriptorSets)              \
	X(vkCreateCommandPool)                 \
	X(vkDestroyCommandPool)                \
	X(vkAllocateCommandBuffers)            \
	X(vkFreeCommandBuffers)                \
	X(vkBeginCommandBuffer)                \
	X(vkEndCommandBuffer)                  \
	X(vkCmdBindPipeline)                   \
	X(vkCmdBindDescriptorSets)             \
	X(vkCmdPushConstants)                  \
	X(vkCmdDispatch)                       \
	X(vkCmdFillBuffer)                     \
	X(vkCmdCopyBuffer)                     \
	X(vkCmdPipelineBarrier)                \
	X(vkCmdResetQueryPool)                 \
	X(vkCmdWriteTimestamp)                 \
	X(vkCreateQueryPool)                   \
	X(vkDestroyQueryPool)                  \
	X(vkGetQueryPoolResults)               \
	X(vkCreateFence)                       \
	X(vkDestroyFence)                      \
	X(vkWaitForFences)                     \
	X(vkResetFences)                       \
	X(vkGetFenceStatus)                    \
	X(vkQueueSubmit)

#define KILN_DECLARE_FN(name) PFN_##name name;

/* KILN_HANDLE converts the uint64_t h that Go holds to the Vulkan handle type T;
 * KILN_U64 converts back. */
#define KILN_HANDLE(T, h) ((T)(uintptr_t)(h))
#define KILN_U64(h) ((uint64_t)(uintptr_t)(h))

/* KILN_APPEND links the structure s at the end of a pNext chain whose last
 * pNext is *next, and makes s's pNext the chain's end. */
#define KILN_APPEND(next, s) \
	do {                     \
		*(next) = &(s);      \
		(next) = &(s).pNext; \
	} while (0)

/* KILN_RETURN_CREATED creates a T with d->create from the create (or
 * allocate) info ci, stores the handle in *out and returns the VkResult. */
#define KILN_RETURN_CREATED(d, T, create, ci, out)                \
	do {                                                          \
		T h_ = VK_NULL_HANDLE;                                    \
		VkResult r_ = (d)->create((d)->device, &(ci), NULL, &h_); \
		*(out) = KILN_U64(h_);                                    \
		return r_;                                                \
	} while (0)

/* Result codes of the loading steps that are not Vulkan calls. */
enum {
	KILN_LOAD_OK = 0,
	KILN_LOAD_NO_LIBRARY = 1,
	KILN_LOAD_NO_SYMBOL = 2
};

typedef struct kiln_loader {
	void *lib;
	PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
	PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion; /* NULL on a Vulkan 1.0 loader */
	KILN_GLOBAL_FNS(KILN_DECLARE_FN)
} kiln_loader;

typedef struct kiln_instance {
	VkInstance instance;
	VkDebugUtilsMessengerEXT messenger;
	PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr; /* for optional instance functions (coopmat.c) */
	pthread_mutex_t mu;      /* guards the message fields below */
	uint64_t msg_count;      /* messages received since the last take */
	char *msgs;              /* their text, one per line, capped at KILN_MSG_CAP bytes */
	size_t msgs_len;
	size_t msgs_cap;
	KILN_INSTANCE_FNS(KILN_DECLARE_FN)
	KILN_DEBUG_FNS(KILN_DECLARE_FN)
} kiln_instance;

typedef struct kiln_device {
	VkDevice device;
	VkQueue queue;
	KILN_DEVICE_FNS(KILN_DECLARE_FN)
	/* NULL unless the device was created with host_query_reset (see queryreset.go). */
	PFN_vkResetQueryPool vkResetQueryPool;
	/* NULL unless the device was created with device_address (see address.go). */
	PFN_vkGetBufferDeviceAddress vkGetBufferDeviceAddress;
	/* NULL unless VK_EXT_external_memory_host is enabled. */
	PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT;
} kiln_device;

/* The properties package vk reads from a physical device, copied out of the
 * VkPhysicalDeviceProperties2 chain so that no pNext pointer reaches Go memory. */
typedef struct kiln_props {
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceSubgroupProperties subgroup;
	int has_driver;
	VkPhysicalDeviceDriverProperties driver;
	int has_float_controls;
	VkPhysicalDeviceFloatControlsProperties float_controls;
	int has_size_control;
	VkPhysicalDeviceSubgroupSizeControlProperties size_control;
	int has_external_host;
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT external_host;
	int has_id;
	VkPhysicalDeviceIDProperties id;
} kiln_props;

/* Which optional property and feature structs to chain, and which device
 * extensions and features to enable: the Go side decides from the API version
 * and the device's extensions. */
typedef struct kiln_chain {
	int float_controls;
	int size_control;
	int external_host;
} kiln_chain;

typedef struct kiln_device_options {
	void *next; /* more feature structs to enable, a chain ending in NULL (kiln_coop_chain), or NULL */
	const char *const *extensions;
	uint32_t n_extensions;
	int size_control;     /* enable subgroupSizeControl */
	int full_subgroups;   /* enable computeFullSubgroups */
	int device_address;   /* enable bufferDeviceAddress (Vulkan 1.2) */
	int host_query_reset; /* enable hostQueryReset (Vulkan 1.2) */
	int float16;          /* enable shaderFloat16 (Vulkan 1.2) */
	int storage16;        /* enable storageBuffer16BitAccess (Vulkan 1.1) */
	int int16;            /* enable shaderInt16 */
} kiln_device_options;

int kiln_load(const char *name, kiln_loader **out, char *err, size_t errlen);
void kiln_unload(kiln_loader *l);
uint32_t kiln_instance_version(kiln_loader *l);
VkResult kiln_enumerate_layers(kiln_loader *l, uint32_t *count, VkLayerProperties *out);
VkResult kiln_create_instance(kiln_loader *l, uint32_t api_version, int validation, int sync_validation, kiln_instance **out, const char **missing);
void kiln_destroy_instance(kiln_instance *in);
uint64_t kiln_message_count(kiln_instance *in);
char *kiln_take_messages(kiln_instance *in, uint64_t *count);

VkResult kiln_enumerate_physical_devices(kiln_instance *in, uint32_t *count, VkPhysicalDevice *out);
void kiln_get_basic_properties(kiln_instance *in, VkPhysicalDevice pd, VkPhysicalDeviceProperties *out);
void kiln_get_properties(kiln_instance *in, VkPhysicalDevice pd, uint32_t instance_api, kiln_chain chain, kiln_props *out);
/* kiln_read_features fills the chain of feature structures (each with its sType
 * set) through vkGetPhysicalDeviceFeatures2. */
void kiln_read_features(kiln_instance *in, VkPhysicalDevice pd, void *chain);
void kiln_get_features(kiln_instance *in, VkPhysicalDevice pd, uint32_t instance_api, kiln_chain chain,
	uint32_t *float16, uint32_t *size_control, uint32_t *full_subgroups, uint32_t *storage16, uint32_t *int16);
void kiln_get_memory_properties(kiln_instance *in, VkPhysicalDevice pd, VkPhysicalDeviceMemoryProperties *out);
/* kiln_get_memory_budget reads VK_EXT_memory_budget's budget and usage of every
 * heap (VK_MAX_MEMORY_HEAPS entries each); the caller checked that the device
 * has the extension. */
void kiln_get_memory_budget(kiln_instance *in, VkPhysicalDevice pd, VkDeviceSize *budget, VkDeviceSize *usage);
void kiln_get_queue_families(kiln_instance *in, VkPhysicalDevice pd, uint32_t *count, VkQueueFamilyProperties *out);
VkResult kiln_enumerate_device_extensions(kiln_instance *in, VkPhysicalDevice pd, uint32_t *count, VkExtensionProperties *out);
VkResult kiln_create_device(kiln_instance *in, VkPhysicalDevice pd, uint32_t queue_family, kiln_device_options opts,
	kiln_device **out, const char **missing);
void kiln_destroy_device(kiln_device *d);
VkResult kiln_device_wait_idle(kiln_device *d);

VkResult kiln_create_buffer(kiln_device *d, uint64_t size, uint32_t usage, uint64_t *out);
void kiln_destroy_buffer(kiln_device *d, uint64_t b);
void kiln_buffer_requirements(kiln_device *d, uint64_t b, uint64_t *size, uint32_t *type_bits);
VkResult kiln_allocate_memory(kiln_device *d, uint64_t size, uint32_t type_index, uint64_t *out);
void kiln_free_memory(kiln_device *d, uint64_t m);
VkResult kiln_bind_buffer_memory(kiln_device *d, uint64_t b, uint64_t m);
VkResult kiln_map_memory(kiln_device *d, uint64_t m, void **out);
void kiln_unmap_memory(kiln_device *d, uint64_t m);
VkResult kiln_flush_memory(kiln_device *d, uint64_t m, uint64_t offset, uint64_t size);
VkResult kiln_invalidate_memory(kiln_device *d, uint64_t m, uint64_t offset, uint64_t size);

VkResult kiln_create_shader_module(kiln_device *d, const void *code, size_t bytes, uint64_t *out);
void kiln_destroy_shader_module(kiln_device *d, uint64_t m);
VkResult kiln_create_storage_set_layout(kiln_device *d, uint32_t bindings, uint64_t *out);
void kiln_destroy_set_layout(kiln_device *d, uint64_t l);
VkResult kiln_create_pipeline_layout(kiln_device *d, uint64_t set_layout, uint32_t push_bytes, uint64_t *out);
void kiln_destroy_pipeline_layout(kiln_device *d, uint64_t l);
VkResult kiln_create_pipeline_cache(kiln_device *d, const void *data, size_t size, uint64_t *out);
void kiln_destroy_pipeline_cache(kiln_device *d, uint64_t c);
VkResult kiln_pipeline_cache_data(kiln_device *d, uint64_t c, size_t *size, void *data);
VkResult kiln_create_compute_pipeline(kiln_device *d, uint64_t cache, uint64_t layout, uint64_t module,
	const char *entry, const VkSpecializationMapEntry *entries, uint32_t n_entries,
	const void *spec_data, size_t spec_size, uint32_t subgroup_size, uint32_t stage_flags, uint64_t *out);
void kiln_destroy_pipeline(kiln_device *d, uint64_t p);

VkResult kiln_create_storage_pool(kiln_device *d, uint32_t buffers, uint32_t sets, uint64_t *out);
void kiln_destroy_descriptor_pool(kiln_device *d, uint64_t p);
VkResult kiln_allocate_set(kiln_device *d, uint64_t pool, uint64_t layout, uint64_t *out);
VkResult kiln_write_storage_set(kiln_device *d, uint64_t set, uint32_t n, const uint64_t *buffers, const uint64_t *offsets, const uint64_t *ranges);

VkResult kiln_create_command_pool(kiln_device *d, uint32_t queue_family, uint64_t *out);
void kiln_destroy_command_pool(kiln_device *d, uint64_t p);
VkResult kiln_allocate_command_buffer(kiln_device *d, uint64_t pool, VkCommandBuffer *out);
void kiln_free_command_buffer(kiln_device *d, uint64_t pool, VkCommandBuffer cb);
VkResult kiln_begin_command_buffer(kiln_device *d, VkCommandBuffer cb);
VkResult kiln_end_command_buffer(kiln_device *d, VkCommandBuffer cb);
void kiln_cmd_bind_compute(kiln_device *d, VkCommandBuffer cb, uint64_t pipeline, uint64_t layout, uint64_t set);
void kiln_cmd_push_constants(kiln_device *d, VkCommandBuffer cb, uint64_t layout, uint32_t size, const void *data);
void kiln_cmd_dispatch(kiln_device *d, VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z);
void kiln_cmd_fill_buffer(kiln_device *d, VkCommandBuffer cb, uint64_t b, uint64_t offset, uint64_t size, uint32_t value);
void kiln_cmd_copy_buffer(kiln_device *d, VkCommandBuffer cb, uint64_t src, uint64_t src_offset, uint64_t dst, uint64_t dst_offset, uint64_t size);
void kiln_cmd_memory_barrier(kiln_device *d, VkCommandBuffer cb, uint32_t src_stage, uint32_t dst_stage, uint32_t src_access, uint32_t dst_access);
void kiln_cmd_reset_queries(kiln_device *d, VkCommandBuffer cb, uint64_t pool, uint32_t first, uint32_t count);
void kiln_cmd_write_timestamp(kiln_device *d, VkCommandBuffer cb, uint32_t stage, uint64_t pool, uint32_t query);

VkResult kiln_create_timestamp_pool(kiln_device *d, uint32_t count, uint64_t *out);
void kiln_destroy_query_pool(kiln_device *d, uint64_t p);
VkResult kiln_query_results(kiln_device *d, uint64_t pool, uint32_t count, uint64_t *out);

VkResult kiln_create_fence(kiln_device *d, uint64_t *out);
void kiln_destroy_fence(kiln_device *d, uint64_t f);
VkResult kiln_wait_fence(kiln_device *d, uint64_t f, uint64_t timeout_ns);
VkResult kiln_queue_submit(kiln_device *d, VkCommandBuffer cb, uint64_t fence);
VkResult kiln_reset_fence(kiln_device *d, uint64_t f);
VkResult kiln_fence_status(kiln_device *d, uint64_t f);
VkResult kiln_host_pointer_types(kiln_device *d, void *ptr, uint32_t *type_bits);
VkResult kiln_create_host_buffer(kiln_device *d, uint64_t size, uint32_t usage, uint64_t *out);
VkResult kiln_import_host_memory(kiln_device *d, void *ptr, uint64_t size, uint32_t type_index, uint64_t *out);

#endif
