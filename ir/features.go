package ir

// UsesSubgroups reports whether p reads a subgroup builtin or applies a subgroup
// operation (IR v1.1), so a backend knows to require subgroup support. See
// docs/design.md, "IR v1.1".
func (p *Program) UsesSubgroups() bool {
	return anyExpr(p.Body, func(x Expr) bool {
		switch x := x.(type) {
		case SubgroupExpr:
			return true
		case BuiltinRef:
			return x.Kind == SubgroupSizeBuiltin || x.Kind == SubgroupInvocationIDBuiltin
		}
		return false
	})
}

// anyExpr reports whether f holds for an expression anywhere in stmts, operands
// included.
func anyExpr(stmts []Stmt, f func(Expr) bool) bool {
	for _, s := range stmts {
		var xs []Expr
		var blocks [][]Stmt
		switch s := s.(type) {
		case LetStmt:
			xs = []Expr{s.Value}
		case VarStmt:
			xs = []Expr{s.Value}
		case AssignStmt:
			xs = []Expr{s.Value}
		case StoreStmt:
			xs = []Expr{s.Index, s.Value}
		case IfStmt:
			xs, blocks = []Expr{s.Cond}, [][]Stmt{s.Then, s.Else}
		case ForStmt:
			xs, blocks = []Expr{s.From, s.To, s.Step}, [][]Stmt{s.Body}
		case WhileStmt:
			xs, blocks = []Expr{s.Cond}, [][]Stmt{s.Body}
		case AtomicStmt:
			xs = []Expr{s.Index, s.Value, s.Compare}
		case MatrixFillStmt:
			xs = []Expr{s.Value}
		case MatrixLoadStmt:
			xs = append([]Expr{s.Offset, s.Stride}, s.Bound.exprs()...)
		case MatrixStoreStmt:
			xs = append([]Expr{s.Offset, s.Stride}, s.Bound.exprs()...)
		}
		for _, x := range xs {
			if exprAny(x, f) {
				return true
			}
		}
		for _, b := range blocks {
			if anyExpr(b, f) {
				return true
			}
		}
	}
	return false
}

// anyStmt reports whether f holds for a statement anywhere in stmts, nested blocks
// included.
func anyStmt(stmts []Stmt, f func(Stmt) bool) bool {
	for _, s := range stmts {
		if f(s) {
			return true
		}
		var blocks [][]Stmt
		switch s := s.(type) {
		case IfStmt:
			blocks = [][]Stmt{s.Then, s.Else}
		case ForStmt:
			blocks = [][]Stmt{s.Body}
		case WhileStmt:
			blocks = [][]Stmt{s.Body}
		}
		for _, b := range blocks {
			if anyStmt(b, f) {
				return true
			}
		}
	}
	return false
}

// exprs returns the bound's expressions, none for a nil bound.
func (b *MatrixBound) exprs() []Expr {
	if b == nil {
		return nil
	}
	return []Expr{b.Rows, b.Cols}
}

func exprAny(x Expr, f func(Expr) bool) bool {
	if x == nil {
		return false
	}
	if f(x) {
		return true
	}
	var ops []Expr
	switch x := x.(type) {
	case LoadExpr:
		ops = []Expr{x.Index}
	case UnaryExpr:
		ops = []Expr{x.X}
	case BinaryExpr:
		ops = []Expr{x.X, x.Y}
	case FmaExpr:
		ops = []Expr{x.A, x.B, x.C}
	case SelectExpr:
		ops = []Expr{x.Cond, x.A, x.B}
	case CastExpr:
		ops = []Expr{x.X}
	case BitcastExpr:
		ops = []Expr{x.X}
	case SubgroupExpr:
		ops = []Expr{x.X, x.Lane}
	}
	for _, o := range ops {
		if exprAny(o, f) {
			return true
		}
	}
	return false
}
