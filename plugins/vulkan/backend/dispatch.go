package backend

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// binding is one buffer of a protocol-1 dispatch.
type binding struct {
	decl  ir.BufferDecl
	count uint32
	input []byte
	// dev is the scratch span the shader sees; staging its host-visible copy on
	// devices that stage (zero when nothing crosses).
	dev, staging span
}

// readsInput reports whether the dispatch uploads the binding's input.
func (bd *binding) readsInput() bool { return bd.decl.Access.Readable() && bd.count > 0 }

// Dispatch runs a pipeline once and returns its write and read_write buffers: a
// job over scratch spans of the device's heaps (see docs/design.md, "Vulkan").
func (b *Backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	start := time.Now()
	b.life.RLock()
	if req == nil {
		b.life.RUnlock()
		return nil, pluginapi.Rejected("vulkan: dispatch without a request. Fix: pass a DispatchRequest")
	}
	p, ok := b.pipelines.GetHeld(req.Pipeline, (*pipeline).hold)
	if !ok {
		b.life.RUnlock()
		return nil, pluginapi.Rejected("vulkan has no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", req.Pipeline)
	}
	d := p.d
	j := &job{d: d, pipelines: []*pipeline{p}, life: &b.life}
	binds, err := p.bindings(req)
	if err == nil {
		if err = ir.CheckUniforms(p.prog, req.Uniforms); err != nil {
			err = pluginapi.Rejected("vulkan: %w", err)
		}
	}
	if err == nil {
		err = p.checkGrid(req.Grid)
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("vulkan: program %q not dispatched: %w", p.prog.Name, ctx.Err())
	}
	if err == nil {
		err = d.checkLost()
	}
	if err != nil {
		j.finish()
		return nil, err
	}
	if req.Grid[0] == 0 || req.Grid[1] == 0 || req.Grid[2] == 0 {
		j.finish()
		return &pluginapi.DispatchResult{Outputs: unchangedOutputs(binds), HostNanos: time.Since(start).Nanoseconds()}, nil
	}
	if err := j.stage(b, binds, req); err != nil {
		j.finish()
		return nil, err
	}
	// The outputs are read after the job's fence, before its scratch is freed.
	keep := j.scratch
	j.scratch = nil
	ns, err := j.run(ctx, fmt.Sprintf("running program %q", p.prog.Name))
	if err != nil {
		b.freeSpansLater(d, keep, j.seq)
		return nil, err
	}
	res := &pluginapi.DispatchResult{DeviceNanos: ns}
	for _, bd := range binds {
		if !bd.decl.Access.IsOutput() {
			continue
		}
		out := make([]byte, uint64(bd.count)*4)
		if bd.count > 0 {
			src := bd.dev
			if !src.isMapped() {
				src = bd.staging
			}
			if err := src.invalidate(); err != nil {
				b.freeSpans(keep)
				return nil, d.fail("reading results", err)
			}
			copy(out, src.bytes())
		}
		res.Outputs = append(res.Outputs, out)
	}
	b.freeSpans(keep)
	b.noteValidation()
	res.HostNanos = time.Since(start).Nanoseconds()
	return res, nil
}

// stage takes scratch spans for the bindings, writes the inputs (in place, or
// into staging spans, or copies them straight from an imported data-plane
// segment) and builds the job's ops: uploads and clears, the dispatch,
// read-backs.
func (j *job) stage(b *Backend, binds []*binding, req *pluginapi.DispatchRequest) error {
	d, p := j.d, j.pipelines[0]
	o := op{kind: opDispatch, p: p, grid: req.Grid, uniforms: req.Uniforms,
		binds: make([]span, len(binds)), counts: make([]uint32, len(binds))}
	var after []op
	heap := d.heapFor()
	for i, bd := range binds {
		o.counts[i] = bd.count
		if bd.count == 0 {
			continue
		}
		size := uint64(bd.count) * 4
		var err error
		if bd.dev, err = heap.alloc(size); err != nil {
			return d.fail(fmt.Sprintf("allocating the buffers of program %q", p.prog.Name), err)
		}
		j.scratch = append(j.scratch, bd.dev)
		o.binds[i] = bd.dev
		if bd.dev.isMapped() {
			mem := bd.dev.bytes()
			if bd.readsInput() {
				copy(mem, bd.input)
			} else {
				clear(mem)
			}
			if err := bd.dev.flush(); err != nil {
				return d.fail("writing inputs", err)
			}
			continue
		}
		if bd.decl.Access == ir.Write {
			j.ops = append(j.ops, op{kind: opFill, dst: bd.dev})
		}
		if !bd.readsInput() && !bd.decl.Access.IsOutput() {
			continue
		}
		if seg, segRes, ok := b.segmentView(d, bd.input); ok && !bd.decl.Access.IsOutput() {
			// The input is in an imported segment: the device copies it itself.
			j.residents = append(j.residents, segRes)
			j.ops = append(j.ops, op{kind: opCopy, src: seg, dst: bd.dev})
			continue
		}
		if bd.staging, err = d.staging.alloc(size); err != nil {
			return d.fail("allocating staging memory", err)
		}
		j.scratch = append(j.scratch, bd.staging)
		if bd.readsInput() {
			copy(bd.staging.bytes(), bd.input)
			if err := bd.staging.flush(); err != nil {
				return d.fail("writing inputs", err)
			}
			j.ops = append(j.ops, op{kind: opCopy, src: bd.staging, dst: bd.dev})
		}
		if bd.decl.Access.IsOutput() {
			after = append(after, op{kind: opCopy, src: bd.dev, dst: bd.staging})
		}
	}
	var err error
	if o.p, err = p.forCounts(o.counts); err != nil {
		return err
	}
	if err := j.guardFor(&o); err != nil {
		return err
	}
	j.ops = append(j.ops, o)
	// The device time is the dispatch's, not its uploads' and read-backs'.
	j.timeOp = len(j.ops)
	j.ops = append(j.ops, after...)
	j.guardReadBack()
	return nil
}

// freeSpans returns spans the device is done with to their heaps.
func (b *Backend) freeSpans(spans []span) {
	for _, s := range spans {
		s.b.h.free(s)
	}
}

// freeSpansLater frees spans once job seq has finished (at once when it was
// never submitted).
func (b *Backend) freeSpansLater(d *device, spans []span, seq uint64) {
	for _, s := range spans {
		b.freeLater(d, s, seq)
	}
}

// bindings checks the launch's buffers the way the CPU reference does and sizes
// every binding.
func (p *pipeline) bindings(req *pluginapi.DispatchRequest) ([]*binding, error) {
	prog := p.prog
	if len(req.Inputs) > len(prog.Buffers) {
		return nil, pluginapi.Rejected("vulkan: program %q has %d buffers but the dispatch gives %d inputs. Fix: pass one input per binding (nil for write buffers)",
			prog.Name, len(prog.Buffers), len(req.Inputs))
	}
	maxBytes := p.d.a.bindingLimit()
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
			return nil, pluginapi.Rejected("vulkan: program %q: buffer %q (binding %d) has %d bytes, more than adapter %d binds (maxStorageBufferRange %d, no buffer device addresses). Fix: split the work into buffers of at most %d elements",
				prog.Name, decl.Name, decl.Binding, bytes, p.d.a.index, maxBytes, maxBytes/4)
		}
		binds[i] = bd
	}
	return binds, nil
}

// checkGrid rejects grids the device cannot launch: more than 2^32 invocations on an
// axis (global_id is a u32) or, when the grid runs at all, what checkLaunches
// rejects (a grid beyond maxComputeWorkGroupCount runs as several launches; see
// dispatchGrid).
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
