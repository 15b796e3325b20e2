package backend

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// Artifact is the code the backend makes of a program, as `kiln compile --backend
// cuda --emit ptx|cubin` serves it.
type Artifact struct {
	// PTX is the module's text.
	PTX string
	// Target is the architecture the PTX is written for.
	Target ptx.Target
	// WorkgroupSize is the block shape folded into the PTX.
	WorkgroupSize [3]uint32
	// Cubin is the driver's compiled image of PTX for the adapter's device; nil
	// unless asked for.
	Cubin []byte
}

// DefaultSM is the architecture Artifacts writes PTX for when no device is
// usable: sm_80, which every device of compute capability 8.0 and later runs.
const DefaultSM = 80

// Artifacts emits program p, specialized by spec and with the workgroup override
// wg (zero keeps the program's), exactly as Compile does for adapter, and with
// cubin set also links it to a cubin on that device. Without a usable adapter the
// PTX is written for sm_DefaultSM, and asking for the cubin is an
// UnavailableError carrying the adapter's reason.
func (b *Backend) Artifacts(ctx context.Context, adapter int, p *ir.Program, spec ir.SpecMap, wg [3]uint32, cubin bool) (*Artifact, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	if p == nil {
		return nil, pluginapi.Rejected("cuda: no program to compile. Fix: pass a program")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cuda: artifacts of %q: %w", p.Name, err)
	}
	a, aerr := b.adapterAt(adapter)
	if aerr != nil && cubin {
		return nil, aerr
	}
	target := ptx.Target{SM: DefaultSM}
	lim := limits{maxBlock: [3]uint32{ir.MaxInvocations, ir.MaxInvocations, ir.MaxInvocations},
		maxThreadsPerBlock: ir.MaxInvocations, sharedPerBlock: ir.MaxSharedBytes}
	if aerr == nil {
		target, lim = a.target, a.lim
	}
	size, err := checkLimits(p, wg, lim)
	if err != nil {
		return nil, err
	}
	opts := ptx.Options{Target: target, Spec: spec, WorkgroupSize: size, NonCoherentReads: true}
	if aerr == nil {
		opts = emitOptions(a, spec, size)
	}
	m, err := ptx.Emit(p, opts)
	if err != nil {
		return nil, pluginapi.Rejected("cuda: %w", err)
	}
	out := &Artifact{PTX: m.Text, Target: m.Target, WorkgroupSize: m.WorkgroupSize}
	if !cubin {
		return out, nil
	}
	d, err := a.Open()
	if err != nil {
		return nil, err
	}
	err = d.ctx.Do(func() error {
		var err error
		if out.Cubin, err = d.ctx.Link(m.Text); err != nil {
			return linkFailure(d, p, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
