package scope

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Stack is an emitter's lexical scopes, the innermost last: each maps a name
// to what it is bound to (a value, a variable).
type Stack[L any] []map[string]L

// Push opens a scope with the bindings given (none, or a loop's counter).
func (s *Stack[L]) Push(bindings map[string]L) {
	if bindings == nil {
		bindings = map[string]L{}
	}
	*s = append(*s, bindings)
}

// Pop closes the innermost scope.
func (s *Stack[L]) Pop() { *s = (*s)[:len(*s)-1] }

// Bind binds name in the innermost scope, shadowing an outer binding.
func (s Stack[L]) Bind(name string, l L) { s[len(s)-1][name] = l }

// Lookup finds name's binding, innermost scope first.
func (s Stack[L]) Lookup(name string) (L, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if l, ok := s[i][name]; ok {
			return l, true
		}
	}
	var none L
	return none, false
}

// Block emits stmts with emit in a new scope of s, stopping at the first
// statement that cannot be reached: once *open is false (a break, continue or
// return closed the current block), the rest are never emitted. emit emits
// the statements at the start of the slice it is given, one or a run of them
// (see package wide), and returns how many it emitted.
func Block[L, S any](s *Stack[L], stmts []S, open *bool, emit func([]S) (int, error)) error {
	s.Push(nil)
	defer s.Pop()
	for len(stmts) > 0 && *open {
		n, err := emit(stmts)
		if err != nil {
			return err
		}
		stmts = stmts[n:]
	}
	return nil
}

// Typed evaluates x with expr and checks that its type (typeOf) is t; what
// names x in the error.
func Typed[V any](x ir.Expr, t ir.Type, what string, expr func(ir.Expr) (V, error), typeOf func(V) ir.Type) (V, error) {
	v, err := expr(x)
	if err != nil {
		var none V
		return none, err
	}
	if got := typeOf(v); got != t {
		var none V
		return none, fmt.Errorf("%s has type %s, want %s. Fix: run ir.Validate and correct the program", what, got, t)
	}
	return v, nil
}
