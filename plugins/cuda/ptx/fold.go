package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
)

// Emit-time simplifications (see docs/design.md, "CUDA"). They change how a
// program is written in PTX, never what it computes:
//
//   - Integer constants fold: every integer and bool value has a range
//     (ir/ranges; see docs/design.md, "Value ranges and bounds-check
//     elision"), and an operator whose result's range is one number (both
//     operands constant: literals, specialization parameters, the workgroup
//     size, lets bound to constants, an unrolled loop's counter; or ranges that
//     decide a comparison) is that constant, with wrapping arithmetic as at run
//     time; x+0, x-0, x*1 are x and x*0 is 0.
//   - A for loop whose from, to and step are constants and which runs at most
//     maxUnroll times (and fits maxUnrolledStmts statements unrolled, as
//     liveStmts counts them) is unrolled: its body is emitted once per iteration with the counter a
//     constant (ir.Validate makes sure no statement assigns it); continue jumps
//     to the next copy, break past the last, and the copies after one that
//     always breaks or returns are left out.
//   - Comparisons and land, lor, eq, ne of constants fold too, and an if whose
//     condition folds to a constant is its then or else block, or nothing.
//   - An if without else whose body is at most maxPredicated lets, stores and
//     assignments (no subgroup operation, which must not run in lanes the if
//     leaves out) is written without a branch: the body runs straight through,
//     its loads, stores and assignments predicated on the condition (and their
//     bounds), so the loads of
//     consecutive ifs (an unrolled loop's copies) can be in flight together.
//     Its arithmetic runs in every lane, which no IR operation can notice.
//   - Inside an if whose condition is (or is a land of) i < len(buf) (or
//     len(buf) > i) with i a u32 value, loads and stores of buf at exactly that
//     value skip their bounds check: the condition already made it.

// maxUnroll is the most iterations a for loop is unrolled for: enough for the
// deepest shared tile of the register-tiled matmul (32 steps of k).
const maxUnroll = 32

// maxUnrolledStmts bounds the statements an unrolled loop emits (counted by
// liveStmts), so unrolling never blows a kernel up: the matmul's inner loop at
// an 8×8 block is 80 statements per step.
const maxUnrolledStmts = 4096

// boundFact says that register index holds a value below the element count in
// register count.
type boundFact struct{ index, count string }

// known reports whether index < count holds where the emitter is.
func (e *emitter) known(index, count string) bool {
	for _, f := range e.facts {
		if f.index == index && f.count == count {
			return true
		}
	}
	return false
}

// simplifyInt simplifies an identity: x+0, 0+x, x-0, x*1, 1*x, x*0, 0*x. (Two
// constants fold through their ranges before this.)
func (e *emitter) simplifyInt(op ir.BinaryOp, a, b value) (value, bool) {
	is := func(v value, bits uint32) bool { return v.konst && v.lit.Bits == bits }
	switch op {
	case ir.OpAdd:
		if is(b, 0) {
			return a, true
		}
		if is(a, 0) {
			return b, true
		}
	case ir.OpSub:
		if is(b, 0) {
			return a, true
		}
	case ir.OpMul:
		if is(b, 1) {
			return a, true
		}
		if is(a, 1) {
			return b, true
		}
		if is(a, 0) || is(b, 0) {
			return e.constant(ir.Literal{Type: a.t, Bits: 0}), true
		}
	}
	return value{}, false
}

// liveStmts counts the statements of stmts that emit code, through their nested
// blocks: an if whose condition is a constant before anything is emitted
// (staticValue) counts as its live arm, and a nested for loop that will unroll
// (constant bounds, at most maxUnroll iterations) as its body once per
// iteration.
func (e *emitter) liveStmts(stmts []ir.Stmt) int {
	n := 0
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.IfStmt:
			r, _ := e.staticValue(s.Cond)
			switch c, ok := r.Const(); {
			case ok && c != 0:
				n += e.liveStmts(s.Then)
			case ok:
				n += e.liveStmts(s.Else)
			default:
				n += 1 + e.liveStmts(s.Then) + e.liveStmts(s.Else)
			}
		case ir.ForStmt:
			trips := 1
			from, _ := e.staticValue(s.From)
			to, _ := e.staticValue(s.To)
			step, _ := e.staticValue(s.Step)
			f, fok := from.Const()
			t, tok := to.Const()
			st, sok := step.Const()
			if fok && tok && sok {
				if k, ok := ranges.Trips(s.Type, f, t, st, maxUnroll); ok {
					trips = k
				}
			}
			n += 1 + trips*e.liveStmts(s.Body)
		case ir.WhileStmt:
			n += 1 + e.liveStmts(s.Body)
		default:
			n++
		}
	}
	return n
}

