package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The scalar matrix path. A matrix statement is lowered to IR that the emitter
// writes like any other: each invocation of the workgroup handles the elements
// e (row-major index) with e mod W = its linear local id, W the workgroup's
// invocations, in a loop over e. Every matrix is private: each invocation holds
// its elements in a .local array kiln_matrix<i>, element e at slot e / W. Only
// an mma reads elements other invocations hold (whole rows of A and columns of
// B), so it runs in chunks of kc steps of k through one shared staging buffer
// (kiln_matrix_stage, sized to what the program's shared arrays leave of the
// 48 KiB of static shared memory): the owners copy A[:, k0:k0+kc] and
// B[k0:k0+kc, :] into it, and each invocation adds those steps to its
// accumulator elements, chunk after chunk, so any matrix size runs. A matrix
// statement is collective and in uniform control flow, so the lowering may put
// barriers in: one (bar.sync 0) before every matrix statement orders it after
// the previous ones (a load may read what a store wrote), and one before and
// after each staging. Every matrix is zeroed at the start of the kernel, so a
// matrix read before anything was written into it reads 0, as the reference
// does outside strict mode.
//
//   - fill: every element gets the value.
//   - load and store: element (r, c) is at offset + r·stride + c ("row") or
//     offset + c·stride + r ("col"), in wrapping u32 arithmetic, read and
//     written with the IR's own load and store, which give 0 and write nothing
//     out of range; an element outside the bound gets the index 0xFFFFFFFF,
//     out of range of every array.
//   - mma: element (r, c) of the accumulator starts from its value and adds
//     A[r][k]·B[k][c] for k = 0, 1, ..., K−1 in order (chunk after chunk), each
//     product and each sum rounded to f32 (add.rn, mul.rn: never fused). f16
//     and bf16 operands convert to f32 exactly and their products are exact;
//     tf32 is computed in full f32, which the bound allows.
//   - convert: each element through f32 to the destination's type, as cast.

// maxStaticShared is the most static shared memory (.shared variables) a CUDA
// kernel may declare.
const maxStaticShared = 48 << 10

// Names of the lowering's arrays and locals; IR names are identifiers, so a dot
// keeps them apart from the program's.
const (
	matElem   = "kiln.e"
	matRow    = "kiln.r"
	matCol    = "kiln.c"
	matK      = "kiln.k"
	matSum    = "kiln.s"
	matOffset = "kiln.offset"
	matStride = "kiln.stride"
	matRows   = "kiln.rows"
	matCols   = "kiln.cols"
	matValue  = "kiln.value"
	matIndex  = "kiln.index"
	matChunk  = "kiln.k0"
)

// tileName is the array name of matrix m's tile.
func tileName(m string) string { return "kiln.matrix." + m }

// outOfRange is an index no array has.
const outOfRange = 0xFFFFFFFF

// stageName is the array name of the staging buffer's view as elements of t.
func stageName(t ir.Type) string { return "kiln.stage." + t.String() }

// declareScalarMatrices declares a private array for every matrix and the
// staging buffer the mma statements need, and zeroes every matrix.
func (e *emitter) declareScalarMatrices() error {
	w := e.invocations()
	e.stageBytes = maxStaticShared - e.sharedBytes
	var stage uint32
	ir.Inspect(e.prog.Body, func(n any) bool {
		if s, ok := n.(ir.MatrixMMAStmt); ok {
			a, aok := e.prog.Matrix(s.A)
			b, bok := e.prog.Matrix(s.B)
			if aok && bok && a.Cols == b.Rows {
				kc := e.chunk(a, b)
				stage = max(stage, arrayBytes(a.Type, (a.Rows+b.Cols)*kc))
			}
		}
		return true
	})
	if stage > 0 {
		sym := "kiln_matrix_stage"
		e.shared = append(e.shared, fmt.Sprintf("\t.shared .align 4 .b8 %s[%d]; // the scalar matrix path's mma staging buffer", sym, stage))
		e.sharedBytes += stage
		base := e.r()
		e.preInst("mov.u32 %s, %s", base, sym)
		for _, t := range []ir.Type{ir.F16, ir.BF16, ir.F32} {
			e.arrays[stageName(t)] = array{elem: t, shared: true, base: base, fixed: stage / t.Size()}
		}
	}
	for i, m := range e.prog.Matrices {
		e.declareLocal(tileName(m.Name), fmt.Sprintf("kiln_matrix%d", i), m.Type, (m.Rows*m.Cols+w-1)/w,
			fmt.Sprintf("matrix %s: %dx%d %s, scalar path: private, element e held by invocation e mod %d at slot e / %d", m.Name, m.Rows, m.Cols, m.Type, w, w))
	}
	var zero []ir.Stmt
	for _, m := range e.prog.Matrices {
		zero = append(zero, e.eachElement(m, store(tileName(m.Name), e.slot(), ir.Literal{Type: m.Type})))
	}
	return e.block(zero)
}

