package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/pluginapi"
)

// v2state is a plugin's protocol-2 state on the host: the capabilities last
// seen, the traffic counters, the scratch buffers the v1 API dispatches through
// on resident plugins, and the submits still running. The zero value is ready.
// See docs/design.md, "Protocol v2: buffers, submits, shared memory, fast path".
type v2state struct {
	toPlugin, fromPlugin atomic.Int64
	bufferIDs            atomic.Int64

	mu      sync.Mutex
	caps    pluginapi.Capabilities
	scratch []*scratchBuffer // free scratch buffers, of scratchProc
	// scratchProc is the process the scratch buffers live in.
	scratchProc *process
	pending     []*Pending // submits that may still run, oldest first
}

// Traffic counts the buffer bytes that crossed between the host and a plugin
// process: every byte written into or read out of the plugin's buffers by Write,
// Read and the v1 API's inputs and outputs, whatever the transport (gRPC
// messages or shared memory). Commands are not counted, and neither are bytes an
// application writes or reads in place through Buffer.Map.
type Traffic struct {
	// ToPlugin and FromPlugin are bytes sent to and received from the plugin.
	ToPlugin, FromPlugin int64
}

// Traffic returns the bytes moved between the host and this backend's plugin
// since the host opened it (relaunches included).
func (b *Backend) Traffic() Traffic {
	return Traffic{ToPlugin: b.p.v2.toPlugin.Load(), FromPlugin: b.p.v2.fromPlugin.Load()}
}

// conn returns the host's side of proc's connection. A plugin client from
// pluginapi.Dispense is always a Conn.
func (proc *process) conn() pluginapi.Conn {
	c, _ := proc.backend.(pluginapi.Conn)
	return c
}

// callAny runs fn on the plugin's current process with its connection, as
// Backend.call does: when the process turns out to have died before the call
// (nothing ran), the plugin is relaunched and fn runs once more.
func (b *Backend) callAny(ctx context.Context, op, program string, fn func(context.Context, *process, pluginapi.Conn) error) error {
	for attempt := 0; ; attempt++ {
		proc, err := b.p.current(ctx)
		if err != nil {
			return err
		}
		err = b.callConn(ctx, proc, op, program, func(ctx context.Context, conn pluginapi.Conn) error {
			return fn(ctx, proc, conn)
		})
		if err != errNothingRan {
			return err
		}
		if attempt > 0 {
			return b.nothingRanTwice(proc, op)
		}
	}
}

// holds reports whether proc is the plugin's running process and alive: not
// exited, and its data plane (if it has one) not lost. Buffers live only in a
// process that holds.
func (p *plugin) holds(proc *process) bool {
	if proc == nil || p.running() != proc {
		return false
	}
	if exited, _, _ := proc.runner.exitInfo(); exited {
		return false
	}
	conn := proc.conn()
	return conn == nil || conn.Lost() == nil
}

// capsOf returns proc's capabilities and remembers them for Report.
func (p *plugin) capsOf(proc *process) pluginapi.Capabilities {
	c := pluginapi.Capabilities{Protocol: p.protocol}
	if conn := proc.conn(); conn != nil {
		c = conn.Capabilities()
	}
	p.v2.mu.Lock()
	p.v2.caps = c
	p.v2.mu.Unlock()
	return c
}

// capabilities returns the running process's capabilities, else the last seen.
func (p *plugin) capabilities() pluginapi.Capabilities {
	if proc := p.running(); proc != nil {
		return p.capsOf(proc)
	}
	p.v2.mu.Lock()
	defer p.v2.mu.Unlock()
	if p.v2.caps.Protocol == 0 {
		return pluginapi.Capabilities{Protocol: p.protocol}
	}
	return p.v2.caps
}

// hostError turns the SDK's host-side errors into the host's typed errors; it
// returns nil for any other error. A broken data plane also stops the process.
func (b *Backend) hostError(proc *process, program string, err error) error {
	var (
		limit  *pluginapi.LimitError
		result *pluginapi.ResultError
		proto  *pluginapi.ProtocolError
		unimp  *pluginapi.UnimplementedError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &limit):
		return &LaunchError{Program: program, Detail: limit.Error()}
	case errors.As(err, &result):
		return &BadResultError{Backend: b.Name(), Detail: result.Detail}
	case errors.As(err, &proto):
		b.p.log.Error("plugin broke the data plane protocol; stopping it", "pid", proc.pid, "error", err)
		b.p.drop(proc, "stopped by the host: it broke the data plane protocol")
		return &BadResultError{Backend: b.Name(), Detail: proto.Detail}
	case errors.As(err, &unimp):
		return &UnsupportedError{Backend: b.Name(), Interface: unimp.Interface}
	}
	return nil
}

// callConn runs fn with proc's connection under callOn's classification, after
// turning the SDK's host-side errors into typed ones (which callOn would
// otherwise take for plugin failures).
func (b *Backend) callConn(ctx context.Context, proc *process, op, program string, fn func(context.Context, pluginapi.Conn) error) error {
	if conn := proc.conn(); conn != nil && conn.Lost() != nil {
		// The data plane saw the process die (or break the protocol) before
		// this call: nothing of it ran.
		b.p.drop(proc, "its data plane closed: "+conn.Lost().Error())
		return errNothingRan
	}
	var hostErr error
	err := b.callOn(ctx, proc, op, func(ctx context.Context, proc *process) error {
		conn := proc.conn()
		if conn == nil {
			return fmt.Errorf("plugin client %T is not a pluginapi.Conn", proc.backend)
		}
		err := fn(ctx, conn)
		if hostErr = b.hostError(proc, program, err); hostErr != nil {
			return nil
		}
		return err
	})
	if hostErr != nil {
		return hostErr
	}
	return err
}

