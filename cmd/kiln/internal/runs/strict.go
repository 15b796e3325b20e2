package runs

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
)

// CheckStrict runs j on the reference interpreter in this process, in strict mode
// (docs/design.md, "The oracle and strict mode"), and returns the shared-memory
// hazard it finds (wrapping an *interp.StrictError), or any other error the run
// meets. It uses j's workgroup size override and specialization, not an autotune
// record.
func CheckStrict(ctx context.Context, j Job) error {
	l := j.Launch
	wg := j.Program.WorkgroupSize
	if l.WorkgroupSize != ([3]uint32{}) {
		wg = l.WorkgroupSize
	}
	grid := l.Grid
	if l.Invocations != ([3]uint32{}) {
		grid = ir.GridFor(l.Invocations, wg)
	}
	_, err := interp.Run(ctx, j.Program,
		interp.Options{WorkgroupSize: l.WorkgroupSize, Spec: l.Spec, Strict: true},
		interp.Launch{Grid: grid, Inputs: l.Inputs, OutputCounts: l.OutputCounts, Uniforms: l.Uniforms})
	if err != nil {
		return fmt.Errorf("--strict: %s on the reference interpreter: %w", j.Program.Name, err)
	}
	return nil
}
