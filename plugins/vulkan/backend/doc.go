// Package backend is kiln's Vulkan backend: a pluginapi.Backend (id "vulkan") that
// runs IR v1 and v1.1 programs as Vulkan compute pipelines through the vk binding
// and the spirv emitter (see docs/design.md, "Vulkan"). The kiln-backend-vulkan executable serves it; tests use it in
// process.
//
// Adapters: every Vulkan physical device is one adapter, CPU implementations such as
// lavapipe included. When the loader or a driver is missing the backend still
// describes itself, with one unavailable adapter whose Reason says what to install.
//
// Profile: the DeviceProfile flags report what the device offers as Vulkan describes
// it (limits, subgroup properties, features, extensions). mem_bw_gbps is measured,
// not looked up: the first Describe runs a kiln copy kernel (dst[i] = src[i] over
// 64 MiB of u32 in device-local memory, 8 MiB on CPU devices) once to warm up and
// three more times, timed by timestamp queries, and reports the fastest run as bytes
// read plus bytes written per second (2 × size / time), in GB/s (10^9 bytes): the
// bandwidth a kiln kernel gets, which can be below the memory's peak. It is 0 (unknown)
// when the device has no timestamps or the measurement failed. Timing quality is
// DeviceTimestamps when the device supports
// timestamps on its compute queue (timestampComputeAndGraphics, timestampPeriod > 0,
// timestampValidBits > 0), HostEnqueueWait otherwise.
//
// Devices: the logical device enables VK_KHR_shader_float_controls and
// VK_EXT_subgroup_size_control where the device's Vulkan version lacks them, and
// the subgroupSizeControl and computeFullSubgroups features where offered. The
// emitter's target follows the device: SignedZeroInfNanPreserve for 32-bit floats
// when shaderSignedZeroInfNanPreserveFloat32, and the subgroup classes compute
// shaders support.
//
// Compile emits SPIR-V, checks the device limits, and builds the compute pipeline
// through a VkPipelineCache seeded with the host's cached blob when that blob's
// header names this device (vendor id, device id, pipelineCacheUUID); any other
// blob is ignored and the pipeline is compiled fresh. The blob returned is the
// cache's data (vkGetPipelineCacheData). Parameters and the workgroup size are
// specialization constants. A program using subgroups runs with its required
// size, or (any size) the device's own when it divides the workgroup, else the
// largest the device can be asked for that does; with subgroup size control the
// size is required explicitly, with full subgroups when the workgroup's x is a
// multiple of it. A size the device cannot run is a RejectedError naming both.
//
// Dispatch: on discrete and virtual GPUs buffers live in device-local memory and
// inputs and outputs move through host-visible staging buffers; on integrated GPUs
// and CPU devices, where device-local memory is host-visible, the buffers are mapped
// directly. Every buffer is bound with exactly count*4 bytes (4 bytes for an empty
// one, whose count is 0); element counts travel in the push-constant block, and
// the dispatch's uniform block right after them. Write
// buffers are cleared with vkCmdFillBuffer. A grid with a zero axis runs nothing and
// returns zeroed write buffers and unchanged read_write buffers. Device time comes
// from two timestamp queries around the dispatch.
//
// Known driver limit: Mesa's llvmpipe (lavapipe) ends a shader's loops after 65535
// iterations in all (its loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS), so a program
// whose invocations loop longer gets wrong results there without any error; GPU
// drivers have no such limit.
//
// Errors: programs, launches and limits the device cannot take are
// pluginapi.RejectedError, unusable adapters pluginapi.UnavailableError, and Vulkan
// failures while working (out of device memory, a lost device) pluginapi.DeviceError;
// once a device is lost every later call on it says so.
package backend
