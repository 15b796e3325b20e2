package kit

import (
	"context"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// MatchOracle runs case c of p on the CPU reference interpreter (c's
// specialization, workgroup size, grid, inputs and uniforms) and compares got
// with its outputs (verify.Compare; no variant is accepted). Emitter tests use
// it to hold a simulated module to the oracle.
func MatchOracle(p *ir.Program, c kernels.Case, got [][]byte) error {
	want, err := interp.Run(context.Background(), p, interp.Options{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize},
		interp.Launch{Grid: c.Grid, Inputs: clone(c.Inputs), OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		return fmt.Errorf("conformance: program %q: the CPU reference failed: %w", p.Name, err)
	}
	_, err = verify.Compare(p, got, want)
	return err
}