// staticValue is the range and type of x as far as they are known before any
// of x is emitted: literals, parameters, the workgroup size, local_id, the
// locals in scope and the integer operators over them. Any other expression is
// Unknown (with type 0).
func (e *emitter) staticValue(x ir.Expr) (ranges.Range, ir.Type) {
	switch x := x.(type) {
	case ir.Literal:
		return ranges.Exact(x.Bits), x.Type
	case ir.ParamRef:
		if l, ok := e.params[x.Name]; ok {
			return ranges.Exact(l.Bits), l.Type
		}
	case ir.BuiltinRef:
		switch {
		case x.Axis > 2:
		case x.Kind == ir.WorkgroupSizeBuiltin:
			return ranges.Exact(e.wg[x.Axis]), ir.U32
		case x.Kind == ir.LocalIDBuiltin:
			return ranges.Between(0, e.wg[x.Axis]-1), ir.U32
		}
	case ir.LocalRef:
		if l, ok := e.scopes.Lookup(x.Name); ok {
			return l.rng, l.t
		}
	case ir.UnaryExpr:
		if r, t := e.staticValue(x.X); t != 0 && !t.IsFloat() {
			return ranges.Unary(x.Op, t, r), t
		}
	case ir.BinaryExpr:
		a, t := e.staticValue(x.X)
		b, u := e.staticValue(x.Y)
		if t == 0 || u != t || t.IsFloat() {
			break
		}
		rt := t
		if x.Op.IsComparison() {
			rt = ir.Bool
		}
		return ranges.Binary(x.Op, t, a, b), rt
	case ir.CastExpr:
		if r, t := e.staticValue(x.X); t != 0 && !t.IsFloat() && !x.To.IsFloat() {
			return ranges.Cast(t, x.To, r), x.To
		}
	}
	return ranges.Unknown(), 0
}

// unroll emits a for loop of n iterations, counter values from, from+step, ...,
// as n copies of its body.
func (e *emitter) unroll(s ir.ForStmt, from, step uint32, n int) error {
	end := e.label()
	v := from
	for range n {
		next := e.label()
		counter := e.constant(ir.Literal{Type: s.Type, Bits: v})
		e.scopes.Push(map[string]local{s.Var: {value: counter}})
		e.loops = append(e.loops, loop{cont: next, end: end})
		err := e.block(s.Body)
		e.loops = e.loops[:len(e.loops)-1]
		e.scopes.Pop()
		if err != nil {
			return err
		}
		if !e.open && !e.jumped[next] {
			// This copy always breaks or returns: the rest never run.
			break
		}
		e.place(next)
		v += step
	}
	e.place(end)
	return nil
}

// condition evaluates an if's condition and returns the bound facts it makes
// true (see the top of this file).
func (e *emitter) condition(x ir.Expr) (value, []boundFact, error) {
	if b, ok := x.(ir.BinaryExpr); ok {
		switch b.Op {
		case ir.OpLAnd:
			p1, f1, err := e.condition(b.X)
			if err != nil {
				return value{}, nil, err
			}
			p2, f2, err := e.condition(b.Y)
			if err != nil {
				return value{}, nil, err
			}
			if v, ok := e.simplifyBool(ir.OpLAnd, p1, p2); ok {
				return v, append(f1, f2...), nil
			}
			d := e.p()
			e.inst("and.pred %s, %s, %s", d, p1.reg, p2.reg)
			return value{reg: d, t: ir.Bool}, append(f1, f2...), nil
		case ir.OpLt, ir.OpGt:
			index, length := b.X, b.Y
			if b.Op == ir.OpGt {
				index, length = b.Y, b.X
			}
			l, ok := length.(ir.LenExpr)
			if !ok {
				break
			}
			a, ok := e.arrays[l.Buffer]
			if !ok || a.shared {
				break
			}
			i, err := e.expr(index)
			if err != nil {
				return value{}, nil, err
			}
			// The fact holds for this value, not for a var the body may assign.
			i = e.settle(i)
			if i.t != ir.U32 {
				return value{}, nil, fmt.Errorf("the if condition compares a %s with a buffer's length. Fix: run ir.Validate and correct the program", i.t)
			}
			p := e.pred2("lt.u32", i.reg, a.count)
			return value{reg: p, t: ir.Bool}, []boundFact{{index: i.reg, count: a.count}}, nil
		}
	}
	v, err := e.expr(x)
	if err == nil && v.t != ir.Bool {
		err = fmt.Errorf("the if condition has type %s, want bool. Fix: run ir.Validate and correct the program", v.t)
	}
	return v, nil, err
}

