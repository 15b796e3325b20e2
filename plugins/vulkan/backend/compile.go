package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// pipeline is a compiled program on one device.
type pipeline struct {
	d    *device
	prog *ir.Program
	wg   [3]uint32
	push uint32
	// uniforms and grid are the offsets of the uniform block and the grid words
	// in the push constants, gridMode how the module reads the grid; sg the
	// subgroups the pipeline requires.
	uniforms, grid uint32
	gridMode       spirv.GridMode
	sg             vk.SubgroupRequirement
	// guard says that the module has the loop guard's buffer after the
	// program's bindings (spirv.Module.LoopGuard; see guard.go).
	guard bool
	// addr builds and keeps the address variants of a compiled pipeline;
	// addresses are a variant's address offsets by binding (see address.go).
	addr      *addressing
	addresses map[uint32]uint32
	// use is held for reading by dispatches and for writing by destroy.
	use       sync.RWMutex
	setLayout vk.DescriptorSetLayout
	layout    vk.PipelineLayout
	pipe      vk.Pipeline
}

// hold read-locks the pipeline for a dispatch: destroy waits until it is let go.
func (p *pipeline) hold() { p.use.RLock() }

// destroy waits for the pipeline's dispatches and destroys its objects.
func (p *pipeline) destroy() {
	p.use.Lock()
	defer p.use.Unlock()
	p.destroyVariants()
	p.d.forgetPipeline(p)
	p.d.vk.DestroyPipeline(p.pipe)
	p.d.vk.DestroyPipelineLayout(p.layout)
	p.d.vk.DestroySetLayout(p.setLayout)
}

// Compile emits the program as SPIR-V and builds its compute pipeline on the
// adapter's device, through a pipeline cache seeded with req.CachedBlob when the
// blob was made by this device.
func (b *Backend) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	defer b.noteValidation()
	if err := gpukit.CompileContext(ctx, ID, req); err != nil {
		return nil, err
	}
	start := time.Now()
	a, d, err := b.deviceAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		return nil, err
	}
	p := req.Program
	m, wg, err := a.emit(p, req.Spec, req.WorkgroupSize)
	if err != nil {
		return nil, err
	}
	if lim := a.props.Limits.MaxPushConstantsSize; m.PushConstantBytes > lim {
		return nil, pluginapi.Rejected("vulkan: program %q needs %d bytes of push constants (one u32 per buffer and per uniform, and %d grid words) but adapter %d (%s) allows %d. Fix: use at most %d buffers and uniforms together on this device",
			p.Name, m.PushConstantBytes, spirv.GridWordCount, a.index, a.info.Name, lim, lim/4-spirv.GridWordCount)
	}
	var sg vk.SubgroupRequirement
	if m.Subgroups {
		if sg, err = a.subgroupRequirement(p, wg); err != nil {
			return nil, err
		}
	}
	pl := &pipeline{d: d, prog: p, wg: wg, push: m.PushConstantBytes, uniforms: m.UniformOffset,
		grid: m.GridOffset, gridMode: m.Grid, sg: sg, guard: m.LoopGuard, addr: &addressing{wg: wg, spec: req.Spec}}
	blob, err := pl.build(m, usableBlob(req.CachedBlob, a.props))
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.adapters.Closed() {
		pl.destroy()
		return nil, errClosed
	}
	return &pluginapi.CompileResult{Pipeline: b.pipelines.Add(pl), Blob: blob, CompileNanos: time.Since(start).Nanoseconds()}, nil
}

// emit checks program p, with the workgroup override (all zero keeps p's),
// against the adapter's limits and emits its module for the adapter, as
// Compile and Artifact do; it returns the module and the workgroup size it
// runs with.
func (a *adapter) emit(p *ir.Program, spec ir.SpecMap, override [3]uint32) (*spirv.Module, [3]uint32, error) {
	wg, err := checkLimits(p, override, a.props.Limits)
	if err != nil {
		return nil, wg, err
	}
	m, err := spirv.EmitFor(p, a.targetFor(wg, spec))
	if err != nil {
		return nil, wg, pluginapi.Rejected("vulkan: adapter %d (%s): %w", a.index, a.info.Name, err)
	}
	return m, wg, nil
}

// build creates the pipeline's Vulkan objects through a pipeline cache seeded with
// seed and returns the cache's data.
func (p *pipeline) build(m *spirv.Module, seed []byte) ([]byte, error) {
	d := p.d
	cache, err := d.vk.CreatePipelineCache(seed)
	if err != nil && seed != nil {
		// The driver refused a blob whose header named this device; start empty.
		cache, err = d.vk.CreatePipelineCache(nil)
	}
	if err != nil {
		return nil, d.fail("pipeline cache creation", err)
	}
	defer d.vk.DestroyPipelineCache(cache)
	module, err := d.vk.CreateShaderModule(m.Words)
	if err != nil {
		return nil, d.fail("shader module creation", err)
	}
	defer d.vk.DestroyShaderModule(module)
	fail := func(op string, err error) ([]byte, error) {
		p.destroy()
		return nil, d.fail(op, err)
	}
	if p.setLayout, err = d.vk.CreateStorageSetLayout(p.setBindings()); err != nil {
		return fail("descriptor set layout creation", err)
	}
	if p.layout, err = d.vk.CreatePipelineLayout(p.setLayout, p.push); err != nil {
		return fail("pipeline layout creation", err)
	}
	if p.pipe, err = d.vk.CreateComputePipeline(cache, p.layout, module, m.EntryPoint, nil, nil, p.sg); err != nil {
		return fail(fmt.Sprintf("compiling program %q", p.prog.Name), err)
	}
	blob, err := d.vk.PipelineCacheData(cache)
	if err != nil {
		return fail("reading the pipeline cache", err)
	}
	return blob, nil
}

// cacheHeaderBytes is the size of VkPipelineCacheHeaderVersionOne.
const cacheHeaderBytes = 32

// usableBlob returns blob when its VkPipelineCacheHeaderVersionOne names this
// device (header size, version one, vendor id, device id, pipelineCacheUUID), nil
// otherwise: a blob from another device or driver is ignored.
func usableBlob(blob []byte, p vk.Properties) []byte {
	if len(blob) < cacheHeaderBytes {
		return nil
	}
	size := binary.LittleEndian.Uint32(blob[0:])
	version := binary.LittleEndian.Uint32(blob[4:])
	if size < cacheHeaderBytes || uint64(size) > uint64(len(blob)) || version != 1 {
		return nil
	}
	if binary.LittleEndian.Uint32(blob[8:]) != p.VendorID || binary.LittleEndian.Uint32(blob[12:]) != p.DeviceID {
		return nil
	}
	if !bytes.Equal(blob[16:32], p.PipelineCacheUUID[:]) {
		return nil
	}
	return blob
}

// checkLimits checks the program, with the workgroup override, against the
// device's limits (the SDK checked the rest: pluginapi.CheckCompile). It
// returns the workgroup size the pipeline runs with.
func checkLimits(p *ir.Program, override [3]uint32, lim vk.Limits) ([3]uint32, error) {
	return gpukit.CheckLimits(ID, p, override, gpukit.ProgramLimits{
		Workgroup: lim.MaxComputeWorkGroupSize, WorkgroupName: "maxComputeWorkGroupSize",
		Invocations: lim.MaxComputeWorkGroupInvocations, InvocationsText: "maxComputeWorkGroupInvocations %d",
		SharedBytes: lim.MaxComputeSharedMemorySize, SharedText: "maxComputeSharedMemorySize %d",
	})
}
