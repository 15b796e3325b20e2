package interp

import (
	"fmt"
	"reflect"

	"github.com/kiln-dev/kiln/ir"
)

// stmtFn runs a statement for the active lanes of m. A statement that ends lanes
// (break, return, or a nested statement that does) clears them from m.
type stmtFn func(w *worker, m *mask)

type localKind uint8

const (
	letLocal localKind = iota + 1
	varLocal
	forLocal
	resultLocal
)

// local is a name in scope: its type and either its register or, for a let bound to
// a value that cannot change while the let is visible, that value's expression.
// val keeps what is known of a let's value (linear, uniform, constant).
type local struct {
	typ   ir.Type
	kind  localKind
	reg   int
	alias exprFn
	val   value
}

// compiler turns a program into closures. Names are resolved once here; the
// closures only index registers.
type compiler struct {
	k       *Kernel
	buffers map[string]ir.BufferDecl
	shared  map[string]int
	mats    map[string]int // matrices by name: their index in the program
	scopes  []map[string]*local
	consts  map[uint32][]uint32
	loops   int
	// conts holds, for each enclosing loop, the mask its continue statements add
	// lanes to (-1: the loop has no continue).
	conts []int
	// path is the statement being compiled (body[2].then[0]), for run-time errors.
	path string
}

func compileProgram(k *Kernel) error {
	p := k.prog
	c := &compiler{
		k:       k,
		buffers: make(map[string]ir.BufferDecl, len(p.Buffers)),
		shared:  make(map[string]int, len(p.Shared)),
		mats:    make(map[string]int, len(p.Matrices)),
		consts:  make(map[uint32][]uint32),
	}
	c.declare()
	k.atomicBuf = make([]bool, len(p.Buffers))
	k.elemSizes = make([]int, len(p.Buffers))
	for _, b := range p.Buffers {
		if int(b.Binding) >= len(p.Buffers) {
			return fmt.Errorf("interp: program %q: buffer %q has binding %d of %d buffers. Fix: number the bindings 0..n-1", p.Name, b.Name, b.Binding, len(p.Buffers))
		}
		k.elemSizes[b.Binding] = elemSize(b.Type)
	}
	markAtomicTargets(p.Body, c.buffers, k.atomicBuf)
	k.returns = endsLanes(p.Body, false)
	k.nMasks = 1 // mask 0 is the workgroup's root mask
	k.nTemps = 1 // temp 0 also holds loop conditions
	body, err := c.block(p.Body, "body")
	if err != nil {
		return fmt.Errorf("interp: program %q: %w", p.Name, err)
	}
	k.body = body
	return nil
}

// declare records the buffers, shared arrays and matrices (Validate has checked their names
// and dense, unique bindings).
func (c *compiler) declare() {
	for _, b := range c.k.prog.Buffers {
		c.buffers[b.Name] = b
	}
	for i, s := range c.k.prog.Shared {
		c.shared[s.Name] = i
	}
	for i, m := range c.k.prog.Matrices {
		c.mats[m.Name] = i
	}
}

// markAtomicTargets flags the buffers some atomic statement targets.
func markAtomicTargets(list []ir.Stmt, buffers map[string]ir.BufferDecl, flags []bool) {
	ir.Inspect(list, func(n any) bool {
		if s, ok := n.(ir.AtomicStmt); ok {
			if b, ok := buffers[s.Target]; ok {
				flags[b.Binding] = true
			}
		}
		_, stmt := n.(ir.Stmt) // expressions hold no atomics
		return stmt
	})
}

// endsLanes reports whether running list can end lanes for the code after it: a
// return anywhere, or (when breaks is set) a break that is not inside a nested loop.
func endsLanes(list []ir.Stmt, breaks bool) bool {
	for _, s := range list {
		switch s := s.(type) {
		case ir.ReturnStmt:
			return true
		case ir.BreakStmt, ir.ContinueStmt:
			if breaks {
				return true
			}
		case ir.IfStmt:
			if endsLanes(s.Then, breaks) || endsLanes(s.Else, breaks) {
				return true
			}
		case ir.ForStmt:
			if endsLanes(s.Body, false) {
				return true
			}
		case ir.WhileStmt:
			if endsLanes(s.Body, false) {
				return true
			}
		}
	}
	return false
}

