package ptx

import (
	"context"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// TestMatrixStatementsOnInterpreter runs the edge table's matrix rows (the
// scalar matrix path) on the interpreter, for sm_70 and sm_80, and compares
// their outputs with the model's bit for bit.
func TestMatrixStatementsOnInterpreter(t *testing.T) {
	for _, c := range edgetest.MatrixCases() {
		t.Run(c.Name, func(t *testing.T) {
			matrixOnInterpreter(t, c)
		})
	}
}

// matrixOnInterpreter runs c on the interpreter for sm_70 and sm_80 and
// compares its outputs with the model's bit for bit.
func matrixOnInterpreter(t *testing.T, c edgetest.Case) {
	t.Helper()
	for _, target := range []Target{{SM: 70}, {SM: 80}} {
		got, err := dispatchOn(target, c.Prog, c.Launch, nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		for _, msg := range c.Compare(got, c.Want) {
			t.Errorf("%s: %s", target, msg)
		}
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

// TestMatrixStagingFitsStaticShared: an mma whose A and B (64 KiB together)
// do not fit the shared memory the program's shared arrays leave stages them in
// chunks of k that do: the kernel's static shared memory stays within 48 KiB,
// and the matrices take none of it (edgetest's mma.chunked.f32 row checks the
// results).
func TestMatrixStagingFitsStaticShared(t *testing.T) {
	for _, c := range edgetest.MatrixCases() {
		if c.Name != "matrix.mma.chunked.f32" {
			continue
		}
		m, err := Emit(c.Prog, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// 8000 words of the program's own, and 4 chunks of 64 steps of k:
		// (32 + 32)·64 f32.
		if m.SharedBytes != 32000+16384 || !strings.Contains(m.Text, "kiln_matrix_stage[16384]") {
			t.Errorf("%d bytes of static shared memory, want 48384 with a 16384-byte staging buffer", m.SharedBytes)
		}
		return
	}
	t.Fatal("the edge table has no matrix.mma.chunked.f32 row")
}

// TestRandomMatrixScripts runs random matrix scripts on the interpreter (sm_70
// and sm_80) and on the oracle, and compares both with the model bit for bit.
func TestRandomMatrixScripts(t *testing.T) {
	n := 40
	if testing.Short() || raceEnabled {
		n = 8
	}
	for _, c := range edgetest.RandomMatrixCases(2026, n) {
		t.Run(c.Name, func(t *testing.T) {
			matrixOnInterpreter(t, c)
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
