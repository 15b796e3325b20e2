package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
	"github.com/kiln-dev/kiln/plugins/internal/scope"
)

// Control flow is structured as SPIR-V requires: an if is a selection construct
// (OpSelectionMerge) whose merge block follows both arms; a loop is a loop construct
// (OpLoopMerge) whose header evaluates the condition and branches to the body or
// the merge block, whose body falls through to the continue block, and whose
// continue block branches back to the header. break branches to the innermost
// loop's merge block; return is OpReturn. Statements after a break or return in the
// same block can never run and are not emitted; a merge block that no arm reaches
// holds OpUnreachable. continue branches to the innermost loop's continue block,
// which adds a for loop's step before the header tests again.

// op emits an instruction with result type resultType and a fresh result id into
// the current block and returns the id.
func (e *emitter) op(opcode, resultType uint32, operands ...uint32) uint32 {
	id := e.id()
	e.body = appendInst(e.body, opcode, append([]uint32{resultType, id}, operands...)...)
	ids := operands
	if opcode == opExtInst {
		ids = ids[2:] // the instruction set and the instruction number
	}
	switch {
	case opcode == opLoad, opcode == opPhi, isAtomic(opcode):
		e.dynamic[id] = true
	default:
		for _, o := range ids {
			if e.dynamic[o] {
				e.dynamic[id] = true
				break
			}
		}
	}
	return id
}

// inst emits an instruction without a result into the current block.
func (e *emitter) inst(opcode uint32, operands ...uint32) {
	e.body = appendInst(e.body, opcode, operands...)
}

// label starts block id.
func (e *emitter) label(id uint32) {
	e.inst(opLabel, id)
	e.cur = id
	e.open = true
}

// terminate ends the current block with a branch, return or unreachable.
func (e *emitter) terminate(opcode uint32, operands ...uint32) {
	e.inst(opcode, operands...)
	e.open = false
}

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
func (e *emitter) typed(x ir.Expr, t ir.Type, what string) (uint32, error) {
	v, err := e.typedValue(x, t, what)
	return v.id, err
}

// typedValue is typed returning the value, with its range.
func (e *emitter) typedValue(x ir.Expr, t ir.Type, what string) (value, error) {
	return scope.Typed(x, t, what, e.expr, value.typ)
}

// typ is the value's type.
func (v value) typ() ir.Type { return v.t }

func (e *emitter) stmt(s ir.Stmt) error {
	switch s := s.(type) {
	case ir.LetStmt:
		v, err := e.expr(s.Value)
		if err != nil {
			return err
		}
		e.scopes.Bind(s.Name, local{value: v})
		return nil
	case ir.VarStmt:
		return e.varStmt(s)
	case ir.AssignStmt:
		l, ok := e.scopes.Lookup(s.Name)
		if !ok || !l.variable {
			return fmt.Errorf("assign: %q is not a var in scope. Fix: declare it with var before assigning", s.Name)
		}
		v, err := e.typed(s.Value, l.t, fmt.Sprintf("the value assigned to %q", s.Name))
		if err != nil {
			return err
		}
		e.inst(opStore, l.id, v)
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
		l := e.loops[len(e.loops)-1]
		if l.left != 0 {
			e.inst(opStore, l.left, e.constant(ir.LitBool(true)))
		}
		e.terminate(opBranch, l.merge)
		return nil
	case ir.ContinueStmt:
		if len(e.loops) == 0 {
			return fmt.Errorf("continue outside a loop. Fix: use continue only inside for or while")
		}
		e.terminate(opBranch, e.loops[len(e.loops)-1].cont)
		return nil
	case ir.BarrierStmt:
		e.barrier()
		return nil
	case ir.AtomicStmt:
		return e.atomic(s)
	case ir.ReturnStmt:
		e.terminate(opReturn)
		return nil
	case ir.MatrixFillStmt, ir.MatrixLoadStmt, ir.MatrixStoreStmt, ir.MatrixMMAStmt, ir.MatrixConvertStmt:
		return e.matrixStmt(s)
	}
	return fmt.Errorf("statement %T has no SPIR-V form. Fix: build statements with the ir package's types", s)
}

// varStmt declares a Function variable in the entry block and stores the initial
// value where the var statement runs. A var no assign sets keeps its initial
// value's range.
func (e *emitter) varStmt(s ir.VarStmt) error {
	t := e.scalar(s.Type)
	v, err := e.typedValue(s.Value, s.Type, fmt.Sprintf("the initial value of var %q", s.Name))
	if err != nil {
		return err
	}
	id := e.id()
	e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, t), id, storageFunction)
	e.name(id, s.Name)
	e.inst(opStore, id, v.id)
	r := ranges.Unknown()
	if !e.assigned[s.Name] {
		r = v.rng
	}
	e.scopes.Bind(s.Name, local{value: value{id: id, t: s.Type, rng: r}, variable: true})
	return nil
}

