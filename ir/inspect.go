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
		switch s := s.(type) {
		case LetStmt:
			inspectExpr(s.Value, visit)
		case VarStmt:
			inspectExpr(s.Value, visit)
		case AssignStmt:
			inspectExpr(s.Value, visit)
		case StoreStmt:
			inspectExpr(s.Index, visit)
			inspectExpr(s.Value, visit)
		case IfStmt:
			inspectExpr(s.Cond, visit)
			Inspect(s.Then, visit)
			Inspect(s.Else, visit)
		case ForStmt:
			inspectExpr(s.From, visit)
			inspectExpr(s.To, visit)
			inspectExpr(s.Step, visit)
			Inspect(s.Body, visit)
		case WhileStmt:
			inspectExpr(s.Cond, visit)
			Inspect(s.Body, visit)
		case AtomicStmt:
			inspectExpr(s.Index, visit)
			inspectExpr(s.Value, visit)
			inspectExpr(s.Compare, visit)
		case MatrixFillStmt:
			inspectExpr(s.Value, visit)
		case MatrixLoadStmt:
			inspectAddressing(s.Offset, s.Stride, s.Bound, visit)
		case MatrixStoreStmt:
			inspectAddressing(s.Offset, s.Stride, s.Bound, visit)
		}
	}
}

func inspectAddressing(offset, stride Expr, bound *MatrixBound, visit func(node any) bool) {
	inspectExpr(offset, visit)
	inspectExpr(stride, visit)
	if bound != nil {
		inspectExpr(bound.Rows, visit)
		inspectExpr(bound.Cols, visit)
	}
}

func inspectExpr(e Expr, visit func(node any) bool) {
	if e == nil || !visit(e) {
		return
	}
	switch e := e.(type) {
	case LoadExpr:
		inspectExpr(e.Index, visit)
	case UnaryExpr:
		inspectExpr(e.X, visit)
	case BinaryExpr:
		inspectExpr(e.X, visit)
		inspectExpr(e.Y, visit)
	case FmaExpr:
		inspectExpr(e.A, visit)
		inspectExpr(e.B, visit)
		inspectExpr(e.C, visit)
	case SelectExpr:
		inspectExpr(e.Cond, visit)
		inspectExpr(e.A, visit)
		inspectExpr(e.B, visit)
	case CastExpr:
		inspectExpr(e.X, visit)
	case BitcastExpr:
		inspectExpr(e.X, visit)
	case SubgroupExpr:
		inspectExpr(e.X, visit)
		inspectExpr(e.Lane, visit)
	}
}
