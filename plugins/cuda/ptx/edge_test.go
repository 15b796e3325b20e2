package ptx

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// TestEdgeTableOnInterpreter runs the semantic edge table on the PTX interpreter
// and compares every output with the CPU reference interpreter under the table's
// rules (bit for bit but for exp, log, sin and cos), and the IR v1.2 rows with
// the outputs ir/half computes for them.
func TestEdgeTableOnInterpreter(t *testing.T) {
	for _, c := range edgetest.Table() {
		t.Run(c.Name, func(t *testing.T) {
			want, err := c.Reference(context.Background())
			if err != nil {
				t.Fatalf("oracle: %v", err)
			}
			got, err := dispatchCase(c.Prog, c.Launch, c.Launch.Uniforms)
			if err != nil {
				t.Fatalf("interpreter: %v", err)
			}
			for _, msg := range c.Compare(got, want) {
				t.Error(msg)
			}
		})
	}
}

// TestEdgeTableWantsMatchTheOracle checks the outputs the IR v1.2 rows (16-bit
// operators and casts, matrix scripts) expect against the CPU reference
// interpreter.
func TestEdgeTableWantsMatchTheOracle(t *testing.T) {
	for _, c := range edgetest.Table() {
		if c.Want == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			bad, err := c.OracleAgrees(context.Background())
			if err != nil {
				t.Fatalf("oracle: %v", err)
			}
			for _, msg := range bad {
				t.Error("oracle: " + msg)
			}
		})
	}
}
