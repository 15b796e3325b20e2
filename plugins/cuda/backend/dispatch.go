package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// binding is one buffer of a dispatch.
type binding struct {
	decl  ir.BufferDecl
	count uint32
	input []byte
	dev   *buffer
}

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
		return nil, pluginapi.Rejected("cuda: dispatch without a request. Fix: pass a DispatchRequest")
	}
	p, ok := b.pipelines.GetHeld(req.Pipeline, (*pipeline).hold)
	if !ok {
		return nil, pluginapi.Rejected("cuda has no pipeline %d (never compiled or already released). Fix: dispatch a handle returned by Compile", req.Pipeline)
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
		return nil, pluginapi.Rejected("cuda: %w", err)
	}
	if err := p.checkGrid(req.Grid); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cuda: program %q not dispatched: %w", p.prog.Name, err)
	}
	if req.Grid[0] == 0 || req.Grid[1] == 0 || req.Grid[2] == 0 {
		return &pluginapi.DispatchResult{Outputs: unchangedOutputs(binds), HostNanos: time.Since(start).Nanoseconds()}, nil
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
			if bd.readsInput() {
				b.pin(d, bd.input)
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

// bindings checks the launch's buffers the way the CPU reference does and sizes
// every binding.
func (p *pipeline) bindings(req *pluginapi.DispatchRequest) ([]*binding, error) {
	prog := p.prog
	if len(req.Inputs) > len(prog.Buffers) {
		return nil, pluginapi.Rejected("cuda: program %q has %d buffers but the dispatch gives %d inputs. Fix: pass one input per binding (nil for write buffers)",
			prog.Name, len(prog.Buffers), len(req.Inputs))
	}
	maxBytes := p.d.a.lim.maxBufferBytes()
	binds := make([]*binding, len(prog.Buffers))
	for i, decl := range prog.Buffers {
		bd := &binding{decl: decl}
		if i < len(req.Inputs) {
			bd.input = req.Inputs[i]
		}
		switch {
		case decl.Access == ir.Write && len(bd.input) != 0:
			return nil, pluginapi.Rejected("cuda: program %q: buffer %q (binding %d) is write-only but got %d input bytes. Fix: pass nil for write buffers and size them with OutputCounts",
				prog.Name, decl.Name, decl.Binding, len(bd.input))
		case decl.Access == ir.Write:
			bd.count = decl.Count
			if bd.count == 0 && i < len(req.OutputCounts) {
				bd.count = req.OutputCounts[i]
			}
		case len(bd.input)%4 != 0:
			return nil, pluginapi.Rejected("cuda: program %q: input of buffer %q (binding %d) is %d bytes, not a multiple of 4. Fix: pass whole 4-byte %s elements",
				prog.Name, decl.Name, decl.Binding, len(bd.input), decl.Type)
		case decl.Count != 0 && uint64(len(bd.input)) != uint64(decl.Count)*4:
			return nil, pluginapi.Rejected("cuda: program %q: buffer %q (binding %d) holds exactly %d elements but its input is %d bytes. Fix: pass %d bytes",
				prog.Name, decl.Name, decl.Binding, decl.Count, len(bd.input), uint64(decl.Count)*4)
		case uint64(len(bd.input))/4 > math.MaxUint32:
			return nil, pluginapi.Rejected("cuda: program %q: input of buffer %q (binding %d) has %d elements, more than a u32 len. Fix: split the work into smaller buffers",
				prog.Name, decl.Name, decl.Binding, len(bd.input)/4)
		default:
			bd.count = uint32(len(bd.input) / 4)
		}
		if bytes := uint64(bd.count) * 4; bytes > maxBytes {
			return nil, pluginapi.Rejected("cuda: program %q: buffer %q (binding %d) has %d bytes, more than adapter %d's %d. Fix: split the work into buffers of at most %d elements",
				prog.Name, decl.Name, decl.Binding, bytes, p.d.a.index, maxBytes, maxBytes/4)
		}
		binds[i] = bd
	}
	return binds, nil
}

// checkGrid rejects grids the device cannot launch: more than 2^32 invocations on
// an axis (global_id is a u32) or, when the grid runs at all, more blocks than the
// device's maximum grid dimensions.
func (p *pipeline) checkGrid(grid [3]uint32) error {
	wg := p.mod.WorkgroupSize
	for axis, g := range grid {
		if uint64(g)*uint64(wg[axis]) > math.MaxUint32+1 {
			return pluginapi.Rejected("cuda: program %q: grid %v with workgroup size %v gives more than 2^32 invocations on axis %d, beyond a u32 global_id. Fix: use a smaller grid",
				p.prog.Name, grid, wg, axis)
		}
	}
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

// setArgs fills the kernel's parameters: each buffer's address and count, and
// each uniform's 32 bits from the uniform block.
func (p *pipeline) setArgs(binds []*binding, uniforms []byte) {
	for i, prm := range p.mod.Params {
		switch prm.Kind {
		case ptx.BufferPointer:
			p.args.Set(i, uint64(binds[prm.Binding].dev.ptr))
		case ptx.ElementCount:
			p.args.Set(i, uint64(binds[prm.Binding].count))
		case ptx.UniformValue:
			p.args.Set(i, uint64(binary.LittleEndian.Uint32(uniforms[4*prm.Binding:])))
		}
	}
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
			if bd.dev, err = d.alloc(uint64(bd.count) * 4); err != nil {
				return d.fail(fmt.Sprintf("allocating buffer %q of program %q", bd.decl.Name, p.prog.Name), err)
			}
		}
		for _, bd := range binds {
			var err error
			switch {
			case bd.decl.Access == ir.Write:
				err = c.MemsetD32Async(bd.dev.ptr, 0, uint64(bd.count), d.stream)
			case bd.readsInput():
				err = c.MemcpyHtoDAsync(bd.dev.ptr, bd.input, d.stream)
			}
			if err != nil {
				return d.fail(fmt.Sprintf("uploading buffer %q", bd.decl.Name), err)
			}
		}
		p.setArgs(binds, uniforms)
		if err := c.EventRecord(d.start, d.stream); err != nil {
			return d.fail("recording the start event", err)
		}
		if err := c.Launch(p.fn, grid, p.mod.WorkgroupSize, d.stream, p.args); err != nil {
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
			if !bd.decl.Access.IsOutput() {
				continue
			}
			out := make([]byte, uint64(bd.count)*4)
			if err := c.MemcpyDtoHAsync(out, bd.dev.ptr, d.stream); err != nil {
				return d.fail(fmt.Sprintf("reading buffer %q back", bd.decl.Name), err)
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