// chunk is the steps of k an mma of a by b stages at a time: the largest
// divisor of K whose columns of a and rows of b fit the staging buffer's room
// (at least 8: the program's shared arrays take at most 32 KiB, so 16 KiB is
// left, and a step of k takes at most (256 + 256)·4 bytes), or 0 when none does.
func (e *emitter) chunk(a, b ir.MatrixDecl) uint32 {
	step := (a.Rows + b.Cols) * a.Type.Size()
	for kc := a.Cols; kc > 0; kc-- {
		if a.Cols%kc == 0 && kc*step <= e.stageBytes {
			return kc
		}
	}
	return 0
}

// slot is the index in a matrix's private array of element matElem.
func (e *emitter) slot() ir.Expr {
	return ir.Div(ir.Local(matElem), ir.LitU32(e.invocations()))
}

// invocations is the workgroup's number of invocations.
func (e *emitter) invocations() uint32 { return e.wg[0] * e.wg[1] * e.wg[2] }

// eachElement is a loop over the elements of m this invocation handles, with the
// element's index in matElem.
func (e *emitter) eachElement(m ir.MatrixDecl, body ...ir.Stmt) ir.Stmt {
	linear := ir.Add(ir.LocalID(0), ir.Mul(ir.LitU32(e.wg[0]), ir.Add(ir.LocalID(1), ir.Mul(ir.LitU32(e.wg[1]), ir.LocalID(2)))))
	return ir.ForStmt{Var: matElem, Type: ir.U32, From: linear, To: ir.LitU32(m.Rows * m.Cols), Step: ir.LitU32(e.invocations()), Body: body}
}

// rowCol binds matRow and matCol to element matElem's row and column in m.
func rowCol(m ir.MatrixDecl) []ir.Stmt {
	return []ir.Stmt{
		ir.LetStmt{Name: matRow, Value: ir.Div(ir.Local(matElem), ir.LitU32(m.Cols))},
		ir.LetStmt{Name: matCol, Value: ir.Rem(ir.Local(matElem), ir.LitU32(m.Cols))},
	}
}

// scalarMatrixStmt emits a matrix statement on the scalar path.
func (e *emitter) scalarMatrixStmt(s ir.Stmt) error {
	if last := len(e.body) - 1; last < 0 || e.body[last] != "\tbar.sync 0;" {
		e.inst("bar.sync 0")
	}
	var lowered []ir.Stmt
	var err error
	switch s := s.(type) {
	case ir.MatrixFillStmt:
		lowered, err = e.scalarFill(s)
	case ir.MatrixLoadStmt:
		lowered, err = e.scalarLoad(s)
	case ir.MatrixStoreStmt:
		lowered, err = e.scalarStore(s)
	case ir.MatrixMMAStmt:
		lowered, err = e.scalarMMA(s)
	case ir.MatrixConvertStmt:
		lowered, err = e.scalarConvert(s)
	default:
		err = fmt.Errorf("statement %T is not a matrix statement. Fix: report this kiln bug", s)
	}
	if err != nil {
		return err
	}
	e.assigned[matSum] = true
	return e.block(lowered)
}

func (e *emitter) scalarFill(s ir.MatrixFillStmt) ([]ir.Stmt, error) {
	m, err := e.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	return []ir.Stmt{
		ir.LetStmt{Name: matValue, Value: s.Value},
		e.eachElement(m, store(tileName(m.Name), e.slot(), ir.Local(matValue))),
	}, nil
}

