package ir

import "slices"

// The matrix statements of IR v1.2. Each is collective: every invocation of the
// workgroup reaches it, in uniform control flow, with the same operand values, as
// for a barrier. See docs/design.md, "IR v1.2".

// MatrixLayout says how a matrix's elements lie in a buffer or shared array.
type MatrixLayout uint8

// The matrix layouts: element (r, c) is at offset + r·stride + c in RowMajor, at
// offset + c·stride + r in ColMajor.
const (
	RowMajor MatrixLayout = iota + 1
	ColMajor
	layoutEnd
)

var layoutNames = [...]string{RowMajor: "row", ColMajor: "col"}

// String returns the layout's JSON name ("row", "col").
func (l MatrixLayout) String() string { return enumString(layoutNames[:], RowMajor, l) }

// Valid reports whether l is a defined layout.
func (l MatrixLayout) Valid() bool { return l > 0 && l < layoutEnd }

// ParseMatrixLayout turns a layout name ("row") into a MatrixLayout.
func ParseMatrixLayout(name string) (MatrixLayout, bool) {
	return parseEnum(layoutNames[:], RowMajor, name)
}

// MatrixPrecision says how matrix_mma may treat f32 operands.
type MatrixPrecision uint8

// The mma precisions: PrecisionDefault multiplies the operands as they are;
// PrecisionTF32 (f32 operands only) lets the backend round A and B to 10 fraction
// bits first.
const (
	PrecisionDefault MatrixPrecision = iota
	PrecisionTF32
	precisionEnd
)

var precisionNames = [...]string{PrecisionDefault: "", PrecisionTF32: "tf32"}

// String returns the precision's JSON name ("tf32"; "" for the default).
func (p MatrixPrecision) String() string { return enumString(precisionNames[:], PrecisionDefault, p) }

// Valid reports whether p is a defined precision.
func (p MatrixPrecision) Valid() bool { return p < precisionEnd }

// ParseMatrixPrecision turns a precision name ("tf32", or "" for the default) into
// a MatrixPrecision.
func ParseMatrixPrecision(name string) (MatrixPrecision, bool) {
	return parseEnum(precisionNames[:], PrecisionDefault, name)
}

// MatrixBound limits a matrix load or store to the first Rows rows and Cols
// columns (u32 expressions): a load gives 0 outside, a store writes nothing there.
type MatrixBound struct{ Rows, Cols Expr }

// MatrixFillStmt sets every element of Matrix to Value (an expression of the
// matrix's element type).
type MatrixFillStmt struct {
	Matrix string
	Value  Expr
}

// MatrixLoadStmt fills Matrix from the buffer or shared array From (of the
// matrix's element type): element (r, c) is From[Offset + r·Stride + c] in
// RowMajor, From[Offset + c·Stride + r] in ColMajor (u32 arithmetic), 0 where the
// index is out of range or (r, c) is outside Bound when Bound is set.
type MatrixLoadStmt struct {
	Matrix string
	From   string
	Offset Expr
	Stride Expr
	Layout MatrixLayout
	Bound  *MatrixBound
}

// MatrixStoreStmt writes Matrix to the buffer or shared array To with the
// addressing of MatrixLoadStmt; elements outside Bound or out of range are not
// written.
type MatrixStoreStmt struct {
	Matrix string
	To     string
	Offset Expr
	Stride Expr
	Layout MatrixLayout
	Bound  *MatrixBound
}

// matrixCopy is what a matrix load and a matrix store share, for the code that
// treats them alike: the statement's JSON name, the matrix, the buffer or shared
// array on the other side (under the JSON key from or to) and the addressing.
type matrixCopy struct {
	store          bool
	matrix, array  string
	offset, stride Expr
	layout         MatrixLayout
	bound          *MatrixBound
}

// asMatrixCopy views a MatrixLoadStmt or MatrixStoreStmt as a matrixCopy.
func asMatrixCopy(s Stmt) (matrixCopy, bool) {
	switch s := s.(type) {
	case MatrixLoadStmt:
		return matrixCopy{false, s.Matrix, s.From, s.Offset, s.Stride, s.Layout, s.Bound}, true
	case MatrixStoreStmt:
		return matrixCopy{true, s.Matrix, s.To, s.Offset, s.Stride, s.Layout, s.Bound}, true
	}
	return matrixCopy{}, false
}

// stmt is the MatrixLoadStmt or MatrixStoreStmt that c views.
func (c matrixCopy) stmt() Stmt {
	if c.store {
		return MatrixStoreStmt{Matrix: c.matrix, To: c.array, Offset: c.offset, Stride: c.stride, Layout: c.layout, Bound: c.bound}
	}
	return MatrixLoadStmt{Matrix: c.matrix, From: c.array, Offset: c.offset, Stride: c.stride, Layout: c.layout, Bound: c.bound}
}

// op and arrayKey are the statement's JSON name and the key of its array.
func (c matrixCopy) op() string {
	if c.store {
		return "matrix_store"
	}
	return "matrix_load"
}

