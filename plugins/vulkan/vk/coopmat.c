#include <stdlib.h>
#include "coopmat.h"

void kiln_coop_get_features(kiln_instance *in, VkPhysicalDevice pd, int has_coop, int has_bf16, int memory_model,
	kiln_coop_features *out) {
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
	VkPhysicalDeviceShaderBfloat16FeaturesKHR bf = {KILN_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
	VkPhysicalDeviceVulkanMemoryModelFeatures mm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
	VkPhysicalDeviceFeatures2 f = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	void **next = &f.pNext;
	if (has_coop) {
		KILN_APPEND(next, cm);
	}
	if (has_bf16) {
		KILN_APPEND(next, bf);
	}
	if (memory_model) {
		KILN_APPEND(next, mm);
	}
	in->vkGetPhysicalDeviceFeatures2(pd, &f);
	out->cooperative_matrix = cm.cooperativeMatrix;
	out->vulkan_memory_model = mm.vulkanMemoryModel;
	out->vulkan_memory_model_device_scope = mm.vulkanMemoryModelDeviceScope;
	out->bfloat16_type = bf.shaderBFloat16Type;
	out->bfloat16_cooperative_matrix = bf.shaderBFloat16CooperativeMatrix;
}

VkResult kiln_coop_properties(kiln_instance *in, VkPhysicalDevice pd, uint32_t cap, VkCooperativeMatrixPropertiesKHR *out,
	uint32_t *count) {
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR fn = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)
		in->vkGetInstanceProcAddr(in->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
	*count = 0;
	if (fn == NULL) {
		return VK_ERROR_EXTENSION_NOT_PRESENT;
	}
	uint32_t n = 0;
	VkResult r = fn(pd, &n, NULL);
	if (r != VK_SUCCESS || cap == 0 || out == NULL) {
		*count = n;
		return r;
	}
	for (uint32_t i = 0; i < cap; i++) {
		VkCooperativeMatrixPropertiesKHR z = {KILN_STYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
		out[i] = z;
	}
	n = cap;
	r = fn(pd, &n, out);
	*count = n;
	return r;
}

/* kiln_coop_chain_mem holds the structs kiln_coop_chain links. */
typedef struct kiln_coop_chain_mem {
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm;
	VkPhysicalDeviceVulkanMemoryModelFeatures mm;
	VkPhysicalDeviceShaderBfloat16FeaturesKHR bf;
	kiln_coop2_features_nv nv;
} kiln_coop_chain_mem;

void *kiln_coop_chain(int coop, int memory_model, int device_scope, int bf16, const kiln_coop2_features_nv *nv, void **mem) {
	*mem = NULL;
	if (!coop && !memory_model && !bf16 && nv == NULL) {
		return NULL;
	}
	kiln_coop_chain_mem *m = calloc(1, sizeof *m);
	if (m == NULL) {
		return NULL;
	}
	*mem = m;
	void *head = NULL;
	if (bf16) {
		m->bf.sType = KILN_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR;
		m->bf.shaderBFloat16Type = VK_TRUE;
		m->bf.shaderBFloat16CooperativeMatrix = coop ? VK_TRUE : VK_FALSE;
		m->bf.pNext = head;
		head = &m->bf;
	}
	if (memory_model) {
		m->mm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
		m->mm.vulkanMemoryModel = VK_TRUE;
		m->mm.vulkanMemoryModelDeviceScope = device_scope ? VK_TRUE : VK_FALSE;
		m->mm.pNext = head;
		head = &m->mm;
	}
	if (nv != NULL) {
		m->nv = *nv;
		m->nv.sType = KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV;
		m->nv.pNext = head;
		head = &m->nv;
	}
	if (coop) {
		m->cm.sType = KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
		m->cm.cooperativeMatrix = VK_TRUE;
		m->cm.pNext = head;
		head = &m->cm;
	}
	return head;
}

typedef VkResult(VKAPI_PTR *kiln_pfn_coop2_flexible)(VkPhysicalDevice, uint32_t *, kiln_coop2_flexible_nv *);

VkResult kiln_coop2_get(kiln_instance *in, VkPhysicalDevice pd, kiln_coop2_features_nv *features,
	kiln_coop2_properties_nv *props, uint32_t cap, kiln_coop2_flexible_nv *out, uint32_t *count) {
	kiln_coop2_features_nv f = {KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
	VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f};
	in->vkGetPhysicalDeviceFeatures2(pd, &f2);
	*features = f;
	kiln_coop2_properties_nv p = {KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
	VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p};
	in->vkGetPhysicalDeviceProperties2(pd, &p2);
	*props = p;
	kiln_pfn_coop2_flexible fn = (kiln_pfn_coop2_flexible)
		in->vkGetInstanceProcAddr(in->instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
	*count = 0;
	if (fn == NULL) {
		return VK_ERROR_EXTENSION_NOT_PRESENT;
	}
	uint32_t n = 0;
	VkResult r = fn(pd, &n, NULL);
	if (r != VK_SUCCESS || cap == 0 || out == NULL) {
		*count = n;
		return r;
	}
	for (uint32_t i = 0; i < cap; i++) {
		kiln_coop2_flexible_nv z = {KILN_STYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV};
		out[i] = z;
	}
	n = cap;
	r = fn(pd, &n, out);
	*count = n;
	return r;
}
