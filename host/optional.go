package host

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/pluginapi"
)

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
	err := b.callAny(ctx, "artifact", pl.prog.Name, func(ctx context.Context, proc *process, conn *client.Conn) error {
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
	return b.p.stats.failed(b.callAny(ctx, "health", b.Name(), func(ctx context.Context, _ *process, conn *client.Conn) error {
		return conn.Health(ctx)
	}))
}