// maxPredicated is the most statements an if's body may have to be written as
// predicated code.
const maxPredicated = 8

// predicable reports whether an if's body can run as predicated straight-line
// code: lets, stores and assignments only, with no subgroup operation.
func predicable(stmts []ir.Stmt) bool {
	if len(stmts) == 0 || len(stmts) > maxPredicated {
		return false
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.LetStmt:
			if !laneLocal(s.Value) {
				return false
			}
		case ir.StoreStmt:
			if !laneLocal(s.Index) || !laneLocal(s.Value) {
				return false
			}
		case ir.AssignStmt:
			if !laneLocal(s.Value) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// laneLocal reports whether x involves no subgroup operation.
func laneLocal(x ir.Expr) bool {
	switch x := x.(type) {
	case ir.SubgroupExpr:
		return false
	case ir.LoadExpr:
		return laneLocal(x.Index)
	case ir.UnaryExpr:
		return laneLocal(x.X)
	case ir.BinaryExpr:
		return laneLocal(x.X) && laneLocal(x.Y)
	case ir.FmaExpr:
		return laneLocal(x.A) && laneLocal(x.B) && laneLocal(x.C)
	case ir.SelectExpr:
		return laneLocal(x.Cond) && laneLocal(x.A) && laneLocal(x.B)
	case ir.CastExpr:
		return laneLocal(x.X)
	case ir.BitcastExpr:
		return laneLocal(x.X)
	}
	return true
}

// guarded returns the predicate a memory access runs under: its bounds check ok
// ("" for none) and the condition of the predicated if being emitted, if any.
func (e *emitter) guarded(ok string) string {
	switch {
	case e.cond == "":
		return ok
	case ok == "":
		return e.cond
	}
	d := e.p()
	e.inst("and.pred %s, %s, %s", d, ok, e.cond)
	return d
}

// predicatedIf emits an if whose body is predicable as that body under its
// condition, without a branch.
func (e *emitter) predicatedIf(s ir.IfStmt) error {
	c, facts, err := e.condition(s.Cond)
	if err != nil || c.konst {
		if err == nil && c.lit.Bits&1 != 0 {
			err = e.block(s.Then)
		}
		return err
	}
	// The body may assign a var the condition read in place.
	cond := e.settle(c).reg
	// The body holds no if, so no predicated if encloses this one.
	outer := len(e.facts)
	e.facts = append(e.facts, facts...)
	e.cond = cond
	err = e.block(s.Then)
	e.facts, e.cond = e.facts[:outer], ""
	return err
}

// simplifyBool folds land, lor, eq and ne over constant bools, and land or lor
// with one constant operand (true && x is x, false && x is false, and so on).
func (e *emitter) simplifyBool(op ir.BinaryOp, a, b value) (value, bool) {
	if a.konst && b.konst {
		x, y := a.lit.Bits&1 != 0, b.lit.Bits&1 != 0
		switch op {
		case ir.OpLAnd:
			return e.constant(ir.LitBool(x && y)), true
		case ir.OpLOr:
			return e.constant(ir.LitBool(x || y)), true
		case ir.OpEq:
			return e.constant(ir.LitBool(x == y)), true
		case ir.OpNe:
			return e.constant(ir.LitBool(x != y)), true
		}
		return value{}, false
	}
	if op != ir.OpLAnd && op != ir.OpLOr {
		return value{}, false
	}
	for _, pair := range [2][2]value{{a, b}, {b, a}} {
		k, other := pair[0], pair[1]
		if !k.konst {
			continue
		}
		// true && x = x, false || x = x; false && x = false, true || x = true.
		if (k.lit.Bits&1 != 0) == (op == ir.OpLAnd) {
			return other, true
		}
		return k, true
	}
	return value{}, false
}
