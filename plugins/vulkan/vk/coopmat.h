/*
 * VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 for package vk (see
 * coopmat.go). The Vulkan headers this builds against may predate them, so the
 * few structs and enum values used are declared here when the header lacks them
 * (values from the Vulkan registry).
 */
#ifndef KILN_COOPMAT_H
#define KILN_COOPMAT_H

#include "kiln_vk.h"

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
typedef enum VkComponentTypeKHR { VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF } VkComponentTypeKHR;
typedef enum VkScopeKHR { VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF } VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
	VkStructureType sType;
	void *pNext;
	uint32_t MSize;
	uint32_t NSize;
	uint32_t KSize;
	VkComponentTypeKHR AType;
	VkComponentTypeKHR BType;
	VkComponentTypeKHR CType;
	VkComponentTypeKHR ResultType;
	VkBool32 saturatingAccumulation;
	VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
	VkStructureType sType;
	void *pNext;
	VkBool32 cooperativeMatrix;
	VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *);
#endif
#define KILN_STYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
#define KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)

#ifndef VK_KHR_shader_bfloat16
#define VK_KHR_shader_bfloat16 1
typedef struct VkPhysicalDeviceShaderBfloat16FeaturesKHR {
	VkStructureType sType;
	void *pNext;
	VkBool32 shaderBFloat16Type;
	VkBool32 shaderBFloat16DotProduct;
	VkBool32 shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;
#endif
#define KILN_STYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR ((VkStructureType)1000141000)

/* kiln_coop_features are the device's features that the cooperative-matrix
 * path needs; has_* says which extensions' structs were chained. */
typedef struct kiln_coop_features {
	uint32_t cooperative_matrix;
	uint32_t vulkan_memory_model;
	uint32_t vulkan_memory_model_device_scope;
	uint32_t bfloat16_type;
	uint32_t bfloat16_cooperative_matrix;
} kiln_coop_features;

/* kiln_coop_get_features reads them: the cooperative-matrix struct when
 * has_coop, the bfloat16 struct when has_bf16, the memory model (Vulkan 1.2)
 * when memory_model. */
void kiln_coop_get_features(kiln_instance *in, VkPhysicalDevice pd, int has_coop, int has_bf16, int memory_model,
	kiln_coop_features *out);

/* kiln_coop_properties lists the device's cooperative-matrix properties: up to
 * cap entries into out (may be NULL with cap 0), the total count in *count;
 * VK_ERROR_EXTENSION_NOT_PRESENT when the function is not there. */
VkResult kiln_coop_properties(kiln_instance *in, VkPhysicalDevice pd, uint32_t cap, VkCooperativeMatrixPropertiesKHR *out,
	uint32_t *count);

/* VK_NV_cooperative_matrix2 (workgroup-scope matrices of flexible sizes): kiln
 * reads what the device lists and enables what its NV path uses. The structs are
 * kiln's own with the registry's layout, so older headers build too. */
typedef struct kiln_coop2_features_nv {
	VkStructureType sType;
	void *pNext;
	VkBool32 workgroup_scope;
	VkBool32 flexible_dimensions;
	VkBool32 reductions;
	VkBool32 conversions;
	VkBool32 per_element_operations;
	VkBool32 tensor_addressing;
	VkBool32 block_loads;
} kiln_coop2_features_nv;
typedef struct kiln_coop2_properties_nv {
	VkStructureType sType;
	void *pNext;
	uint32_t workgroup_scope_max_workgroup_size;
	uint32_t flexible_dimensions_max_dimension;
	uint32_t workgroup_scope_reserved_shared_memory;
} kiln_coop2_properties_nv;
typedef struct kiln_coop2_flexible_nv {
	VkStructureType sType;
	void *pNext;
	uint32_t m_granularity, n_granularity, k_granularity;
	uint32_t a_type, b_type, c_type, result_type;
	VkBool32 saturating_accumulation;
	uint32_t scope;
	uint32_t workgroup_invocations;
} kiln_coop2_flexible_nv;
#define KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV ((VkStructureType)1000593000)

/* kiln_coop_chain allocates the feature structs that enable cooperativeMatrix,
 * vulkanMemoryModel and the bfloat16 type and cooperative matrices, as asked,
 * (with vulkanMemoryModelDeviceScope when device_scope) and, when nv is not
 * NULL, VK_NV_cooperative_matrix2's features set in *nv, and returns their
 * chain, ending in NULL, for kiln_device_options.next; *mem is the allocation
 * to free() after vkCreateDevice. NULL when nothing is asked or out of
 * memory. */
void *kiln_coop_chain(int coop, int memory_model, int device_scope, int bf16, const kiln_coop2_features_nv *nv, void **mem);
#define KILN_STYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV ((VkStructureType)1000593001)
#define KILN_STYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV ((VkStructureType)1000593002)

/* kiln_coop2_get reads the device's VK_NV_cooperative_matrix2 features and
 * limits (call only when the device lists the extension) and its
 * flexible-dimension combinations: up to cap into out (may be NULL with cap
 * 0), the total count in *count; VK_ERROR_EXTENSION_NOT_PRESENT when the
 * list's function is not there. */
VkResult kiln_coop2_get(kiln_instance *in, VkPhysicalDevice pd, kiln_coop2_features_nv *features,
	kiln_coop2_properties_nv *props, uint32_t cap, kiln_coop2_flexible_nv *out, uint32_t *count);

#endif
