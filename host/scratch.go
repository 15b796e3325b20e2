package host

import (
	"bytes"
	"context"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/pluginapi"
)

// dispatchOn runs a v1 dispatch on proc: through scratch buffers and one submit
// when the plugin keeps buffers (so the bytes cross through shared memory once
// each way), else inline (client.Conn.DispatchSized: shared memory when the
// plugin has the data plane, gRPC messages otherwise).
// limit is the receive limit of an inline response over gRPC.
//
// spans are the plugin's timed phases (empty unless the host traces).
func (b *Backend) dispatchOn(ctx context.Context, proc *process, pl *Pipeline, req *pluginapi.DispatchRequest, sizes []int, limit int) (res *pluginapi.DispatchResult, spans []pluginapi.Span, err error) {
	var in int64
	for _, d := range req.Inputs {
		in += int64(len(d))
	}
	// A plugin that starts dispatches on its data plane gets a small one as
	// one request (see client.SmallDispatch); others that keep buffers get
	// it as a submit over scratch buffers.
	if caps := b.p.capsOf(proc); caps.Resident() && !(caps.PipelinedDispatch && caps.SharedMemory && client.SmallDispatch(req, sizes)) {
		return b.dispatchResident(ctx, proc, pl, req, in)
	}
	var sized *client.DispatchResult
	err = b.callConn(ctx, proc, "dispatch", pl.prog.Name, func(ctx context.Context, conn *client.Conn) error {
		var err error
		sized, err = conn.DispatchSized(client.WithReceiveLimit(ctx, limit), req, sizes)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	b.p.v2.toPlugin.Add(in)
	for _, o := range sized.Outputs {
		b.p.v2.fromPlugin.Add(int64(len(o)))
	}
	return &sized.DispatchResult, sized.Spans, nil
}

// scratchBuffer is a buffer the v1 API dispatches through.
type scratchBuffer struct {
	handle uint64
	size   uint64
	mem    []byte // the host's mapping, nil when not mapped
}

// Scratch policy: free scratch buffers kept per plugin process.
const (
	maxScratchBuffers = 8
	maxScratchBytes   = 512 << 20
)

// takeScratch returns a free scratch buffer of at least size bytes on proc, or
// allocates one.
func (b *Backend) takeScratch(ctx context.Context, conn *client.Conn, proc *process, size uint64) (*scratchBuffer, error) {
	size = max(size, pluginapi.ElementBytes)
	v := &b.p.v2
	v.mu.Lock()
	if v.scratchProc != proc {
		v.scratch, v.scratchProc = nil, proc // the old process took its buffers with it
	}
	best := -1
	for i, s := range v.scratch {
		if s.size >= size && (best < 0 || s.size < v.scratch[best].size) {
			best = i
		}
	}
	if best >= 0 {
		s := v.scratch[best]
		v.scratch = append(v.scratch[:best], v.scratch[best+1:]...)
		v.mu.Unlock()
		return s, nil
	}
	v.mu.Unlock()
	res, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Adapter: b.adapter.Index, Size: size, Usage: pluginapi.UsageStorage | pluginapi.UsageMap})
	if err != nil {
		return nil, err
	}
	return &scratchBuffer{handle: res.Buffer, size: size, mem: conn.Mapping(res.Buffer)}, nil
}

// putScratch returns scratch buffers to proc's pool, freeing those beyond the
// policy.
func (b *Backend) putScratch(ctx context.Context, conn *client.Conn, proc *process, bufs []*scratchBuffer) {
	v := &b.p.v2
	var free []*scratchBuffer
	v.mu.Lock()
	if v.scratchProc != proc {
		free = bufs
	} else {
		for _, s := range bufs {
			total := s.size
			for _, o := range v.scratch {
				total += o.size
			}
			if len(v.scratch) >= maxScratchBuffers || total > maxScratchBytes {
				free = append(free, s)
				continue
			}
			v.scratch = append(v.scratch, s)
		}
	}
	v.mu.Unlock()
	for _, s := range free {
		if err := conn.FreeBuffer(ctx, s.handle); err != nil {
			b.p.log.Debug("freeing a scratch buffer failed", "error", err)
		}
	}
}

