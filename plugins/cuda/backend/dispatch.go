package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// binding is one buffer of a dispatch.
type binding struct {
	gpukit.Binding
	dev *buffer
}

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
	p, err := gpukit.DispatchPipeline(ID, &b.pipelines, req.Pipeline, (*pipeline).hold)
	if err != nil {
		return nil, err
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
	if err := p.checkGridDimensions(req.Grid); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cuda: program %q not dispatched: %w", p.prog.Name, err)
	}
	if req.Grid[0] == 0 || req.Grid[1] == 0 || req.Grid[2] == 0 {
		return &pluginapi.DispatchResult{Outputs: gpukit.UnchangedOutputs(binds), HostNanos: time.Since(start).Nanoseconds()}, nil
	}
	d := p.d
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	if err := d.checkLost(); err != nil {
		d.release()
		return nil, err
	}
	// Inputs staged in a shared-memory segment are uploaded by DMA.
	_ = d.ctx.Do(func() error {
		for _, bd := range binds {
			if bd.ReadsInput() {
				b.pin(d, bd.Input)
			}
		}
		return nil
	})
	res, err := p.run(ctx, req.Grid, binds, req.Uniforms)
	if ab, ok := isAbandoned(err); ok {
		// The device still runs the kernel: a goroutine waits for it, frees the
		// buffers and then lets the device, the pipeline and Close go on.
		handedOff = true
		go func() {
			<-ab.done
			_ = d.ctx.Do(func() error { d.free(bufferList(binds)...); return nil })
			d.release()
			p.use.RUnlock()
			b.life.RUnlock()
		}()
		return nil, fmt.Errorf("cuda: program %q: %w", p.prog.Name, err)
	}
	_ = d.ctx.Do(func() error { d.free(bufferList(binds)...); return nil })
	d.release()
	if err != nil {
		return nil, err
	}
	res.HostNanos = time.Since(start).Nanoseconds()
	return res, nil
}

func bufferList(binds []*binding) []*buffer {
	out := make([]*buffer, 0, len(binds))
	for _, bd := range binds {
		out = append(out, bd.dev)
	}
	return out
}

// bindings sizes every binding of a launch the SDK checked
// (pluginapi.CheckLaunch) and checks each against the device's largest buffer.
func (p *pipeline) bindings(req *pluginapi.DispatchRequest) ([]*binding, error) {
	lim := gpukit.BindingLimit{Adapter: p.d.a.index, Bytes: p.d.a.lim.maxBufferBytes(), Text: "adapter %d's %d"}
	return gpukit.SizeBindings(ID, p.prog, req, lim, func(s gpukit.Binding) *binding { return &binding{Binding: s} })
}

// checkGrid rejects grids the device cannot launch: more than 2^32 invocations on
// an axis (global_id is a u32; the SDK checks that for Dispatch but not for a
// batch's dispatches) or what checkGridDimensions rejects.
func (p *pipeline) checkGrid(grid [3]uint32) error {
	if err := gpukit.CheckGridInvocations(ID, p.prog.Name, grid, p.mod.WorkgroupSize); err != nil {
		return err
	}
	return p.checkGridDimensions(grid)
}

// checkGridDimensions rejects, when the grid runs at all, more blocks than the
// device's maximum grid dimensions.
func (p *pipeline) checkGridDimensions(grid [3]uint32) error {
	if grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
		return nil
	}
	limit := p.d.a.lim.maxGrid
	for axis, g := range grid {
		if g > limit[axis] {
			return pluginapi.Rejected("cuda: program %q: grid %v exceeds adapter %d's maximum grid dimensions %v on axis %d. Fix: launch at most %d workgroups on that axis (give each invocation more elements, or use axis 0)",
				p.prog.Name, grid, p.d.a.index, limit, axis, limit[axis])
		}
	}
	return nil
}

