package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The scalar matrix path (IR v1.2 workgroup matrices without matrix units; see
// docs/design.md, "Vulkan", "Scalar matrix path"). Element e of a matrix's
// rows×cols elements (row-major) belongs to invocation e mod W of the W
// invocations of the workgroup. A matrix that some matrix_mma reads as a or b
// is a Workgroup array of all its elements, since an mma element reads a row
// of a and a column of b; every other matrix (an accumulator, a matrix only
// loaded, converted and stored) is private: each invocation holds its elements
// in a Function array, element e at slot e / W. Either is named
// "kiln_matrix_<name>" in the module (so `kiln compile --emit spirv --dis`
// shows the path) and zeroed when the shader starts (a matrix read before it
// is written reads 0). Each matrix statement is lowered to IR statements the
// emitter already knows, bracketed by barriers: matrix statements are
// collective and in uniform control flow, so every invocation reaches the
// barriers, and the barriers order matrix statements among themselves (a
// matrix_store to a shared array or buffer and a matrix_load from it, an mma
// and the convert that reads its result). Inside a statement, invocation i
// (the linear local id) handles its elements i, i+W, i+2W, …:
//
//   - matrix_fill stores the value to its elements.
//   - matrix_load reads element (r, c) from offset + r·stride + c ("row") or
//     offset + c·stride + r ("col"), in u32 arithmetic, 0 out of range or
//     outside the bound.
//   - matrix_store writes its elements that are in range and inside the
//     bound. When two elements may land on the same index (a stride below the
//     contiguous dimension, or one so large that the index wraps), an element
//     is written only when no element after it in row-major order that the
//     store writes lands on its index, so the last one wins as in the
//     reference (each element checks the other rows, or columns, in a loop).
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
	mxWrite  = "kiln.write"
	mxOther  = "kiln.o"
	mxAt     = "kiln.at"
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

// declareMatrices declares each matrix's Workgroup array or Function slices
// and checks that the shared arrays and Workgroup matrices fit the device's
// workgroup memory.
func (e *emitter) declareMatrices() error {
	if done, err := e.declareCoop(); done {
		return err
	}
	operands := map[string]bool{}
	mmaOperands(e.prog.Body, operands)
	var tiles uint64
	for _, m := range e.prog.Matrices {
		n := m.Rows * m.Cols
		if operands[m.Name] {
			e.declareWorkgroupArray(matrixArrayPrefix+m.Name, m.Name, m.Type, n)
			tiles += uint64(n) * uint64(e.workgroupElemBytes(m.Type))
			continue
		}
		a := array{elem: m.Type, shared: true, private: true, count: (n + e.invocations() - 1) / e.invocations()}
		if e.narrowBF16(a) {
			e.capability(capabilityInt16)
		}
		elem := e.memType(a)
		c := e.cu32(a.count)
		at := e.typ(typeKey{op: opTypeArray, a: elem, b: c}, elem, c)
		a.varID = e.id()
		e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, at), a.varID, storageFunction)
		e.name(a.varID, matrixArrayPrefix+m.Name)
		e.arrays[m.Name] = a
	}
	var bytes uint64
	for _, s := range e.prog.Shared {
		bytes += uint64(s.Count) * uint64(e.workgroupElemBytes(s.Type))
	}
	if limit := e.target.MaxSharedBytes; limit != 0 && bytes+tiles > uint64(limit) {
		return fmt.Errorf("the shared arrays (%d bytes) and the mma operand matrices (%d bytes: the scalar matrix path holds them in workgroup memory) need %d bytes of workgroup memory, more than the device's %d (maxComputeSharedMemorySize). Fix: use smaller mma operands or shared arrays",
			bytes, tiles, bytes+tiles, limit)
	}
	return nil
}

// mmaOperands adds the name of every matrix an mma in stmts reads as a or b.
func mmaOperands(stmts []ir.Stmt, names map[string]bool) {
	ir.Inspect(stmts, func(n any) bool {
		if s, ok := n.(ir.MatrixMMAStmt); ok {
			names[s.A], names[s.B] = true, true
		}
		_, stmt := n.(ir.Stmt) // no mma inside an expression
		return stmt
	})
}