// dropScratch frees scratch buffers in the background, off the caller's time,
// under the host's context (which Close ends, as does the plane's closing): the
// frees follow every request sent before them, so the plugin runs them after a
// submit that may still use the buffers.
func (b *Backend) dropScratch(conn *client.Conn, bufs []*scratchBuffer) {
	if len(bufs) == 0 {
		return
	}
	p := b.p
	go func() {
		for _, s := range bufs {
			if err := conn.FreeBuffer(p.set.ctx, s.handle); err != nil {
				p.log.Debug("freeing a scratch buffer of a failed dispatch failed", "error", err)
			}
		}
	}()
}

// dispatchResident runs a v1 dispatch on a plugin that keeps buffers: inputs go
// into scratch buffers (in place when mapped), write buffers are zeroed, one
// submit runs the pipeline, and the outputs are read back.
func (b *Backend) dispatchResident(ctx context.Context, proc *process, pl *Pipeline, req *pluginapi.DispatchRequest, in int64) (*pluginapi.DispatchResult, []pluginapi.Span, error) {
	prog := pl.prog
	n := len(prog.Buffers)
	bind := make([]uint64, n) // bytes bound per binding
	for _, d := range prog.Buffers {
		if d.Access.Readable() {
			bind[d.Binding] = uint64(len(req.Inputs[d.Binding]))
		} else {
			bind[d.Binding] = uint64(req.OutputCounts[d.Binding]) * uint64(d.Type.Size())
		}
	}
	var res *pluginapi.DispatchResult
	var spans []pluginapi.Span
	var out int64
	err := b.callConn(ctx, proc, "dispatch", prog.Name, func(ctx context.Context, conn *client.Conn) (err error) {
		bufs := make([]*scratchBuffer, 0, n)
		defer func() {
			if err != nil {
				// The plugin may still run the submit (its caller gave
				// up on it): no other dispatch may take its buffers.
				b.dropScratch(conn, bufs)
				return
			}
			b.putScratch(context.WithoutCancel(ctx), conn, proc, bufs)
		}()
		cmd := pluginapi.DispatchCommand{Pipeline: req.Pipeline, Grid: req.Grid, Bindings: make([]pluginapi.BufferRange, n), Uniforms: req.Uniforms}
		cmds := make([]pluginapi.SubmitCommand, 0, n+1)
		for i := range n {
			// A 16-bit buffer binds 2n bytes of a buffer of whole 4-byte
			// words, so that its zero fill covers it (fills are word-sized).
			s, err := b.takeScratch(ctx, conn, proc, roundUp(bind[i], pluginapi.ElementBytes))
			if err != nil {
				return err
			}
			bufs = append(bufs, s)
			r := pluginapi.BufferRange{Buffer: s.handle, Size: bind[i]}
			cmd.Bindings[i] = r
			data := req.Inputs[i]
			switch {
			case prog.Buffers[i].Access.Readable() && s.mem != nil:
				copyParallel(s.mem, data)
			case prog.Buffers[i].Access.Readable():
				if err := conn.WriteBuffer(ctx, s.handle, 0, data); err != nil {
					return err
				}
			case s.mem != nil:
				clear(s.mem[:bind[i]])
			default:
				cmds = append(cmds, pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: s.handle, Size: roundUp(bind[i], pluginapi.ElementBytes)}})
			}
		}
		cmds = append(cmds, cmd)
		pending, err := conn.SubmitAsync(ctx, &pluginapi.SubmitRequest{Adapter: b.adapter.Index, Commands: cmds})
		if err != nil {
			return err
		}
		sub, err := pending.Wait(ctx)
		if err != nil {
			return err
		}
		outputs := prog.Outputs()
		res = &pluginapi.DispatchResult{HostNanos: sub.HostNanos, DeviceNanos: sub.DeviceNanos, Outputs: make([][]byte, 0, len(outputs))}
		spans = pending.Spans()
		for _, bi := range outputs {
			s := bufs[bi]
			var o []byte
			if s.mem != nil {
				// A clone allocates without zeroing first: half the memory
				// traffic of make and copy (a 256 MiB output took 21-25 ms
				// this way and 31-42 ms with make and a split copy).
				o = bytes.Clone(s.mem[:bind[bi]])
			} else {
				o = make([]byte, bind[bi])
				if err := conn.ReadBuffer(ctx, s.handle, 0, o); err != nil {
					return err
				}
			}
			out += int64(len(o))
			res.Outputs = append(res.Outputs, o)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	b.p.v2.toPlugin.Add(in)
	b.p.v2.fromPlugin.Add(out)
	return res, spans, nil
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m uint64) uint64 { return (n + m - 1) / m * m }
