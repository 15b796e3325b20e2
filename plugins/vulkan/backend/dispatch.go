package backend

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// binding is one buffer of a protocol-1 dispatch.
type binding struct {
	gpukit.Binding
	// dev is the scratch span the shader sees; staging its host-visible copy on
	// devices that stage (zero when nothing crosses).
	dev, staging span
}

// Dispatch runs a pipeline once and returns its write and read_write buffers: a
// job over scratch spans of the device's heaps (see docs/design.md, "Vulkan").
func (b *Backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	start := time.Now()
	b.life.RLock()
	p, err := gpukit.DispatchPipeline(ID, &b.pipelines, req.Pipeline, (*pipeline).hold)
	if err != nil {
		b.life.RUnlock()
		return nil, err
	}
	d := p.d
	j := &job{d: d, pipelines: []*pipeline{p}, life: &b.life}
	binds, err := p.bindings(req)
	if err == nil && req.Grid[0] != 0 && req.Grid[1] != 0 && req.Grid[2] != 0 {
		err = p.checkLaunches(req.Grid)
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
		return &pluginapi.DispatchResult{Outputs: gpukit.UnchangedOutputs(binds), HostNanos: time.Since(start).Nanoseconds()}, nil
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
		if !bd.Decl.Access.IsOutput() {
			continue
		}
		out := make([]byte, bd.Bytes())
		if bd.Count > 0 {
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
		o.counts[i] = bd.Count
		if bd.Count == 0 {
			continue
		}
		// A span holds whole 4-byte words (fills and copies work on words);
		// an odd count of 2-byte elements leaves 2 bytes of padding.
		size := (bd.Bytes() + 3) &^ 3
		var err error
		if bd.dev, err = heap.alloc(size); err != nil {
			return d.fail(fmt.Sprintf("allocating the buffers of program %q", p.prog.Name), err)
		}
		j.scratch = append(j.scratch, bd.dev)
		o.binds[i] = bd.dev
		if bd.dev.isMapped() {
			mem := bd.dev.bytes()
			if bd.ReadsInput() {
				copy(mem, bd.Input)
			} else {
				clear(mem)
			}
			if err := bd.dev.flush(); err != nil {
				return d.fail("writing inputs", err)
			}
			continue
		}
		if bd.Decl.Access == ir.Write {
			j.ops = append(j.ops, op{kind: opFill, dst: bd.dev})
		}
		if !bd.ReadsInput() && !bd.Decl.Access.IsOutput() {
			continue
		}
		if seg, segRes, ok := b.segmentView(d, bd.Input); ok && !bd.Decl.Access.IsOutput() {
			// The input is in an imported segment: the device copies it itself.
			j.residents = append(j.residents, segRes)
			j.ops = append(j.ops, op{kind: opCopy, src: seg, dst: bd.dev})
			continue
		}
		if bd.staging, err = d.staging.alloc(size); err != nil {
			return d.fail("allocating staging memory", err)
		}
		j.scratch = append(j.scratch, bd.staging)
		if bd.ReadsInput() {
			copy(bd.staging.bytes(), bd.Input)
			if err := bd.staging.flush(); err != nil {
				return d.fail("writing inputs", err)
			}
			j.ops = append(j.ops, op{kind: opCopy, src: bd.staging, dst: bd.dev})
		}
		if bd.Decl.Access.IsOutput() {
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

// bindings sizes every binding of a launch the SDK checked
// (pluginapi.CheckLaunch) and checks each against the device's binding limit.
func (p *pipeline) bindings(req *pluginapi.DispatchRequest) ([]*binding, error) {
	lim := gpukit.BindingLimit{Adapter: p.d.a.index, Bytes: p.d.a.bindingLimit(), Text: "adapter %d binds (maxStorageBufferRange %d, no buffer device addresses)"}
	return gpukit.SizeBindings(ID, p.prog, req, lim, func(s gpukit.Binding) *binding { return &binding{Binding: s} })
}

// checkGrid rejects grids the device cannot launch: more than 2^32 invocations on an
// axis (global_id is a u32; the SDK checks that for Dispatch but not for a
// batch's dispatches) or, when the grid runs at all, what checkLaunches
// rejects (a grid beyond maxComputeWorkGroupCount runs as several launches; see
// dispatchGrid).
func (p *pipeline) checkGrid(grid [3]uint32) error {
	if err := gpukit.CheckGridInvocations(ID, p.prog.Name, grid, p.wg); err != nil {
		return err
	}
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return nil
	}
	return p.checkLaunches(grid)
}
