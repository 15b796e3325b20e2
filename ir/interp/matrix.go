package interp

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/kiln-dev/kiln/ir"
)

// Workgroup matrices (IR v1.2; docs/design.md, "IR v1.2"). A worker holds each
// matrix of the program once, row-major, in register form (f32 bits, or an f16 or
// bf16 in the low half), for the workgroup it runs; a new workgroup's matrices read
// as zeros. A matrix statement is collective: it runs once for the workgroup, when
// every invocation reached it (else the run stops, as for a barrier), with the
// operand values of the invocation with local id (0,0,0) — strict mode checks
// that every invocation computed the same. Matrix statements run in program order,
// so they are ordered among themselves; their shared-array accesses are the
// workgroup's (matrixLane in strict mode's shadow), and race with invocations'
// own accesses that no barrier separates from them.

// matrixOperand is a scalar operand of a matrix statement, which every invocation
// computes.
type matrixOperand struct {
	name string
	fn   exprFn
}

// maxMatrixOperands is the most operands a matrix statement has: offset, stride
// and the bound's rows and cols.
const maxMatrixOperands = 4

// matrix resolves a matrix name.
func (c *compiler) matrix(name string) (int, ir.MatrixDecl, error) {
	i, ok := c.mats[name]
	if !ok {
		return 0, ir.MatrixDecl{}, fmt.Errorf("unknown matrix %q. Fix: declare it in the program's matrices", name)
	}
	d := c.k.prog.Matrices[i]
	if d.Type != ir.F32 && !d.Type.Is16Bit() {
		return 0, ir.MatrixDecl{}, fmt.Errorf("matrix %q has %s elements. Fix: declare matrices of f16, bf16 or f32", name, d.Type)
	}
	return i, d, nil
}

// u32Operand compiles a u32 operand of a matrix statement.
func (c *compiler) u32Operand(name string, e ir.Expr) (matrixOperand, error) {
	if e == nil {
		return matrixOperand{}, fmt.Errorf("matrix statement without its %s. Fix: give it a u32 expression", name)
	}
	v, err := c.expr(e, 0)
	if err != nil {
		return matrixOperand{}, err
	}
	if v.typ != ir.U32 {
		return matrixOperand{}, fmt.Errorf("matrix statement %s is %s. Fix: give a u32 %s (cast it)", name, v.typ, name)
	}
	return matrixOperand{name: name, fn: v.fn}, nil
}

// tile is the addressing of a matrix load or store, compiled: its operands are
// offset, stride and, when bounded, the bound's rows and cols.
type tile struct {
	ops     []matrixOperand
	col     bool // ColMajor
	bounded bool
}

func (c *compiler) tile(offset, stride ir.Expr, layout ir.MatrixLayout, bound *ir.MatrixBound) (tile, error) {
	if !layout.Valid() {
		return tile{}, fmt.Errorf("matrix layout %d. Fix: use row or col", layout)
	}
	t := tile{col: layout == ir.ColMajor, bounded: bound != nil}
	names := []string{"offset", "stride"}
	exprs := []ir.Expr{offset, stride}
	if bound != nil {
		names = append(names, "bound rows", "bound cols")
		exprs = append(exprs, bound.Rows, bound.Cols)
	}
	for i, e := range exprs {
		op, err := c.u32Operand(names[i], e)
		if err != nil {
			return tile{}, err
		}
		t.ops = append(t.ops, op)
	}
	return t, nil
}

// tileAt is a tile's addressing for one run of its statement.
type tileAt struct {
	off, stride uint32
	rows, cols  uint32 // the bound; MaxUint32 when there is none
	col         bool
	n           uint32 // the array's element count
}

func (t tile) at(vals []uint32, n int) tileAt {
	a := tileAt{off: vals[0], stride: vals[1], rows: math.MaxUint32, cols: math.MaxUint32, col: t.col, n: uint32(n)}
	if t.bounded {
		a.rows, a.cols = vals[2], vals[3]
	}
	return a
}

// index is the array index of element (r, c), in u32 arithmetic; ok is false when
// the element is outside the bound or the index outside the array.
func (a tileAt) index(r, c uint32) (uint32, bool) {
	if r >= a.rows || c >= a.cols {
		return 0, false
	}
	k := a.off + r*a.stride + c
	if a.col {
		k = a.off + c*a.stride + r
	}
	return k, k < a.n
}