// lookupArray resolves a buffer or shared array.
func (e *emitter) lookupArray(name, what string) (array, error) {
	a, ok := e.arrays[name]
	if !ok {
		return a, fmt.Errorf("%s: %q is not a buffer or shared array. Fix: declare it in buffers or shared", what, name)
	}
	return a, nil
}

// provablyInBounds reports whether index's range lies below a's fixed count, so
// that an access needs no check: only shared arrays have one (see
// docs/design.md, "Value ranges and bounds-check elision").
func (e *emitter) provablyInBounds(a array, index value) bool {
	return a.shared && index.rng.Below(a.count)
}

// inBounds is index < count, with a buffer's count from the push constants and a
// shared array's fixed count.
func (e *emitter) inBounds(a array, index uint32) uint32 {
	n := e.cu32(a.count)
	if !a.shared {
		n = e.count(a)
	}
	return e.op(opULessThan, e.bool(), index, n)
}

// elemPtr is a pointer to element index of a.
func (e *emitter) elemPtr(a array, index uint32) uint32 {
	t := e.memType(a)
	switch {
	case a.private:
		return e.op(opAccessChain, e.pointer(storageFunction, t), a.varID, index)
	case a.shared:
		return e.op(opAccessChain, e.pointer(storageWorkgroup, t), a.varID, index)
	case a.addressed:
		return e.op(opAccessChain, e.pointer(storagePhysicalStorageBuffer, t), e.address(a), e.cu32(0), index)
	}
	return e.op(opAccessChain, e.pointer(storageStorageBuffer, t), a.varID, e.cu32(0), index)
}

// access is the memory operands of a load or store through a pointer into a:
// a PhysicalStorageBuffer access must state its alignment, the element size.
func access(a array) []uint32 {
	if a.addressed {
		return []uint32{memoryAccessAligned, a.elem.Size()}
	}
	return nil
}

// address returns an addressed buffer's pointer from the push constants, loaded
// once in the entry block.
func (e *emitter) address(a array) uint32 {
	k := hoistKey{binding: a.binding, address: true}
	if id, ok := e.hoisted[k]; ok {
		return id
	}
	t := e.pointer(storagePhysicalStorageBuffer, a.block)
	ptr := e.id()
	e.preamble = appendInst(e.preamble, opAccessChain, e.pointer(storagePushConstant, t), ptr, e.pushVar, e.cu32(a.member))
	id := e.id()
	e.preamble = appendInst(e.preamble, opLoad, t, id, ptr)
	e.dynamic[id] = true
	e.hoisted[k] = id
	return id
}

// guarded runs do in a selection construct entered only when cond holds. It
// returns the block that branched around do (the header) and the last block of do.
func (e *emitter) guarded(cond uint32, do func()) (header, last uint32) {
	header = e.cur
	body, merge := e.id(), e.id()
	e.inst(opSelectionMerge, merge, selectionControlNone)
	e.terminate(opBranchConditional, cond, body, merge)
	e.label(body)
	do()
	last = e.cur
	e.terminate(opBranch, merge)
	e.label(merge)
	return header, last
}

// store writes target[index] only when index is in bounds.
func (e *emitter) store(s ir.StoreStmt) error {
	a, index, v, err := e.storeOperands(s)
	if err != nil {
		return err
	}
	e.storeAt(a, index, v)
	return nil
}

// storeOperands resolves a store's array and evaluates its index and value.
func (e *emitter) storeOperands(s ir.StoreStmt) (a array, index value, v uint32, err error) {
	if a, err = e.lookupArray(s.Target, "store"); err != nil {
		return a, index, 0, err
	}
	if index, err = e.typedValue(s.Index, ir.U32, "the store index"); err != nil {
		return a, index, 0, err
	}
	v, err = e.typed(s.Value, a.elem, fmt.Sprintf("the value stored to %q", s.Target))
	return a, index, v, err
}

// storeAt writes v to a[index] only when index is in bounds: unchecked where
// provablyInBounds, in a selection construct otherwise.
func (e *emitter) storeAt(a array, index value, v uint32) {
	if e.provablyInBounds(a, index) {
		e.storeTo(a, index.id, v)
		return
	}
	e.guarded(e.inBounds(a, index.id), func() { e.storeTo(a, index.id, v) })
}

