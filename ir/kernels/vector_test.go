package kernels_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// accesses lists, in program order, the buffer accesses of the statements
// (loads as "load a", stores as "store out"), not entering loops.
func accesses(stmts []ir.Stmt) []string {
	var out []string
	ir.Inspect(stmts, func(n any) bool {
		switch n := n.(type) {
		case ir.LoadExpr:
			out = append(out, "load "+n.Target)
		case ir.StoreStmt:
			out = append(out, "store "+n.Target)
		case ir.ForStmt:
			return false
		}
		return true
	})
	return out
}

// TestVectorAddLoadsAheadOfStores pins the order vector_add's lanes keep:
// every load of a and b comes before the first store to out (outside the loop
// for an epi beyond the lanes), so that a compiler keeps them all in flight.
func TestVectorAddLoadsAheadOfStores(t *testing.T) {
	k, _ := kernels.Lookup("vector_add")
	seq := accesses(k.Program().Body)
	loads, stored := 0, false
	for _, a := range seq {
		switch a {
		case "load a", "load b":
			if stored {
				t.Fatalf("a load after a store: %v", seq)
			}
			loads++
		case "store out":
			stored = true
		}
	}
	if want := 2 * 8; loads != want || !stored {
		t.Fatalf("%d lane loads (want %d) and stores %v: %v", loads, want, stored, seq)
	}
}

// TestVectorAddBeyondTheLanes: an epi larger than the lanes the program loads
// ahead (16, not a candidate) still adds every element.
func TestVectorAddBeyondTheLanes(t *testing.T) {
	k, _ := kernels.Lookup("vector_add")
	addsEveryElement(t, k, 3, 3, 9, 16)
}

// vector_add_f16 adds 8 elements per invocation by default, twice vector_add's
// 4, so that an invocation has as many bytes of loads in flight (2 × 8 × 2)
// as the f32 add at its measured best (2 × 4 × 4); its launch covers them.
func TestVectorAddF16DefaultEPI(t *testing.T) {
	for _, c := range []struct {
		name string
		epi  uint32
	}{{"vector_add", 4}, {"vector_add_f16", 8}} {
		k, _ := kernels.Lookup(c.name)
		d, ok := k.Program().Param("epi")
		if !ok || d.Default.Bits != c.epi {
			t.Fatalf("%s: epi default %v, want %d", c.name, d.Default, c.epi)
		}
		cs := k.NewCase(rand.New(rand.NewPCG(1, 2)), 4097)
		if want := (4097 + c.epi - 1) / c.epi; cs.Invocations[0] != want {
			t.Errorf("%s: %d invocations for 4097 elements, want %d", c.name, cs.Invocations[0], want)
		}
	}
}

// vector_add_f16 loads 16 lanes ahead (its largest candidate, epi 16, two
// chunks of 8) and adds every element at each candidate and beyond, and at
// values that are no multiple of 8 (rounded up), on the interpreter.
func TestVectorAddF16Lanes(t *testing.T) {
	k, _ := kernels.Lookup("vector_add_f16")
	p := k.Program()
	if d, _ := p.Param("epi"); len(d.Candidates) != 2 || d.Candidates[0].Bits != 8 || d.Candidates[1].Bits != 16 {
		t.Fatalf("epi candidates %v", d.Candidates)
	}
	loads := 0
	for _, a := range accesses(p.Body) {
		if a == "store out" {
			break
		}
		loads++
	}
	if loads != 2*16 {
		t.Fatalf("%d loads before the first store, want 32", loads)
	}
	addsEveryElement(t, k, 5, 0, 1, 8, 9, 16, 17, 24, 40)
}

// addsEveryElement runs k at each epi on a 32-wide workgroup on the interpreter
// (1021 elements drawn from seed) and checks the output against the reference.
func addsEveryElement(t *testing.T, k kernels.Kernel, seed uint64, epis ...uint32) {
	t.Helper()
	p := k.Program()
	for _, epi := range epis {
		base := k.NewCase(rand.New(rand.NewPCG(seed, uint64(epi))), 1021)
		var spec ir.SpecMap
		spec.Set("epi", ir.SpecU32(epi))
		c, _ := k.Retune(base, [3]uint32{32, 1, 1}, spec)
		got, err := interp.Run(context.Background(), p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
			interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Check(got, k.Reference(base)); err != nil {
			t.Errorf("epi %d: %v", epi, err)
		}
	}
}
