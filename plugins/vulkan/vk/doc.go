// Package vk is kiln's binding to the Vulkan C API, limited to what a compute
// backend needs.
//
// It is built with cgo against the libvulkan-dev headers but does not link the
// Vulkan loader: Load opens libvulkan.so.1 with dlopen at run time and resolves every
// function through vkGetInstanceProcAddr and vkGetDeviceProcAddr, so a program using
// vk starts on a machine without Vulkan and can say why Vulkan is unavailable (see
// LoaderMissingError). The compiled binary links only libc and libdl.
//
// Every Vulkan call that returns a VkResult other than VK_SUCCESS becomes an *Error
// naming the call and the result ("vkCreateComputePipelines:
// VK_ERROR_OUT_OF_DEVICE_MEMORY"). Non-dispatchable handles are uint64 values in Go
// and Vulkan's create-info structs are built on the C side, so no Go pointer is ever
// stored in C memory.
//
// With InstanceOptions.Validation the instance enables VK_LAYER_KHRONOS_validation
// and a VK_EXT_debug_utils messenger that records every warning and error; Messages
// returns and clears them.
package vk
