package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Speculated ifs (see docs/design.md, "Vulkan", "Speculated ifs"): an if whose
// arms hold only lets, stores and assigns of lane-local expressions evaluates
// every expression of both arms, loads included, before its selection
// construct, which then holds only the stores and assigns. A driver that
// unrolls the loop around such an if (vector_add's epi elements) so has all
// the loads in flight together instead of one behind each branch.
//
// Evaluating an expression has no effect the program can observe and never
// faults: a load reads from its clamped index (0 out of bounds, an element
// every buffer and shared array has) and selects 0, division guards its
// divisor, and a shared access loses its check only by its index's range,
// which holds on every path. What could change is the order of a load and a
// write to the memory it reads, so an arm is speculated only when no
// expression after a store loads from memory that store may have written (the
// same array; any buffer after a buffer store unless Target.DisjointBindings
// says bindings never overlap) and none after an assign reads that var.
// Subgroup operations depend on which lanes run them and are never
// speculated, nor is an arm with any other statement.

// maxSpeculated is the most statements of one arm that are speculated.
const maxSpeculated = 8

// speculable reports whether an arm may be evaluated before its if's branch.
func (e *emitter) speculable(stmts []ir.Stmt) bool {
	if len(stmts) > maxSpeculated {
		return false
	}
	w := written{e: e, arrays: map[string]bool{}, vars: map[string]bool{}}
	for _, s := range stmts {
		var exprs []ir.Expr
		switch s := s.(type) {
		case ir.LetStmt:
			exprs = []ir.Expr{s.Value}
		case ir.StoreStmt:
			exprs = []ir.Expr{s.Index, s.Value}
		case ir.AssignStmt:
			exprs = []ir.Expr{s.Value}
		default:
			return false
		}
		for _, x := range exprs {
			if !w.speculable(x) {
				return false
			}
		}
		switch s := s.(type) {
		case ir.StoreStmt:
			w.arrays[s.Target] = true
			if a, ok := e.arrays[s.Target]; ok && !a.shared {
				w.buffer = true
			}
		case ir.AssignStmt:
			w.vars[s.Name] = true
		}
	}
	return true
}

// written is what the statements of an arm so far store to and assign.
type written struct {
	e      *emitter
	arrays map[string]bool // stored to
	buffer bool            // some buffer is stored to
	vars   map[string]bool // assigned
}

// mayRead reports whether a load from the array name may read what the arm
// has stored.
func (w written) mayRead(name string) bool {
	a, ok := w.e.arrays[name]
	return !ok || w.arrays[name] || !a.shared && w.buffer && !w.e.target.DisjointBindings
}

// speculable reports whether x has no subgroup operation, loads nothing the arm
// may have stored and reads no var it assigned.
func (w written) speculable(x ir.Expr) bool {
	sub := func(xs ...ir.Expr) bool {
		for _, x := range xs {
			if !w.speculable(x) {
				return false
			}
		}
		return true
	}
	switch x := x.(type) {
	case ir.Literal, ir.ParamRef, ir.BuiltinRef, ir.LenExpr, ir.UniformRef:
		return true
	case ir.LocalRef:
		return !w.vars[x.Name]
	case ir.LoadExpr:
		return !w.mayRead(x.Target) && sub(x.Index)
	case ir.UnaryExpr:
		return sub(x.X)
	case ir.BinaryExpr:
		return sub(x.X, x.Y)
	case ir.FmaExpr:
		return sub(x.A, x.B, x.C)
	case ir.SelectExpr:
		return sub(x.Cond, x.A, x.B)
	case ir.CastExpr:
		return sub(x.X)
	case ir.BitcastExpr:
		return sub(x.X)
	}
	return false
}

// pending is a store or an assign whose operands are evaluated and that runs
// only in its arm: a store to a at index, or, with a nil array, an assign of v
// to the Function variable ptr.
type pending struct {
	a     *array
	index value
	ptr   uint32
	v     uint32
}

// speculate evaluates an arm's lets and the operands of its stores and assigns
// in the current block, in a scope of its own, and returns the stores and
// assigns.
func (e *emitter) speculate(stmts []ir.Stmt) ([]pending, error) {
	e.scopes.Push(nil)
	defer e.scopes.Pop()
	var out []pending
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.LetStmt:
			v, err := e.expr(s.Value)
			if err != nil {
				return nil, err
			}
			e.scopes.Bind(s.Name, local{value: v})
		case ir.AssignStmt:
			l, ok := e.scopes.Lookup(s.Name)
			if !ok || !l.variable {
				return nil, fmt.Errorf("assign: %q is not a var in scope. Fix: declare it with var before assigning", s.Name)
			}
			v, err := e.typed(s.Value, l.t, fmt.Sprintf("the value assigned to %q", s.Name))
			if err != nil {
				return nil, err
			}
			out = append(out, pending{ptr: l.id, v: v})
		case ir.StoreStmt:
			a, index, v, err := e.storeOperands(s)
			if err != nil {
				return nil, err
			}
			out = append(out, pending{a: &a, index: index, v: v})
		default:
			return nil, fmt.Errorf("statement %T cannot be speculated. Fix: report this emitter bug", s)
		}
	}
	return out, nil
}

// commit runs a pending store or assign in the current block.
func (e *emitter) commit(p pending) {
	if p.a == nil {
		e.inst(opStore, p.ptr, p.v)
		return
	}
	e.storeAt(*p.a, p.index, p.v)
}

// speculatedIf emits an if on the non-constant condition cond whose arms are
// speculable: both arms' expressions first, then a selection construct
// holding only their stores and assigns, or none when there are none. A lone
// store under the if is one selection construct on cond && index < count.
func (e *emitter) speculatedIf(cond uint32, s ir.IfStmt) error {
	then, err := e.speculate(s.Then)
	if err != nil {
		return err
	}
	els, err := e.speculate(s.Else)
	if err != nil {
		return err
	}
	switch {
	case len(then) == 0 && len(els) == 0:
		return nil
	case len(then) == 0:
		cond = e.op(opLogicalNot, e.bool(), cond)
		then, els = els, nil
	}
	if len(els) == 0 && len(then) == 1 && then[0].a != nil {
		p := then[0]
		guard := cond
		if !e.provablyInBounds(*p.a, p.index) {
			guard = e.op(opLogicalAnd, e.bool(), cond, e.inBounds(*p.a, p.index.id))
		}
		e.guarded(guard, func() { e.storeTo(*p.a, p.index.id, p.v) })
		return nil
	}
	thenLabel, merge := e.id(), e.id()
	elseLabel := merge
	if len(els) > 0 {
		elseLabel = e.id()
	}
	e.inst(opSelectionMerge, merge, selectionControlNone)
	e.terminate(opBranchConditional, cond, thenLabel, elseLabel)
	for _, arm := range []struct {
		label uint32
		ops   []pending
	}{{thenLabel, then}, {elseLabel, els}} {
		if arm.label == merge {
			continue
		}
		e.label(arm.label)
		for _, p := range arm.ops {
			e.commit(p)
		}
		e.terminate(opBranch, merge)
	}
	e.label(merge)
	return nil
}
