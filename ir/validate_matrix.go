package ir

import "fmt"

// Validation of IR v1.2: the 16-bit types' operators, the workgroup matrices and
// their statements. See docs/design.md, "IR v1.2: spellings and validation".

type matrixInfo struct {
	MatrixDecl
	path string
}

// f16Fix is the Fix for an operator applied to a 16-bit type that does not take it.
func f16Fix(t Type) string {
	if t == BF16 {
		return "bf16 is a storage and matrix type (load, store, cast, select): cast to f32, compute, and cast back"
	}
	return "f16 takes neg, abs, sqrt, add, sub, mul, div, min, max, the comparisons, fma and select: cast to f32 for the others"
}

// matrixDecls checks the matrix declarations: names in the one namespace, element
// types f16, bf16 or f32, sides multiples of MatrixDimStep up to MaxMatrixDim, and
// at most MaxMatrixBytes in all.
func (c *checker) matrixDecls() error {
	var total uint64
	for i, m := range c.prog.Matrices {
		path := fmt.Sprintf("matrices[%d]", i)
		if !validIdent(m.Name) {
			return verr(path, identFix, "matrix name %q is not a valid identifier", m.Name)
		}
		if prev, dup := c.matrices[m.Name]; dup {
			return verr(path, "give each matrix its own name", "matrix %q is already declared at %s", m.Name, prev.path)
		}
		if prev, dup := c.arrays[m.Name]; dup {
			return verr(path, "choose another name: matrices share the one namespace with buffers, shared arrays, parameters and uniforms",
				"matrix %q is already declared at %s", m.Name, prev.path)
		}
		if _, dup := c.params[m.Name]; dup {
			return verr(path, "choose another name: matrices share the one namespace with buffers, shared arrays, parameters and uniforms",
				"matrix %q is already declared as a parameter", m.Name)
		}
		if _, dup := c.uniforms[m.Name]; dup {
			return verr(path, "choose another name: matrices share the one namespace with buffers, shared arrays, parameters and uniforms",
				"matrix %q is already declared as a uniform", m.Name)
		}
		if m.Type != F16 && m.Type != BF16 && m.Type != F32 {
			return verr(path, "use f16, bf16 or f32", "matrix %q has element type %s", m.Name, m.Type)
		}
		for _, side := range []struct {
			name string
			n    uint32
		}{{"rows", m.Rows}, {"cols", m.Cols}} {
			if side.n == 0 || side.n%MatrixDimStep != 0 || side.n > MaxMatrixDim {
				return verr(path, fmt.Sprintf("use a multiple of %d from %d to %d (pad the data and use bound for the edges)", MatrixDimStep, MatrixDimStep, MaxMatrixDim),
					"matrix %q has %s %d", m.Name, side.name, side.n)
			}
		}
		total += uint64(m.Bytes())
		if total > MaxMatrixBytes {
			return verr(path, fmt.Sprintf("keep all matrices together within %d bytes (rows*cols*2 for f16 and bf16, *4 for f32), e.g. with smaller tiles", MaxMatrixBytes),
				"matrix %q brings the matrices to %d bytes", m.Name, total)
		}
		c.matrices[m.Name] = matrixInfo{MatrixDecl: m, path: path}
	}
	return nil
}

// matrix resolves a matrix name used by op.
func (c *checker) matrix(name, path, op string) (matrixInfo, error) {
	m, ok := c.matrices[name]
	if !ok {
		return m, verr(path, "declare it in matrices", "%s: %q is not a matrix", op, name)
	}
	return m, nil
}

// matrixArray checks the buffer or shared array a matrix load (write false) or
// store (write true) uses.
func (c *checker) matrixArray(m matrixInfo, name, path, op string, write bool) error {
	a, err := c.array(name, path, op)
	if err != nil {
		return err
	}
	switch {
	case write && !a.shared && !a.access.Writable():
		return verr(path, "declare it with access write or read_write", "%s: buffer %q has access %s", op, name, a.access)
	case !write && !a.shared && !a.access.Readable():
		return verr(path, "declare it with access read or read_write", "%s: buffer %q has access %s", op, name, a.access)
	case a.elem != m.Type:
		return verr(path, fmt.Sprintf("use a buffer or shared array of %s, or a matrix of %s (convert with matrix_convert)", m.Type, a.elem),
			"%s: %q has element type %s but matrix %q has %s", op, name, a.elem, m.Name, m.Type)
	}
	return nil
}

