package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Emitted is the device code Emit returns.
type Emitted struct {
	*Artifact
	// Backend is the name of the backend that emitted it, "id:adapter".
	Backend string
	// Unavailable is the adapter's reason when it cannot dispatch: the plugin
	// emitted the code without a device, for the target its Info names.
	Unavailable string
}

// Emit returns the device code of kind ("spirv", "ptx", ...) that backend name
// ("id" or "id:adapter") compiles prog to, as `kiln compile` shows it. On an
// available adapter it is Acquire, Compile and Artifact: the program is
// compiled on the device, with an autotune record's workgroup size when opts
// names none. When the plugin reports no available adapter for name (a CUDA
// plugin on a machine without the NVIDIA driver), the request still goes to the
// plugin for that adapter (the first when name gives no index): a plugin whose
// emitter needs no device answers it, as the CUDA plugin does for PTX, and any
// other request gives the plugin's error, an UnavailableError for one that
// needs the device. An error of the artifact request says "NAME cannot emit
// KIND".
func (h *Host) Emit(ctx context.Context, name string, prog *ir.Program, opts CompileOptions, kind string) (*Emitted, error) {
	p, index, err := h.findNamed(ctx, name)
	if err != nil {
		return nil, err
	}
	adapter, pickErr := pickAdapter(p.desc, name, index)
	if pickErr == nil {
		return h.emitOn(ctx, name, prog, opts, kind)
	}
	var nf *NotFoundError
	if errors.As(pickErr, &nf) {
		return nil, pickErr
	}
	for _, a := range p.desc.Adapters {
		if index < 0 || a.Index == index {
			adapter = a
			break
		}
	}
	if prog == nil {
		return nil, &LaunchError{Program: "<nil>", Detail: "no program. Fix: pass the *ir.Program to compile"}
	}
	if err := ir.Validate(prog); err != nil {
		return nil, fmt.Errorf("program %q is invalid: %w", prog.Name, err)
	}
	b := &Backend{p: p, adapter: adapter}
	var art *Artifact
	err = b.callAny(ctx, "artifact", prog.Name, func(ctx context.Context, _ *process, conn *client.Conn) error {
		var err error
		art, err = conn.Artifact(ctx, &pluginapi.ArtifactRequest{
			Adapter: adapter.Index, Program: prog, Spec: opts.Spec, WorkgroupSize: opts.WorkgroupSize, Kind: kind,
		})
		return err
	})
	if err := b.p.stats.failed(err); err != nil {
		return nil, fmt.Errorf("%s cannot emit %s without a device: %w", b.Name(), kind, err)
	}
	return &Emitted{Artifact: art, Backend: b.Name(), Unavailable: adapter.Reason}, nil
}

// emitOn is Emit on an available adapter.
func (h *Host) emitOn(ctx context.Context, name string, prog *ir.Program, opts CompileOptions, kind string) (*Emitted, error) {
	b, err := h.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	pl, err := b.Compile(ctx, prog, opts)
	if err != nil {
		return nil, err
	}
	defer b.Release(context.WithoutCancel(ctx), pl)
	art, err := b.Artifact(ctx, pl, kind)
	if err != nil {
		return nil, fmt.Errorf("%s cannot emit %s: %w", b.Name(), kind, err)
	}
	return &Emitted{Artifact: art, Backend: b.Name()}, nil
}