// addressing binds the offset, stride and bound of a load or store, and
// returns the statements that bind matIndex, in each element's loop, to the
// element's index in the array (outOfRange outside the bound).
func addressing(m ir.MatrixDecl, offset, stride ir.Expr, layout ir.MatrixLayout, bound *ir.MatrixBound) (outer, inner []ir.Stmt, err error) {
	outer = []ir.Stmt{ir.LetStmt{Name: matOffset, Value: offset}, ir.LetStmt{Name: matStride, Value: stride}}
	if bound != nil {
		outer = append(outer, ir.LetStmt{Name: matRows, Value: bound.Rows}, ir.LetStmt{Name: matCols, Value: bound.Cols})
	}
	major, minor := ir.Local(matRow), ir.Local(matCol)
	switch layout {
	case ir.RowMajor:
	case ir.ColMajor:
		major, minor = minor, major
	default:
		return nil, nil, fmt.Errorf("matrix layout %d is not defined. Fix: use row or col", layout)
	}
	var index ir.Expr = ir.Add(ir.Add(ir.Local(matOffset), ir.Mul(major, ir.Local(matStride))), minor)
	if bound != nil {
		inside := ir.LAnd(ir.Lt(ir.Local(matRow), ir.Local(matRows)), ir.Lt(ir.Local(matCol), ir.Local(matCols)))
		index = ir.Select(inside, index, ir.LitU32(outOfRange))
	}
	inner = append(rowCol(m), ir.LetStmt{Name: matIndex, Value: index})
	return outer, inner, nil
}

func (e *emitter) scalarLoad(s ir.MatrixLoadStmt) ([]ir.Stmt, error) {
	return e.scalarMove(s.Matrix, s.Offset, s.Stride, s.Layout, s.Bound, func(m ir.MatrixDecl) ir.Stmt {
		return store(tileName(m.Name), e.slot(), ir.Load(s.From, ir.Local(matIndex)))
	})
}

func (e *emitter) scalarStore(s ir.MatrixStoreStmt) ([]ir.Stmt, error) {
	return e.scalarMove(s.Matrix, s.Offset, s.Stride, s.Layout, s.Bound, func(m ir.MatrixDecl) ir.Stmt {
		return store(s.To, ir.Local(matIndex), ir.Load(tileName(m.Name), e.slot()))
	})
}

// scalarMove lowers a load or store of matrix name at offset and stride:
// move(m) is the statement that, in each element's loop, moves the element
// between the tile and index matIndex of the array.
func (e *emitter) scalarMove(name string, offset, stride ir.Expr, layout ir.MatrixLayout, bound *ir.MatrixBound, move func(m ir.MatrixDecl) ir.Stmt) ([]ir.Stmt, error) {
	m, err := e.matrix(name)
	if err != nil {
		return nil, err
	}
	outer, inner, err := addressing(m, offset, stride, layout, bound)
	if err != nil {
		return nil, err
	}
	return append(outer, e.eachElement(m, append(inner, move(m))...)), nil
}

// toF32 converts x of type t to f32 (exactly, for the matrix types).
func toF32(t ir.Type, x ir.Expr) ir.Expr {
	if t == ir.F32 {
		return x
	}
	return ir.Cast(ir.F32, x)
}

