package vk

/*
#include "kiln_vk.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Result is a VkResult.
type Result int32

// The results kiln's callers test for.
const (
	ErrOutOfHostMemory   Result = C.VK_ERROR_OUT_OF_HOST_MEMORY
	ErrOutOfDeviceMemory Result = C.VK_ERROR_OUT_OF_DEVICE_MEMORY
	ErrInitFailed        Result = C.VK_ERROR_INITIALIZATION_FAILED
	ErrDeviceLost        Result = C.VK_ERROR_DEVICE_LOST
)

var resultNames = map[Result]string{
	C.VK_SUCCESS:                                            "VK_SUCCESS",
	C.VK_NOT_READY:                                          "VK_NOT_READY",
	C.VK_TIMEOUT:                                            "VK_TIMEOUT",
	C.VK_EVENT_SET:                                          "VK_EVENT_SET",
	C.VK_EVENT_RESET:                                        "VK_EVENT_RESET",
	C.VK_INCOMPLETE:                                         "VK_INCOMPLETE",
	C.VK_ERROR_OUT_OF_HOST_MEMORY:                           "VK_ERROR_OUT_OF_HOST_MEMORY",
	C.VK_ERROR_OUT_OF_DEVICE_MEMORY:                         "VK_ERROR_OUT_OF_DEVICE_MEMORY",
	C.VK_ERROR_INITIALIZATION_FAILED:                        "VK_ERROR_INITIALIZATION_FAILED",
	C.VK_ERROR_DEVICE_LOST:                                  "VK_ERROR_DEVICE_LOST",
	C.VK_ERROR_MEMORY_MAP_FAILED:                            "VK_ERROR_MEMORY_MAP_FAILED",
	C.VK_ERROR_LAYER_NOT_PRESENT:                            "VK_ERROR_LAYER_NOT_PRESENT",
	C.VK_ERROR_EXTENSION_NOT_PRESENT:                        "VK_ERROR_EXTENSION_NOT_PRESENT",
	C.VK_ERROR_FEATURE_NOT_PRESENT:                          "VK_ERROR_FEATURE_NOT_PRESENT",
	C.VK_ERROR_INCOMPATIBLE_DRIVER:                          "VK_ERROR_INCOMPATIBLE_DRIVER",
	C.VK_ERROR_TOO_MANY_OBJECTS:                             "VK_ERROR_TOO_MANY_OBJECTS",
	C.VK_ERROR_FORMAT_NOT_SUPPORTED:                         "VK_ERROR_FORMAT_NOT_SUPPORTED",
	C.VK_ERROR_FRAGMENTED_POOL:                              "VK_ERROR_FRAGMENTED_POOL",
	C.VK_ERROR_UNKNOWN:                                      "VK_ERROR_UNKNOWN",
	C.VK_ERROR_OUT_OF_POOL_MEMORY:                           "VK_ERROR_OUT_OF_POOL_MEMORY",
	C.VK_ERROR_INVALID_EXTERNAL_HANDLE:                      "VK_ERROR_INVALID_EXTERNAL_HANDLE",
	C.VK_ERROR_FRAGMENTATION:                                "VK_ERROR_FRAGMENTATION",
	C.VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS:               "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS",
	C.VK_PIPELINE_COMPILE_REQUIRED:                          "VK_PIPELINE_COMPILE_REQUIRED",
	C.VK_ERROR_VALIDATION_FAILED_EXT:                        "VK_ERROR_VALIDATION_FAILED_EXT",
	C.VK_ERROR_INVALID_SHADER_NV:                            "VK_ERROR_INVALID_SHADER_NV",
	C.VK_ERROR_NOT_PERMITTED_KHR:                            "VK_ERROR_NOT_PERMITTED_KHR",
	C.VK_ERROR_COMPRESSION_EXHAUSTED_EXT:                    "VK_ERROR_COMPRESSION_EXHAUSTED_EXT",
	C.VK_THREAD_IDLE_KHR:                                    "VK_THREAD_IDLE_KHR",
	C.VK_THREAD_DONE_KHR:                                    "VK_THREAD_DONE_KHR",
	C.VK_OPERATION_DEFERRED_KHR:                             "VK_OPERATION_DEFERRED_KHR",
	C.VK_OPERATION_NOT_DEFERRED_KHR:                         "VK_OPERATION_NOT_DEFERRED_KHR",
	C.VK_ERROR_INVALID_DRM_FORMAT_MODIFIER_PLANE_LAYOUT_EXT: "VK_ERROR_INVALID_DRM_FORMAT_MODIFIER_PLANE_LAYOUT_EXT",
}

// String returns the result's name ("VK_ERROR_DEVICE_LOST"), or "VkResult(N)" for a
// code this binding does not know.
func (r Result) String() string {
	if name, ok := resultNames[r]; ok {
		return name
	}
	return fmt.Sprintf("VkResult(%d)", int32(r))
}

// Error is a Vulkan call that returned something other than VK_SUCCESS.
type Error struct {
	// Call is the Vulkan function, e.g. "vkCreateComputePipelines".
	Call string
	// Result is what it returned.
	Result Result
}

// Error reads "vkCreateComputePipelines: VK_ERROR_OUT_OF_DEVICE_MEMORY".
func (e *Error) Error() string { return e.Call + ": " + e.Result.String() }

// IsDeviceLost reports whether err is, or wraps, a Vulkan call that returned
// VK_ERROR_DEVICE_LOST.
func IsDeviceLost(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Result == ErrDeviceLost
}

// check turns a VkResult into nil (VK_SUCCESS) or an *Error naming call.
func check(call string, r C.VkResult) error {
	if r == C.VK_SUCCESS {
		return nil
	}
	return &Error{Call: call, Result: Result(r)}
}
