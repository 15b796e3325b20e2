// Package backend is kiln's Vulkan backend: a pluginapi.Backend (id "vulkan") that
// runs IR v1 and v1.1 programs as Vulkan compute pipelines through the vk binding
// and the spirv emitter (see docs/design.md, "Vulkan"). The kiln-backend-vulkan executable serves it; tests use it in
// process.
//
// Adapters: every Vulkan physical device is one adapter, CPU implementations such as
// lavapipe included. When the loader or a driver is missing the backend still
// describes itself, with one unavailable adapter whose Reason says what to install.
//
// Profile: the DeviceProfile flags report what the backend can run on the device:
// limits, subgroup operations and shuffles, shared memory, timestamps; f16 and
// bf16 where the device has them, tensor cores where the cooperative-matrix path
// is used (coopmat.go); never indirect dispatch or hardware counters. mem_bw_gbps is
// measured, not looked up, in the background after the first Describe (which does
// not wait, and creates no device; 0 until the measurement ends;
// Config.NoBandwidth skips it; Prestart starts Vulkan early): a kiln copy
// kernel (dst[i] = src[i] over 256 MiB of u32) is warmed up once, then one job of
// as many copies as move 1 GiB is timed by its timestamps (CPU devices: 16 MiB
// buffers, 128 MiB moved);
// the result is bytes read plus written per second in GB/s (10^9 bytes), quantized
// to two significant digits. Until then an NVIDIA adapter reports NVML's estimate
// (2 × maximum memory clock × bus width, by GPU UUID; vk.NVMLBandwidth), read
// alongside Vulkan's start. Timing quality is DeviceTimestamps when the device
// supports timestamps on its compute queue (timestampComputeAndGraphics,
// timestampPeriod > 0, timestampValidBits > 0), HostEnqueueWait otherwise.
//
// Devices: the logical device enables VK_KHR_shader_float_controls and
// VK_EXT_subgroup_size_control where the device's Vulkan version lacks them, and
// the subgroupSizeControl and computeFullSubgroups features where offered. The
// emitter's target follows the device: SignedZeroInfNanPreserve for 32-bit floats
// when shaderSignedZeroInfNanPreserveFloat32, DenormPreserve when
// shaderDenormPreserveFloat32 (a device lacking either says so in its adapter
// name), and the subgroup classes compute shaders support.
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
// Memory, jobs and protocol 2 (Buffers, Submitter, HealthChecker; see
// docs/design.md, "Vulkan"): buffers, staging copies and protocol-1 scratch
// buffers are spans of large suballocated blocks; on integrated GPUs and CPU
// devices they are host-mapped device memory, on discrete ones device-local with
// host-visible staging. Every call's work is a job recorded into one reused
// command buffer (barriers only between dependent ops), submitted once under the
// device lock, which is released at once; a job whose ops equal what a free
// command buffer was recorded with submits that one again without recording.
// The job waits on its own fence on the calling goroutine (polling it for
// 200µs on GPUs, then blocking) and gives up when the caller's context ends; a
// warm Submit allocates only its result. On the data plane submits and
// transfers are started instead (pluginapi.Pipelined, pipelined.go): the
// adapter's queue submits the job and goes on, and the completion waits on its
// fence, holding what the job uses until the device is done. Descriptor sets are cached per
// pipeline and bound ranges. Element counts and the uniform block travel in the
// push constants; write buffers of a protocol-1 dispatch are zeroed. A grid with
// a zero axis runs nothing. Device time comes from two timestamp queries around
// a job's ops.
//
// Known driver limit: Mesa's llvmpipe (lavapipe) ends a shader's loops after 65535
// iterations in all (its loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS), without an
// error. On that driver every module carries the loop guard (guard.go, and
// spirv's loopguard.go), and a dispatch or submit whose loops were cut fails with
// a RejectedError instead of returning wrong values; GPU drivers have no such
// limit and get unguarded modules.
//
// Errors: programs, launches and limits the device cannot take are
// pluginapi.RejectedError, unusable adapters pluginapi.UnavailableError, and Vulkan
// failures while working (out of device memory, a lost device) pluginapi.DeviceError;
// once a device is lost every later call on it says so, Health reports it and
// Config.OnDeviceLost is told (the plugin exits there so the host relaunches it;
// in process the next Open creates a new device).
package backend
