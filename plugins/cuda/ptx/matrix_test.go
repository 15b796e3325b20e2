package ptx

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// TestMatrixStatementsOnInterpreter runs the edge table's matrix rows (the
// scalar matrix path) on the interpreter, for sm_70 and sm_80, and compares
// their outputs with the model's bit for bit.
func TestMatrixStatementsOnInterpreter(t *testing.T) {
	for _, c := range edgetest.MatrixCases() {
		t.Run(c.Name, func(t *testing.T) {
			for _, target := range []Target{{SM: 70}, {SM: 80}} {
				got, err := dispatchOn(target, c.Prog, c.Launch, nil)
				if err != nil {
					t.Fatalf("%s: %v", target, err)
				}
				for _, msg := range c.Compare(got, c.Want) {
					t.Errorf("%s: %s", target, msg)
				}
			}
		})
	}
}

// TestMatrixPathIsNamed: the module says which path each matrix took.
func TestMatrixPathIsNamed(t *testing.T) {
	c := edgetest.MatrixCases()[0]
	m, err := Emit(c.Prog, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Text, "matrix m: 32x16 f16, scalar path") {
		t.Errorf("the module does not name the matrix's path:\n%s", m.Text)
	}
}

// TestMatrixTilesBeyondStaticSharedAreRejected: shared tiles that, with the
// shared arrays, exceed the 48 KiB of static shared memory make Emit fail with
// the sizes and a Fix; matrices no mma multiplies are private and take none.
func TestMatrixTilesBeyondStaticSharedAreRejected(t *testing.T) {
	program := func(sharedWords uint32) *ir.Program {
		b := ir.NewBuilder("big", 256, 1, 1)
		out := b.Buffer("out", ir.F32, ir.Write)
		b.Shared("s", ir.U32, sharedWords)
		b.Matrix("acc", ir.F32, 16, 16)
		b.Matrix("a", ir.F32, 16, 256)
		b.Matrix("b", ir.F32, 256, 16)
		b.Matrix("big", ir.F16, 128, 96)
		b.MatrixFill("a", ir.LitF32(1))
		b.MatrixFill("b", ir.LitF32(1))
		b.MatrixMMA("acc", "a", "b")
		b.MatrixStore("acc", out, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
		b.MatrixFill("big", ir.LitF16(2))
		return b.Program()
	}
	_, err := Emit(program(6144), Options{})
	if err == nil || !strings.Contains(err.Error(), "49152") || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("tiles of 32 KiB and 24 KiB of shared arrays: Emit = %v, want a rejection naming the 49152-byte limit with a Fix", err)
	}
	m, err := Emit(program(4096), Options{})
	if err != nil {
		t.Fatalf("tiles of 32 KiB and 16 KiB of shared arrays: %v", err)
	}
	if m.SharedBytes != 48<<10 || !strings.Contains(m.Text, "matrix big: 128x96 f16, scalar path: private") {
		t.Errorf("%d bytes of shared memory, want 49152 (the private matrix takes none)", m.SharedBytes)
	}
}
