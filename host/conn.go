package host

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/host/client"
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

// conn returns the host's side of proc's connection (nil before it was
// dispensed).
func (proc *process) conn() *client.Conn { return proc.backend }

// callAny runs fn on the plugin's current process with its connection, as
// Backend.call does: when the process turns out to have died before the call
// (nothing ran), the plugin is relaunched and fn runs once more.
func (b *Backend) callAny(ctx context.Context, op, program string, fn func(context.Context, *process, *client.Conn) error) error {
	for attempt := 0; ; attempt++ {
		proc, err := b.p.current(ctx)
		if err != nil {
			return err
		}
		err = b.callConn(ctx, proc, op, program, func(ctx context.Context, conn *client.Conn) error {
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
	if err == nil {
		// Before the targets below, which escape to the heap: four
		// allocations on every successful call otherwise.
		return nil
	}
	var (
		limit  *client.LimitError
		result *client.ResultError
		proto  *client.ProtocolError
		unimp  *pluginapi.UnimplementedError
	)
	switch {
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
func (b *Backend) callConn(ctx context.Context, proc *process, op, program string, fn func(context.Context, *client.Conn) error) error {
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
			return errors.New("the plugin process has no connection yet")
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
