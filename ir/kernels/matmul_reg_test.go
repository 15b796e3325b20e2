package kernels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// regLaunch is a matmul_reg case of size n at workgroup wg with bm = bn =
// block, tile depth tk and the given stages.
func regLaunch(t *testing.T, n int, wg [3]uint32, block, tk, stages uint32) kernels.Case {
	t.Helper()
	k, _ := kernels.Lookup("matmul_reg")
	var spec ir.SpecMap
	spec.Set("bm", ir.SpecU32(block))
	spec.Set("bn", ir.SpecU32(block))
	spec.Set("tk", ir.SpecU32(tk))
	spec.Set("stages", ir.SpecU32(stages))
	c, ok := k.Retune(k.NewCase(rand.New(rand.NewPCG(3, uint64(n))), n), wg, spec)
	if !ok {
		t.Fatal("matmul_reg cannot be retuned")
	}
	return c
}

// runReg runs c on p in the interpreter, strict mode (no shared-memory race,
// no read of an unwritten word) when strict is set, and reports whether the
// outputs equal the reference bit for bit.
func runReg(t *testing.T, p *ir.Program, c kernels.Case, strict bool) error {
	t.Helper()
	k, _ := kernels.Lookup("matmul_reg")
	got, err := interp.Run(context.Background(), p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec, Strict: strict},
		interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		t.Fatalf("interp.Run: %v", err)
	}
	return k.Check(got, k.Reference(c))
}

// pipelineIf is the program's if on "pipelined": its then branch is the
// pipelined k loop, its else branch the plain one.
func pipelineIf(t *testing.T, p *ir.Program) (int, ir.IfStmt) {
	t.Helper()
	for i, s := range p.Body {
		if is, ok := s.(ir.IfStmt); ok && is.Cond == ir.Local("pipelined") {
			return i, is
		}
	}
	t.Fatal("matmul_reg has no if on pipelined")
	return 0, ir.IfStmt{}
}

// barriers counts the barrier statements in the body of the loop on t in
// stmts.
func barriers(t *testing.T, stmts []ir.Stmt) int {
	t.Helper()
	for _, s := range stmts {
		if f, ok := s.(ir.ForStmt); ok && f.Var == "t" {
			n := 0
			for _, s := range f.Body {
				if _, ok := s.(ir.BarrierStmt); ok {
					n++
				}
			}
			return n
		}
	}
	t.Fatal("no loop on t")
	return 0
}

// TestMatmulRegPipelined: at stages 2 a launch whose tiles fit in half their
// arrays runs the pipelined k loop (one barrier per step), equal to the
// reference bit for bit over many steps and free of shared-memory races; a
// launch too large for it, and stages 1, run the plain loop (two barriers
// per step). With the plain loop cut out of the program, only the pipelined
// launches still give the reference's results.
func TestMatmulRegPipelined(t *testing.T) {
	k, _ := kernels.Lookup("matmul_reg")
	p := k.Program()
	at, branch := pipelineIf(t, p)
	if n := barriers(t, branch.Then); n != 1 {
		t.Errorf("the pipelined loop has %d barriers per step, want 1", n)
	}
	if n := barriers(t, branch.Else); n != 2 {
		t.Errorf("the plain loop has %d barriers per step, want 2", n)
	}
	cut := *p
	cut.Body = append([]ir.Stmt(nil), p.Body...)
	branch.Else = nil
	cut.Body[at] = branch
	for _, tc := range []struct {
		wg        [3]uint32
		block, tk uint32
		stages    uint32
		pipelined bool
		sizes     []int
	}{
		{[3]uint32{16, 16, 1}, 8, 8, 2, true, []int{1, 17, 100}}, // 13 steps of 8
		{[3]uint32{8, 8, 1}, 4, 8, 2, true, []int{37}},           // tiles of 256, 4 trips
		{[3]uint32{32, 16, 1}, 1, 4, 2, true, []int{37}},         // fills of 1 trip, some lanes idle
		{[3]uint32{16, 16, 1}, 8, 32, 2, false, []int{37}},       // tiles of 4096
		{[3]uint32{8, 8, 1}, 8, 16, 2, false, []int{37}},         // tiles of 1024 in 16 trips
		{[3]uint32{16, 16, 1}, 8, 8, 1, false, []int{100}},       // stages 1
	} {
		for _, size := range tc.sizes {
			name := fmt.Sprintf("wg %v, bm=bn=%d, tk=%d, stages=%d, size %d", tc.wg, tc.block, tc.tk, tc.stages, size)
			c := regLaunch(t, size, tc.wg, tc.block, tc.tk, tc.stages)
			if got := pipelines(c); got != tc.pipelined {
				t.Fatalf("%s: the test's model says pipelined %v, want %v", name, got, tc.pipelined)
			}
			if err := runReg(t, p, c, true); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			err := runReg(t, &cut, c, false)
			switch {
			case tc.pipelined && err != nil:
				t.Errorf("%s, plain loop cut: %v", name, err)
			case !tc.pipelined && err == nil && size > 1:
				t.Errorf("%s, plain loop cut: the reference's results without the loop this launch should run", name)
			}
		}
	}
}
