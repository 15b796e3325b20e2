package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// binding is one buffer of a dispatch.
type binding struct {
	decl  ir.BufferDecl
	count uint32
	input []byte
	// dev is the buffer the shader sees; staging is its host-visible copy on
	// devices that stage (nil when nothing crosses).
	dev, staging *buffer
}

// size is the buffer's bound size: count*4 bytes, and 4 for an empty buffer, since
// Vulkan has no empty buffers.
func (bd *binding) size() uint64 { return max(uint64(bd.count)*4, 4) }

// readsInput reports whether the dispatch uploads the binding's input.
func (bd *binding) readsInput() bool { return bd.decl.Access.Readable() && bd.count > 0 }

// Dispatch runs a pipeline once and returns its write and read_write buffers.
func (b *Backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	start := time.Now()
	b.life.RLock()
	handedOff := false
	defer func() {
		if !handedOff {
			b.life.RUnlock()
		}
	}()
	if req == nil {
		return nil, pluginapi.Rejected("vulkan: dispatch without a request. Fix: pass a DispatchRequest")
	}
	b.mu.Lock()
	p, ok := b.pipelines[req.Pipeline]
	if ok {
		p.use.RLock()
	}
	b.mu.Unlock()
	if !ok {
		return nil, pluginapi.Rejected("vulkan has no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", req.Pipeline)
	}
	defer func() {
		if !handedOff {
			p.use.RUnlock()
		}
	}()
	binds, err := p.bindings(req)
	if err != nil {
		return nil, err
	}
	if err := ir.CheckUniforms(p.prog, req.Uniforms); err != nil {
		return nil, pluginapi.Rejected("vulkan: %w", err)
	}
	if err := p.checkGrid(req.Grid); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vulkan: program %q not dispatched: %w", p.prog.Name, err)
	}
	if req.Grid[0] == 0 || req.Grid[1] == 0 || req.Grid[2] == 0 {
		return &pluginapi.DispatchResult{Outputs: unchangedOutputs(binds), HostNanos: time.Since(start).Nanoseconds()}, nil
	}
	d := p.d
	d.mu.Lock()
	if err := d.checkLost(); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	j := &job{p: p, d: d, binds: binds, uniforms: req.Uniforms}
	res, err := j.run(ctx, req.Grid)
	if errors.Is(err, errAbandoned) {
		// The device is still running the work: a goroutine waits for it, frees it
		// and then lets the device, the pipeline and Close go on.
		handedOff = true
		go func() {
			j.sub.wait()
			j.free()
			d.mu.Unlock()
			p.use.RUnlock()
			b.life.RUnlock()
		}()
		return nil, fmt.Errorf("vulkan: program %q: stopped waiting for the device: %w", p.prog.Name, context.Cause(ctx))
	}
	j.free()
	d.mu.Unlock()
	b.noteValidation()
	if err != nil {
		return nil, err
	}
	res.HostNanos = time.Since(start).Nanoseconds()
	return res, nil
}

// bindings checks the launch's buffers the way the CPU reference does and sizes
// every binding.
func (p *pipeline) bindings(req *pluginapi.DispatchRequest) ([]*binding, error) {
	prog := p.prog
	if len(req.Inputs) > len(prog.Buffers) {
		return nil, pluginapi.Rejected("vulkan: program %q has %d buffers but the dispatch gives %d inputs. Fix: pass one input per binding (nil for write buffers)",
			prog.Name, len(prog.Buffers), len(req.Inputs))
	}
	maxBytes := uint64(p.d.a.props.Limits.MaxStorageBufferRange)
	binds := make([]*binding, len(prog.Buffers))
	for i, decl := range prog.Buffers {
		bd := &binding{decl: decl}
		if i < len(req.Inputs) {
			bd.input = req.Inputs[i]
		}
		switch {
		case decl.Access == ir.Write && len(bd.input) != 0:
			return nil, pluginapi.Rejected("vulkan: program %q: buffer %q (binding %d) is write-only but got %d input bytes. Fix: pass nil for write buffers and size them with OutputCounts",
				prog.Name, decl.Name, decl.Binding, len(bd.input))
		case decl.Access == ir.Write:
			bd.count = decl.Count
			if bd.count == 0 && i < len(req.OutputCounts) {
				bd.count = req.OutputCounts[i]
			}
		case len(bd.input)%4 != 0:
			return nil, pluginapi.Rejected("vulkan: program %q: input of buffer %q (binding %d) is %d bytes, not a multiple of 4. Fix: pass whole 4-byte %s elements",
				prog.Name, decl.Name, decl.Binding, len(bd.input), decl.Type)
		case decl.Count != 0 && uint64(len(bd.input)) != uint64(decl.Count)*4:
			return nil, pluginapi.Rejected("vulkan: program %q: buffer %q (binding %d) holds exactly %d elements but its input is %d bytes. Fix: pass %d bytes",
				prog.Name, decl.Name, decl.Binding, decl.Count, len(bd.input), uint64(decl.Count)*4)
		case uint64(len(bd.input))/4 > math.MaxUint32:
			return nil, pluginapi.Rejected("vulkan: program %q: input of buffer %q (binding %d) has %d elements, more than a u32 len. Fix: split the work into smaller buffers",
				prog.Name, decl.Name, decl.Binding, len(bd.input)/4)
		default:
			bd.count = uint32(len(bd.input) / 4)
		}
		if bytes := uint64(bd.count) * 4; bytes > maxBytes {
			return nil, pluginapi.Rejected("vulkan: program %q: buffer %q (binding %d) has %d bytes, more than adapter %d's maxStorageBufferRange of %d. Fix: split the work into buffers of at most %d elements",
				prog.Name, decl.Name, decl.Binding, bytes, p.d.a.index, maxBytes, maxBytes/4)
		}
		binds[i] = bd
	}
	return binds, nil
}

