package rangetest

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir/interp"
)

// TestCasesRunOnTheOracle: every case is valid and runs on the CPU reference.
func TestCasesRunOnTheOracle(t *testing.T) {
	for _, c := range Cases() {
		l := c.Launch
		if _, err := interp.Run(context.Background(), c.Prog, interp.Options{},
			interp.Launch{Grid: l.Grid, Inputs: l.Inputs, OutputCounts: l.OutputCounts, Uniforms: l.Uniforms}); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}