// collective builds the statement function of a matrix statement (what, at path):
// it checks that the whole workgroup reached it, computes its operands on every
// invocation (strict mode: they must agree, and the matrices in reads must have
// been written), then runs do with the operand values of the first invocation.
func (c *compiler) collective(what, path string, ops []matrixOperand, reads []int, do func(w *worker, vals []uint32)) stmtFn {
	strict := c.k.strict
	return func(w *worker, m *mask) {
		if !w.whole(m) {
			w.fail(w.divergence(m, what, path))
			return
		}
		w.active = m
		var buf [maxMatrixOperands]uint32
		vals := buf[:len(ops)]
		for i, op := range ops {
			reg := op.fn(w, 0, w.run.k.group)
			if w.halted {
				return
			}
			if strict {
				if l, ok := uniformLanes(reg[:w.run.k.group]); !ok {
					e := w.matrixHazard(NonUniformOperand, path)
					e.Operand, e.Value, e.OtherValue = op.name, reg[l], reg[0]
					e.Workgroup, e.Invocation = w.laneWorkgroup(l)
					w.fail(e)
					return
				}
			}
			vals[i] = reg[0]
		}
		if strict {
			for _, mi := range reads {
				if !w.written[mi] {
					e := w.matrixHazard(UnwrittenMatrix, path)
					e.Matrix = w.run.k.prog.Matrices[mi].Name
					w.fail(e)
					return
				}
			}
		}
		do(w, vals)
	}
}

// matrixHazard starts the StrictError of a matrix statement's hazard.
func (w *worker) matrixHazard(h Hazard, path string) *StrictError {
	return &StrictError{Program: w.run.k.prog.Name, Hazard: h, Workgroup: w.wgID, Statement: path}
}

func (c *compiler) matrixFill(s ir.MatrixFillStmt, path string) (stmtFn, error) {
	mi, md, err := c.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	if s.Value == nil {
		return nil, fmt.Errorf("matrix_fill of %q without a value. Fix: give a %s value", s.Matrix, md.Type)
	}
	v, err := c.expr(s.Value, 0)
	if err != nil {
		return nil, err
	}
	if v.typ != md.Type {
		return nil, fmt.Errorf("matrix_fill of %s matrix %q with a %s value. Fix: give a %s value", md.Type, s.Matrix, v.typ, md.Type)
	}
	ops := []matrixOperand{{name: "value", fn: v.fn}}
	return c.collective("matrix_fill", path, ops, nil, func(w *worker, vals []uint32) {
		fillWords(w.mats[mi], vals[0])
		w.written[mi] = true
	}), nil
}

func (c *compiler) matrixLoad(s ir.MatrixLoadStmt, path string) (stmtFn, error) {
	mi, md, err := c.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	t, decl, ok := c.target(s.From)
	switch {
	case !ok:
		return nil, fmt.Errorf("matrix_load from unknown buffer or shared array %q. Fix: declare it", s.From)
	case t.buffer && !decl.Access.Readable():
		return nil, fmt.Errorf("matrix_load from buffer %q, whose access is %s. Fix: declare it read or read_write", s.From, decl.Access)
	case t.typ != md.Type:
		return nil, fmt.Errorf("matrix_load of %s matrix %q from %q of %s. Fix: load from an array of the matrix's type", md.Type, s.Matrix, s.From, t.typ)
	}
	tl, err := c.tile(s.Offset, s.Stride, s.Layout, s.Bound)
	if err != nil {
		return nil, err
	}
	checked, site := c.strictSite(t)
	return c.collective("matrix_load", path, tl.ops, nil, func(w *worker, vals []uint32) {
		words := t.words(w)
		dst := w.mats[mi]
		done := eachElement(md, tl.at(vals, len(words)), func(e, k uint32, in bool) bool {
			switch {
			case !in:
				dst[e] = 0
			case checked && !w.strictMatrixRead(site, k):
				return false
			default:
				// Atomic: other workgroups' matrix_stores may write the
				// buffer concurrently (a racy program, but no Go data race).
				dst[e] = atomic.LoadUint32(&words[k])
			}
			return true
		})
		if done {
			w.written[mi] = true
		}
	}), nil
}

func (c *compiler) matrixStore(s ir.MatrixStoreStmt, path string) (stmtFn, error) {
	mi, md, err := c.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	t, decl, ok := c.target(s.To)
	switch {
	case !ok:
		return nil, fmt.Errorf("matrix_store to unknown buffer or shared array %q. Fix: declare it", s.To)
	case t.buffer && !decl.Access.Writable():
		return nil, fmt.Errorf("matrix_store to buffer %q, whose access is %s. Fix: declare it write or read_write", s.To, decl.Access)
	case t.typ != md.Type:
		return nil, fmt.Errorf("matrix_store of %s matrix %q to %q of %s. Fix: store to an array of the matrix's type (matrix_convert first)", md.Type, s.Matrix, s.To, t.typ)
	}
	tl, err := c.tile(s.Offset, s.Stride, s.Layout, s.Bound)
	if err != nil {
		return nil, err
	}
	checked, site := c.strictSite(t)
	return c.collective("matrix_store", path, tl.ops, []int{mi}, func(w *worker, vals []uint32) {
		words := t.words(w)
		src := w.mats[mi]
		eachElement(md, tl.at(vals, len(words)), func(e, k uint32, in bool) bool {
			switch {
			case !in:
			case checked && !w.strictMatrixWrite(site, k):
				return false
			default:
				atomic.StoreUint32(&words[k], src[e]) // workgroups run concurrently
			}
			return true
		})
	}), nil
}