func (c *compiler) lookup(name string) *local {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if l, ok := c.scopes[i][name]; ok {
			return l
		}
	}
	return nil
}

// bind declares name in the innermost scope.
func (c *compiler) bind(name string, l *local) error {
	_, isBuf := c.buffers[name]
	_, isShared := c.shared[name]
	_, isMatrix := c.mats[name]
	if name == "" || isBuf || isShared || isMatrix || c.lookup(name) != nil {
		return fmt.Errorf("local %q is empty or already declared (or names a buffer, shared array or matrix). Fix: use a new name",
			name)
	}
	c.scopes[len(c.scopes)-1][name] = l
	return nil
}

func (c *compiler) newLocal() int {
	c.k.nLocals++
	return c.k.nLocals - 1
}

func (c *compiler) newMask() int {
	c.k.nMasks++
	return c.k.nMasks - 1
}

func (c *compiler) pushScope() { c.scopes = append(c.scopes, map[string]*local{}) }

func (c *compiler) popScope() { c.scopes = c.scopes[:len(c.scopes)-1] }

// block compiles a statement list in its own scope.
func (c *compiler) block(list []ir.Stmt, path string) (stmtFn, error) {
	c.pushScope()
	defer c.popScope()
	fns := make([]stmtFn, 0, len(list))
	for i, s := range list {
		f, err := c.stmt(s, fmt.Sprintf("%s[%d]", path, i))
		if err != nil {
			return nil, err
		}
		if f != nil {
			fns = append(fns, f)
		}
	}
	return sequence(fns), nil
}

// sequence runs statements in order until the mask is empty or the run halts.
func sequence(fns []stmtFn) stmtFn {
	switch len(fns) {
	case 0:
		return func(*worker, *mask) {}
	case 1:
		return fns[0]
	}
	return func(w *worker, m *mask) {
		for _, f := range fns {
			f(w, m)
			if m.empty() || w.halted {
				return
			}
		}
	}
}

