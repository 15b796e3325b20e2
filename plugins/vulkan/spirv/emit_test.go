package spirv

import (
	"errors"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func TestCorpusValidates(t *testing.T) {
	val := spirvVal(t)
	all := kernels.All()
	if len(all) == 0 {
		t.Fatal("kernels.All() is empty")
	}
	for _, k := range all {
		validate(t, val, k.Name, mustEmit(t, k.Name, k.Program()))
	}
}

func TestSemanticProgramsValidate(t *testing.T) {
	val := spirvVal(t)
	seen := map[string]int{}
	for _, np := range semanticPrograms(t, seen) {
		validate(t, val, np.name, mustEmit(t, np.name, np.prog))
	}
	checkCoverage(t, seen)
}

// checkCoverage fails when an operator of the ir package got no accepted program:
// then the table lost track of it (or Validate changed) and nothing tests it.
func checkCoverage(t *testing.T, seen map[string]int) {
	t.Helper()
	for _, op := range ir.UnaryOps() {
		if seen["unary "+op.String()] == 0 {
			t.Errorf("unary %s: no type was accepted, so it is untested", op)
		}
	}
	for _, op := range ir.BinaryOps() {
		if seen["binary "+op.String()] == 0 {
			t.Errorf("binary %s: no type was accepted, so it is untested", op)
		}
	}
	for _, op := range ir.AtomicOps() {
		if seen["atomic "+op.String()] != 4 {
			t.Errorf("atomic %s: %d of 4 variants (u32/i32, with/without result) accepted", op, seen["atomic "+op.String()])
		}
	}
	// i32/u32/f32 to each other (9, identity included), bool to and from i32/u32
	// (4) and bool to bool.
	if seen["cast"] != 14 {
		t.Errorf("%d cast pairs accepted, want 14", seen["cast"])
	}
}

func TestEmitIsDeterministic(t *testing.T) {
	progs := semanticPrograms(t, map[string]int{})
	for _, k := range kernels.All() {
		progs = append(progs, namedProgram{k.Name, k.Program()})
	}
	for _, np := range progs {
		a := mustEmit(t, np.name, np.prog)
		b := mustEmit(t, np.name, np.prog)
		if !slices.Equal(a.Words, b.Words) {
			t.Errorf("%s: two emits differ", np.name)
		}
	}
}

func TestEmitRejectsNilAndInvalidPrograms(t *testing.T) {
	if _, err := Emit(nil); err == nil {
		t.Error("Emit(nil) succeeded")
	}
	b := ir.NewBuilder("bad", 64, 1, 1)
	b.Store("nowhere", ir.LitU32(0), ir.LitU32(1))
	_, err := Emit(b.Program())
	var verr *ir.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Emit of an invalid program: %v, want a wrapped *ir.ValidationError", err)
	}
}
