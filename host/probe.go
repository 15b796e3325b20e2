package host

import (
	"context"
	"fmt"
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

// probeLater is the circuit breaker's half-open step: once a failing plugin's
// backoff has passed, the host probes it in the background (one probe at a
// time), under the host's context and the start timeout plus the hang timeout.
// The probe's success ends the failing state; its failure extends the backoff.
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
		for _, a := range p.desc.Adapters {
			if !a.Available {
				continue
			}
			err := probe(ctx, &Backend{p: p, adapter: a})
			p.log.Info("probed a failing plugin", "adapter", a.Index, "error", err)
			return
		}
	}()
}
