package vk

/*
#include <stdlib.h>
#include "kiln_vk.h"
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// Handles of non-dispatchable Vulkan objects. Zero is VK_NULL_HANDLE.
type (
	Buffer              uint64
	Memory              uint64
	ShaderModule        uint64
	DescriptorSetLayout uint64
	PipelineLayout      uint64
	PipelineCache       uint64
	Pipeline            uint64
	DescriptorPool      uint64
	DescriptorSet       uint64
	CommandPool         uint64
	QueryPool           uint64
	Fence               uint64
)

// BufferUsage is a VkBufferUsageFlags mask.
type BufferUsage uint32

// The buffer usages kiln needs.
const (
	UsageTransferSrc BufferUsage = C.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
	UsageTransferDst BufferUsage = C.VK_BUFFER_USAGE_TRANSFER_DST_BIT
	UsageStorage     BufferUsage = C.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
)

// PipelineStage is a VkPipelineStageFlags mask.
type PipelineStage uint32

// The pipeline stages kiln synchronizes.
const (
	StageTopOfPipe     PipelineStage = C.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT
	StageComputeShader PipelineStage = C.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
	StageTransfer      PipelineStage = C.VK_PIPELINE_STAGE_TRANSFER_BIT
	StageBottomOfPipe  PipelineStage = C.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
	StageHost          PipelineStage = C.VK_PIPELINE_STAGE_HOST_BIT
)

// Access is a VkAccessFlags mask.
type Access uint32

// The memory accesses kiln synchronizes.
const (
	AccessShaderRead    Access = C.VK_ACCESS_SHADER_READ_BIT
	AccessShaderWrite   Access = C.VK_ACCESS_SHADER_WRITE_BIT
	AccessTransferRead  Access = C.VK_ACCESS_TRANSFER_READ_BIT
	AccessTransferWrite Access = C.VK_ACCESS_TRANSFER_WRITE_BIT
	AccessHostRead      Access = C.VK_ACCESS_HOST_READ_BIT
)

// MemoryRequirements is VkMemoryRequirements, less the alignment (every buffer has
// its own allocation at offset 0).
type MemoryRequirements struct {
	Size uint64
	// TypeBits has bit i set when memory type i can back the object.
	TypeBits uint32
}

// SubgroupRequirement is how a compute pipeline's subgroups must be: Size, when
// non-zero, is VkPipelineShaderStageRequiredSubgroupSizeCreateInfo's
// requiredSubgroupSize (the device's subgroupSizeControl must be enabled), and
// FullSubgroups sets VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT
// (computeFullSubgroups). The zero value asks for nothing.
type SubgroupRequirement struct {
	Size          uint32
	FullSubgroups bool
}

// SpecializationEntry is a VkSpecializationMapEntry: specialization constant ID
// takes Size bytes at Offset of the data blob.
type SpecializationEntry struct {
	ID, Offset, Size uint32
}

// Device is a VkDevice with its function table and its one queue. Vulkan requires
// external synchronization of the queue, of command pools and of the objects a call
// destroys or records into; callers provide it.
type Device struct {
	d *C.kiln_device
	// allocations counts successful vkAllocateMemory calls; submits, begins,
	// fenceWaits, cmdResets and hostResets count vkQueueSubmit,
	// vkBeginCommandBuffer, vkWaitForFences, vkCmdResetQueryPool and
	// vkResetQueryPool calls.
	allocations, submits, begins, fenceWaits, cmdResets, hostResets atomic.Uint64
}

// Calls counts some of the Vulkan calls made on a device, for tests that pin
// what a path does not do.
type Calls struct {
	// Submits counts vkQueueSubmit, Recordings vkBeginCommandBuffer and
	// FenceWaits vkWaitForFences calls; QueryResets counts vkCmdResetQueryPool
	// (recorded) and HostQueryResets vkResetQueryPool (on the host).
	Submits, Recordings, FenceWaits, QueryResets, HostQueryResets uint64
}

// Calls returns how many of the counted calls were made on the device so far.
func (d *Device) Calls() Calls {
	return Calls{Submits: d.submits.Load(), Recordings: d.begins.Load(), FenceWaits: d.fenceWaits.Load(),
		QueryResets: d.cmdResets.Load(), HostQueryResets: d.hostResets.Load()}
}

// Allocations is the number of vkAllocateMemory calls that succeeded on the
// device so far: tests use it to pin that work does not allocate memory.
func (d *Device) Allocations() uint64 { return d.allocations.Load() }

// Destroy destroys the device. Every object created from it must be destroyed
// first.
func (d *Device) Destroy() {
	if d == nil || d.d == nil {
		return
	}
	C.kiln_destroy_device(d.d)
	d.d = nil
}

// WaitIdle waits until the device has finished all submitted work.
func (d *Device) WaitIdle() error {
	return check("vkDeviceWaitIdle", C.kiln_device_wait_idle(d.d))
}

// CreateBuffer creates an exclusive-sharing buffer of size bytes.
func (d *Device) CreateBuffer(size uint64, usage BufferUsage) (Buffer, error) {
	var h C.uint64_t
	err := check("vkCreateBuffer", C.kiln_create_buffer(d.d, C.uint64_t(size), C.uint32_t(usage), &h))
	return Buffer(h), err
}

// DestroyBuffer destroys a buffer; a zero handle is ignored.
func (d *Device) DestroyBuffer(b Buffer) {
	if b != 0 {
		C.kiln_destroy_buffer(d.d, C.uint64_t(b))
	}
}

// BufferRequirements reads a buffer's memory requirements.
func (d *Device) BufferRequirements(b Buffer) MemoryRequirements {
	var size C.uint64_t
	var bits C.uint32_t
	C.kiln_buffer_requirements(d.d, C.uint64_t(b), &size, &bits)
	return MemoryRequirements{Size: uint64(size), TypeBits: uint32(bits)}
}

// AllocateMemory allocates size bytes of memory type typeIndex.
func (d *Device) AllocateMemory(size uint64, typeIndex uint32) (Memory, error) {
	var h C.uint64_t
	err := check("vkAllocateMemory", C.kiln_allocate_memory(d.d, C.uint64_t(size), C.uint32_t(typeIndex), &h))
	if err == nil {
		d.allocations.Add(1)
	}
	return Memory(h), err
}

// FreeMemory frees memory; a zero handle is ignored.
func (d *Device) FreeMemory(m Memory) {
	if m != 0 {
		C.kiln_free_memory(d.d, C.uint64_t(m))
	}
}

// BindBufferMemory binds memory (from offset 0) to a buffer.
func (d *Device) BindBufferMemory(b Buffer, m Memory) error {
	return check("vkBindBufferMemory", C.kiln_bind_buffer_memory(d.d, C.uint64_t(b), C.uint64_t(m)))
}

// MapMemory maps all of a host-visible allocation and returns its first size bytes
// as a slice of C memory, valid until UnmapMemory or FreeMemory.
func (d *Device) MapMemory(m Memory, size uint64) ([]byte, error) {
	var p unsafe.Pointer
	if err := check("vkMapMemory", C.kiln_map_memory(d.d, C.uint64_t(m), &p)); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), size), nil
}

// UnmapMemory unmaps a mapped allocation.
func (d *Device) UnmapMemory(m Memory) {
	C.kiln_unmap_memory(d.d, C.uint64_t(m))
}

// WholeSize is VK_WHOLE_SIZE: the rest of an allocation from an offset.
const WholeSize = ^uint64(0)

// FlushMemory makes host writes to bytes [offset, offset+size) of a mapped,
// non-coherent allocation visible to the device (size may be WholeSize; offset
// and size are multiples of nonCoherentAtomSize or reach the end).
func (d *Device) FlushMemory(m Memory, offset, size uint64) error {
	return check("vkFlushMappedMemoryRanges", C.kiln_flush_memory(d.d, C.uint64_t(m), C.uint64_t(offset), C.uint64_t(size)))
}

// InvalidateMemory makes device writes to bytes [offset, offset+size) of a
// mapped, non-coherent allocation visible to the host.
func (d *Device) InvalidateMemory(m Memory, offset, size uint64) error {
	return check("vkInvalidateMappedMemoryRanges", C.kiln_invalidate_memory(d.d, C.uint64_t(m), C.uint64_t(offset), C.uint64_t(size)))
}

// CreateShaderModule creates a shader module from SPIR-V words.
func (d *Device) CreateShaderModule(words []uint32) (ShaderModule, error) {
	code := C.CBytes(bytesOf(words))
	defer C.free(code)
	var h C.uint64_t
	err := check("vkCreateShaderModule", C.kiln_create_shader_module(d.d, code, C.size_t(len(words)*4), &h))
	return ShaderModule(h), err
}

// DestroyShaderModule destroys a shader module; a zero handle is ignored.
func (d *Device) DestroyShaderModule(m ShaderModule) {
	if m != 0 {
		C.kiln_destroy_shader_module(d.d, C.uint64_t(m))
	}
}

// CreateStorageSetLayout creates a descriptor set layout of bindings storage
// buffers at bindings 0..bindings-1, visible to the compute stage.
func (d *Device) CreateStorageSetLayout(bindings uint32) (DescriptorSetLayout, error) {
	var h C.uint64_t
	err := check("vkCreateDescriptorSetLayout", C.kiln_create_storage_set_layout(d.d, C.uint32_t(bindings), &h))
	return DescriptorSetLayout(h), err
}

// DestroySetLayout destroys a descriptor set layout; a zero handle is ignored.
func (d *Device) DestroySetLayout(l DescriptorSetLayout) {
	if l != 0 {
		C.kiln_destroy_set_layout(d.d, C.uint64_t(l))
	}
}

// CreatePipelineLayout creates a pipeline layout of one descriptor set and, when
// pushBytes > 0, one compute push-constant range [0, pushBytes).
func (d *Device) CreatePipelineLayout(set DescriptorSetLayout, pushBytes uint32) (PipelineLayout, error) {
	var h C.uint64_t
	err := check("vkCreatePipelineLayout", C.kiln_create_pipeline_layout(d.d, C.uint64_t(set), C.uint32_t(pushBytes), &h))
	return PipelineLayout(h), err
}

// DestroyPipelineLayout destroys a pipeline layout; a zero handle is ignored.
func (d *Device) DestroyPipelineLayout(l PipelineLayout) {
	if l != 0 {
		C.kiln_destroy_pipeline_layout(d.d, C.uint64_t(l))
	}
}

// CreatePipelineCache creates a pipeline cache seeded with initial (may be empty).
// The driver checks initial's header itself and ignores data it cannot use, but
// callers should check the header first (see CacheHeader).
func (d *Device) CreatePipelineCache(initial []byte) (PipelineCache, error) {
	var data unsafe.Pointer
	if len(initial) > 0 {
		data = C.CBytes(initial)
		defer C.free(data)
	}
	var h C.uint64_t
	err := check("vkCreatePipelineCache", C.kiln_create_pipeline_cache(d.d, data, C.size_t(len(initial)), &h))
	return PipelineCache(h), err
}

// DestroyPipelineCache destroys a pipeline cache; a zero handle is ignored.
func (d *Device) DestroyPipelineCache(c PipelineCache) {
	if c != 0 {
		C.kiln_destroy_pipeline_cache(d.d, C.uint64_t(c))
	}
}

// PipelineCacheData returns a pipeline cache's serialized contents.
func (d *Device) PipelineCacheData(c PipelineCache) ([]byte, error) {
	for {
		var n C.size_t
		if err := check("vkGetPipelineCacheData", C.kiln_pipeline_cache_data(d.d, C.uint64_t(c), &n, nil)); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		buf := C.malloc(n)
		if buf == nil {
			return nil, &Error{Call: "vkGetPipelineCacheData", Result: ErrOutOfHostMemory}
		}
		r := C.kiln_pipeline_cache_data(d.d, C.uint64_t(c), &n, buf)
		out := C.GoBytes(buf, C.int(n))
		C.free(buf)
		if r == C.VK_INCOMPLETE {
			continue
		}
		if err := check("vkGetPipelineCacheData", r); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// CreateComputePipeline creates a compute pipeline from module's entry point with
// the given specialization constants, through cache (zero: no cache).
func (d *Device) CreateComputePipeline(cache PipelineCache, layout PipelineLayout, module ShaderModule, entry string, spec []SpecializationEntry, data []byte, sg SubgroupRequirement) (Pipeline, error) {
	name := C.CString(entry)
	defer C.free(unsafe.Pointer(name))
	var entries *C.VkSpecializationMapEntry
	if len(spec) > 0 {
		entries = (*C.VkSpecializationMapEntry)(C.calloc(C.size_t(len(spec)), C.sizeof_VkSpecializationMapEntry))
		defer C.free(unsafe.Pointer(entries))
		list := unsafe.Slice(entries, len(spec))
		for i, e := range spec {
			list[i].constantID = C.uint32_t(e.ID)
			list[i].offset = C.uint32_t(e.Offset)
			list[i].size = C.size_t(e.Size)
		}
	}
	var blob unsafe.Pointer
	if len(data) > 0 {
		blob = C.CBytes(data)
		defer C.free(blob)
	}
	var h C.uint64_t
	flags := C.uint32_t(0)
	if sg.FullSubgroups {
		flags |= C.VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT
	}
	r := C.kiln_create_compute_pipeline(d.d, C.uint64_t(cache), C.uint64_t(layout), C.uint64_t(module), name,
		entries, C.uint32_t(len(spec)), blob, C.size_t(len(data)), C.uint32_t(sg.Size), flags, &h)
	return Pipeline(h), check("vkCreateComputePipelines", r)
}

// DestroyPipeline destroys a pipeline; a zero handle is ignored.
func (d *Device) DestroyPipeline(p Pipeline) {
	if p != 0 {
		C.kiln_destroy_pipeline(d.d, C.uint64_t(p))
	}
}

// CreateStoragePool creates a descriptor pool for sets descriptor sets of up to
// buffers storage buffers each.
func (d *Device) CreateStoragePool(buffers, sets uint32) (DescriptorPool, error) {
	var h C.uint64_t
	err := check("vkCreateDescriptorPool", C.kiln_create_storage_pool(d.d, C.uint32_t(buffers), C.uint32_t(max(sets, 1)), &h))
	return DescriptorPool(h), err
}

// DestroyDescriptorPool destroys a descriptor pool and its sets; a zero handle is
// ignored.
func (d *Device) DestroyDescriptorPool(p DescriptorPool) {
	if p != 0 {
		C.kiln_destroy_descriptor_pool(d.d, C.uint64_t(p))
	}
}

// AllocateSet allocates one descriptor set of layout from pool.
func (d *Device) AllocateSet(pool DescriptorPool, layout DescriptorSetLayout) (DescriptorSet, error) {
	var h C.uint64_t
	err := check("vkAllocateDescriptorSets", C.kiln_allocate_set(d.d, C.uint64_t(pool), C.uint64_t(layout), &h))
	return DescriptorSet(h), err
}

// StorageRange is Range bytes of Buffer from Offset, as a storage descriptor
// sees them.
type StorageRange struct {
	Buffer        Buffer
	Offset, Range uint64
}

// WriteStorageSet points binding i of set at ranges[i]. The set must not be in
// use by a pending command buffer.
func (d *Device) WriteStorageSet(set DescriptorSet, ranges []StorageRange) error {
	n := len(ranges)
	if n == 0 {
		return nil
	}
	mem := (*C.uint64_t)(C.calloc(C.size_t(3*n), C.sizeof_uint64_t))
	if mem == nil {
		return &Error{Call: "vkUpdateDescriptorSets", Result: ErrOutOfHostMemory}
	}
	defer C.free(unsafe.Pointer(mem))
	all := unsafe.Slice(mem, 3*n)
	for i, r := range ranges {
		all[i], all[n+i], all[2*n+i] = C.uint64_t(r.Buffer), C.uint64_t(r.Offset), C.uint64_t(r.Range)
	}
	return check("vkUpdateDescriptorSets", C.kiln_write_storage_set(d.d, C.uint64_t(set), C.uint32_t(n), &all[0], &all[n], &all[2*n]))
}

// CreateCommandPool creates a transient command pool for queueFamily.
func (d *Device) CreateCommandPool(queueFamily uint32) (CommandPool, error) {
	var h C.uint64_t
	err := check("vkCreateCommandPool", C.kiln_create_command_pool(d.d, C.uint32_t(queueFamily), &h))
	return CommandPool(h), err
}

// DestroyCommandPool destroys a command pool and its command buffers; a zero handle
// is ignored.
func (d *Device) DestroyCommandPool(p CommandPool) {
	if p != 0 {
		C.kiln_destroy_command_pool(d.d, C.uint64_t(p))
	}
}

// CreateTimestampPool creates a query pool of count timestamp queries.
func (d *Device) CreateTimestampPool(count uint32) (QueryPool, error) {
	var h C.uint64_t
	err := check("vkCreateQueryPool", C.kiln_create_timestamp_pool(d.d, C.uint32_t(count), &h))
	return QueryPool(h), err
}

// DestroyQueryPool destroys a query pool; a zero handle is ignored.
func (d *Device) DestroyQueryPool(p QueryPool) {
	if p != 0 {
		C.kiln_destroy_query_pool(d.d, C.uint64_t(p))
	}
}

// QueryResults waits for and returns queries 0..count-1 of pool as 64-bit values.
func (d *Device) QueryResults(pool QueryPool, count uint32) ([]uint64, error) {
	if count == 0 {
		return nil, nil
	}
	out := make([]uint64, count)
	return out, d.QueryResultsInto(pool, out)
}

// QueryResultsInto waits for and reads queries 0..len(out)-1 of pool into out as
// 64-bit values.
func (d *Device) QueryResultsInto(pool QueryPool, out []uint64) error {
	if len(out) == 0 {
		return nil
	}
	return check("vkGetQueryPoolResults", C.kiln_query_results(d.d, C.uint64_t(pool), C.uint32_t(len(out)), (*C.uint64_t)(unsafe.Pointer(&out[0]))))
}

// CreateFence creates an unsignaled fence.
func (d *Device) CreateFence() (Fence, error) {
	var h C.uint64_t
	err := check("vkCreateFence", C.kiln_create_fence(d.d, &h))
	return Fence(h), err
}

// DestroyFence destroys a fence; a zero handle is ignored.
func (d *Device) DestroyFence(f Fence) {
	if f != 0 {
		C.kiln_destroy_fence(d.d, C.uint64_t(f))
	}
}

// WaitFence waits up to timeout for a fence: true when it signaled, false when the
// time ran out.
func (d *Device) WaitFence(f Fence, timeout time.Duration) (bool, error) {
	d.fenceWaits.Add(1)
	r := C.kiln_wait_fence(d.d, C.uint64_t(f), C.uint64_t(max(timeout, 0)))
	if r == C.VK_TIMEOUT {
		return false, nil
	}
	return r == C.VK_SUCCESS, check("vkWaitForFences", r)
}

// HostMemoryTypes returns the memory types that can import the host memory at
// ptr (VK_EXT_external_memory_host must be enabled).
func (d *Device) HostMemoryTypes(ptr unsafe.Pointer) (uint32, error) {
	var bits C.uint32_t
	err := check("vkGetMemoryHostPointerPropertiesEXT", C.kiln_host_pointer_types(d.d, ptr, &bits))
	return uint32(bits), err
}

// CreateHostBuffer creates a buffer of size bytes that can be bound to imported
// host memory.
func (d *Device) CreateHostBuffer(size uint64, usage BufferUsage) (Buffer, error) {
	var h C.uint64_t
	err := check("vkCreateBuffer", C.kiln_create_host_buffer(d.d, C.uint64_t(size), C.uint32_t(usage), &h))
	return Buffer(h), err
}

// ImportHostMemory makes size bytes of host memory at ptr device memory of type
// typeIndex (one of HostMemoryTypes), counted as an allocation. ptr and size
// must be multiples of Properties.MinImportedHostPointerAlignment, and the memory
// must stay mapped until FreeMemory.
func (d *Device) ImportHostMemory(ptr unsafe.Pointer, size uint64, typeIndex uint32) (Memory, error) {
	var h C.uint64_t
	err := check("vkAllocateMemory", C.kiln_import_host_memory(d.d, ptr, C.uint64_t(size), C.uint32_t(typeIndex), &h))
	if err == nil {
		d.allocations.Add(1)
	}
	return Memory(h), err
}

// FenceSignaled reports whether a fence has signaled, without waiting.
func (d *Device) FenceSignaled(f Fence) (bool, error) {
	r := C.kiln_fence_status(d.d, C.uint64_t(f))
	if r == C.VK_NOT_READY {
		return false, nil
	}
	return r == C.VK_SUCCESS, check("vkGetFenceStatus", r)
}

// ResetFence returns a signaled fence to the unsignaled state, for reuse.
func (d *Device) ResetFence(f Fence) error {
	return check("vkResetFences", C.kiln_reset_fence(d.d, C.uint64_t(f)))
}

// Submit submits one command buffer to the device's queue, signaling fence when it
// completes.
func (d *Device) Submit(cb CommandBuffer, fence Fence) error {
	d.submits.Add(1)
	return check("vkQueueSubmit", C.kiln_queue_submit(d.d, cb.cb, C.uint64_t(fence)))
}

// CommandBuffer is a primary command buffer.
type CommandBuffer struct {
	d  *Device
	cb C.VkCommandBuffer
}

// AllocateCommandBuffer allocates a primary command buffer from pool.
func (d *Device) AllocateCommandBuffer(pool CommandPool) (CommandBuffer, error) {
	var cb C.VkCommandBuffer
	if err := check("vkAllocateCommandBuffers", C.kiln_allocate_command_buffer(d.d, C.uint64_t(pool), &cb)); err != nil {
		return CommandBuffer{}, err
	}
	return CommandBuffer{d: d, cb: cb}, nil
}

// FreeCommandBuffer returns a command buffer to its pool; a zero CommandBuffer is
// ignored.
func (d *Device) FreeCommandBuffer(pool CommandPool, cb CommandBuffer) {
	if cb.cb != nil {
		C.kiln_free_command_buffer(d.d, C.uint64_t(pool), cb.cb)
	}
}

// Begin starts recording (resetting what was recorded before). The recording
// may be submitted again and again, each time once the previous submission is
// done.
func (c CommandBuffer) Begin() error {
	c.d.begins.Add(1)
	return check("vkBeginCommandBuffer", C.kiln_begin_command_buffer(c.d.d, c.cb))
}

// End finishes recording.
func (c CommandBuffer) End() error {
	return check("vkEndCommandBuffer", C.kiln_end_command_buffer(c.d.d, c.cb))
}

// BindCompute binds a compute pipeline and descriptor set 0.
func (c CommandBuffer) BindCompute(p Pipeline, layout PipelineLayout, set DescriptorSet) {
	C.kiln_cmd_bind_compute(c.d.d, c.cb, C.uint64_t(p), C.uint64_t(layout), C.uint64_t(set))
}

// PushConstants records data at offset 0 of the compute push-constant range.
func (c CommandBuffer) PushConstants(layout PipelineLayout, data []byte) {
	if len(data) == 0 {
		return
	}
	// The driver copies the bytes while recording: Go memory may be passed.
	C.kiln_cmd_push_constants(c.d.d, c.cb, C.uint64_t(layout), C.uint32_t(len(data)), unsafe.Pointer(&data[0]))
}

// Dispatch records a dispatch of x*y*z workgroups.
func (c CommandBuffer) Dispatch(x, y, z uint32) {
	C.kiln_cmd_dispatch(c.d.d, c.cb, C.uint32_t(x), C.uint32_t(y), C.uint32_t(z))
}

// FillBuffer records filling bytes [offset, offset+size) of b with the 32-bit
// value.
func (c CommandBuffer) FillBuffer(b Buffer, offset, size uint64, value uint32) {
	C.kiln_cmd_fill_buffer(c.d.d, c.cb, C.uint64_t(b), C.uint64_t(offset), C.uint64_t(size), C.uint32_t(value))
}

// CopyBuffer records copying size bytes from src at srcOffset to dst at
// dstOffset.
func (c CommandBuffer) CopyBuffer(src Buffer, srcOffset uint64, dst Buffer, dstOffset, size uint64) {
	C.kiln_cmd_copy_buffer(c.d.d, c.cb, C.uint64_t(src), C.uint64_t(srcOffset), C.uint64_t(dst), C.uint64_t(dstOffset), C.uint64_t(size))
}

// MemoryBarrier records a global memory barrier.
func (c CommandBuffer) MemoryBarrier(src, dst PipelineStage, srcAccess, dstAccess Access) {
	C.kiln_cmd_memory_barrier(c.d.d, c.cb, C.uint32_t(src), C.uint32_t(dst), C.uint32_t(srcAccess), C.uint32_t(dstAccess))
}

// ResetQueries records resetting queries [first, first+count) of pool.
func (c CommandBuffer) ResetQueries(pool QueryPool, first, count uint32) {
	c.d.cmdResets.Add(1)
	C.kiln_cmd_reset_queries(c.d.d, c.cb, C.uint64_t(pool), C.uint32_t(first), C.uint32_t(count))
}

// WriteTimestamp records writing a timestamp into query of pool once stage is
// reached.
func (c CommandBuffer) WriteTimestamp(stage PipelineStage, pool QueryPool, query uint32) {
	C.kiln_cmd_write_timestamp(c.d.d, c.cb, C.uint32_t(stage), C.uint64_t(pool), C.uint32_t(query))
}
