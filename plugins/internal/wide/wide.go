package wide

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Widths are the run lengths tried, longest first.
var Widths = []int{8, 4, 2}

// Run is a matched run: N statements on buffer Target at index Base+k, storing
// (Store) or loading.
type Run struct {
	Target string
	Base   string
	N      int
	Store  bool
}

// Match finds the longest run at the start of stmts on a buffer for which
// qualifies holds.
func Match(stmts []ir.Stmt, qualifies func(target string) bool) (Run, bool) {
	if len(stmts) == 0 {
		return Run{}, false
	}
	target, base, dst, store, ok := access(stmts[0], 0)
	if !ok || !qualifies(target) || dst == base {
		return Run{}, false
	}
	n := 1
	for n < len(stmts) && n < Widths[0] {
		t, b, d, s, ok := access(stmts[n], uint32(n))
		if !ok || t != target || b != base || s != store || d == base {
			break
		}
		n++
	}
	for _, w := range Widths {
		if n >= w {
			return Run{Target: target, Base: base, N: w, Store: store}, true
		}
	}
	return Run{}, false
}

// access returns the k-th statement's parts if it fits a run: the buffer, the
// base, the destination name of a load ("" for a store) and whether it stores.
func access(s ir.Stmt, k uint32) (target, base, dst string, store, ok bool) {
	if st, isStore := s.(ir.StoreStmt); isStore {
		if readsMemory(st.Value) {
			return "", "", "", false, false
		}
		base, ok = index(st.Index, k)
		return st.Target, base, "", true, ok
	}
	dst, ld, isLoad := Load(s)
	if !isLoad {
		return "", "", "", false, false
	}
	base, ok = index(ld.Index, k)
	return ld.Target, base, dst, false, ok
}

// Load returns the name a let or assign statement binds and the load it binds
// it to; ok is false for any other statement. The statements of a run of
// loads are such statements.
func Load(s ir.Stmt) (name string, ld ir.LoadExpr, ok bool) {
	var value ir.Expr
	switch s := s.(type) {
	case ir.LetStmt:
		name, value = s.Name, s.Value
	case ir.AssignStmt:
		name, value = s.Name, s.Value
	default:
		return "", ir.LoadExpr{}, false
	}
	ld, ok = value.(ir.LoadExpr)
	return name, ld, ok
}

// index reports whether x is base+k (or base, for k = 0) with base a local,
// returning base.
func index(x ir.Expr, k uint32) (string, bool) {
	if l, ok := x.(ir.LocalRef); ok {
		return l.Name, k == 0
	}
	b, ok := x.(ir.BinaryExpr)
	if !ok || b.Op != ir.OpAdd {
		return "", false
	}
	l, lok := b.X.(ir.LocalRef)
	c, cok := b.Y.(ir.Literal)
	if !lok || !cok {
		l, lok = b.Y.(ir.LocalRef)
		c, cok = b.X.(ir.Literal)
	}
	if !lok || !cok || c.Type != ir.U32 || c.Bits != k {
		return "", false
	}
	return l.Name, true
}

// readsMemory reports whether x may read memory: anything but locals,
// literals, parameters, builtins and operators on them (a load, a length, a
// subgroup operation) counts.
func readsMemory(x ir.Expr) bool {
	switch x := x.(type) {
	case ir.UnaryExpr:
		return readsMemory(x.X)
	case ir.BinaryExpr:
		return readsMemory(x.X) || readsMemory(x.Y)
	case ir.FmaExpr:
		return readsMemory(x.A) || readsMemory(x.B) || readsMemory(x.C)
	case ir.SelectExpr:
		return readsMemory(x.Cond) || readsMemory(x.A) || readsMemory(x.B)
	case ir.CastExpr:
		return readsMemory(x.X)
	case ir.BitcastExpr:
		return readsMemory(x.X)
	case ir.LocalRef, ir.Literal, ir.ParamRef, ir.BuiltinRef:
		return false
	}
	return true
}

// Values evaluates the values a run of stores stores, in order, with typed
// (the emitter's evaluation of an expression checked to have type elem).
func Values[V any](stores []ir.Stmt, elem ir.Type, typed func(x ir.Expr, t ir.Type, what string) (V, error)) ([]V, error) {
	vals := make([]V, 0, len(stores))
	for _, s := range stores {
		s := s.(ir.StoreStmt)
		v, err := typed(s.Value, elem, fmt.Sprintf("the value stored to %q", s.Target))
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
	return vals, nil
}