func (c matrixCopy) arrayKey() string {
	if c.store {
		return "to"
	}
	return "from"
}

// MatrixMMAStmt computes Acc += A·B: A is M×K, B K×N, Acc M×N of f32; A and B are
// both f16, both bf16 or both f32. Precision PrecisionTF32 (f32 operands only)
// allows rounding A and B to tf32 first.
type MatrixMMAStmt struct {
	Acc       string
	A, B      string
	Precision MatrixPrecision
}

// MatrixConvertStmt sets Matrix to From's elements converted to Matrix's element
// type (as cast does, through f32); both have the same shape.
type MatrixConvertStmt struct {
	Matrix string
	From   string
}

// UsesMatrices reports whether p declares workgroup matrices (IR v1.2).
func (p *Program) UsesMatrices() bool { return len(p.Matrices) > 0 }

// Uses16BitTypes reports whether p declares a buffer, shared array or matrix of
// f16 or bf16, or an expression anywhere has such a type (a literal or a cast), so
// a backend knows to require 16-bit support (IR v1.2).
func (p *Program) Uses16BitTypes() bool {
	return slices.ContainsFunc(p.Buffers, func(b BufferDecl) bool { return b.Type.Is16Bit() }) ||
		slices.ContainsFunc(p.Shared, func(s SharedDecl) bool { return s.Type.Is16Bit() }) ||
		slices.ContainsFunc(p.Matrices, func(m MatrixDecl) bool { return m.Type.Is16Bit() }) ||
		slices.ContainsFunc(p.Params, func(d ParamDecl) bool { return d.Type.Is16Bit() }) ||
		anyStmt(p.Body, func(s Stmt) bool {
			v, ok := s.(VarStmt)
			return ok && v.Type.Is16Bit()
		}) ||
		anyExpr(p.Body, func(x Expr) bool {
			switch x := x.(type) {
			case Literal:
				return x.Type.Is16Bit()
			case CastExpr:
				return x.To.Is16Bit()
			}
			return false
		})
}

// Matrix declares a workgroup matrix of rows×cols elements of type t (IR v1.2) and
// returns its name for the matrix statements.
func (b *Builder) Matrix(name string, t Type, rows, cols uint32) string {
	b.prog.Matrices = append(b.prog.Matrices, MatrixDecl{Name: name, Type: t, Rows: rows, Cols: cols})
	return name
}

// MatrixFill sets every element of matrix m to value.
func (k *Block) MatrixFill(m string, value Expr) {
	k.stmts = append(k.stmts, MatrixFillStmt{Matrix: m, Value: value})
}

// MatrixLoad fills matrix m from the buffer or shared array from, starting at
// offset, rows (RowMajor) or columns (ColMajor) stride elements apart.
func (k *Block) MatrixLoad(m, from string, offset, stride Expr, layout MatrixLayout) {
	k.stmts = append(k.stmts, MatrixLoadStmt{Matrix: m, From: from, Offset: offset, Stride: stride, Layout: layout})
}

// MatrixLoadBounded is MatrixLoad that reads only the first rows×cols elements of
// the tile and gives 0 for the others.
func (k *Block) MatrixLoadBounded(m, from string, offset, stride Expr, layout MatrixLayout, rows, cols Expr) {
	k.stmts = append(k.stmts, MatrixLoadStmt{Matrix: m, From: from, Offset: offset, Stride: stride, Layout: layout,
		Bound: &MatrixBound{Rows: rows, Cols: cols}})
}

// MatrixStore writes matrix m to the buffer or shared array to, with MatrixLoad's
// addressing.
func (k *Block) MatrixStore(m, to string, offset, stride Expr, layout MatrixLayout) {
	k.stmts = append(k.stmts, MatrixStoreStmt{Matrix: m, To: to, Offset: offset, Stride: stride, Layout: layout})
}

// MatrixStoreBounded is MatrixStore that writes only the first rows×cols elements
// of the tile.
func (k *Block) MatrixStoreBounded(m, to string, offset, stride Expr, layout MatrixLayout, rows, cols Expr) {
	k.stmts = append(k.stmts, MatrixStoreStmt{Matrix: m, To: to, Offset: offset, Stride: stride, Layout: layout,
		Bound: &MatrixBound{Rows: rows, Cols: cols}})
}

// MatrixMMA accumulates acc += a·b.
func (k *Block) MatrixMMA(acc, a, b string) {
	k.stmts = append(k.stmts, MatrixMMAStmt{Acc: acc, A: a, B: b})
}

// MatrixMMATF32 accumulates acc += a·b for f32 a and b, letting the backend round
// them to tf32 first.
func (k *Block) MatrixMMATF32(acc, a, b string) {
	k.stmts = append(k.stmts, MatrixMMAStmt{Acc: acc, A: a, B: b, Precision: PrecisionTF32})
}

// MatrixConvert sets matrix dst to src's elements converted to dst's type.
func (k *Block) MatrixConvert(dst, src string) {
	k.stmts = append(k.stmts, MatrixConvertStmt{Matrix: dst, From: src})
}