func (e *emitter) scalarMMA(s ir.MatrixMMAStmt) ([]ir.Stmt, error) {
	acc, err := e.matrix(s.Acc)
	if err != nil {
		return nil, err
	}
	a, err := e.matrix(s.A)
	if err != nil {
		return nil, err
	}
	b, err := e.matrix(s.B)
	if err != nil {
		return nil, err
	}
	if acc.Type != ir.F32 || a.Type != b.Type || a.Rows != acc.Rows || b.Cols != acc.Cols || a.Cols != b.Rows {
		return nil, fmt.Errorf("matrix_mma %s += %s·%s: shapes %dx%d %s += %dx%d %s · %dx%d %s do not fit. Fix: run ir.Validate and correct the program",
			s.Acc, s.A, s.B, acc.Rows, acc.Cols, acc.Type, a.Rows, a.Cols, a.Type, b.Rows, b.Cols, b.Type)
	}
	kc := e.chunk(a, b)
	if kc == 0 {
		return nil, fmt.Errorf("matrix_mma %s += %s·%s: one step of k (%d bytes) does not fit the %d bytes of shared memory the program's shared arrays leave. Fix: use smaller shared arrays",
			s.Acc, s.A, s.B, (a.Rows+b.Cols)*a.Type.Size(), e.stageBytes)
	}
	m, n, k0 := a.Rows, b.Cols, ir.Local(matChunk)
	stage := stageName(a.Type)
	// inChunk is the staged index of element matElem, whose step of k is k,
	// or outOfRange outside the chunk.
	inChunk := func(k, index ir.Expr) ir.Expr {
		return ir.Select(ir.Lt(ir.Sub(k, k0), ir.LitU32(kc)), index, ir.LitU32(outOfRange))
	}
	// A[r][k] goes to stage[r·kc + k − k0], B[k][c] to stage[M·kc + (k − k0)·N + c].
	stageA := e.eachElement(a,
		ir.LetStmt{Name: matRow, Value: ir.Div(ir.Local(matElem), ir.LitU32(a.Cols))},
		ir.LetStmt{Name: matK, Value: ir.Rem(ir.Local(matElem), ir.LitU32(a.Cols))},
		store(stage, inChunk(ir.Local(matK), ir.Add(ir.Mul(ir.Local(matRow), ir.LitU32(kc)), ir.Sub(ir.Local(matK), k0))),
			ir.Load(tileName(a.Name), e.slot())))
	stageB := e.eachElement(b,
		ir.LetStmt{Name: matK, Value: ir.Div(ir.Local(matElem), ir.LitU32(b.Cols))},
		ir.LetStmt{Name: matCol, Value: ir.Rem(ir.Local(matElem), ir.LitU32(b.Cols))},
		store(stage, inChunk(ir.Local(matK), ir.Add(ir.LitU32(m*kc), ir.Add(ir.Mul(ir.Sub(ir.Local(matK), k0), ir.LitU32(n)), ir.Local(matCol)))),
			ir.Load(tileName(b.Name), e.slot())))
	kk := ir.Local(matK)
	product := ir.Mul(toF32(a.Type, ir.Load(stage, ir.Add(ir.Mul(ir.Local(matRow), ir.LitU32(kc)), kk))),
		toF32(b.Type, ir.Load(stage, ir.Add(ir.LitU32(m*kc), ir.Add(ir.Mul(kk, ir.LitU32(n)), ir.Local(matCol))))))
	accumulate := e.eachElement(acc, append(rowCol(acc),
		ir.VarStmt{Name: matSum, Type: ir.F32, Value: ir.Load(tileName(acc.Name), e.slot())},
		ir.ForStmt{Var: matK, Type: ir.U32, From: ir.LitU32(0), To: ir.LitU32(kc), Step: ir.LitU32(1), Body: []ir.Stmt{
			ir.AssignStmt{Name: matSum, Value: ir.Add(ir.Local(matSum), product)},
		}},
		store(tileName(acc.Name), e.slot(), ir.Local(matSum)),
	)...)
	return []ir.Stmt{ir.ForStmt{Var: matChunk, Type: ir.U32, From: ir.LitU32(0), To: ir.LitU32(a.Cols), Step: ir.LitU32(kc), Body: []ir.Stmt{
		ir.BarrierStmt{}, stageA, stageB, ir.BarrierStmt{}, accumulate,
	}}}, nil
}

func (e *emitter) scalarConvert(s ir.MatrixConvertStmt) ([]ir.Stmt, error) {
	dst, err := e.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	src, err := e.matrix(s.From)
	if err != nil {
		return nil, err
	}
	if dst.Rows != src.Rows || dst.Cols != src.Cols {
		return nil, fmt.Errorf("matrix_convert %s from %s: shapes %dx%d and %dx%d differ. Fix: run ir.Validate and correct the program",
			s.Matrix, s.From, dst.Rows, dst.Cols, src.Rows, src.Cols)
	}
	var v ir.Expr = ir.Load(tileName(src.Name), e.slot())
	if src.Type != dst.Type {
		v = toF32(src.Type, v)
		if dst.Type != ir.F32 {
			v = ir.Cast(dst.Type, v)
		}
	}
	return []ir.Stmt{e.eachElement(dst, store(tileName(dst.Name), e.slot(), v))}, nil
}

// store is a store statement.
func store(target string, index, value ir.Expr) ir.Stmt {
	return ir.StoreStmt{Target: target, Index: index, Value: value}
}
