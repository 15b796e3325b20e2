package backend

import (
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

// Restrict (see docs/design.md, "Vulkan"): a dispatch whose bindings share no
// byte runs a variant of its pipeline whose buffers are decorated Restrict
// (spirv.Target.DisjointBindings), which lets a driver keep loads of read
// buffers in its read-only caches; the variant is built on first use and kept
// with the pipeline. A dispatch with overlapping bindings, or one that reaches
// bindings through device addresses, runs the pipeline as compiled.

// disjoint reports whether no two non-empty spans share a byte.
func disjoint(binds []span) bool {
	for i, s := range binds {
		if s.size == 0 {
			continue
		}
		for _, t := range binds[i+1:] {
			if t.size != 0 && overlaps(s.b, s.off, s.size, t.b, t.off, t.size) {
				return false
			}
		}
	}
	return true
}

// forBinds returns the pipeline a dispatch of p's compiled form over binds runs:
// p's Restrict variant when the bindings are disjoint, else p.
func (p *pipeline) forBinds(binds []span) (*pipeline, error) {
	if p.addr == nil || len(binds) < 2 || !disjoint(binds) {
		return p, nil
	}
	ad := p.addr
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if ad.restricted != nil {
		return ad.restricted, nil
	}
	a := p.d.a
	t := a.targetFor(ad.wg)
	t.DisjointBindings = true
	m, err := spirv.EmitFor(p.prog, t)
	if err != nil {
		return nil, pluginapi.Rejected("vulkan: adapter %d (%s): %w", a.index, a.info.Name, err)
	}
	v := &pipeline{d: p.d, prog: p.prog, wg: p.wg, push: m.PushConstantBytes, uniforms: m.UniformOffset,
		grid: m.GridOffset, gridMode: m.Grid, sg: p.sg, addresses: m.AddressOffsets}
	if _, err := v.build(m, ad.spec, ad.data, nil); err != nil {
		return nil, err
	}
	ad.restricted = v
	return v, nil
}
