package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
	"github.com/kiln-dev/kiln/plugins/internal/scope"
)

// Control flow is branches to labels: an if is "@!c bra else; then; bra end; else:
// ...; end:"; a loop is a head that tests its condition and branches to its end,
// a body, a continue point (a for loop's increment) and a branch back to the head.
// break branches to the innermost loop's end, return is ret. Statements after a
// break or return in the same block can never run and are not emitted.

// block emits stmts in a new scope, stopping at the first statement that cannot be
// reached.
func (e *emitter) block(stmts []ir.Stmt) error {
	return scope.Block(&e.scopes, stmts, &e.open, e.leading)
}

// leading emits the statement at the start of stmts, or the run of 16-bit
// accesses that starts there as one wide access (wide.go), and returns how
// many statements it emitted.
func (e *emitter) leading(stmts []ir.Stmt) (int, error) {
	if n, err := e.wide(stmts); n > 0 || err != nil {
		return n, err
	}
	return 1, e.stmt(stmts[0])
}

// typed evaluates x and checks that it has type t.
func (e *emitter) typed(x ir.Expr, t ir.Type, what string) (string, error) {
	v, err := e.typedValue(x, t, what)
	return v.reg, err
}

// typedValue is typed returning the value, with its range.
func (e *emitter) typedValue(x ir.Expr, t ir.Type, what string) (value, error) {
	return scope.Typed(x, t, what, e.expr, value.typ)
}

// typ is the value's type.
func (v value) typ() ir.Type { return v.t }

// settle returns v in a register no assignment changes: a copy of a var's or
// loop counter's register, read in place, so that a let bound to it keeps the
// value it had.
func (e *emitter) settle(v value) value {
	if !v.mutable {
		return v
	}
	reg := e.fresh(v.t)
	e.mov(v.t, reg, v.reg)
	v.reg, v.mutable = reg, false
	return v
}

// mov copies src to dst: mov.pred for bool, mov.b32 for the rest.
func (e *emitter) mov(t ir.Type, dst, src string) {
	if t == ir.Bool {
		e.inst("mov.pred %s, %s", dst, src)
		return
	}
	e.inst("mov.b32 %s, %s", dst, src)
}

// fresh returns a new register of t's kind.
func (e *emitter) fresh(t ir.Type) string {
	if t == ir.Bool {
		return e.p()
	}
	return e.r()
}

func (e *emitter) stmt(s ir.Stmt) error {
	switch s := s.(type) {
	case ir.LetStmt:
		v, err := e.expr(s.Value)
		if err != nil {
			return err
		}
		e.scopes.Bind(s.Name, local{value: e.settle(v)})
		return nil
	case ir.VarStmt:
		v, err := e.typedValue(s.Value, s.Type, fmt.Sprintf("the initial value of var %q", s.Name))
		if err != nil {
			return err
		}
		if !e.assigned[s.Name] {
			// Never assigned: the var is its initial value, range and all.
			e.scopes.Bind(s.Name, local{value: e.settle(v), variable: true})
			return nil
		}
		reg := e.fresh(s.Type)
		e.mov(s.Type, reg, v.reg)
		e.scopes.Bind(s.Name, local{value: value{reg: reg, t: s.Type}, variable: true})
		return nil
	case ir.AssignStmt:
		l, ok := e.scopes.Lookup(s.Name)
		if !ok || !l.variable {
			return fmt.Errorf("assign: %q is not a var in scope. Fix: declare it with var before assigning", s.Name)
		}
		v, err := e.typed(s.Value, l.t, fmt.Sprintf("the value assigned to %q", s.Name))
		if err != nil {
			return err
		}
		if e.cond != "" {
			// In a predicated if (fold.go).
			op := "mov.b32"
			if l.t == ir.Bool {
				op = "mov.pred"
			}
			e.inst("@%s %s %s, %s", e.cond, op, l.reg, v)
			return nil
		}
		e.mov(l.t, l.reg, v)
		return nil
	case ir.StoreStmt:
		return e.store(s)
	case ir.IfStmt:
		return e.ifStmt(s)
	case ir.ForStmt:
		return e.forStmt(s)
	case ir.WhileStmt:
		return e.whileStmt(s)
	case ir.BreakStmt:
		if len(e.loops) == 0 {
			return fmt.Errorf("break outside a loop. Fix: use break only inside for or while")
		}
		e.jump(e.loops[len(e.loops)-1].end)
		return nil
	case ir.ContinueStmt:
		if len(e.loops) == 0 {
			return fmt.Errorf("continue outside a loop. Fix: use continue only inside for or while")
		}
		e.jump(e.loops[len(e.loops)-1].cont)
		return nil
	case ir.BarrierStmt:
		e.inst("bar.sync 0")
		return nil
	case ir.AtomicStmt:
		return e.atomic(s)
	case ir.ReturnStmt:
		e.inst("ret")
		e.open = false
		return nil
	case ir.MatrixFillStmt, ir.MatrixLoadStmt, ir.MatrixStoreStmt, ir.MatrixMMAStmt, ir.MatrixConvertStmt:
		return e.matrixStmt(s)
	}
	return fmt.Errorf("statement %T has no PTX form. Fix: build statements with the ir package's types", s)
}

