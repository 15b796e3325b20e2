// Package backend is kiln's CUDA backend: a pluginapi.Backend (id "cuda") that runs
// IR programs as CUDA kernels through the driver binding and the ptx emitter. The
// kiln-backend-cuda executable serves it; tests use it in process.
//
// Adapters: every CUDA device is one adapter (cuda:0, cuda:1, ... in the driver's
// order), with its own primary context, stream and events once opened. When the
// driver library is missing, too old for the PTX kiln emits, or finds no device,
// the backend still describes itself, with one unavailable adapter whose Reason
// says what to fix. [Backend.Start] loads the driver and reads the devices'
// attributes ahead of the first call; describing reads attributes only and
// creates no context, which Open (or the first call needing the device) does.
//
// Profile: limits, warps of 32 as subgroups with shuffles, shared memory, f16
// (compute capability 5.3+), bf16 (8.0+), tensor cores (7.0+), device timestamps
// (CUDA events, TimingQuality DeviceTimestamps), no indirect dispatch and no
// hardware counters. mem_bw_gbps is first an estimate from the attributes (the
// memory's peak, 2 × memory clock × bus width), then, once the background
// measurement that opening the adapter starts has finished, the measured copy
// bandwidth: a kiln copy kernel (dst[i] = src[i] over 1 GiB of u32) runs once to
// warm up and three more times, timed by events, and the fastest run's bytes
// read plus written per second is what Describe reports. Both are rounded to two
// significant digits, so noise does not reorder backends of equal bandwidth, and
// identical GPUs tie. A failed measurement keeps the estimate.
//
// Identity: vendor NVIDIA, the device's name and compute capability, the
// driver's version (kernel module and CUDA), discrete or integrated, and the
// UUID as Instance: the device fingerprint is one physical GPU's and follows it
// when the GPUs are reordered, while identical GPUs share the model fingerprint
// (and cached cubins).
//
// Programs: all of IR v1.1. Uniforms are kernel parameters after the buffers'
// addresses and counts, filled from each dispatch's uniform block. Subgroups are
// warps of 32, or aligned segments of a warp when the program requires fewer
// lanes or its workgroup is not a multiple of 32 (see ptx.SubgroupSizeFor); a
// program requiring more than 32 lanes is rejected at compile.
//
// Compile emits PTX for the device's target with the specialization and
// workgroup size folded in and read buffers loaded through the non-coherent path
// (a dispatch whose read binding overlaps a written one runs the kernel emitted
// with plain loads instead, linked on first use), then loads the cubin of the host's cached blob when
// its header matches this driver version, compute capability and PTX text and its
// digest is intact, and otherwise compiles the PTX with the driver's JIT linker
// (cuLinkCreate, cuLinkAddData, cuLinkComplete). The blob returned is the cubin
// behind that header. A driver whose JIT rejects the PTX version makes the
// adapter unavailable with a Fix.
//
// Dispatch: each adapter has one stream and two events; dispatches and submits
// take turns on it, and adapters do not wait for each other. Buffers are device
// allocations of count times the element size (4 bytes, 2 for f16 and bf16;
// at least 4 bytes for an empty one); read and read_write inputs
// are copied in, write buffers are zeroed with cuMemsetD32Async, the kernel gets
// every buffer's address and element count as parameters, and the outputs are
// copied back after the end event completes. Device time is the time between the
// two events. A submit runs on the caller's goroutine with the context current
// on its locked thread: it resolves its commands into the device's scratch space
// (no allocation but the result), enqueues them and polls the end event for
// 200µs; only a longer batch blocks in the driver on another goroutine. When the
// caller's context ends first the call returns its error and the work is left
// to finish in the background before its buffers are freed (a later call waits
// for it, or for its own deadline). A grid with a zero axis runs nothing and
// returns zeroed write buffers and unchanged read_write buffers.
//
// Copies between buffers (pluginapi.PeerCopier, peer.go): on one device
// cuMemcpyDtoDAsync; between two, cuMemcpyPeerAsync with peer access enabled
// both ways where cuDeviceCanAccessPeer allows it, else staged through two
// pinned 32 MiB host buffers. A copy holds both devices' streams, taken in
// adapter order.
//
// Errors: programs, launches and limits the device cannot take are
// pluginapi.RejectedError, unusable adapters pluginapi.UnavailableError, and
// driver failures while working pluginapi.DeviceError. After a sticky failure (an
// illegal address, a failed launch) the context is unusable and every later call
// on the adapter says so.
package backend