// setArgs fills the kernel's parameters: each buffer's address and count, each
// uniform's 32 bits from the uniform block, and the tensor maps encoded from
// them (or the flag that tells the kernel it has none). Every launch of a
// kernel with tensor maps must come after it: maps left from an earlier launch
// would copy from that launch's buffers.
func (p *pipeline) setArgs(binds []*binding, uniforms []byte) {
	for i, prm := range p.mod.Params {
		switch prm.Kind {
		case ptx.BufferPointer:
			p.args.Set(i, uint64(binds[prm.Binding].dev.ptr))
		case ptx.ElementCount:
			p.args.Set(i, uint64(binds[prm.Binding].Count))
		case ptx.UniformValue:
			p.args.Set(i, uint64(binary.LittleEndian.Uint32(uniforms[4*prm.Binding:])))
		}
	}
	p.tmaps.fill(p.mod, p.args, p.d.ctx.EncodeTensorMap)
}

// run allocates the buffers, uploads the inputs, zero-fills the write buffers,
// launches the kernel (with the uniforms, checked by the caller, as parameters)
// between the two timing events, waits for it and reads the
// outputs back. The device's stream must be held; the caller frees the buffers.
func (p *pipeline) run(ctx context.Context, grid [3]uint32, binds []*binding, uniforms []byte) (*pluginapi.DispatchResult, error) {
	d := p.d
	c := d.ctx
	err := c.Do(func() error {
		for _, bd := range binds {
			var err error
			if bd.dev, err = d.alloc(bd.Bytes()); err != nil {
				return d.fail(fmt.Sprintf("allocating buffer %q of program %q", bd.Decl.Name, p.prog.Name), err)
			}
		}
		for _, bd := range binds {
			var err error
			switch {
			case bd.Decl.Access == ir.Write:
				// Whole words: an allocation's size class is a multiple of 4.
				err = c.MemsetD32Async(bd.dev.ptr, 0, (bd.Bytes()+3)/4, d.stream)
			case bd.ReadsInput():
				err = c.MemcpyHtoDAsync(bd.dev.ptr, bd.Input, d.stream)
			}
			if err != nil {
				return d.fail(fmt.Sprintf("uploading buffer %q", bd.Decl.Name), err)
			}
		}
		p.setArgs(binds, uniforms)
		if err := c.EventRecord(d.start, d.stream); err != nil {
			return d.fail("recording the start event", err)
		}
		if err := c.Launch(p.fn, grid, p.mod.WorkgroupSize, p.mod.DynamicSharedBytes, d.stream, p.args); err != nil {
			return d.fail(fmt.Sprintf("launching program %q", p.prog.Name), err)
		}
		if err := c.EventRecord(d.end, d.stream); err != nil {
			return d.fail("recording the end event", err)
		}
		return nil
	})
	if err != nil {
		// Whatever was enqueued must finish before the buffers are freed.
		_ = c.Do(func() error { return c.StreamSynchronize(d.stream) })
		return nil, err
	}
	if err := d.wait(ctx, d.end); err != nil {
		if _, ok := isAbandoned(err); ok {
			return nil, err
		}
		return nil, d.fail(fmt.Sprintf("running program %q", p.prog.Name), err)
	}
	res := &pluginapi.DispatchResult{}
	err = c.Do(func() error {
		for _, bd := range binds {
			if !bd.Decl.Access.IsOutput() {
				continue
			}
			out := make([]byte, bd.Bytes())
			if err := c.MemcpyDtoHAsync(out, bd.dev.ptr, d.stream); err != nil {
				return d.fail(fmt.Sprintf("reading buffer %q back", bd.Decl.Name), err)
			}
			res.Outputs = append(res.Outputs, out)
		}
		if err := c.StreamSynchronize(d.stream); err != nil {
			return d.fail("reading results", err)
		}
		ms, err := c.EventElapsed(d.start, d.end)
		if err != nil {
			return d.fail("reading the timing events", err)
		}
		res.DeviceNanos = int64(float64(ms) * 1e6)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