// strictSite reports whether strict mode checks accesses of t (a shared
// array under strict mode) and, if so, t's site for the shadow.
func (c *compiler) strictSite(t target) (bool, int) {
	if !c.checked(t) {
		return false, 0
	}
	return true, c.site(t)
}

// eachElement visits the elements of matrix md in row-major order with their
// position e in the matrix's words and the array index k a gives them (in:
// inside the bound and the array); it stops, returning false, when visit does.
func eachElement(md ir.MatrixDecl, a tileAt, visit func(e, k uint32, in bool) bool) bool {
	for r := range md.Rows {
		for col := range md.Cols {
			k, in := a.index(r, col)
			if !visit(r*md.Cols+col, k, in) {
				return false
			}
		}
	}
	return true
}

func (c *compiler) matrixMMA(s ir.MatrixMMAStmt, path string) (stmtFn, error) {
	ci, cd, err := c.matrix(s.Acc)
	if err != nil {
		return nil, err
	}
	ai, ad, err := c.matrix(s.A)
	if err != nil {
		return nil, err
	}
	bi, bd, err := c.matrix(s.B)
	if err != nil {
		return nil, err
	}
	switch {
	case cd.Type != ir.F32:
		return nil, fmt.Errorf("matrix_mma accumulates into %s matrix %q. Fix: accumulate into an f32 matrix", cd.Type, s.Acc)
	case ad.Type != bd.Type:
		return nil, fmt.Errorf("matrix_mma of %s matrix %q and %s matrix %q. Fix: multiply two f16, two bf16 or two f32 matrices", ad.Type, s.A, bd.Type, s.B)
	case ci == ai || ci == bi:
		return nil, fmt.Errorf("matrix_mma accumulates into %q, one of its operands. Fix: accumulate into a matrix of its own", s.Acc)
	case ad.Rows != cd.Rows || bd.Cols != cd.Cols || ad.Cols != bd.Rows:
		return nil, fmt.Errorf("matrix_mma of %q (%d×%d) into %q (%d×%d) with %q (%d×%d): the shapes do not chain. Fix: multiply an M×K by a K×N matrix into an M×N one",
			s.A, ad.Rows, ad.Cols, s.Acc, cd.Rows, cd.Cols, s.B, bd.Rows, bd.Cols)
	case !s.Precision.Valid() || (s.Precision == ir.PrecisionTF32 && ad.Type != ir.F32):
		return nil, fmt.Errorf("matrix_mma precision %q on %s matrices. Fix: ask for tf32 only with f32 operands", s.Precision, ad.Type)
	}
	m, n, k := int(cd.Rows), int(cd.Cols), int(ad.Cols)
	typ := ad.Type
	return c.collective("matrix_mma", path, nil, []int{ai, bi, ci}, func(w *worker, _ []uint32) {
		a, b := w.mulA[:m*k], w.mulB[:k*n]
		for i, x := range w.mats[ai] {
			a[i] = f32(toF32(typ, x))
		}
		for i, x := range w.mats[bi] {
			b[i] = f32(toF32(typ, x))
		}
		mma(w.mats[ci], a, b, m, n, k)
		w.written[ci] = true
	}), nil
}

// mma is acc += a·b for an m×n acc, m×k a and k×n b, all row-major: each element
// adds its products in order of k, acc = fl32(acc + fl32(a·b)), every step
// rounded to f32 (the products of f16 and bf16 values are exact). The explicit
// conversions keep Go from fusing a multiply and an add.
func mma(acc []uint32, a, b []float32, m, n, k int) {
	for i := range m {
		arow := a[i*k : (i+1)*k]
		crow := acc[i*n : (i+1)*n]
		for j := range n {
			s := f32(crow[j])
			for kk, x := range arow {
				p := float32(x * b[kk*n+j])
				s = float32(s + p)
			}
			crow[j] = bitsOf(s)
		}
	}
}

func (c *compiler) matrixConvert(s ir.MatrixConvertStmt, path string) (stmtFn, error) {
	di, dd, err := c.matrix(s.Matrix)
	if err != nil {
		return nil, err
	}
	si, sd, err := c.matrix(s.From)
	if err != nil {
		return nil, err
	}
	switch {
	case di == si:
		return nil, fmt.Errorf("matrix_convert of %q into itself. Fix: convert into another matrix", s.Matrix)
	case dd.Rows != sd.Rows || dd.Cols != sd.Cols:
		return nil, fmt.Errorf("matrix_convert of %q (%d×%d) into %q (%d×%d). Fix: convert between matrices of one shape",
			s.From, sd.Rows, sd.Cols, s.Matrix, dd.Rows, dd.Cols)
	}
	from, to := sd.Type, dd.Type
	return c.collective("matrix_convert", path, nil, []int{si}, func(w *worker, _ []uint32) {
		dst := w.mats[di]
		for i, x := range w.mats[si] {
			dst[i] = fromF32(to, toF32(from, x))
		}
		w.written[di] = true
	}), nil
}
