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
	found := false
	Inspect(stmts, func(n any) bool {
		if x, ok := n.(Expr); ok && !found {
			found = f(x)
		}
		return !found
	})
	return found
}

// anyStmt reports whether f holds for a statement anywhere in stmts, nested blocks
// included.
func anyStmt(stmts []Stmt, f func(Stmt) bool) bool {
	found := false
	Inspect(stmts, func(n any) bool {
		s, ok := n.(Stmt) // not into expressions: they hold no statements
		if ok && !found {
			found = f(s)
		}
		return ok && !found
	})
	return found
}
