package host

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// probeProgram is the host's own smallest dispatch: one invocation stores its
// global id into a one-element buffer. A probe succeeds when the backend
// compiles and runs it and returns an output of the right size.
func probeProgram() (*ir.Program, error) {
	b := ir.NewBuilder("kiln.probe", 1, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 1)
	b.Store(out, ir.LitU32(0), ir.GlobalID(0))
	return b.Build()
}

// Probe compiles and dispatches the host's probe program (one invocation, one
// four-byte output) on the backend name, as a health check: a crash, hang or bad
// result comes back as the usual typed error. A success ends a failing state.
// The probe leaves the persistent stores alone (no cache entry, no autotune
// lookup).
// kiln doctor probes every ready backend this way.
func (h *Host) Probe(ctx context.Context, name string) error {
	b, err := h.Acquire(ctx, name)
	if err != nil {
		return err
	}
	return probe(ctx, b)
}

func probe(ctx context.Context, b *Backend) error {
	prog, err := probeProgram()
	if err != nil {
		return fmt.Errorf("probe program: %w", err)
	}
	pl, err := b.Compile(ctx, prog, CompileOptions{noStores: true})
	if err != nil {
		return err
	}
	_, err = b.Dispatch(ctx, pl, Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{nil}})
	if rerr := b.Release(ctx, pl); err == nil && rerr != nil {
		b.p.log.Debug("releasing the probe pipeline failed", "error", rerr)
	}
	return err
}

// replay is a small real launch that failed on a plugin (it crashed, hung or
// answered with a bad result), kept for the half-open probe: a plugin that
// answers the host's own probe program but breaks on real work must fail its
// probe too, rather than be preferred again and break the next caller's
// launch.
type replay struct {
	adapter int
	prog    *ir.Program // the pipeline's own copy, never changed
	opts    CompileOptions
	work    Work
}

// replayLimit bounds the bytes (inputs and outputs) of a launch kept for the
// probe; a failing plugin without one is probed with the probe program.
const replayLimit = 1 << 20

// launchFailed notes a dispatch of pl over w (of about bytes bytes) that
// failed on proc with err: a bad result counts toward failing (badResult), and
// a launch that crashed the plugin, hung it or got a bad result is kept for the
// half-open probe when it is small. Other errors (the caller's deadline, a
// rejected program) say nothing about the plugin's health.
func (p *plugin) launchFailed(proc *process, pl *Pipeline, w Work, bytes int, err error) {
	p.badResult(proc, err)
	switch ErrorKind(err) {
	case KindCrashed, KindHung, KindBadResult:
	default:
		return
	}
	if bytes > replayLimit {
		return
	}
	opts := pl.opts
	opts.noStores = true
	r := &replay{adapter: pl.backend.adapter.Index, prog: pl.prog, opts: opts, work: Work{
		Grid: w.Grid, Invocations: w.Invocations,
		OutputCounts: slices.Clone(w.OutputCounts), Uniforms: slices.Clone(w.Uniforms),
	}}
	for _, in := range w.Inputs {
		r.work.Inputs = append(r.work.Inputs, slices.Clone(in))
	}
	p.mu.Lock()
	p.failures.replay = r
	p.mu.Unlock()
}

// probeFailing is the half-open probe of a failing plugin on b: the last small
// launch that failed on it, when one was kept, else the probe program. Either
// way a success (healthy) closes the breaker.
func probeFailing(ctx context.Context, b *Backend) error {
	b.p.mu.Lock()
	r := b.p.failures.replay
	b.p.mu.Unlock()
	if r == nil {
		return probe(ctx, b)
	}
	pl, err := b.Compile(ctx, r.prog, r.opts)
	if err != nil {
		return err
	}
	_, err = b.Dispatch(ctx, pl, r.work)
	if rerr := b.Release(ctx, pl); err == nil && rerr != nil {
		b.p.log.Debug("releasing the replayed pipeline failed", "error", rerr)
	}
	return err
}

// probeLater is the circuit breaker's half-open step: once a failing plugin's
// backoff has passed, the host probes it in the background (one probe at a
// time, probeFailing), under the host's context and the start timeout plus the
// hang timeout. The probe's success ends the failing state; its failure
// extends the backoff.
func (h *Host) probeLater(p *plugin) {
	p.mu.Lock()
	if p.probing || p.closed || !p.failures.failing || time.Now().Before(p.notBefore) {
		p.mu.Unlock()
		return
	}
	p.probing = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			p.probing = false
			p.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(h.ctx, p.set.startTimeout+p.set.hangTimeout)
		defer cancel()
		p.mu.Lock()
		adapter := -1
		if r := p.failures.replay; r != nil {
			adapter = r.adapter
		}
		p.mu.Unlock()
		for _, a := range p.desc.Adapters {
			if !a.Available || (adapter >= 0 && a.Index != adapter) {
				continue
			}
			err := probeFailing(ctx, &Backend{p: p, adapter: a})
			p.log.Info("probed a failing plugin", "adapter", a.Index, "error", err)
			return
		}
	}()
}