// target resolves a buffer or shared array.
func (e *emitter) target(name, what string) (array, error) {
	a, ok := e.arrays[name]
	if !ok {
		return a, fmt.Errorf("%s: %q is not a buffer or shared array. Fix: declare it in buffers or shared", what, name)
	}
	return a, nil
}

// inBounds returns a predicate that is index < count, or "" when that is known:
// an enclosing if has established it for a buffer (see fold.go), or the index's
// range lies below a shared or local array's fixed count (see docs/design.md,
// "Value ranges and bounds-check elision").
func (e *emitter) inBounds(a array, index value) string {
	fixed := a.shared || a.local
	if fixed && index.rng.Below(a.fixed) || !fixed && e.known(index.reg, a.count) {
		return ""
	}
	p := e.p()
	if fixed {
		e.inst("setp.lt.u32 %s, %s, %d", p, index.reg, a.fixed)
	} else {
		e.inst("setp.lt.u32 %s, %s, %s", p, index.reg, a.count)
	}
	return p
}

// address returns the address of element index of a (meaningful only in bounds)
// and the state space to access it in.
func (e *emitter) address(a array, index string) (addr, space string) {
	size := a.elem.Size()
	if a.shared {
		addr = e.r()
		e.inst("mad.lo.u32 %s, %s, %d, %s", addr, index, size, a.base)
		return addr, "shared"
	}
	off, addr := e.rd(), e.rd()
	e.inst("mul.wide.u32 %s, %s, %d", off, index, size)
	e.inst("add.s64 %s, %s, %s", addr, a.base, off)
	if a.local {
		return addr, "local"
	}
	return addr, "global"
}

// store writes target[index] only when index is in bounds; a bool goes to shared
// memory as a u32 0 or 1.
func (e *emitter) store(s ir.StoreStmt) error {
	a, err := e.target(s.Target, "store")
	if err != nil {
		return err
	}
	index, err := e.typedValue(s.Index, ir.U32, "the store index")
	if err != nil {
		return err
	}
	v, err := e.typed(s.Value, a.elem, fmt.Sprintf("the value stored to %q", s.Target))
	if err != nil {
		return err
	}
	if a.elem == ir.Bool {
		word := e.r()
		e.inst("selp.b32 %s, 1, 0, %s", word, v)
		v = word
	}
	ok := e.guarded(e.inBounds(a, index))
	addr, space := e.address(a, index.reg)
	// A 16-bit element is the register's low half.
	kind := "b32"
	if a.elem.Is16Bit() {
		kind = "b16"
	}
	e.inst("%sst.%s.%s [%s], %s", guard(ok), space, kind, addr, v)
	return nil
}

// atomicOp is the PTX operation (with its type suffix) of an IR atomic on elem.
func atomicOp(op ir.AtomicOp, elem ir.Type) (string, error) {
	if !elem.IsInteger() {
		return "", fmt.Errorf("element type %s has no atomics. Fix: use u32 or i32 elements", elem)
	}
	sign := "u32"
	if elem == ir.I32 {
		sign = "s32"
	}
	switch op {
	case ir.AtomicAdd:
		return "add.u32", nil
	case ir.AtomicMin:
		return "min." + sign, nil
	case ir.AtomicMax:
		return "max." + sign, nil
	case ir.AtomicAnd:
		return "and.b32", nil
	case ir.AtomicOr:
		return "or.b32", nil
	case ir.AtomicXor:
		return "xor.b32", nil
	case ir.AtomicExchange:
		return "exch.b32", nil
	case ir.AtomicCompareExchange:
		return "cas.b32", nil
	}
	return "", fmt.Errorf("atomic operation %d has no PTX form. Fix: use add, min, max, and, or, xor, exchange or cas", op)
}

// atomic applies the operation only when index is in bounds; its result, when
// bound, is the old value, or 0 out of bounds.
func (e *emitter) atomic(s ir.AtomicStmt) error {
	a, err := e.target(s.Target, "atomic "+s.Op.String())
	if err != nil {
		return err
	}
	op, err := atomicOp(s.Op, a.elem)
	if err != nil {
		return fmt.Errorf("atomic on %q: %w", s.Target, err)
	}
	index, err := e.typedValue(s.Index, ir.U32, "the atomic index")
	if err != nil {
		return err
	}
	v, err := e.typed(s.Value, a.elem, "the atomic value")
	if err != nil {
		return err
	}
	if s.Op == ir.AtomicCompareExchange {
		// atom.cas takes the value to compare with before the new value.
		cmp, err := e.typed(s.Compare, a.elem, "the value cas compares with")
		if err != nil {
			return err
		}
		v = cmp + ", " + v
	}
	old := e.r()
	ok := e.inBounds(a, index)
	if ok != "" {
		e.inst("mov.b32 %s, 0", old)
	}
	addr, space := e.address(a, index.reg)
	e.inst("%satom.%s.%s %s, [%s], %s", guard(ok), space, op, old, addr, v)
	if s.Result != "" {
		e.scopes.Bind(s.Result, local{value: value{reg: old, t: a.elem}})
	}
	return nil
}