// storeTo is the OpStore of v to a[index], without a check; a bf16 value is
// narrowed to a bf16 buffer's 16-bit element.
func (e *emitter) storeTo(a array, index, v uint32) {
	if e.narrowBF16(a) {
		v = e.op(opUConvert, e.u16(), v)
	}
	e.inst(opStore, append([]uint32{e.elemPtr(a, index), v}, access(a)...)...)
}

// atomic applies the operation only when index is in bounds; its result, when
// bound, is the old value or 0 out of bounds. cas is OpAtomicCompareExchange,
// which stores the value when the old value equals the compare value. Buffers use Device scope, shared
// arrays Workgroup scope; the semantics are relaxed (ordering comes from barriers).
func (e *emitter) atomic(s ir.AtomicStmt) error {
	a, err := e.lookupArray(s.Target, "atomic "+s.Op.String())
	if err != nil {
		return err
	}
	opcode, err := atomicOpcode(s.Op, a.elem)
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
	var compare uint32
	if opcode == opAtomicCompareExchange {
		if s.Compare == nil {
			return fmt.Errorf("cas on %q has no compare value. Fix: set the atomic's compare", s.Target)
		}
		if compare, err = e.typed(s.Compare, a.elem, "the cas compare value"); err != nil {
			return err
		}
	}
	t := e.scalar(a.elem)
	scope := uint32(scopeDevice)
	if a.shared {
		scope = scopeWorkgroup
	}
	var old uint32
	apply := func() {
		ptr, sc, none := e.elemPtr(a, index.id), e.cu32(scope), e.cu32(semanticsNone)
		if opcode == opAtomicCompareExchange {
			// Equal and unequal semantics, then the value stored and the comparator.
			old = e.op(opcode, t, ptr, sc, none, none, v, compare)
			return
		}
		old = e.op(opcode, t, ptr, sc, none, v)
	}
	if e.provablyInBounds(a, index) {
		apply()
		if s.Result != "" {
			e.scopes.Bind(s.Result, local{value: value{id: old, t: a.elem}})
		}
		return nil
	}
	header, last := e.guarded(e.inBounds(a, index.id), apply)
	if s.Result != "" {
		zero := e.zero(a.elem)
		res := e.op(opPhi, t, old, last, zero, header)
		e.scopes.Bind(s.Result, local{value: value{id: res, t: a.elem}})
	}
	return nil
}

func atomicOpcode(op ir.AtomicOp, elem ir.Type) (uint32, error) {
	signed := elem == ir.I32
	if !elem.IsInteger() {
		return 0, fmt.Errorf("element type %s has no atomics. Fix: use u32 or i32 elements", elem)
	}
	switch op {
	case ir.AtomicAdd:
		return opAtomicIAdd, nil
	case ir.AtomicMin:
		if signed {
			return opAtomicSMin, nil
		}
		return opAtomicUMin, nil
	case ir.AtomicMax:
		if signed {
			return opAtomicSMax, nil
		}
		return opAtomicUMax, nil
	case ir.AtomicAnd:
		return opAtomicAnd, nil
	case ir.AtomicOr:
		return opAtomicOr, nil
	case ir.AtomicXor:
		return opAtomicXor, nil
	case ir.AtomicExchange:
		return opAtomicExchange, nil
	case ir.AtomicCompareExchange:
		return opAtomicCompareExchange, nil
	}
	return 0, fmt.Errorf("atomic operation %d has no SPIR-V form. Fix: use add, min, max, and, or, xor or exchange", op)
}

// barrier is OpControlBarrier with Workgroup execution and memory scope and
// AcquireRelease semantics over WorkgroupMemory (shared arrays) and UniformMemory
// (storage buffers): every write to a shared array or buffer made by the workgroup
// before the barrier is visible to the whole workgroup after it.
func (e *emitter) barrier() {
	wg := e.cu32(scopeWorkgroup)
	e.inst(opControlBarrier, wg, wg, e.cu32(semanticsAcquireRelease|semanticsWorkgroupMemory|semanticsUniformMemory))
}

func (e *emitter) ifStmt(s ir.IfStmt) error {
	c, err := e.typedValue(s.Cond, ir.Bool, "the if condition")
	if err != nil {
		return err
	}
	if k, ok := c.rng.Const(); ok {
		// Only one arm can run: it is emitted in place, in a scope of its own.
		if k != 0 {
			return e.block(s.Then)
		}
		return e.block(s.Else)
	}
	if e.speculable(s.Then) && e.speculable(s.Else) {
		return e.speculatedIf(c.id, s)
	}
	cond := c.id
	then, merge := e.id(), e.id()
	els := merge
	if len(s.Else) > 0 {
		els = e.id()
	}
	e.inst(opSelectionMerge, merge, selectionControlNone)
	e.terminate(opBranchConditional, cond, then, els)
	reached := len(s.Else) == 0 // the header branches to the merge block itself
	for _, arm := range []struct {
		label uint32
		stmts []ir.Stmt
	}{{then, s.Then}, {els, s.Else}} {
		if arm.label == merge {
			continue
		}
		e.label(arm.label)
		if err := e.block(arm.stmts); err != nil {
			return err
		}
		if e.open {
			e.terminate(opBranch, merge)
			reached = true
		}
	}
	e.label(merge)
	if !reached {
		e.terminate(opUnreachable)
	}
	return nil
}

