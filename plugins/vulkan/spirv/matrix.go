package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The scalar matrix path (IR v1.2 workgroup matrices without matrix units; see
// docs/design.md, "Vulkan", "Scalar matrix path"). Every matrix is a Workgroup
// array of its rows×cols elements, row-major, named "kiln_matrix_<name>" in the
// module (so `kiln compile --emit spirv --dis` shows the path), zeroed when the
// shader starts (a matrix read before it is written reads 0). Each matrix
// statement is lowered to IR statements the emitter already knows, bracketed
// by barriers: matrix statements are collective and in uniform control flow,
// so every invocation reaches the barriers, and the barriers order matrix
// statements among themselves (a matrix_store to a shared array or buffer and
// a matrix_load from it, an mma and the convert that reads its result). Inside
// a statement, invocation i of the W invocations of the workgroup (i the
// linear local id) handles elements i, i+W, i+2W, … of the tile:
//
//   - matrix_fill stores the value to its elements.
//   - matrix_load reads element (r, c) from offset + r·stride + c ("row") or
//     offset + c·stride + r ("col"), in u32 arithmetic, 0 out of range or
//     outside the bound.
//   - matrix_store writes its elements that are in range and inside the
//     bound. When two elements may land on the same index (a stride below the
//     contiguous dimension, or one so large that the index wraps), invocation
//     0 alone writes every element in row-major order instead, so the last
//     element written wins as in the reference.
//   - matrix_mma computes each of its acc elements as acc + Σ a·b, with the
//     products exact in f32 for f16 and bf16 (rounded to f32 for f32, tf32
//     included: the scalar path computes tf32 in f32) and the sum rounded
//     after each k, k = 0, 1, …, K-1 in order, so exact inputs give the
//     reference's bits.
//   - matrix_convert converts each element through f32 as cast does.
//
// Names the lowering introduces contain a dot, which no IR identifier has.

// matrixArrayPrefix starts the debug name of a matrix's Workgroup array.
const matrixArrayPrefix = "kiln_matrix_"

// Names of the lowered statements' locals.
const (
	mxLinear = "kiln.i" // the invocation's linear local id
	mxElem   = "kiln.e"
	mxRow    = "kiln.r"
	mxCol    = "kiln.c"
	mxIndex  = "kiln.idx"
	mxValue  = "kiln.v"
	mxOffset = "kiln.offset"
	mxStride = "kiln.stride"
	mxRows   = "kiln.rows"
	mxCols   = "kiln.cols"
	mxSum    = "kiln.sum"
	mxK      = "kiln.k"
)

// declareMatrices declares each matrix's Workgroup array and checks that the
// shared arrays and matrices fit the device's workgroup memory.
func (e *emitter) declareMatrices() error {
	for _, m := range e.prog.Matrices {
		e.declareWorkgroupArray(matrixArrayPrefix+m.Name, m.Name, m.Type, m.Rows*m.Cols)
	}
	var bytes uint64
	for _, s := range e.prog.Shared {
		bytes += uint64(s.Count) * uint64(e.workgroupElemBytes(s.Type))
	}
	var tiles uint64
	for _, m := range e.prog.Matrices {
		tiles += uint64(m.Rows) * uint64(m.Cols) * uint64(e.workgroupElemBytes(m.Type))
	}
	if limit := e.target.MaxSharedBytes; limit != 0 && bytes+tiles > uint64(limit) {
		return fmt.Errorf("the shared arrays (%d bytes) and the workgroup matrices (%d bytes on the scalar matrix path) need %d bytes of workgroup memory, more than the device's %d (maxComputeSharedMemorySize). Fix: use smaller matrices or shared arrays",
			bytes, tiles, bytes+tiles, limit)
	}
	return nil
}

// matrixDecl resolves a matrix.
func (e *emitter) matrixDecl(name, what string) (ir.MatrixDecl, error) {
	m, ok := e.prog.Matrix(name)
	if !ok {
		return m, fmt.Errorf("%s: %q is not a matrix. Fix: declare it in matrices", what, name)
	}
	return m, nil
}

// u32 helpers for the lowered statements.
func lit(v uint32) ir.Expr    { return ir.LitU32(v) }
func loc(n string) ir.Expr    { return ir.Local(n) }
func lt(a, b ir.Expr) ir.Expr { return ir.Lt(a, b) }

// linearID is the invocation's index in the workgroup, x fastest.
func (e *emitter) linearID() ir.Expr {
	x, y := e.wg[0], e.wg[1]
	return ir.Add(ir.LocalID(0), ir.Mul(lit(x), ir.Add(ir.LocalID(1), ir.Mul(lit(y), ir.LocalID(2)))))
}

// invocations is the workgroup's invocation count.
func (e *emitter) invocations() uint32 { return e.wg[0] * e.wg[1] * e.wg[2] }

// eachElement runs body for the elements i, i+W, … below n of the invocation.
func (e *emitter) eachElement(n uint32, body []ir.Stmt) ir.Stmt {
	return ir.ForStmt{Var: mxElem, Type: ir.U32, From: loc(mxLinear), To: lit(n), Step: lit(e.invocations()), Body: body}
}

// matrixStmt emits a matrix statement as its lowering between two barriers.
func (e *emitter) matrixStmt(s ir.Stmt) error {
	body, err := e.lowerMatrix(s)
	if err != nil {
		return err
	}
	e.barrier()
	if err := e.block(append([]ir.Stmt{ir.LetStmt{Name: mxLinear, Value: e.linearID()}}, body...)); err != nil {
		return err
	}
	e.barrier()
	return nil
}

// zeroMatrices sets every matrix's elements to 0 at the start of the shader.
func (e *emitter) zeroMatrices() error {
	if len(e.prog.Matrices) == 0 {
		return nil
	}
	body := []ir.Stmt{ir.LetStmt{Name: mxLinear, Value: e.linearID()}}
	for _, m := range e.prog.Matrices {
		body = append(body, e.eachElement(m.Rows*m.Cols, []ir.Stmt{
			ir.StoreStmt{Target: m.Name, Index: loc(mxElem), Value: ir.Literal{Type: m.Type}}}))
	}
	return e.block(body)
}

func (e *emitter) lowerMatrix(s ir.Stmt) ([]ir.Stmt, error) {
	switch s := s.(type) {
	case ir.MatrixFillStmt:
		m, err := e.matrixDecl(s.Matrix, "matrix_fill")
		if err != nil {
			return nil, err
		}
		return []ir.Stmt{
			ir.LetStmt{Name: mxValue, Value: s.Value},
			e.eachElement(m.Rows*m.Cols, []ir.Stmt{ir.StoreStmt{Target: m.Name, Index: loc(mxElem), Value: loc(mxValue)}}),
		}, nil
	case ir.MatrixLoadStmt:
		m, err := e.matrixDecl(s.Matrix, "matrix_load")
		if err != nil {
			return nil, err
		}
		lets, inBound := addressing(s.Offset, s.Stride, s.Bound)
		value := ir.Expr(ir.Load(s.From, loc(mxIndex)))
		if inBound != nil {
			value = ir.Select(inBound, value, ir.Literal{Type: m.Type})
		}
		body := append(element(m, s.Layout), ir.StoreStmt{Target: m.Name, Index: loc(mxElem), Value: value})
		return append(lets, e.eachElement(m.Rows*m.Cols, body)), nil
	case ir.MatrixStoreStmt:
		m, err := e.matrixDecl(s.Matrix, "matrix_store")
		if err != nil {
			return nil, err
		}
		return e.lowerStore(m, s), nil
	case ir.MatrixMMAStmt:
		return e.lowerMMA(s)
	case ir.MatrixConvertStmt:
		dst, err := e.matrixDecl(s.Matrix, "matrix_convert")
		if err != nil {
			return nil, err
		}
		src, err := e.matrixDecl(s.From, "matrix_convert")
		if err != nil {
			return nil, err
		}
		if src.Rows != dst.Rows || src.Cols != dst.Cols {
			return nil, fmt.Errorf("matrix_convert: %q is %d×%d but %q is %d×%d. Fix: convert between matrices of one shape", dst.Name, dst.Rows, dst.Cols, src.Name, src.Rows, src.Cols)
		}
		value := ir.Expr(ir.Load(src.Name, loc(mxElem)))
		if src.Type != dst.Type {
			if src.Type != ir.F32 {
				value = ir.Cast(ir.F32, value)
			}
			if dst.Type != ir.F32 {
				value = ir.Cast(dst.Type, value)
			}
		}
		return []ir.Stmt{e.eachElement(dst.Rows*dst.Cols, []ir.Stmt{ir.StoreStmt{Target: dst.Name, Index: loc(mxElem), Value: value}})}, nil
	}
	return nil, fmt.Errorf("statement %T is not a matrix statement. Fix: build statements with the ir package's types", s)
}

// addressing evaluates a load's or store's offset, stride and bound once, and
// returns the lets and the condition that (row, col) lies inside the bound (nil
// without one).
func addressing(offset, stride ir.Expr, bound *ir.MatrixBound) ([]ir.Stmt, ir.Expr) {
	lets := []ir.Stmt{ir.LetStmt{Name: mxOffset, Value: offset}, ir.LetStmt{Name: mxStride, Value: stride}}
	if bound == nil {
		return lets, nil
	}
	lets = append(lets, ir.LetStmt{Name: mxRows, Value: bound.Rows}, ir.LetStmt{Name: mxCols, Value: bound.Cols})
	return lets, ir.LAnd(lt(loc(mxRow), loc(mxRows)), lt(loc(mxCol), loc(mxCols)))
}

// element binds the row, column and array index of element kiln.e of m.
func element(m ir.MatrixDecl, layout ir.MatrixLayout) []ir.Stmt {
	index := ir.Add(ir.Add(loc(mxOffset), ir.Mul(loc(mxRow), loc(mxStride))), loc(mxCol))
	if layout == ir.ColMajor {
		index = ir.Add(ir.Add(loc(mxOffset), ir.Mul(loc(mxCol), loc(mxStride))), loc(mxRow))
	}
	return []ir.Stmt{
		ir.LetStmt{Name: mxRow, Value: ir.Div(loc(mxElem), lit(m.Cols))},
		ir.LetStmt{Name: mxCol, Value: ir.Rem(loc(mxElem), lit(m.Cols))},
		ir.LetStmt{Name: mxIndex, Value: index},
	}
}

// lowerStore writes m's elements in parallel when no two can share an index,
// and from invocation 0 alone, in row-major order, otherwise.
func (e *emitter) lowerStore(m ir.MatrixDecl, s ir.MatrixStoreStmt) []ir.Stmt {
	lets, inBound := addressing(s.Offset, s.Stride, s.Bound)
	write := ir.Stmt(ir.StoreStmt{Target: s.To, Index: loc(mxIndex), Value: ir.Load(m.Name, loc(mxElem))})
	if inBound != nil {
		write = ir.IfStmt{Cond: inBound, Then: []ir.Stmt{write}}
	}
	body := append(element(m, s.Layout), write)
	// Element (r, c) is at offset + r·stride + c (row): the indices are
	// distinct when stride ≥ cols and (rows-1)·stride + cols-1 does not wrap.
	outer, inner := m.Rows, m.Cols
	if s.Layout == ir.ColMajor {
		outer, inner = m.Cols, m.Rows
	}
	distinct := ir.Expr(ir.Ge(loc(mxStride), lit(inner)))
	if outer > 1 {
		distinct = ir.LAnd(distinct, ir.Le(loc(mxStride), lit((^uint32(0)-(inner-1))/(outer-1))))
	}
	serial := ir.ForStmt{Var: mxElem, Type: ir.U32, From: lit(0), To: lit(m.Rows * m.Cols), Step: lit(1), Body: body}
	return append(lets, ir.IfStmt{Cond: distinct,
		Then: []ir.Stmt{e.eachElement(m.Rows*m.Cols, body)},
		Else: []ir.Stmt{ir.IfStmt{Cond: ir.Eq(loc(mxLinear), lit(0)), Then: []ir.Stmt{serial}}},
	})
}

// lowerMMA computes each acc element sequentially in k.
func (e *emitter) lowerMMA(s ir.MatrixMMAStmt) ([]ir.Stmt, error) {
	acc, err := e.matrixDecl(s.Acc, "matrix_mma")
	if err != nil {
		return nil, err
	}
	a, err := e.matrixDecl(s.A, "matrix_mma")
	if err != nil {
		return nil, err
	}
	b, err := e.matrixDecl(s.B, "matrix_mma")
	if err != nil {
		return nil, err
	}
	if acc.Type != ir.F32 || a.Type != b.Type || a.Rows != acc.Rows || b.Cols != acc.Cols || a.Cols != b.Rows {
		return nil, fmt.Errorf("matrix_mma: %q (%s %d×%d) += %q (%s %d×%d) · %q (%s %d×%d) has no valid shape. Fix: run ir.Validate and correct the program",
			acc.Name, acc.Type, acc.Rows, acc.Cols, a.Name, a.Type, a.Rows, a.Cols, b.Name, b.Type, b.Rows, b.Cols)
	}
	e.assigned[mxSum] = true
	n, k := acc.Cols, a.Cols
	operand := func(name string, index ir.Expr) ir.Expr {
		x := ir.Load(name, index)
		if a.Type != ir.F32 {
			return ir.Cast(ir.F32, x)
		}
		return x
	}
	product := ir.Mul(operand(a.Name, ir.Add(ir.Mul(loc(mxRow), lit(k)), loc(mxK))),
		operand(b.Name, ir.Add(ir.Mul(loc(mxK), lit(n)), loc(mxCol))))
	return []ir.Stmt{e.eachElement(acc.Rows*n, []ir.Stmt{
		ir.LetStmt{Name: mxRow, Value: ir.Div(loc(mxElem), lit(n))},
		ir.LetStmt{Name: mxCol, Value: ir.Rem(loc(mxElem), lit(n))},
		ir.VarStmt{Name: mxSum, Type: ir.F32, Value: ir.Load(acc.Name, loc(mxElem))},
		ir.ForStmt{Var: mxK, Type: ir.U32, From: lit(0), To: lit(k), Step: lit(1), Body: []ir.Stmt{
			ir.AssignStmt{Name: mxSum, Value: ir.Add(loc(mxSum), product)},
		}},
		ir.StoreStmt{Target: acc.Name, Index: loc(mxElem), Value: loc(mxSum)},
	})}, nil
}