// guard is the predicate prefix of an instruction run only when p holds, or ""
// for none.
func guard(p string) string {
	if p == "" {
		return ""
	}
	return "@" + p + " "
}

func (e *emitter) ifStmt(s ir.IfStmt) error {
	if len(s.Else) == 0 && predicable(s.Then) {
		return e.predicatedIf(s)
	}
	c, facts, err := e.condition(s.Cond)
	if err != nil {
		return err
	}
	if c.konst {
		// Only one side can run; code after an if both of whose sides end stays
		// unreachable.
		if c.lit.Bits&1 != 0 {
			return e.block(s.Then)
		}
		return e.block(s.Else)
	}
	cond := c.reg
	end := e.label()
	els := end
	if len(s.Else) > 0 {
		els = e.label()
	}
	e.inst("@!%s bra %s", cond, els)
	outer := len(e.facts)
	e.facts = append(e.facts, facts...)
	err = e.block(s.Then)
	e.facts = e.facts[:outer]
	if err != nil {
		return err
	}
	reached := e.open || len(s.Else) == 0
	if len(s.Else) > 0 {
		if e.open {
			e.jump(end)
		}
		e.place(els)
		if err := e.block(s.Else); err != nil {
			return err
		}
		reached = reached || e.open
	}
	e.place(end)
	e.open = reached
	return nil
}

// loopBody emits a loop's body with continue going to cont and break to end, then
// the continue point: step (a for loop's increment) and the branch back to head.
func (e *emitter) loopBody(head, cont, end string, body []ir.Stmt, step func()) error {
	e.loops = append(e.loops, loop{cont: cont, end: end})
	err := e.block(body)
	e.loops = e.loops[:len(e.loops)-1]
	if err != nil {
		return err
	}
	e.place(cont)
	step()
	e.jump(head)
	e.place(end)
	return nil
}

// whileStmt re-evaluates the condition at the head before each iteration.
func (e *emitter) whileStmt(s ir.WhileStmt) error {
	head, cont, end := e.label(), e.label(), e.label()
	e.place(head)
	cond, err := e.typed(s.Cond, ir.Bool, "the while condition")
	if err != nil {
		return err
	}
	e.inst("@!%s bra %s", cond, end)
	return e.loopBody(head, cont, end, s.Body, func() {})
}

// forStmt evaluates from, to and step once before the loop; the loop variable is a
// register compared with to (signed for i32, unsigned for u32) at the head and
// incremented, wrapping, at the continue point.
func (e *emitter) forStmt(s ir.ForStmt) error {
	var less string
	switch s.Type {
	case ir.I32:
		less = "s32"
	case ir.U32:
		less = "u32"
	default:
		return fmt.Errorf("for: loop variable %q has type %s. Fix: count with i32 or u32", s.Var, s.Type)
	}
	var vals [3]value
	for i, part := range []struct {
		x    ir.Expr
		what string
	}{{s.From, "from"}, {s.To, "to"}, {s.Step, "step"}} {
		v, err := e.expr(part.x)
		if err != nil {
			return err
		}
		if v.t != s.Type {
			return fmt.Errorf("the for loop's %s has type %s, want %s. Fix: run ir.Validate and correct the program", part.what, v.t, s.Type)
		}
		vals[i] = v
	}
	if vals[0].konst && vals[1].konst && vals[2].konst {
		n, ok := ranges.Trips(s.Type, vals[0].lit.Bits, vals[1].lit.Bits, vals[2].lit.Bits, maxUnroll)
		if ok && n*e.liveStmts(s.Body) <= maxUnrolledStmts {
			return e.unroll(s, vals[0].lit.Bits, vals[2].lit.Bits, n)
		}
	}
	var bounds [3]string
	for i, v := range vals {
		// Copy, so the loop keeps the values even if the body assigns the vars
		// they were read from.
		cp := e.r()
		e.inst("mov.b32 %s, %s", cp, v.reg)
		bounds[i] = cp
	}
	from, to, step := bounds[0], bounds[1], bounds[2]
	v := e.r()
	e.inst("mov.b32 %s, %s", v, from)
	head, cont, end := e.label(), e.label(), e.label()
	e.place(head)
	p := e.p()
	e.inst("setp.lt.%s %s, %s, %s", less, p, v, to)
	e.inst("@!%s bra %s", p, end)
	counter := value{reg: v, t: s.Type, rng: ranges.Loop(s.Type, vals[0].rng, vals[1].rng, vals[2].rng)}
	e.scopes.Push(map[string]local{s.Var: {value: counter, variable: true}})
	defer e.scopes.Pop()
	return e.loopBody(head, cont, end, s.Body, func() {
		e.inst("add.u32 %s, %s, %s", v, v, step)
	})
}