// addressing checks a matrix load's or store's offset, stride, layout and bound.
func (c *checker) addressing(op, path string, depth int, offset, stride Expr, layout MatrixLayout, bound *MatrixBound) error {
	if err := c.want(offset, path+".offset", depth+1, U32, op+" offset"); err != nil {
		return err
	}
	if err := c.want(stride, path+".stride", depth+1, U32, op+" stride"); err != nil {
		return err
	}
	if !layout.Valid() {
		return verr(path+".layout", `use "row" or "col"`, "%s: invalid layout %d", op, layout)
	}
	if bound == nil {
		return nil
	}
	if err := c.want(bound.Rows, path+".bound[0]", depth+1, U32, op+" bound rows"); err != nil {
		return err
	}
	return c.want(bound.Cols, path+".bound[1]", depth+1, U32, op+" bound cols")
}

func (c *checker) matrixStmt(s Stmt, path string, depth int) error {
	switch s := s.(type) {
	case MatrixFillStmt:
		m, err := c.matrix(s.Matrix, path, "matrix_fill")
		if err != nil {
			return err
		}
		return c.want(s.Value, path+".value", depth+1, m.Type, fmt.Sprintf("matrix_fill value for %q", s.Matrix))
	case MatrixLoadStmt, MatrixStoreStmt:
		mc, _ := asMatrixCopy(s)
		m, err := c.matrix(mc.matrix, path, mc.op())
		if err != nil {
			return err
		}
		if err := c.matrixArray(m, mc.array, path+"."+mc.arrayKey(), mc.op(), mc.store); err != nil {
			return err
		}
		return c.addressing(mc.op(), path, depth, mc.offset, mc.stride, mc.layout, mc.bound)
	case MatrixMMAStmt:
		return c.mma(s, path)
	case MatrixConvertStmt:
		dst, err := c.matrix(s.Matrix, path, "matrix_convert")
		if err != nil {
			return err
		}
		src, err := c.matrix(s.From, path+".from", "matrix_convert")
		if err != nil {
			return err
		}
		if s.Matrix == s.From {
			return verr(path, "convert into another matrix of the same shape", "matrix_convert: %q is both destination and source", s.Matrix)
		}
		if dst.Rows != src.Rows || dst.Cols != src.Cols {
			return verr(path, "convert between matrices of the same rows and cols",
				"matrix_convert: %q is %dx%d but %q is %dx%d", dst.Name, dst.Rows, dst.Cols, src.Name, src.Rows, src.Cols)
		}
		return nil
	}
	return verr(path, "build statements with the ir package's types", "unknown statement type %T", s)
}

func (c *checker) mma(s MatrixMMAStmt, path string) error {
	acc, err := c.matrix(s.Acc, path, "matrix_mma")
	if err != nil {
		return err
	}
	a, err := c.matrix(s.A, path+".a", "matrix_mma")
	if err != nil {
		return err
	}
	b, err := c.matrix(s.B, path+".b", "matrix_mma")
	if err != nil {
		return err
	}
	switch {
	case !s.Precision.Valid():
		return verr(path+".precision", `use "tf32" or leave precision out`, "matrix_mma: invalid precision %d", s.Precision)
	case acc.Type != F32:
		return verr(path, "accumulate in an f32 matrix (matrix_convert it to 16 bits afterwards)",
			"matrix_mma: accumulator %q has element type %s", acc.Name, acc.Type)
	case a.Type != b.Type:
		return verr(path, "give a and b the same element type (matrix_convert one of them)",
			"matrix_mma: a %q is %s but b %q is %s", a.Name, a.Type, b.Name, b.Type)
	case s.Precision == PrecisionTF32 && a.Type != F32:
		return verr(path+".precision", "leave precision out: tf32 applies to f32 operands only",
			"matrix_mma: precision tf32 with %s operands", a.Type)
	case s.Acc == s.A || s.Acc == s.B:
		return verr(path, "accumulate into a matrix other than the operands (a may equal b)",
			"matrix_mma: accumulator %q is also an operand", s.Acc)
	case a.Rows != acc.Rows || b.Cols != acc.Cols || a.Cols != b.Rows:
		return verr(path, "use a M×K, b K×N and an M×N accumulator",
			"matrix_mma: shapes do not match: acc %q is %dx%d, a %q is %dx%d, b %q is %dx%d",
			acc.Name, acc.Rows, acc.Cols, a.Name, a.Rows, a.Cols, b.Name, b.Rows, b.Cols)
	}
	return nil
}