// UnsupportedError says a backend does not implement an optional interface the
// call needs (pluginapi.Artifacts, pluginapi.HealthChecker). kiln doctor lists
// what each plugin lacks.
type UnsupportedError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Interface names the missing interface ("pluginapi.Artifacts").
	Interface string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("backend %s does not implement %s. Fix: use a backend that does (kiln doctor lists what each plugin implements)", e.Backend, e.Interface)
}

// dispatchOn runs a v1 dispatch on proc: through scratch buffers and one submit
// when the plugin keeps buffers (so the bytes cross through shared memory once
// each way), else inline (pluginapi.Conn.DispatchSized: shared memory when the
// plugin has the data plane, gRPC messages otherwise).
// limit is the receive limit of an inline response over gRPC.
func (b *Backend) dispatchOn(ctx context.Context, proc *process, pl *Pipeline, req *pluginapi.DispatchRequest, sizes []int, limit int) (*pluginapi.DispatchResult, error) {
	var in int64
	for _, d := range req.Inputs {
		in += int64(len(d))
	}
	if b.p.capsOf(proc).Resident() {
		return b.dispatchResident(ctx, proc, pl, req, in)
	}
	var res *pluginapi.DispatchResult
	err := b.callConn(ctx, proc, "dispatch", pl.prog.Name, func(ctx context.Context, conn pluginapi.Conn) error {
		var err error
		res, err = conn.DispatchSized(pluginapi.WithReceiveLimit(ctx, limit), req, sizes)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.p.v2.toPlugin.Add(in)
	for _, o := range res.Outputs {
		b.p.v2.fromPlugin.Add(int64(len(o)))
	}
	return res, nil
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
func (b *Backend) takeScratch(ctx context.Context, conn pluginapi.Conn, proc *process, size uint64) (*scratchBuffer, error) {
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
func (b *Backend) putScratch(ctx context.Context, conn pluginapi.Conn, proc *process, bufs []*scratchBuffer) {
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
func (b *Backend) dropScratch(conn pluginapi.Conn, bufs []*scratchBuffer) {
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
func (b *Backend) dispatchResident(ctx context.Context, proc *process, pl *Pipeline, req *pluginapi.DispatchRequest, in int64) (*pluginapi.DispatchResult, error) {
	prog := pl.prog
	n := len(prog.Buffers)
	bind := make([]uint64, n) // bytes bound per binding
	for _, d := range prog.Buffers {
		if d.Access.Readable() {
			bind[d.Binding] = uint64(len(req.Inputs[d.Binding]))
		} else {
			bind[d.Binding] = uint64(req.OutputCounts[d.Binding]) * pluginapi.ElementBytes
		}
	}
	var res *pluginapi.DispatchResult
	var out int64
	err := b.callConn(ctx, proc, "dispatch", prog.Name, func(ctx context.Context, conn pluginapi.Conn) (err error) {
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
		var cmds []pluginapi.SubmitCommand
		for i := range n {
			s, err := b.takeScratch(ctx, conn, proc, bind[i])
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
				cmds = append(cmds, pluginapi.FillCommand{Dst: r})
			}
		}
		cmds = append(cmds, cmd)
		sub, err := conn.Submit(ctx, &pluginapi.SubmitRequest{Adapter: b.adapter.Index, Commands: cmds})
		if err != nil {
			return err
		}
		res = &pluginapi.DispatchResult{HostNanos: sub.HostNanos, DeviceNanos: sub.DeviceNanos}
		for _, bi := range prog.Outputs() {
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
		return nil, err
	}
	b.p.v2.toPlugin.Add(in)
	b.p.v2.fromPlugin.Add(out)
	return res, nil
}

// Artifact is device code a backend compiles a program to (pluginapi.Artifact).
type Artifact = pluginapi.Artifact

// Artifact asks the backend for the device code of pl's program, as compiled
// (specialization and workgroup size included), of the given kind ("spirv",
// "ptx"). A backend without pluginapi.Artifacts gives an *UnsupportedError.
func (b *Backend) Artifact(ctx context.Context, pl *Pipeline, kind string) (*Artifact, error) {
	if pl == nil || pl.backend.p != b.p {
		return nil, &LaunchError{Program: "<pipeline>", Detail: fmt.Sprintf("pipeline was not compiled on %s. Fix: compile it with this backend's Compile", b.Name())}
	}
	var a *Artifact
	err := b.callAny(ctx, "artifact", pl.prog.Name, func(ctx context.Context, proc *process, conn pluginapi.Conn) error {
		if _, err := b.p.open(ctx, proc, b.adapter.Index); err != nil {
			return err
		}
		var err error
		a, err = conn.Artifact(ctx, &pluginapi.ArtifactRequest{
			Adapter: b.adapter.Index, Program: pl.prog, Spec: pl.opts.Spec, WorkgroupSize: pl.opts.WorkgroupSize, Kind: kind,
		})
		return err
	})
	return a, b.p.stats.failed(err)
}

// Health asks the backend whether its devices still work: nil, or the
// plugin's DeviceError or UnavailableError. A backend without
// pluginapi.HealthChecker gives an *UnsupportedError.
func (b *Backend) Health(ctx context.Context) error {
	return b.p.stats.failed(b.callAny(ctx, "health", b.Name(), func(ctx context.Context, _ *process, conn pluginapi.Conn) error {
		return conn.Health(ctx)
	}))
}

// limitProtocols drops the plugin sets of protocols above max (0: keep all).
func limitProtocols(cfg *goplugin.ClientConfig, max int) {
	if max <= 0 {
		return
	}
	for v := range cfg.VersionedPlugins {
		if v > max {
			delete(cfg.VersionedPlugins, v)
		}
	}
}
