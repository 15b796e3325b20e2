#include "kiln_vk.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KILN_MSG_CAP (1u << 20)

/* KILN_PREPEND links the structure s at the head of ci's pNext chain. */
#define KILN_PREPEND(ci, s)             \
	do {                                \
		(s).pNext = (void *)(ci).pNext; \
		(ci).pNext = &(s);              \
	} while (0)

/* KILN_TAKE copies the chained structure s into out->field, unlinked, and sets
 * out->has. */
#define KILN_TAKE(out, has, field, s) \
	do {                              \
		(out)->has = 1;               \
		(out)->field = (s);           \
		(out)->field.pNext = NULL;    \
	} while (0)

/* KILN_DESTROYER defines name(d, h), which hands the T handle h to d->destroy. */
#define KILN_DESTROYER(name, T, destroy)                \
	void name(kiln_device *d, uint64_t h) {             \
		d->destroy(d->device, KILN_HANDLE(T, h), NULL); \
	}

void kiln_read_features(kiln_instance *in, VkPhysicalDevice pd, void *chain) {
	VkPhysicalDeviceFeatures2 f = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	f.pNext = chain;
	in->vkGetPhysicalDeviceFeatures2(pd, &f);
}

int kiln_load(const char *name, kiln_loader **out, char *err, size_t errlen) {
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return KILN_LOAD_NO_LIBRARY;
	}
	PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
	if (gipa == NULL) {
		snprintf(err, errlen, "vkGetInstanceProcAddr");
		dlclose(lib);
		return KILN_LOAD_NO_SYMBOL;
	}
	kiln_loader *l = calloc(1, sizeof *l);
	if (l == NULL) {
		snprintf(err, errlen, "out of host memory");
		dlclose(lib);
		return KILN_LOAD_NO_SYMBOL;
	}
	l->lib = lib;
	l->vkGetInstanceProcAddr = gipa;
	l->vkEnumerateInstanceVersion = (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
#define KILN_LOAD_GLOBAL(fn)                                         \
	l->fn = (PFN_##fn)gipa(NULL, #fn);                               \
	if (l->fn == NULL) {                                             \
		snprintf(err, errlen, "%s", #fn);                            \
		dlclose(lib);                                                \
		free(l);                                                     \
		return KILN_LOAD_NO_SYMBOL;                                  \
	}
	KILN_GLOBAL_FNS(KILN_LOAD_GLOBAL)
#undef KILN_LOAD_GLOBAL
	*out = l;
	return KILN_LOAD_OK;
}

void kiln_unload(kiln_loader *l) {
	if (l == NULL) {
		return;
	}
	dlclose(l->lib);
	free(l);
}

uint32_t kiln_instance_version(kiln_loader *l) {
	uint32_t v = VK_API_VERSION_1_0;
	if (l->vkEnumerateInstanceVersion != NULL && l->vkEnumerateInstanceVersion(&v) != VK_SUCCESS) {
		v = VK_API_VERSION_1_0;
	}
	return v;
}

VkResult kiln_enumerate_layers(kiln_loader *l, uint32_t *count, VkLayerProperties *out) {
	return l->vkEnumerateInstanceLayerProperties(count, out);
}

/* kiln_debug_message records every message the validation layer reports. It may run
 * on any thread, so it appends under the instance's mutex. */
static VKAPI_ATTR VkBool32 VKAPI_CALL kiln_debug_message(
	VkDebugUtilsMessageSeverityFlagBitsEXT severity,
	VkDebugUtilsMessageTypeFlagsEXT types,
	const VkDebugUtilsMessengerCallbackDataEXT *data,
	void *user) {
	(void)types;
	kiln_instance *in = user;
	const char *level = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning";
	const char *id = (data && data->pMessageIdName) ? data->pMessageIdName : "-";
	const char *msg = (data && data->pMessage) ? data->pMessage : "";
	pthread_mutex_lock(&in->mu);
	in->msg_count++;
	size_t need = strlen(level) + strlen(id) + strlen(msg) + 8;
	if (in->msgs_len + need <= KILN_MSG_CAP) {
		if (in->msgs_len + need > in->msgs_cap) {
			size_t cap = in->msgs_cap ? in->msgs_cap : 4096;
			while (cap < in->msgs_len + need) {
				cap *= 2;
			}
			char *grown = realloc(in->msgs, cap);
			if (grown != NULL) {
				in->msgs = grown;
				in->msgs_cap = cap;
			}
		}
		if (in->msgs_len + need <= in->msgs_cap) {
			in->msgs_len += (size_t)snprintf(in->msgs + in->msgs_len, need, "%s %s: %s\n", level, id, msg);
		}
	}
	pthread_mutex_unlock(&in->mu);
	return VK_FALSE;
}

static void kiln_messenger_info(kiln_instance *in, VkDebugUtilsMessengerCreateInfoEXT *ci) {
	memset(ci, 0, sizeof *ci);
	ci->sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
	ci->messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
	ci->messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
		VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
	ci->pfnUserCallback = kiln_debug_message;
	ci->pUserData = in;
}

VkResult kiln_create_instance(kiln_loader *l, uint32_t api_version, int validation, int sync_validation, kiln_instance **out, const char **missing) {
	kiln_instance *in = calloc(1, sizeof *in);
	if (in == NULL) {
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	}
	pthread_mutex_init(&in->mu, NULL);
	VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
	app.pApplicationName = "kiln";
	app.pEngineName = "kiln";
	app.apiVersion = api_version;
	const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
	const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
	VkDebugUtilsMessengerCreateInfoEXT dbg;
	kiln_messenger_info(in, &dbg);
	VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
	ci.pApplicationInfo = &app;
	VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
	VkValidationFeaturesEXT features = {VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
	features.enabledValidationFeatureCount = 1;
	features.pEnabledValidationFeatures = enables;
	if (validation) {
		ci.pNext = &dbg;
		ci.enabledExtensionCount = 1;
		if (sync_validation) {
			features.pNext = &dbg;
			ci.pNext = &features;
			ci.enabledExtensionCount = 2;
		}
		ci.enabledLayerCount = 1;
		ci.ppEnabledLayerNames = layers;
		ci.ppEnabledExtensionNames = exts;
	}
	in->vkGetInstanceProcAddr = l->vkGetInstanceProcAddr;
	VkResult r = l->vkCreateInstance(&ci, NULL, &in->instance);
	if (r != VK_SUCCESS) {
		pthread_mutex_destroy(&in->mu);
		free(in);
		return r;
	}
#define KILN_LOAD_INSTANCE(fn)                                              \
	in->fn = (PFN_##fn)l->vkGetInstanceProcAddr(in->instance, #fn);         \
	if (in->fn == NULL) {                                                   \
		*missing = #fn;                                                     \
		r = VK_ERROR_INITIALIZATION_FAILED;                                 \
	}
	KILN_INSTANCE_FNS(KILN_LOAD_INSTANCE)
	if (validation && r == VK_SUCCESS) {
		KILN_DEBUG_FNS(KILN_LOAD_INSTANCE)
	}
#undef KILN_LOAD_INSTANCE
	if (r == VK_SUCCESS && validation) {
		r = in->vkCreateDebugUtilsMessengerEXT(in->instance, &dbg, NULL, &in->messenger);
		if (r != VK_SUCCESS) {
			*missing = NULL;
		}
	}
	if (r != VK_SUCCESS) {
		PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)l->vkGetInstanceProcAddr(in->instance, "vkDestroyInstance");
		if (destroy != NULL) {
			destroy(in->instance, NULL);
		}
		pthread_mutex_destroy(&in->mu);
		free(in);
		return r;
	}
	*out = in;
	return VK_SUCCESS;
}

void kiln_destroy_instance(kiln_instance *in) {
	if (in == NULL) {
		return;
	}
	if (in->messenger != VK_NULL_HANDLE) {
		in->vkDestroyDebugUtilsMessengerEXT(in->instance, in->messenger, NULL);
	}
	in->vkDestroyInstance(in->instance, NULL);
	pthread_mutex_destroy(&in->mu);
	free(in->msgs);
	free(in);
}

uint64_t kiln_message_count(kiln_instance *in) {
	pthread_mutex_lock(&in->mu);
	uint64_t n = in->msg_count;
	pthread_mutex_unlock(&in->mu);
	return n;
}

char *kiln_take_messages(kiln_instance *in, uint64_t *count) {
	pthread_mutex_lock(&in->mu);
	*count = in->msg_count;
	char *text = NULL;
	if (in->msgs_len > 0) {
		text = malloc(in->msgs_len + 1);
		if (text != NULL) {
			memcpy(text, in->msgs, in->msgs_len);
			text[in->msgs_len] = 0;
		}
	}
	in->msg_count = 0;
	in->msgs_len = 0;
	pthread_mutex_unlock(&in->mu);
	return text;
}

VkResult kiln_enumerate_physical_devices(kiln_instance *in, uint32_t *count, VkPhysicalDevice *out) {
	return in->vkEnumeratePhysicalDevices(in->instance, count, out);
}

static uint32_t kiln_min_version(kiln_instance *in, VkPhysicalDevice pd, uint32_t instance_api) {
	VkPhysicalDeviceProperties p;
	in->vkGetPhysicalDeviceProperties(pd, &p);
	return p.apiVersion < instance_api ? p.apiVersion : instance_api;
}

void kiln_get_basic_properties(kiln_instance *in, VkPhysicalDevice pd, VkPhysicalDeviceProperties *out) {
	in->vkGetPhysicalDeviceProperties(pd, out);
}

void kiln_get_properties(kiln_instance *in, VkPhysicalDevice pd, uint32_t instance_api, kiln_chain chain, kiln_props *out) {
	int with_driver = kiln_min_version(in, pd, instance_api) >= VK_API_VERSION_1_2;
	VkPhysicalDeviceDriverProperties driver = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDeviceFloatControlsProperties fc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
	VkPhysicalDeviceSubgroupSizeControlProperties sc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
	VkPhysicalDeviceSubgroupProperties subgroup = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceProperties2 props = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
	void **next = &props.pNext;
	KILN_APPEND(next, subgroup);
	if (with_driver) {
		KILN_APPEND(next, driver);
	}
	if (chain.float_controls) {
		KILN_APPEND(next, fc);
	}
	if (chain.size_control) {
		KILN_APPEND(next, sc);
	}
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT eh = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
	if (chain.external_host) {
		KILN_APPEND(next, eh);
	}
	int with_id = kiln_min_version(in, pd, instance_api) >= VK_API_VERSION_1_1;
	VkPhysicalDeviceIDProperties id = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
	if (with_id) {
		KILN_APPEND(next, id);
	}
	in->vkGetPhysicalDeviceProperties2(pd, &props);
	memset(out, 0, sizeof *out);
	out->props = props.properties;
	out->subgroup = subgroup;
	out->subgroup.pNext = NULL;
	if (with_driver) {
		KILN_TAKE(out, has_driver, driver, driver);
	}
	if (chain.float_controls) {
		KILN_TAKE(out, has_float_controls, float_controls, fc);
	}
	if (chain.size_control) {
		KILN_TAKE(out, has_size_control, size_control, sc);
	}
	if (with_id) {
		KILN_TAKE(out, has_id, id, id);
	}
	if (chain.external_host) {
		KILN_TAKE(out, has_external_host, external_host, eh);
	}
}

void kiln_get_features(kiln_instance *in, VkPhysicalDevice pd, uint32_t instance_api, kiln_chain chain,
	uint32_t *float16, uint32_t *size_control, uint32_t *full_subgroups, uint32_t *storage16, uint32_t *int16) {
	int with_float16 = kiln_min_version(in, pd, instance_api) >= VK_API_VERSION_1_2;
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
	VkPhysicalDeviceSubgroupSizeControlFeatures sc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
	VkPhysicalDevice16BitStorageFeatures s16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
	VkPhysicalDeviceFeatures2 f = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	f.pNext = &s16;
	void **next = &s16.pNext;
	if (with_float16) {
		KILN_APPEND(next, f16);
	}
	if (chain.size_control) {
		KILN_APPEND(next, sc);
	}
	in->vkGetPhysicalDeviceFeatures2(pd, &f);
	*float16 = with_float16 ? f16.shaderFloat16 : 0;
	*size_control = chain.size_control ? sc.subgroupSizeControl : 0;
	*full_subgroups = chain.size_control ? sc.computeFullSubgroups : 0;
	*storage16 = s16.storageBuffer16BitAccess;
	*int16 = f.features.shaderInt16;
}

void kiln_get_memory_properties(kiln_instance *in, VkPhysicalDevice pd, VkPhysicalDeviceMemoryProperties *out) {
	in->vkGetPhysicalDeviceMemoryProperties(pd, out);
}

void kiln_get_memory_budget(kiln_instance *in, VkPhysicalDevice pd, VkDeviceSize *budget, VkDeviceSize *usage) {
	VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
	VkPhysicalDeviceMemoryProperties2 m = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
	m.pNext = &b;
	in->vkGetPhysicalDeviceMemoryProperties2(pd, &m);
	for (uint32_t i = 0; i < VK_MAX_MEMORY_HEAPS; i++) {
		budget[i] = b.heapBudget[i];
		usage[i] = b.heapUsage[i];
	}
}

void kiln_get_queue_families(kiln_instance *in, VkPhysicalDevice pd, uint32_t *count, VkQueueFamilyProperties *out) {
	in->vkGetPhysicalDeviceQueueFamilyProperties(pd, count, out);
}

VkResult kiln_enumerate_device_extensions(kiln_instance *in, VkPhysicalDevice pd, uint32_t *count, VkExtensionProperties *out) {
	return in->vkEnumerateDeviceExtensionProperties(pd, NULL, count, out);
}

VkResult kiln_create_device(kiln_instance *in, VkPhysicalDevice pd, uint32_t queue_family, kiln_device_options opts,
	kiln_device **out, const char **missing) {
	kiln_device *d = calloc(1, sizeof *d);
	if (d == NULL) {
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	}
	float priority = 1.0f;
	VkDeviceQueueCreateInfo q = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
	q.queueFamilyIndex = queue_family;
	q.queueCount = 1;
	q.pQueuePriorities = &priority;
	VkPhysicalDeviceSubgroupSizeControlFeatures sc = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
	sc.subgroupSizeControl = opts.size_control ? VK_TRUE : VK_FALSE;
	sc.computeFullSubgroups = opts.full_subgroups ? VK_TRUE : VK_FALSE;
	VkDeviceCreateInfo ci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
	ci.queueCreateInfoCount = 1;
	ci.pQueueCreateInfos = &q;
	ci.enabledExtensionCount = opts.n_extensions;
	ci.ppEnabledExtensionNames = opts.extensions;
	if (opts.size_control || opts.full_subgroups) {
		ci.pNext = &sc;
	}
	if (opts.next != NULL) {
		VkBaseOutStructure *tail = opts.next;
		while (tail->pNext != NULL) {
			tail = tail->pNext;
		}
		tail->pNext = (VkBaseOutStructure *)ci.pNext;
		ci.pNext = opts.next;
	}
	VkPhysicalDeviceBufferDeviceAddressFeatures bda = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES};
	if (opts.device_address) {
		bda.bufferDeviceAddress = VK_TRUE;
		KILN_PREPEND(ci, bda);
	}
	VkPhysicalDeviceHostQueryResetFeatures hqr = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES};
	if (opts.host_query_reset) {
		hqr.hostQueryReset = VK_TRUE;
		KILN_PREPEND(ci, hqr);
	}
	VkPhysicalDeviceShaderFloat16Int8Features f16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
	if (opts.float16) {
		f16.shaderFloat16 = VK_TRUE;
		KILN_PREPEND(ci, f16);
	}
	VkPhysicalDevice16BitStorageFeatures s16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
	if (opts.storage16) {
		s16.storageBuffer16BitAccess = VK_TRUE;
		KILN_PREPEND(ci, s16);
	}
	VkPhysicalDeviceFeatures core = {0};
	core.shaderInt16 = opts.int16 ? VK_TRUE : VK_FALSE;
	ci.pEnabledFeatures = &core;
	VkResult r = in->vkCreateDevice(pd, &ci, NULL, &d->device);
	if (r != VK_SUCCESS) {
		free(d);
		return r;
	}
	PFN_vkGetDeviceProcAddr gdpa = in->vkGetDeviceProcAddr;
#define KILN_LOAD_DEVICE(fn)                                  \
	d->fn = (PFN_##fn)gdpa(d->device, #fn);                   \
	if (d->fn == NULL && r == VK_SUCCESS) {                   \
		*missing = #fn;                                       \
		r = VK_ERROR_INITIALIZATION_FAILED;                   \
	}
	KILN_DEVICE_FNS(KILN_LOAD_DEVICE)
#undef KILN_LOAD_DEVICE
	if (r != VK_SUCCESS) {
		if (d->vkDestroyDevice != NULL) {
			d->vkDestroyDevice(d->device, NULL);
		}
		free(d);
		return r;
	}
	if (opts.host_query_reset) {
		d->vkResetQueryPool = (PFN_vkResetQueryPool)gdpa(d->device, "vkResetQueryPool");
	}
	if (opts.device_address) {
		d->vkGetBufferDeviceAddress = (PFN_vkGetBufferDeviceAddress)gdpa(d->device, "vkGetBufferDeviceAddress");
	}
	d->vkGetMemoryHostPointerPropertiesEXT =
		(PFN_vkGetMemoryHostPointerPropertiesEXT)gdpa(d->device, "vkGetMemoryHostPointerPropertiesEXT");
	d->vkGetDeviceQueue(d->device, queue_family, 0, &d->queue);
	*out = d;
	return VK_SUCCESS;
}

void kiln_destroy_device(kiln_device *d) {
	if (d == NULL) {
		return;
	}
	d->vkDestroyDevice(d->device, NULL);
	free(d);
}

VkResult kiln_device_wait_idle(kiln_device *d) {
	return d->vkDeviceWaitIdle(d->device);
}

VkResult kiln_create_buffer(kiln_device *d, uint64_t size, uint32_t usage, uint64_t *out) {
	VkBufferCreateInfo ci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
	ci.size = size;
	ci.usage = usage;
	ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
	KILN_RETURN_CREATED(d, VkBuffer, vkCreateBuffer, ci, out);
}

KILN_DESTROYER(kiln_destroy_buffer, VkBuffer, vkDestroyBuffer)

void kiln_buffer_requirements(kiln_device *d, uint64_t b, uint64_t *size, uint32_t *type_bits) {
	VkMemoryRequirements req;
	d->vkGetBufferMemoryRequirements(d->device, KILN_HANDLE(VkBuffer, b), &req);
	*size = req.size;
	*type_bits = req.memoryTypeBits;
}

VkResult kiln_allocate_memory(kiln_device *d, uint64_t size, uint32_t type_index, uint64_t *out) {
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.allocationSize = size;
	ai.memoryTypeIndex = type_index;
	KILN_RETURN_CREATED(d, VkDeviceMemory, vkAllocateMemory, ai, out);
}

KILN_DESTROYER(kiln_free_memory, VkDeviceMemory, vkFreeMemory)

VkResult kiln_reset_fence(kiln_device *d, uint64_t f) {
	VkFence fence = KILN_HANDLE(VkFence, f);
	return d->vkResetFences(d->device, 1, &fence);
}

VkResult kiln_fence_status(kiln_device *d, uint64_t f) {
	return d->vkGetFenceStatus(d->device, KILN_HANDLE(VkFence, f));
}

VkResult kiln_host_pointer_types(kiln_device *d, void *ptr, uint32_t *type_bits) {
	if (d->vkGetMemoryHostPointerPropertiesEXT == NULL) {
		return VK_ERROR_EXTENSION_NOT_PRESENT;
	}
	VkMemoryHostPointerPropertiesEXT props = {VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	VkResult r = d->vkGetMemoryHostPointerPropertiesEXT(d->device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, ptr, &props);
	*type_bits = props.memoryTypeBits;
	return r;
}

VkResult kiln_create_host_buffer(kiln_device *d, uint64_t size, uint32_t usage, uint64_t *out) {
	VkExternalMemoryBufferCreateInfo ext = {VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
	ext.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	VkBufferCreateInfo ci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
	ci.pNext = &ext;
	ci.size = size;
	ci.usage = usage;
	ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
	KILN_RETURN_CREATED(d, VkBuffer, vkCreateBuffer, ci, out);
}

VkResult kiln_import_host_memory(kiln_device *d, void *ptr, uint64_t size, uint32_t type_index, uint64_t *out) {
	VkImportMemoryHostPointerInfoEXT imp = {VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
	imp.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	imp.pHostPointer = ptr;
	VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	ai.pNext = &imp;
	ai.allocationSize = size;
	ai.memoryTypeIndex = type_index;
	KILN_RETURN_CREATED(d, VkDeviceMemory, vkAllocateMemory, ai, out);
}

VkResult kiln_bind_buffer_memory(kiln_device *d, uint64_t b, uint64_t m) {
	return d->vkBindBufferMemory(d->device, KILN_HANDLE(VkBuffer, b), KILN_HANDLE(VkDeviceMemory, m), 0);
}

VkResult kiln_map_memory(kiln_device *d, uint64_t m, void **out) {
	return d->vkMapMemory(d->device, KILN_HANDLE(VkDeviceMemory, m), 0, VK_WHOLE_SIZE, 0, out);
}

void kiln_unmap_memory(kiln_device *d, uint64_t m) {
	d->vkUnmapMemory(d->device, KILN_HANDLE(VkDeviceMemory, m));
}

static void kiln_mapped_range(uint64_t m, uint64_t offset, uint64_t size, VkMappedMemoryRange *r) {
	memset(r, 0, sizeof *r);
	r->sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE;
	r->memory = KILN_HANDLE(VkDeviceMemory, m);
	r->offset = offset;
	r->size = size;
}

VkResult kiln_flush_memory(kiln_device *d, uint64_t m, uint64_t offset, uint64_t size) {
	VkMappedMemoryRange r;
	kiln_mapped_range(m, offset, size, &r);
	return d->vkFlushMappedMemoryRanges(d->device, 1, &r);
}

VkResult kiln_invalidate_memory(kiln_device *d, uint64_t m, uint64_t offset, uint64_t size) {
	VkMappedMemoryRange r;
	kiln_mapped_range(m, offset, size, &r);
	return d->vkInvalidateMappedMemoryRanges(d->device, 1, &r);
}

VkResult kiln_create_shader_module(kiln_device *d, const void *code, size_t bytes, uint64_t *out) {
	VkShaderModuleCreateInfo ci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
	ci.codeSize = bytes;
	ci.pCode = code;
	KILN_RETURN_CREATED(d, VkShaderModule, vkCreateShaderModule, ci, out);
}

KILN_DESTROYER(kiln_destroy_shader_module, VkShaderModule, vkDestroyShaderModule)

VkResult kiln_create_storage_set_layout(kiln_device *d, uint32_t bindings, uint64_t *out) {
	VkDescriptorSetLayoutBinding *b = NULL;
	if (bindings > 0) {
		b = calloc(bindings, sizeof *b);
		if (b == NULL) {
			return VK_ERROR_OUT_OF_HOST_MEMORY;
		}
	}
	for (uint32_t i = 0; i < bindings; i++) {
		b[i].binding = i;
		b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		b[i].descriptorCount = 1;
		b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
	}
	VkDescriptorSetLayoutCreateInfo ci = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
	ci.bindingCount = bindings;
	ci.pBindings = b;
	VkDescriptorSetLayout l = VK_NULL_HANDLE;
	VkResult r = d->vkCreateDescriptorSetLayout(d->device, &ci, NULL, &l);
	free(b);
	*out = KILN_U64(l);
	return r;
}

KILN_DESTROYER(kiln_destroy_set_layout, VkDescriptorSetLayout, vkDestroyDescriptorSetLayout)

VkResult kiln_create_pipeline_layout(kiln_device *d, uint64_t set_layout, uint32_t push_bytes, uint64_t *out) {
	VkDescriptorSetLayout sl = KILN_HANDLE(VkDescriptorSetLayout, set_layout);
	VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
	VkPipelineLayoutCreateInfo ci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
	ci.setLayoutCount = 1;
	ci.pSetLayouts = &sl;
	if (push_bytes > 0) {
		ci.pushConstantRangeCount = 1;
		ci.pPushConstantRanges = &pr;
	}
	KILN_RETURN_CREATED(d, VkPipelineLayout, vkCreatePipelineLayout, ci, out);
}

KILN_DESTROYER(kiln_destroy_pipeline_layout, VkPipelineLayout, vkDestroyPipelineLayout)

VkResult kiln_create_pipeline_cache(kiln_device *d, const void *data, size_t size, uint64_t *out) {
	VkPipelineCacheCreateInfo ci = {VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
	ci.initialDataSize = size;
	ci.pInitialData = size > 0 ? data : NULL;
	KILN_RETURN_CREATED(d, VkPipelineCache, vkCreatePipelineCache, ci, out);
}

KILN_DESTROYER(kiln_destroy_pipeline_cache, VkPipelineCache, vkDestroyPipelineCache)

VkResult kiln_pipeline_cache_data(kiln_device *d, uint64_t c, size_t *size, void *data) {
	return d->vkGetPipelineCacheData(d->device, KILN_HANDLE(VkPipelineCache, c), size, data);
}

VkResult kiln_create_compute_pipeline(kiln_device *d, uint64_t cache, uint64_t layout, uint64_t module,
	const char *entry, const VkSpecializationMapEntry *entries, uint32_t n_entries,
	const void *spec_data, size_t spec_size, uint32_t subgroup_size, uint32_t stage_flags, uint64_t *out) {
	VkSpecializationInfo spec = {n_entries, entries, spec_size, spec_data};
	VkPipelineShaderStageRequiredSubgroupSizeCreateInfo size = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
	size.requiredSubgroupSize = subgroup_size;
	VkComputePipelineCreateInfo ci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
	ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
	ci.stage.flags = stage_flags;
	if (subgroup_size > 0) {
		ci.stage.pNext = &size;
	}
	ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
	ci.stage.module = KILN_HANDLE(VkShaderModule, module);
	ci.stage.pName = entry;
	if (n_entries > 0) {
		ci.stage.pSpecializationInfo = &spec;
	}
	ci.layout = KILN_HANDLE(VkPipelineLayout, layout);
	ci.basePipelineIndex = -1;
	VkPipeline p = VK_NULL_HANDLE;
	VkResult r = d->vkCreateComputePipelines(d->device, KILN_HANDLE(VkPipelineCache, cache), 1, &ci, NULL, &p);
	*out = KILN_U64(p);
	return r;
}

KILN_DESTROYER(kiln_destroy_pipeline, VkPipeline, vkDestroyPipeline)

VkResult kiln_create_storage_pool(kiln_device *d, uint32_t buffers, uint32_t sets, uint64_t *out) {
	VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, buffers > 0 ? buffers * sets : 1};
	VkDescriptorPoolCreateInfo ci = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
	ci.maxSets = sets;
	ci.poolSizeCount = 1;
	ci.pPoolSizes = &size;
	KILN_RETURN_CREATED(d, VkDescriptorPool, vkCreateDescriptorPool, ci, out);
}

KILN_DESTROYER(kiln_destroy_descriptor_pool, VkDescriptorPool, vkDestroyDescriptorPool)

VkResult kiln_allocate_set(kiln_device *d, uint64_t pool, uint64_t layout, uint64_t *out) {
	VkDescriptorSetLayout l = KILN_HANDLE(VkDescriptorSetLayout, layout);
	VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
	ai.descriptorPool = KILN_HANDLE(VkDescriptorPool, pool);
	ai.descriptorSetCount = 1;
	ai.pSetLayouts = &l;
	VkDescriptorSet s = VK_NULL_HANDLE;
	VkResult r = d->vkAllocateDescriptorSets(d->device, &ai, &s);
	*out = KILN_U64(s);
	return r;
}

VkResult kiln_write_storage_set(kiln_device *d, uint64_t set, uint32_t n, const uint64_t *buffers, const uint64_t *offsets, const uint64_t *ranges) {
	if (n == 0) {
		return VK_SUCCESS;
	}
	VkDescriptorBufferInfo *info = calloc(n, sizeof *info);
	VkWriteDescriptorSet *w = calloc(n, sizeof *w);
	if (info == NULL || w == NULL) {
		free(info);
		free(w);
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	}
	for (uint32_t i = 0; i < n; i++) {
		info[i].buffer = KILN_HANDLE(VkBuffer, buffers[i]);
		info[i].offset = offsets[i];
		info[i].range = ranges[i];
		w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
		w[i].dstSet = KILN_HANDLE(VkDescriptorSet, set);
		w[i].dstBinding = i;
		w[i].descriptorCount = 1;
		w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
		w[i].pBufferInfo = &info[i];
	}
	d->vkUpdateDescriptorSets(d->device, n, w, 0, NULL);
	free(info);
	free(w);
	return VK_SUCCESS;
}

VkResult kiln_create_command_pool(kiln_device *d, uint32_t queue_family, uint64_t *out) {
	VkCommandPoolCreateInfo ci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
	ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
	ci.queueFamilyIndex = queue_family;
	KILN_RETURN_CREATED(d, VkCommandPool, vkCreateCommandPool, ci, out);
}

KILN_DESTROYER(kiln_destroy_command_pool, VkCommandPool, vkDestroyCommandPool)

VkResult kiln_allocate_command_buffer(kiln_device *d, uint64_t pool, VkCommandBuffer *out) {
	VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
	ai.commandPool = KILN_HANDLE(VkCommandPool, pool);
	ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
	ai.commandBufferCount = 1;
	return d->vkAllocateCommandBuffers(d->device, &ai, out);
}

void kiln_free_command_buffer(kiln_device *d, uint64_t pool, VkCommandBuffer cb) {
	d->vkFreeCommandBuffers(d->device, KILN_HANDLE(VkCommandPool, pool), 1, &cb);
}

VkResult kiln_begin_command_buffer(kiln_device *d, VkCommandBuffer cb) {
	/* No ONE_TIME_SUBMIT: a recorded command buffer may be submitted again. */
	VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	return d->vkBeginCommandBuffer(cb, &bi);
}

VkResult kiln_end_command_buffer(kiln_device *d, VkCommandBuffer cb) {
	return d->vkEndCommandBuffer(cb);
}

void kiln_cmd_bind_compute(kiln_device *d, VkCommandBuffer cb, uint64_t pipeline, uint64_t layout, uint64_t set) {
	VkDescriptorSet s = KILN_HANDLE(VkDescriptorSet, set);
	d->vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, KILN_HANDLE(VkPipeline, pipeline));
	d->vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, KILN_HANDLE(VkPipelineLayout, layout), 0, 1, &s, 0, NULL);
}

void kiln_cmd_push_constants(kiln_device *d, VkCommandBuffer cb, uint64_t layout, uint32_t size, const void *data) {
	d->vkCmdPushConstants(cb, KILN_HANDLE(VkPipelineLayout, layout), VK_SHADER_STAGE_COMPUTE_BIT, 0, size, data);
}

void kiln_cmd_dispatch(kiln_device *d, VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) {
	d->vkCmdDispatch(cb, x, y, z);
}

void kiln_cmd_fill_buffer(kiln_device *d, VkCommandBuffer cb, uint64_t b, uint64_t offset, uint64_t size, uint32_t value) {
	d->vkCmdFillBuffer(cb, KILN_HANDLE(VkBuffer, b), offset, size, value);
}

void kiln_cmd_copy_buffer(kiln_device *d, VkCommandBuffer cb, uint64_t src, uint64_t src_offset, uint64_t dst, uint64_t dst_offset, uint64_t size) {
	VkBufferCopy region = {src_offset, dst_offset, size};
	d->vkCmdCopyBuffer(cb, KILN_HANDLE(VkBuffer, src), KILN_HANDLE(VkBuffer, dst), 1, &region);
}

void kiln_cmd_memory_barrier(kiln_device *d, VkCommandBuffer cb, uint32_t src_stage, uint32_t dst_stage, uint32_t src_access, uint32_t dst_access) {
	VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
	mb.srcAccessMask = src_access;
	mb.dstAccessMask = dst_access;
	d->vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

void kiln_cmd_reset_queries(kiln_device *d, VkCommandBuffer cb, uint64_t pool, uint32_t first, uint32_t count) {
	d->vkCmdResetQueryPool(cb, KILN_HANDLE(VkQueryPool, pool), first, count);
}

void kiln_cmd_write_timestamp(kiln_device *d, VkCommandBuffer cb, uint32_t stage, uint64_t pool, uint32_t query) {
	d->vkCmdWriteTimestamp(cb, (VkPipelineStageFlagBits)stage, KILN_HANDLE(VkQueryPool, pool), query);
}

VkResult kiln_create_timestamp_pool(kiln_device *d, uint32_t count, uint64_t *out) {
	VkQueryPoolCreateInfo ci = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
	ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
	ci.queryCount = count;
	KILN_RETURN_CREATED(d, VkQueryPool, vkCreateQueryPool, ci, out);
}

KILN_DESTROYER(kiln_destroy_query_pool, VkQueryPool, vkDestroyQueryPool)

VkResult kiln_query_results(kiln_device *d, uint64_t pool, uint32_t count, uint64_t *out) {
	return d->vkGetQueryPoolResults(d->device, KILN_HANDLE(VkQueryPool, pool), 0, count,
		(size_t)count * sizeof(uint64_t), out, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
}

VkResult kiln_create_fence(kiln_device *d, uint64_t *out) {
	VkFenceCreateInfo ci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	KILN_RETURN_CREATED(d, VkFence, vkCreateFence, ci, out);
}

KILN_DESTROYER(kiln_destroy_fence, VkFence, vkDestroyFence)

VkResult kiln_wait_fence(kiln_device *d, uint64_t f, uint64_t timeout_ns) {
	VkFence fence = KILN_HANDLE(VkFence, f);
	return d->vkWaitForFences(d->device, 1, &fence, VK_TRUE, timeout_ns);
}

VkResult kiln_queue_submit(kiln_device *d, VkCommandBuffer cb, uint64_t fence) {
	VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
	si.commandBufferCount = 1;
	si.pCommandBuffers = &cb;
	return d->vkQueueSubmit(d->queue, 1, &si, KILN_HANDLE(VkFence, fence));
}