// tile is the index of the invocation's element kiln.e in matrix name's
// array: e itself in a Workgroup array, its slot e / W in private slices.
func (e *emitter) tile(name string) ir.Expr {
	if e.arrays[name].private {
		return ir.Div(loc(mxElem), lit(e.invocations()))
	}
	return loc(mxElem)
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
	if e.coop != nil {
		return e.coopStmt(s)
	}
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
	e.zeroCoop()
	if len(e.prog.Matrices) == 0 {
		return nil
	}
	body := []ir.Stmt{ir.LetStmt{Name: mxLinear, Value: e.linearID()}}
	for _, m := range e.prog.Matrices {
		if _, ok := e.arrays[m.Name]; !ok {
			continue // on the cooperative path, a matrix without an array (coopstage.go)
		}
		body = append(body, e.eachElement(m.Rows*m.Cols, []ir.Stmt{
			ir.StoreStmt{Target: m.Name, Index: e.tile(m.Name), Value: ir.Literal{Type: m.Type}}}))
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
			e.eachElement(m.Rows*m.Cols, []ir.Stmt{ir.StoreStmt{Target: m.Name, Index: e.tile(m.Name), Value: loc(mxValue)}}),
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
		body := append(element(m, s.Layout), ir.StoreStmt{Target: m.Name, Index: e.tile(m.Name), Value: value})
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
		value := ir.Expr(ir.Load(src.Name, e.tile(src.Name)))
		if src.Type != dst.Type {
			if src.Type != ir.F32 {
				value = ir.Cast(ir.F32, value)
			}
			if dst.Type != ir.F32 {
				value = ir.Cast(dst.Type, value)
			}
		}
		return []ir.Stmt{e.eachElement(dst.Rows*dst.Cols, []ir.Stmt{ir.StoreStmt{Target: dst.Name, Index: e.tile(dst.Name), Value: value}})}, nil
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

// lowerStore writes m's elements that are in range and inside the bound: all
// of them when no two can share an index, else each only when no later
// element in row-major order lands on its index and is written.
func (e *emitter) lowerStore(m ir.MatrixDecl, s ir.MatrixStoreStmt) []ir.Stmt {
	lets, inBound := addressing(s.Offset, s.Stride, s.Bound)
	write := func(cond ir.Expr) ir.Stmt {
		store := ir.Stmt(ir.StoreStmt{Target: s.To, Index: loc(mxIndex), Value: ir.Load(m.Name, e.tile(m.Name))})
		if cond != nil {
			store = ir.IfStmt{Cond: cond, Then: []ir.Stmt{store}}
		}
		return store
	}
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
	e.assigned[mxWrite] = true
	parallel := append(element(m, s.Layout), write(inBound))
	checked := append(append(element(m, s.Layout), e.shadowCheck(m, s.Layout, s.Bound != nil)...), write(and(loc(mxWrite), inBound)))
	return append(lets, ir.IfStmt{Cond: distinct,
		Then: []ir.Stmt{e.eachElement(m.Rows*m.Cols, parallel)},
		Else: []ir.Stmt{e.eachElement(m.Rows*m.Cols, checked)},
	})
}

// and is a && b, or a alone when b is nil.
func and(a, b ir.Expr) ir.Expr {
	if b == nil {
		return a
	}
	return ir.LAnd(a, b)
}

// shadowCheck sets kiln.write to false when an element after (kiln.r, kiln.c)
// in row-major order, inside the bound (kiln.rows, kiln.cols when bounded),
// lands on the same index. Row layout: only a later row r' can, at column
// c - (r'-r)·stride (u32). Col layout: a column c' ≠ c can, at row
// r + (c-c')·stride, when that row is later, or the same row and c' > c.
func (e *emitter) shadowCheck(m ir.MatrixDecl, layout ir.MatrixLayout, bounded bool) []ir.Stmt {
	r, c, o, at := loc(mxRow), loc(mxCol), loc(mxOther), loc(mxAt)
	inside := func(row, col ir.Expr) ir.Expr {
		if !bounded {
			return nil
		}
		return ir.LAnd(ir.Lt(row, loc(mxRows)), ir.Lt(col, loc(mxCols)))
	}
	var loop ir.Stmt
	if layout == ir.ColMajor {
		later := ir.LOr(ir.Gt(at, r), ir.LAnd(ir.Eq(at, r), ir.Gt(o, c)))
		hit := and(ir.LAnd(ir.Ne(o, c), ir.LAnd(ir.Lt(at, lit(m.Rows)), later)), inside(at, o))
		loop = ir.ForStmt{Var: mxOther, Type: ir.U32, From: lit(0), To: lit(m.Cols), Step: lit(1), Body: []ir.Stmt{
			ir.LetStmt{Name: mxAt, Value: ir.Add(r, ir.Mul(ir.Sub(c, o), loc(mxStride)))},
			ir.IfStmt{Cond: hit, Then: []ir.Stmt{ir.AssignStmt{Name: mxWrite, Value: ir.LitBool(false)}}},
		}}
	} else {
		hit := and(ir.Lt(at, lit(m.Cols)), inside(o, at))
		loop = ir.ForStmt{Var: mxOther, Type: ir.U32, From: ir.Add(r, lit(1)), To: lit(m.Rows), Step: lit(1), Body: []ir.Stmt{
			ir.LetStmt{Name: mxAt, Value: ir.Sub(c, ir.Mul(ir.Sub(o, r), loc(mxStride)))},
			ir.IfStmt{Cond: hit, Then: []ir.Stmt{ir.AssignStmt{Name: mxWrite, Value: ir.LitBool(false)}}},
		}}
	}
	return []ir.Stmt{ir.VarStmt{Name: mxWrite, Type: ir.Bool, Value: ir.LitBool(true)}, loop}
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
		ir.VarStmt{Name: mxSum, Type: ir.F32, Value: ir.Load(acc.Name, e.tile(acc.Name))},
		ir.ForStmt{Var: mxK, Type: ir.U32, From: lit(0), To: lit(k), Step: lit(1), Body: []ir.Stmt{
			ir.AssignStmt{Name: mxSum, Value: ir.Add(loc(mxSum), product)},
		}},
		ir.StoreStmt{Target: acc.Name, Index: e.tile(acc.Name), Value: loc(mxSum)},
	})}, nil
}
