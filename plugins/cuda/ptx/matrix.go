package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Workgroup matrices (IR v1.2). Where a program's matrices live and how each
// matrix statement runs is a path. A program of the matmul_tc shape on sm_80
// and later becomes the tensor-core matmul as a whole (Emit tries
// tensorCoreModule first: tc.go, tc_match.go); every other program's matrices
// take the scalar path (matrix_scalar.go), which runs anywhere, through the two
// dispatch points below, declareMatrices for the storage of the program's
// matrices and matrixStmt for each statement. The emitted module's first line
// and comments name the path (and why not the tensor cores), so `kiln compile
// --emit` shows it.

// matrixPath names a way of running matrix statements.
type matrixPath uint8

// The matrix paths.
const (
	// scalarPath spreads every matrix's elements over the invocations, which
	// compute them on their scalar units (matrix_scalar.go).
	scalarPath matrixPath = iota + 1
)

// declareMatrices chooses the path of the program's matrices and declares their
// storage.
func (e *emitter) declareMatrices() error {
	if len(e.prog.Matrices) == 0 {
		return nil
	}
	e.matrixPath = scalarPath
	return e.declareScalarMatrices()
}

// matrixStmt emits a matrix statement on the program's path.
func (e *emitter) matrixStmt(s ir.Stmt) error {
	switch e.matrixPath {
	case scalarPath:
		return e.scalarMatrixStmt(s)
	}
	return fmt.Errorf("a matrix statement in a program that declares no matrices. Fix: declare the matrix in the program's matrices")
}

// matrix returns the declaration of the matrix name.
func (e *emitter) matrix(name string) (ir.MatrixDecl, error) {
	m, ok := e.prog.Matrix(name)
	if !ok {
		return m, fmt.Errorf("matrix %q is not declared. Fix: declare it in the program's matrices", name)
	}
	return m, nil
}