func (c *compiler) stmt(s ir.Stmt, path string) (stmtFn, error) {
	c.path = path
	f, err := c.stmtInner(s, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

func (c *compiler) stmtInner(s ir.Stmt, path string) (stmtFn, error) {
	switch s := s.(type) {
	case ir.LetStmt:
		return c.let(s)
	case ir.VarStmt:
		return c.varStmt(s)
	case ir.AssignStmt:
		return c.assign(s)
	case ir.StoreStmt:
		return c.store(s)
	case ir.IfStmt:
		return c.ifStmt(s, path)
	case ir.ForStmt:
		return c.forStmt(s, path)
	case ir.WhileStmt:
		return c.whileStmt(s, path)
	case ir.BreakStmt:
		if c.loops == 0 {
			return nil, fmt.Errorf("break outside a loop. Fix: use break only inside for or while")
		}
		return func(_ *worker, m *mask) { m.clear(nil) }, nil
	case ir.ContinueStmt:
		if c.loops == 0 {
			return nil, fmt.Errorf("continue outside a loop. Fix: use continue only inside for or while")
		}
		ci := c.conts[len(c.conts)-1]
		return func(w *worker, m *mask) {
			w.masks[ci].absorb(m)
			m.clear(nil)
		}, nil
	case ir.ReturnStmt:
		return func(w *worker, m *mask) { m.clear(w.live) }, nil
	case ir.BarrierStmt:
		return c.barrier(path), nil
	case ir.AtomicStmt:
		return c.atomic(s)
	case ir.MatrixFillStmt:
		return c.matrixFill(s, path)
	case ir.MatrixLoadStmt:
		return c.matrixLoad(s, path)
	case ir.MatrixStoreStmt:
		return c.matrixStore(s, path)
	case ir.MatrixMMAStmt:
		return c.matrixMMA(s, path)
	case ir.MatrixConvertStmt:
		return c.matrixConvert(s, path)
	}
	return nil, fmt.Errorf("unknown statement %T. Fix: build programs from the ir statement types", s)
}

func (c *compiler) let(s ir.LetStmt) (stmtFn, error) {
	v, err := c.expr(s.Value, 0)
	if err != nil {
		return nil, err
	}
	if v.stable {
		return nil, c.bind(s.Name, &local{typ: v.typ, kind: letLocal, alias: v.fn, val: v})
	}
	r := c.newLocal()
	if err := c.bind(s.Name, &local{typ: v.typ, kind: letLocal, reg: r, val: v}); err != nil {
		return nil, err
	}
	return declareFn(v.fn, r), nil
}

// declareFn evaluates a declaration's value into its register. Inactive lanes of the
// range may be written: they never run the rest of the declaring block.
func declareFn(f exprFn, r int) stmtFn {
	return func(w *worker, m *mask) {
		w.active = m
		src := f(w, m.lo, m.hi)
		copy(w.locals[r][m.lo:m.hi], src[m.lo:m.hi])
	}
}

func (c *compiler) varStmt(s ir.VarStmt) (stmtFn, error) {
	v, err := c.expr(s.Value, 0)
	if err != nil {
		return nil, err
	}
	if v.typ != s.Type {
		return nil, fmt.Errorf("var %q is %s but its value is %s. Fix: cast the value to %s", s.Name, s.Type, v.typ, s.Type)
	}
	r := c.newLocal()
	if err := c.bind(s.Name, &local{typ: s.Type, kind: varLocal, reg: r}); err != nil {
		return nil, err
	}
	return declareFn(v.fn, r), nil
}

func (c *compiler) assign(s ir.AssignStmt) (stmtFn, error) {
	l := c.lookup(s.Name)
	if l == nil || l.kind != varLocal {
		return nil, fmt.Errorf("assignment to %q, which is not a var in scope. Fix: declare it with var first", s.Name)
	}
	v, err := c.expr(s.Value, 0)
	if err != nil {
		return nil, err
	}
	if v.typ != l.typ {
		return nil, fmt.Errorf("assignment of a %s value to %s var %q. Fix: cast the value to %s", v.typ, l.typ, s.Name, l.typ)
	}
	r := l.reg
	f := v.fn
	return func(w *worker, m *mask) {
		w.active = m
		maskedCopy(m, w.locals[r], f(w, m.lo, m.hi))
	}, nil
}

// target is a resolved buffer or shared array.
type target struct {
	name   string
	typ    ir.Type
	buffer bool
	index  int // binding or shared index
	atomic bool
}

func (c *compiler) target(name string) (target, ir.BufferDecl, bool) {
	if b, ok := c.buffers[name]; ok {
		return target{name: name, typ: b.Type, buffer: true, index: int(b.Binding), atomic: c.k.atomicBuf[b.Binding]}, b, true
	}
	if i, ok := c.shared[name]; ok {
		return target{name: name, typ: c.k.prog.Shared[i].Type, index: i}, ir.BufferDecl{}, true
	}
	return target{}, ir.BufferDecl{}, false
}

// checked reports whether strict mode checks the accesses to t.
func (c *compiler) checked(t target) bool { return c.k.strict && !t.buffer }

// words returns the storage of t for the workgroup w is running.
func (t target) words(w *worker) []uint32 {
	if t.buffer {
		return w.run.bufs[t.index]
	}
	return w.shared[t.index]
}

func (c *compiler) store(s ir.StoreStmt) (stmtFn, error) {
	t, decl, ok := c.target(s.Target)
	if !ok {
		return nil, fmt.Errorf("store to unknown buffer or shared array %q. Fix: declare it", s.Target)
	}
	if t.buffer && !decl.Access.Writable() {
		return nil, fmt.Errorf("store to buffer %q, whose access is %s. Fix: declare it write or read_write", s.Target, decl.Access)
	}
	ix, err := c.expr(s.Index, 0)
	if err != nil {
		return nil, err
	}
	if ix.typ != ir.U32 {
		return nil, fmt.Errorf("index is %s. Fix: index with a u32 value (cast it)", ix.typ)
	}
	idx := ix.fn
	v, err := c.expr(s.Value, 1)
	if err != nil {
		return nil, err
	}
	if v.typ != t.typ {
		return nil, fmt.Errorf("store of a %s value into %q of %s. Fix: cast the value to %s", v.typ, s.Target, t.typ, t.typ)
	}
	if c.checked(t) {
		site := c.site(t)
		return func(w *worker, m *mask) {
			w.active = m
			ixs := idx(w, m.lo, m.hi)
			w.strictStore(site, m, ixs, v.fn(w, m.lo, m.hi), t.words(w))
		}, nil
	}
	store := storeLanes
	if t.atomic {
		store = storeLanesAtomic
	}
	if ix.linear && t.buffer && !t.atomic {
		// A store at global_id(0) + off writes a run of words: one bounds check
		// for the run instead of one per lane.
		off := ix.off
		into := v.into
		if into != nil && !readsOnlyAt(s.Value, s.Target, s.Index) {
			into = nil
		}
		return func(w *worker, m *mask) {
			w.active = m
			words := t.words(w)
			if start := uint64(w.linBase + off); m.dense && start+uint64(m.hi) <= uint64(len(words)) {
				if into != nil {
					// The value's last operation writes straight into the buffer.
					into(w, m.lo, m.hi, words[start:start+uint64(m.hi)])
					return
				}
				vals := v.fn(w, m.lo, m.hi)
				copy(words[start+uint64(m.lo):start+uint64(m.hi)], vals[m.lo:m.hi])
				return
			}
			store(m, idx(w, m.lo, m.hi), v.fn(w, m.lo, m.hi), words)
		}, nil
	}
	return func(w *worker, m *mask) {
		w.active = m
		ixs := idx(w, m.lo, m.hi)
		store(m, ixs, v.fn(w, m.lo, m.hi), t.words(w))
	}, nil
}

// readsOnlyAt reports whether every load of target in e uses exactly the index
// index. A store computing e straight into target[index] element by element then
// reads each element before it overwrites it, as if the value were computed first.
func readsOnlyAt(e ir.Expr, target string, index ir.Expr) bool {
	switch e := e.(type) {
	case ir.LoadExpr:
		if e.Target == target && !reflect.DeepEqual(e.Index, index) {
			return false
		}
		return readsOnlyAt(e.Index, target, index)
	case ir.UnaryExpr:
		return readsOnlyAt(e.X, target, index)
	case ir.BinaryExpr:
		return readsOnlyAt(e.X, target, index) && readsOnlyAt(e.Y, target, index)
	case ir.FmaExpr:
		return readsOnlyAt(e.A, target, index) && readsOnlyAt(e.B, target, index) && readsOnlyAt(e.C, target, index)
	case ir.SelectExpr:
		return readsOnlyAt(e.Cond, target, index) && readsOnlyAt(e.A, target, index) && readsOnlyAt(e.B, target, index)
	case ir.CastExpr:
		return readsOnlyAt(e.X, target, index)
	case ir.BitcastExpr:
		return readsOnlyAt(e.X, target, index)
	case ir.SubgroupExpr:
		return false
	}
	return true
}

// index compiles an index expression, which must be u32.
func (c *compiler) index(e ir.Expr, t int) (exprFn, error) {
	v, err := c.expr(e, t)
	if err != nil {
		return nil, err
	}
	if v.typ != ir.U32 {
		return nil, fmt.Errorf("index is %s. Fix: index with a u32 value (cast it)", v.typ)
	}
	return v.fn, nil
}

func (c *compiler) cond(e ir.Expr) (exprFn, error) {
	v, err := c.expr(e, 0)
	if err != nil {
		return nil, err
	}
	if v.typ != ir.Bool {
		return nil, fmt.Errorf("condition is %s. Fix: use a bool condition (compare with ne 0)", v.typ)
	}
	return v.fn, nil
}

func (c *compiler) ifStmt(s ir.IfStmt, path string) (stmtFn, error) {
	cond, err := c.cond(s.Cond)
	if err != nil {
		return nil, err
	}
	cut := c.rangeCond(s.Cond)
	ti, ei := c.newMask(), c.newMask()
	then, err := c.block(s.Then, path+".then")
	if err != nil {
		return nil, err
	}
	els, err := c.block(s.Else, path+".else")
	if err != nil {
		return nil, err
	}
	hasElse := len(s.Else) > 0
	ends := endsLanes(s.Then, true) || endsLanes(s.Else, true)
	return func(w *worker, m *mask) {
		w.active = m
		t, e := &w.masks[ti], &w.masks[ei]
		if at, ok := cut(w, m); ok {
			t.prefix(w.trues, m, at)
			e.suffix(w.trues, m, at)
		} else {
			cv := cond(w, m.lo, m.hi)
			t.narrow(m, cv, 1)
			if hasElse || ends {
				e.narrow(m, cv, 0) // now: the branches reuse the condition's register
			}
		}
		if !t.empty() {
			then(w, t)
			if w.halted {
				return
			}
		}
		if hasElse && !e.empty() {
			els(w, e)
			if w.halted {
				return
			}
		}
		if ends {
			m.merge(t, e)
		}
	}, nil
}

// loopBody compiles a loop body, with var (when not nil) in scope. cont is the
// mask its continue statements collect lanes in, -1 when it has none.
func (c *compiler) loopBody(body []ir.Stmt, path string, loopVar string, v *local) (fn stmtFn, cont int, err error) {
	c.pushScope()
	defer c.popScope()
	if v != nil {
		if err := c.bind(loopVar, v); err != nil {
			return nil, 0, err
		}
	}
	cont = -1
	if hasContinue(body) {
		cont = c.newMask()
	}
	c.loops++
	c.conts = append(c.conts, cont)
	defer func() {
		c.loops--
		c.conts = c.conts[:len(c.conts)-1]
	}()
	fn, err = c.block(body, path+".body")
	return fn, cont, err
}

// hasContinue reports whether list continues its own loop (not a nested one).
func hasContinue(list []ir.Stmt) bool {
	for _, s := range list {
		switch s := s.(type) {
		case ir.ContinueStmt:
			return true
		case ir.IfStmt:
			if hasContinue(s.Then) || hasContinue(s.Else) {
				return true
			}
		}
	}
	return false
}

// iteration runs one iteration of a loop body on the lanes of b, then brings back
// the lanes that continued, so they take the next step and test.
func iteration(w *worker, body stmtFn, b *mask, cont int) {
	if cont < 0 {
		body(w, b)
		return
	}
	lo, hi := b.lo, b.hi
	cm := &w.masks[cont]
	cm.lo, cm.hi = 0, 0
	body(w, b)
	b.rejoin(cm, lo, hi)
}

func (c *compiler) forStmt(s ir.ForStmt, path string) (stmtFn, error) {
	if !s.Type.IsInteger() {
		return nil, fmt.Errorf("for variable %q is %s. Fix: count with i32 or u32", s.Var, s.Type)
	}
	var bounds [3]exprFn
	for i, e := range []ir.Expr{s.From, s.To, s.Step} {
		v, err := c.expr(e, 0)
		if err != nil {
			return nil, err
		}
		if v.typ != s.Type {
			return nil, fmt.Errorf("for %q is %s but its %s is %s. Fix: cast it to %s",
				s.Var, s.Type, [...]string{"from", "to", "step"}[i], v.typ, s.Type)
		}
		bounds[i] = v.fn
	}
	vr, tr, sr := c.newLocal(), c.newLocal(), c.newLocal()
	body, cont, err := c.loopBody(s.Body, path, s.Var, &local{typ: s.Type, kind: forLocal, reg: vr})
	if err != nil {
		return nil, err
	}
	bi := c.newMask()
	less := ltU32
	if s.Type == ir.I32 {
		less = ltI32
	}
	returns := endsLanes(s.Body, false)
	return func(w *worker, m *mask) {
		w.active = m
		lo, hi := m.lo, m.hi
		regs := [3][]uint32{w.locals[vr], w.locals[tr], w.locals[sr]}
		for i, f := range bounds {
			copy(regs[i][lo:hi], f(w, lo, hi)[lo:hi])
		}
		v, to, step := regs[0], regs[1], regs[2]
		b := &w.masks[bi]
		b.copyFrom(m)
		cond := w.temps[0]
		for {
			w.active = b
			less(cond[b.lo:b.hi], v[b.lo:b.hi], to[b.lo:b.hi])
			b.narrow(b, cond, 1)
			if b.empty() {
				break
			}
			iteration(w, body, b, cont)
			if w.halted || w.stopped() {
				return
			}
			addInt(v[b.lo:b.hi], v[b.lo:b.hi], step[b.lo:b.hi])
		}
		if returns {
			m.keepLive(w.live)
		}
	}, nil
}

func (c *compiler) whileStmt(s ir.WhileStmt, path string) (stmtFn, error) {
	cond, err := c.cond(s.Cond)
	if err != nil {
		return nil, err
	}
	body, cont, err := c.loopBody(s.Body, path, "", nil)
	if err != nil {
		return nil, err
	}
	bi := c.newMask()
	returns := endsLanes(s.Body, false)
	return func(w *worker, m *mask) {
		b := &w.masks[bi]
		b.copyFrom(m)
		for {
			w.active = b
			b.narrow(b, cond(w, b.lo, b.hi), 1)
			if b.empty() {
				break
			}
			iteration(w, body, b, cont)
			if w.halted || w.stopped() {
				return
			}
		}
		if returns {
			m.keepLive(w.live)
		}
	}, nil
}

func (c *compiler) barrier(path string) stmtFn {
	return func(w *worker, m *mask) {
		if w.whole(m) {
			if w.strict != nil {
				w.strict.barrier()
			}
			return
		}
		w.fail(w.divergence(m, "barrier", path))
	}
}

func (c *compiler) atomic(s ir.AtomicStmt) (stmtFn, error) {
	t, decl, ok := c.target(s.Target)
	if !ok {
		return nil, fmt.Errorf("atomic on unknown buffer or shared array %q. Fix: declare it", s.Target)
	}
	if !t.typ.IsInteger() || (t.buffer && !decl.Access.Writable()) {
		return nil, fmt.Errorf("atomic on %q (%s elements, access %s). Fix: use atomics on i32 or u32 shared arrays or write/read_write buffers",
			s.Target, t.typ, decl.Access)
	}
	combine := atomicCombine(s.Op, t.typ == ir.I32)
	if combine == nil {
		return nil, fmt.Errorf("unknown atomic operation %d. Fix: use add, min, max, and, or, xor, exchange or cas", s.Op)
	}
	idx, err := c.index(s.Index, 0)
	if err != nil {
		return nil, err
	}
	v, err := c.expr(s.Value, 1)
	if err != nil {
		return nil, err
	}
	if v.typ != t.typ {
		return nil, fmt.Errorf("atomic %s of a %s value on %q of %s. Fix: cast the value to %s", s.Op, v.typ, s.Target, t.typ, t.typ)
	}
	// cmp is the compare operand of cas; every other operation ignores it.
	cmp := c.constant(t.typ, 0)
	if s.Op == ir.AtomicCompareExchange {
		if cmp, err = c.expr(s.Compare, 2); err != nil {
			return nil, err
		}
		if cmp.typ != t.typ {
			return nil, fmt.Errorf("atomic cas comparing a %s value on %q of %s. Fix: cast the value to %s", cmp.typ, s.Target, t.typ, t.typ)
		}
	}
	res := -1
	if s.Result != "" {
		res = c.newLocal()
		if err := c.bind(s.Result, &local{typ: t.typ, kind: resultLocal, reg: res}); err != nil {
			return nil, err
		}
	}
	apply := plainApply(combine)
	if t.buffer {
		apply = atomicApply(s.Op, combine)
	}
	var site int
	checked := c.checked(t)
	if checked {
		site = c.site(t)
	}
	return func(w *worker, m *mask) {
		w.active = m
		ix, vals, cmps := idx(w, m.lo, m.hi), v.fn(w, m.lo, m.hi), cmp.fn(w, m.lo, m.hi)
		var out []uint32
		if res >= 0 {
			out = w.locals[res]
		}
		words := t.words(w)
		for i := m.lo; i < m.hi; i++ {
			if !m.on[i] {
				continue
			}
			if checked && !w.strictAtomic(site, i, ix[i], len(words)) {
				return
			}
			var old uint32
			if k := ix[i]; k < uint32(len(words)) {
				old = apply(&words[k], vals[i], cmps[i])
			}
			if out != nil {
				out[i] = old
			}
		}
	}, nil
}
