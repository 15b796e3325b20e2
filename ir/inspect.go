package ir

// Inspect walks stmts in program order, depth first. It calls visit with each
// statement and, when visit returns true, goes on into the statement's
// expressions in field order and its nested blocks (an if's condition, then
// its then and else blocks; a for's from, to and step, then its body; a matrix
// load's or store's offset, stride, then its bound's rows and cols); it calls
// visit with each expression and, when visit returns true, goes on into its
// operands. Absent expressions (an atomic's nil Compare, a subgroup
// operation's nil Lane, a matrix load's or store's nil Bound) are not visited.
// Nodes are the Stmt and Expr values.
func Inspect(stmts []Stmt, visit func(node any) bool) {
	for _, s := range stmts {
		if !visit(s) {
			continue
		}
		xs, blocks := stmtParts(s)
		for _, x := range xs {
			inspectExpr(x, visit)
		}
		for _, b := range blocks {
			Inspect(b, visit)
		}
	}
}

func inspectExpr(e Expr, visit func(node any) bool) {
	if e == nil || !visit(e) {
		return
	}
	for _, x := range operands(e) {
		inspectExpr(x, visit)
	}
}

// stmtParts is the table of what a statement holds: its expressions in field
// order (a nil one included) and then its nested blocks, in the order Inspect
// documents.
func stmtParts(s Stmt) ([]Expr, [][]Stmt) {
	switch s := s.(type) {
	case LetStmt:
		return []Expr{s.Value}, nil
	case VarStmt:
		return []Expr{s.Value}, nil
	case AssignStmt:
		return []Expr{s.Value}, nil
	case StoreStmt:
		return []Expr{s.Index, s.Value}, nil
	case IfStmt:
		return []Expr{s.Cond}, [][]Stmt{s.Then, s.Else}
	case ForStmt:
		return []Expr{s.From, s.To, s.Step}, [][]Stmt{s.Body}
	case WhileStmt:
		return []Expr{s.Cond}, [][]Stmt{s.Body}
	case AtomicStmt:
		return []Expr{s.Index, s.Value, s.Compare}, nil
	case MatrixFillStmt:
		return []Expr{s.Value}, nil
	case MatrixLoadStmt, MatrixStoreStmt:
		mc, _ := asMatrixCopy(s)
		return append([]Expr{mc.offset, mc.stride}, mc.bound.exprs()...), nil
	}
	return nil, nil
}

// exprs returns the bound's expressions, none for a nil bound.
func (b *MatrixBound) exprs() []Expr {
	if b == nil {
		return nil
	}
	return []Expr{b.Rows, b.Cols}
}

// operands is the table of an expression's operands in field order (a nil one
// included).
func operands(x Expr) []Expr {
	switch x := x.(type) {
	case LoadExpr:
		return []Expr{x.Index}
	case UnaryExpr:
		return []Expr{x.X}
	case BinaryExpr:
		return []Expr{x.X, x.Y}
	case FmaExpr:
		return []Expr{x.A, x.B, x.C}
	case SelectExpr:
		return []Expr{x.Cond, x.A, x.B}
	case CastExpr:
		return []Expr{x.X}
	case BitcastExpr:
		return []Expr{x.X}
	case SubgroupExpr:
		return []Expr{x.X, x.Lane}
	}
	return nil
}