// checkGrid rejects grids the device cannot launch: more than 2^32 invocations on an
// axis (global_id is a u32) or, when the grid runs at all, more launches than
// maxLaunches (a grid beyond maxComputeWorkGroupCount runs as several launches;
// see dispatchGrid).
func (p *pipeline) checkGrid(grid [3]uint32) error {
	for axis, g := range grid {
		if uint64(g)*uint64(p.wg[axis]) > math.MaxUint32+1 {
			return pluginapi.Rejected("vulkan: program %q: grid %v with workgroup size %v gives more than 2^32 invocations on axis %d, beyond a u32 global_id. Fix: use a smaller grid",
				p.prog.Name, grid, p.wg, axis)
		}
	}
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return nil
	}
	return p.checkLaunches(grid)
}

// unchangedOutputs is the result of a dispatch that runs nothing: write buffers
// zero-filled, read_write buffers as given.
func unchangedOutputs(binds []*binding) [][]byte {
	var outs [][]byte
	for _, bd := range binds {
		switch bd.decl.Access {
		case ir.Write:
			outs = append(outs, make([]byte, uint64(bd.count)*4))
		case ir.ReadWrite:
			outs = append(outs, append(make([]byte, 0, len(bd.input)), bd.input...))
		}
	}
	return outs
}

// job is one dispatch's Vulkan objects.
type job struct {
	p        *pipeline
	d        *device
	binds    []*binding
	uniforms []byte
	pool     vk.DescriptorPool
	sub      *submission
}

// free releases every object of the job; the device must be done with them.
func (j *job) free() {
	if j.sub != nil {
		j.sub.free()
	}
	j.d.vk.DestroyDescriptorPool(j.pool)
	for _, bd := range j.binds {
		j.d.freeBuffer(bd.dev)
		j.d.freeBuffer(bd.staging)
		bd.dev, bd.staging = nil, nil
	}
}

// run allocates and fills the buffers, records and submits the dispatch, waits for
// it and reads the outputs back. j.d.mu must be held.
func (j *job) run(ctx context.Context, grid [3]uint32) (*pluginapi.DispatchResult, error) {
	d, p := j.d, j.p
	if err := j.allocate(); err != nil {
		return nil, d.fail(fmt.Sprintf("allocating the buffers of program %q", p.prog.Name), err)
	}
	set, err := j.descriptorSet()
	if err != nil {
		return nil, d.fail("descriptor set creation", err)
	}
	nq := uint32(0)
	if d.a.timestamps {
		nq = 2
	}
	if j.sub, err = d.begin(nq); err != nil {
		return nil, d.fail("command buffer creation", err)
	}
	j.record(set, grid)
	if err := j.sub.run(ctx); err != nil {
		if errors.Is(err, errAbandoned) {
			return nil, err
		}
		return nil, d.fail(fmt.Sprintf("running program %q", p.prog.Name), err)
	}
	res := &pluginapi.DispatchResult{}
	for _, bd := range j.binds {
		if !bd.decl.Access.IsOutput() {
			continue
		}
		src := bd.dev
		if !d.direct {
			src = bd.staging
		}
		if err := d.invalidate(src); err != nil {
			return nil, d.fail("reading results", err)
		}
		out := make([]byte, uint64(bd.count)*4)
		copy(out, src.mapped)
		res.Outputs = append(res.Outputs, out)
	}
	if nq > 0 {
		ns, err := j.sub.elapsed(0)
		if err != nil {
			return nil, d.fail("reading timestamps", err)
		}
		res.DeviceNanos = int64(ns)
	}
	return res, nil
}