// loop emits the body and continue blocks of a loop whose header has been emitted
// and branches to body or merge (see loopHeaderBranch); cont emits the continue
// block's work. left is the loop's guard bool (loopguard.go), 0 when unguarded.
func (e *emitter) loop(bodyLabel, contLabel, merge, header, left uint32, stmts []ir.Stmt, cont func()) error {
	e.label(bodyLabel)
	e.loops = append(e.loops, loopExits{merge: merge, cont: contLabel, left: left})
	err := e.block(stmts)
	e.loops = e.loops[:len(e.loops)-1]
	if err != nil {
		return err
	}
	if e.open {
		e.terminate(opBranch, contLabel)
	}
	e.label(contLabel)
	cont()
	e.backEdge(header, merge, left)
	e.label(merge)
	e.checkLoopExit(left)
	return nil
}

// whileStmt re-evaluates the condition in the loop header before each iteration.
func (e *emitter) whileStmt(s ir.WhileStmt) error {
	header, body, cont, merge := e.id(), e.id(), e.id(), e.id()
	left := e.enterLoop()
	e.terminate(opBranch, header)
	e.label(header)
	cond, err := e.typed(s.Cond, ir.Bool, "the while condition")
	if err != nil {
		return err
	}
	e.inst(opLoopMerge, merge, cont, loopControlNone)
	e.loopHeaderBranch(cond, body, merge, left)
	return e.loop(body, cont, merge, header, left, s.Body, func() {})
}

// maxUnrollHint is the most iterations of a loop with constant bounds that asks
// the driver to unroll it (the deepest shared tile of the register-tiled
// matmul).
const maxUnrollHint = 32

// unrollHint is the loop control of a for loop whose bounds have the values
// bounds: Unroll for constant bounds and at most maxUnrollHint iterations (a
// hint, which changes nothing a program can observe), None otherwise.
func unrollHint(t ir.Type, bounds [3]value) uint32 {
	from, fok := bounds[0].rng.Const()
	to, tok := bounds[1].rng.Const()
	step, sok := bounds[2].rng.Const()
	if fok && tok && sok {
		if _, ok := ranges.Trips(t, from, to, step, maxUnrollHint); ok {
			return loopControlUnroll
		}
	}
	return loopControlNone
}

// forStmt evaluates from, to and step once before the loop; the loop variable is an
// OpPhi in the header (from on entry, var+step from the continue block), compared
// with to (signed for i32, unsigned for u32) before each iteration.
func (e *emitter) forStmt(s ir.ForStmt) error {
	var less uint32
	switch s.Type {
	case ir.I32:
		less = opSLessThan
	case ir.U32:
		less = opULessThan
	default:
		return fmt.Errorf("for: loop variable %q has type %s. Fix: count with i32 or u32", s.Var, s.Type)
	}
	t := e.scalar(s.Type)
	var bounds [3]value
	for i, part := range []struct {
		x    ir.Expr
		what string
	}{{s.From, "from"}, {s.To, "to"}, {s.Step, "step"}} {
		v, err := e.typedValue(part.x, s.Type, "the for loop's "+part.what)
		if err != nil {
			return err
		}
		bounds[i] = v
	}
	from, to, step := bounds[0].id, bounds[1].id, bounds[2].id
	left := e.enterLoop()
	pre := e.cur
	header, body, cont, merge := e.id(), e.id(), e.id(), e.id()
	v, next := e.id(), e.id()
	e.terminate(opBranch, header)
	e.label(header)
	e.inst(opPhi, t, v, from, pre, next, cont)
	e.dynamic[v], e.dynamic[next] = true, true
	cond := e.op(less, e.bool(), v, to)
	e.inst(opLoopMerge, merge, cont, unrollHint(s.Type, bounds))
	e.loopHeaderBranch(cond, body, merge, left)
	counter := value{id: v, t: s.Type, rng: ranges.Loop(s.Type, bounds[0].rng, bounds[1].rng, bounds[2].rng)}
	e.scopes.Push(map[string]local{s.Var: {value: counter}})
	defer e.scopes.Pop()
	return e.loop(body, cont, merge, header, left, s.Body, func() {
		e.inst(opIAdd, t, next, v, step)
	})
}