// allocate creates every binding's buffers and copies the inputs in.
func (j *job) allocate() error {
	d := j.d
	for _, bd := range j.binds {
		var err error
		if d.direct {
			if bd.dev, err = d.newBuffer(bd.size(), vk.UsageStorage|vk.UsageTransferDst, directPrefs); err != nil {
				return err
			}
			if bd.readsInput() {
				copy(bd.dev.mapped, bd.input)
				if err := d.flush(bd.dev); err != nil {
					return err
				}
			}
			continue
		}
		if bd.dev, err = d.newBuffer(bd.size(), vk.UsageStorage|vk.UsageTransferSrc|vk.UsageTransferDst, devicePrefs); err != nil {
			return err
		}
		if !bd.readsInput() && !bd.decl.Access.IsOutput() {
			continue
		}
		if bd.staging, err = d.newBuffer(bd.size(), vk.UsageTransferSrc|vk.UsageTransferDst, stagingPrefs); err != nil {
			return err
		}
		if bd.readsInput() {
			copy(bd.staging.mapped, bd.input)
			if err := d.flush(bd.staging); err != nil {
				return err
			}
		}
	}
	return nil
}

// descriptorSet creates the job's descriptor set: binding i is bytes [0, size) of
// buffer i.
func (j *job) descriptorSet() (vk.DescriptorSet, error) {
	d := j.d
	var err error
	if j.pool, err = d.vk.CreateStoragePool(uint32(len(j.binds))); err != nil {
		return 0, err
	}
	set, err := d.vk.AllocateSet(j.pool, j.p.setLayout)
	if err != nil {
		return 0, err
	}
	bufs := make([]vk.Buffer, len(j.binds))
	ranges := make([]uint64, len(j.binds))
	for i, bd := range j.binds {
		bufs[i], ranges[i] = bd.dev.buf, bd.size()
	}
	return set, d.vk.WriteStorageSet(set, bufs, ranges)
}

// record records uploads and clears, the dispatch between two timestamps, and the
// read-backs, with the barriers between them.
func (j *job) record(set vk.DescriptorSet, grid [3]uint32) {
	d, p, cb := j.d, j.p, j.sub.cb
	transfers := false
	for _, bd := range j.binds {
		switch {
		case bd.decl.Access == ir.Write:
			cb.FillBuffer(bd.dev.buf, bd.size(), 0)
			transfers = true
		case !d.direct && bd.readsInput():
			cb.CopyBuffer(bd.staging.buf, bd.dev.buf, uint64(bd.count)*4)
			transfers = true
		}
	}
	if transfers {
		cb.MemoryBarrier(vk.StageTransfer, vk.StageComputeShader, vk.AccessTransferWrite, vk.AccessShaderRead|vk.AccessShaderWrite)
	}
	if j.sub.nq > 0 {
		cb.WriteTimestamp(vk.StageBottomOfPipe, j.sub.queries, 0)
	}
	cb.BindCompute(p.pipe, p.layout, set)
	// The element counts, one u32 per buffer, the uniform block, then the grid
	// words of each launch: see docs/design.md, "Vulkan".
	push := make([]byte, p.push)
	for i, bd := range j.binds {
		binary.LittleEndian.PutUint32(push[4*i:], bd.count)
	}
	copy(push[p.uniforms:], j.uniforms)
	p.dispatchGrid(cb, push, grid)
	if j.sub.nq > 0 {
		cb.WriteTimestamp(vk.StageBottomOfPipe, j.sub.queries, 1)
	}
	if d.direct {
		cb.MemoryBarrier(vk.StageComputeShader, vk.StageHost, vk.AccessShaderWrite, vk.AccessHostRead)
		return
	}
	cb.MemoryBarrier(vk.StageComputeShader, vk.StageTransfer, vk.AccessShaderWrite, vk.AccessTransferRead)
	for _, bd := range j.binds {
		if bd.decl.Access.IsOutput() && bd.count > 0 {
			cb.CopyBuffer(bd.dev.buf, bd.staging.buf, uint64(bd.count)*4)
		}
	}
	cb.MemoryBarrier(vk.StageTransfer, vk.StageHost, vk.AccessTransferWrite, vk.AccessHostRead)
}
