package interp

import (
	"fmt"
	"sync/atomic"

	"github.com/kiln-dev/kiln/ir"
)

// exprFn computes an expression for lanes [lo, hi) and returns the register (one
// word per lane) that holds the result; only [lo, hi) of it is meaningful. An
// expression node whose value must be computed writes it into its own temporary
// register; a leaf returns the register it reads (a constant, a builtin, a local).
// Expressions are pure and total, so computing them on inactive lanes is harmless.
type exprFn func(w *worker, lo, hi int) []uint32

// value is a compiled expression with its type. stable means its register does not
// change while a let bound to it is in scope, so the let can read it directly.
type value struct {
	fn     exprFn
	typ    ir.Type
	stable bool
	// uniform: every lane has the same value during a run (literals, parameters,
	// uniforms, len, workgroup and subgroup sizes); lane 0 of fn's register holds it.
	uniform bool
	// konst: the value is the compile-time constant bits.
	konst  bool
	bits   uint32
	linear bool   // lane i holds w.linBase + off + i (global_id(0) plus constants)
	off    uint32 // see linear
	// into, when set, computes the value for lanes [lo, hi) into d[lo:hi] instead
	// of its temporary (d's lane i is element i), reading its operands first.
	into func(w *worker, lo, hi int, d []uint32)
}

func (c *compiler) useTemp(t int) {
	if t >= c.k.nTemps {
		c.k.nTemps = t + 1
	}
}

// constant returns a register holding bits in every lane, shared by all runs.
func (c *compiler) constant(t ir.Type, bits uint32) value {
	if t == ir.Bool {
		bits = boolBits(bits != 0)
	}
	reg, ok := c.consts[bits]
	if !ok {
		reg = make([]uint32, c.k.lanes)
		for i := range reg {
			reg[i] = bits
		}
		c.consts[bits] = reg
	}
	return value{fn: func(*worker, int, int) []uint32 { return reg }, typ: t, stable: true, uniform: true, konst: true, bits: bits}
}

// perRun is a value that is the same in every lane and fixed for a run, held in
// the register reg picks from the run.
func perRun(t ir.Type, reg func(r *runState) []uint32) value {
	return value{fn: func(w *worker, _, _ int) []uint32 { return reg(w.run) }, typ: t, stable: true, uniform: true}
}

// expr compiles e so that it computes into temporary t, using temporaries above t
// for its operands.
func (c *compiler) expr(e ir.Expr, t int) (value, error) {
	c.useTemp(t)
	switch e := e.(type) {
	case ir.Literal:
		if !e.Type.Valid() {
			return value{}, fmt.Errorf("literal of invalid type %d. Fix: use a bool, i32, u32, f32, f16 or bf16 literal", e.Type)
		}
		if e.Type.Is16Bit() && e.Bits > 0xFFFF {
			return value{}, fmt.Errorf("%s literal with bits %#x, more than 16. Fix: build it with ir.LitF16 or ir.LitBF16", e.Type, e.Bits)
		}
		return c.constant(e.Type, e.Bits), nil
	case ir.LocalRef:
		return c.localRef(e.Name)
	case ir.ParamRef:
		lit, ok := c.k.params[e.Name]
		if !ok || !lit.Type.Valid() {
			return value{}, fmt.Errorf("unknown parameter %q. Fix: declare it in the program's params", e.Name)
		}
		return c.constant(lit.Type, lit.Bits), nil
	case ir.BuiltinRef:
		return c.builtin(e)
	case ir.LoadExpr:
		return c.load(e, t)
	case ir.LenExpr:
		b, ok := c.buffers[e.Buffer]
		if !ok {
			return value{}, fmt.Errorf("len of unknown buffer %q. Fix: len takes a buffer name", e.Buffer)
		}
		bind := b.Binding
		return perRun(ir.U32, func(r *runState) []uint32 { return r.lens[bind] }), nil
	case ir.UniformRef:
		for i, u := range c.k.prog.Uniforms {
			if u.Name == e.Name {
				return perRun(u.Type, func(r *runState) []uint32 { return r.uniforms[i] }), nil
			}
		}
		return value{}, fmt.Errorf("unknown uniform %q. Fix: declare it in the program's uniforms", e.Name)
	case ir.BitcastExpr:
		x, err := c.expr(e.X, t)
		if err != nil {
			return value{}, err
		}
		if !x.typ.IsNumeric() || !e.To.IsNumeric() {
			return value{}, fmt.Errorf("bitcast from %s to %s. Fix: bitcast between i32, u32 and f32", x.typ, e.To)
		}
		// Registers hold bits, so a bitcast only changes the type.
		x.typ = e.To
		x.linear = false
		return x, nil
	case ir.SubgroupExpr:
		return c.subgroup(e, t)
	case ir.UnaryExpr:
		return c.unary(e, t)
	case ir.BinaryExpr:
		return c.binary(e, t)
	case ir.FmaExpr:
		return c.fma(e, t)
	case ir.SelectExpr:
		return c.selectExpr(e, t)
	case ir.CastExpr:
		return c.cast(e, t)
	}
	return value{}, fmt.Errorf("unknown expression %T. Fix: build programs from the ir expression types", e)
}

func (c *compiler) localRef(name string) (value, error) {
	l := c.lookup(name)
	if l == nil {
		return value{}, fmt.Errorf("unknown local %q. Fix: declare it before use, in an enclosing block", name)
	}
	if l.alias != nil {
		return l.val, nil
	}
	r := l.reg
	v := value{
		fn:     func(w *worker, _, _ int) []uint32 { return w.locals[r] },
		typ:    l.typ,
		stable: l.kind != varLocal,
	}
	if l.kind == letLocal {
		// The let's register holds its value on the lanes that use it, so a
		// linear value stays linear (uniform values are leaves, aliased above).
		v.linear, v.off = l.val.linear, l.val.off
	}
	return v, nil
}

func (c *compiler) builtin(e ir.BuiltinRef) (value, error) {
	if e.Axis > 2 || (!e.Kind.HasAxis() && e.Axis != 0) {
		return value{}, fmt.Errorf("builtin %s on axis %d. Fix: use axis 0, 1 or 2, and 0 for the subgroup builtins", e.Kind, e.Axis)
	}
	a := int(e.Axis)
	var f exprFn
	switch e.Kind {
	case ir.GlobalIDBuiltin:
		c.k.usesGlobal[a] = true
		v := value{fn: func(w *worker, _, _ int) []uint32 { return w.globalIDs(a) }, typ: ir.U32, stable: true}
		v.linear = a == 0 && c.k.linear
		return v, nil
	case ir.LocalIDBuiltin:
		reg := c.k.localID[a]
		f = func(*worker, int, int) []uint32 { return reg }
	case ir.WorkgroupIDBuiltin:
		c.k.usesGroup[a] = true
		f = func(w *worker, _, _ int) []uint32 { return w.groupIDs(a) }
	case ir.NumWorkgroupsBuiltin:
		return perRun(ir.U32, func(r *runState) []uint32 { return r.numGroups[a] }), nil
	case ir.WorkgroupSizeBuiltin:
		return c.constant(ir.U32, c.k.wg[a]), nil
	case ir.SubgroupSizeBuiltin:
		return c.constant(ir.U32, uint32(c.k.sgSize)), nil
	case ir.SubgroupInvocationIDBuiltin:
		reg := make([]uint32, c.k.lanes)
		for i := range reg {
			reg[i] = uint32(i % c.k.sgSize)
		}
		f = func(*worker, int, int) []uint32 { return reg }
	default:
		return value{}, fmt.Errorf("unknown builtin %d. Fix: use one of ir.Builtins()", e.Kind)
	}
	return value{fn: f, typ: ir.U32, stable: true}, nil
}

func (c *compiler) load(e ir.LoadExpr, t int) (value, error) {
	tg, decl, ok := c.target(e.Target)
	if !ok {
		return value{}, fmt.Errorf("load from unknown buffer or shared array %q. Fix: declare it", e.Target)
	}
	if tg.buffer && !decl.Access.Readable() {
		return value{}, fmt.Errorf("load from buffer %q, whose access is %s. Fix: declare it read or read_write", e.Target, decl.Access)
	}
	ix, err := c.expr(e.Index, t)
	if err != nil {
		return value{}, err
	}
	if ix.typ != ir.U32 {
		return value{}, fmt.Errorf("index is %s. Fix: index with a u32 value (cast it)", ix.typ)
	}
	idx := ix.fn
	if c.checked(tg) {
		site := c.site(tg)
		return value{fn: func(w *worker, lo, hi int) []uint32 {
			ixs := idx(w, lo, hi)
			d := w.temps[t]
			w.strictLoad(site, d, ixs, tg.words(w), lo, hi, tg.typ == ir.Bool)
			return d
		}, typ: tg.typ}, nil
	}
	lanes := loadLanes
	switch {
	case tg.atomic:
		lanes = loadLanesAtomic
	case tg.typ == ir.Bool:
		lanes = loadLanesBool
	}
	if ix.linear && tg.buffer && !tg.atomic {
		// A load at global_id(0) + off reads a run of words: when the run lies in
		// the buffer, the register is a view of it, with no copy and no per-lane
		// bounds check.
		off := ix.off
		return value{fn: func(w *worker, lo, hi int) []uint32 {
			words := tg.words(w)
			if start := uint64(w.linBase + off); start+uint64(hi) <= uint64(len(words)) {
				return words[start : start+uint64(hi)]
			}
			d := w.temps[t]
			lanes(d[lo:hi], idx(w, lo, hi)[lo:hi], words)
			return d
		}, typ: tg.typ}, nil
	}
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		ixs := idx(w, lo, hi)
		d := w.temps[t]
		lanes(d[lo:hi], ixs[lo:hi], tg.words(w))
		return d
	}, typ: tg.typ}, nil
}

// rangeCond recognizes an if condition global_id(0) + off < u, with u the same in
// every lane: on a dense mask its lanes are a prefix of the mask's, found with one
// subtraction. The returned function gives where the prefix ends, or false when it
// cannot tell (the ids wrap, or the mask is not dense).
func (c *compiler) rangeCond(e ir.Expr) func(w *worker, m *mask) (int, bool) {
	none := func(*worker, *mask) (int, bool) { return 0, false }
	b, ok := e.(ir.BinaryExpr)
	if !ok || b.Op != ir.OpLt {
		return none
	}
	x, errX := c.expr(b.X, 0)
	y, errY := c.expr(b.Y, 1)
	if errX != nil || errY != nil || !x.linear || !y.uniform || x.typ != ir.U32 || y.typ != ir.U32 {
		return none
	}
	off, bound := x.off, y.fn
	return func(w *worker, m *mask) (int, bool) {
		if !m.dense {
			return 0, false
		}
		start := uint64(w.linBase + off)
		if start+uint64(m.hi) > 1<<32 {
			return 0, false
		}
		n := uint64(bound(w, 0, 1)[0])
		switch {
		case n <= start+uint64(m.lo):
			return m.lo, true
		case n >= start+uint64(m.hi):
			return m.hi, true
		}
		return int(n - start), true
	}
}

func (c *compiler) unary(e ir.UnaryExpr, t int) (value, error) {
	x, err := c.expr(e.X, t)
	if err != nil {
		return value{}, err
	}
	loop := unaryLoop(e.Op, x.typ)
	if loop == nil {
		return value{}, fmt.Errorf("%s is not defined on %s. Fix: see the operator's types in docs/design.md, \"IR v1\"", e.Op, x.typ)
	}
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		xs := x.fn(w, lo, hi)
		d := w.temps[t]
		loop(d[lo:hi], xs[lo:hi])
		return d
	}, typ: x.typ}, nil
}

func (c *compiler) binary(e ir.BinaryExpr, t int) (value, error) {
	x, err := c.expr(e.X, t)
	if err != nil {
		return value{}, err
	}
	y, err := c.expr(e.Y, t+1)
	if err != nil {
		return value{}, err
	}
	if x.typ != y.typ {
		return value{}, fmt.Errorf("%s of %s and %s. Fix: cast the operands to one type", e.Op, x.typ, y.typ)
	}
	loop := binaryLoop(e.Op, x.typ)
	if loop == nil {
		return value{}, fmt.Errorf("%s is not defined on %s. Fix: see the operator's types in docs/design.md, \"IR v1\"", e.Op, x.typ)
	}
	typ := x.typ
	if e.Op.IsComparison() {
		typ = ir.Bool
	}
	into := func(w *worker, lo, hi int, d []uint32) {
		xs, ys := x.fn(w, lo, hi), y.fn(w, lo, hi)
		loop(d[lo:hi], xs[lo:hi], ys[lo:hi])
	}
	v := value{fn: func(w *worker, lo, hi int) []uint32 {
		d := w.temps[t]
		into(w, lo, hi, d)
		return d
	}, typ: typ, into: into}
	if e.Op == ir.OpAdd && typ == ir.U32 {
		// global_id(0) + k and k + global_id(0) stay linear.
		switch {
		case x.linear && y.konst:
			v.linear, v.off = true, x.off+y.bits
		case y.linear && x.konst:
			v.linear, v.off = true, y.off+x.bits
		}
	}
	return v, nil
}

// three compiles the operands of fma and select into t, t+1 and t+2.
func (c *compiler) three(es [3]ir.Expr, t int) ([3]value, error) {
	var vs [3]value
	for i, e := range es {
		v, err := c.expr(e, t+i)
		if err != nil {
			return vs, err
		}
		vs[i] = v
	}
	return vs, nil
}

func (c *compiler) fma(e ir.FmaExpr, t int) (value, error) {
	vs, err := c.three([3]ir.Expr{e.A, e.B, e.C}, t)
	if err != nil {
		return value{}, err
	}
	typ := vs[0].typ
	if (typ != ir.F32 && typ != ir.F16) || vs[1].typ != typ || vs[2].typ != typ {
		return value{}, fmt.Errorf("fma of %s, %s and %s. Fix: fma takes three f32 or three f16 operands", vs[0].typ, vs[1].typ, vs[2].typ)
	}
	lanes := fmaLanes
	if typ == ir.F16 {
		lanes = fmaF16Lanes
	}
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		a, b, cc := vs[0].fn(w, lo, hi), vs[1].fn(w, lo, hi), vs[2].fn(w, lo, hi)
		d := w.temps[t]
		lanes(d[lo:hi], a[lo:hi], b[lo:hi], cc[lo:hi])
		return d
	}, typ: typ}, nil
}

func (c *compiler) selectExpr(e ir.SelectExpr, t int) (value, error) {
	vs, err := c.three([3]ir.Expr{e.Cond, e.A, e.B}, t)
	if err != nil {
		return value{}, err
	}
	if vs[0].typ != ir.Bool || vs[1].typ != vs[2].typ {
		return value{}, fmt.Errorf("select with a %s condition and %s, %s values. Fix: use a bool condition and two values of one type",
			vs[0].typ, vs[1].typ, vs[2].typ)
	}
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		cs, a, b := vs[0].fn(w, lo, hi), vs[1].fn(w, lo, hi), vs[2].fn(w, lo, hi)
		d := w.temps[t]
		selectLanes(d[lo:hi], cs[lo:hi], a[lo:hi], b[lo:hi])
		return d
	}, typ: vs[1].typ}, nil
}

func (c *compiler) cast(e ir.CastExpr, t int) (value, error) {
	x, err := c.expr(e.X, t)
	if err != nil {
		return value{}, err
	}
	loop, identity, ok := castLoop(x.typ, e.To)
	if !ok {
		return value{}, fmt.Errorf("cast from %s to %s. Fix: cast between i32, u32 and f32, between bool and i32/u32, or between f32 and f16/bf16 (go through f32)", x.typ, e.To)
	}
	if identity {
		return value{fn: x.fn, typ: e.To, stable: x.stable}, nil
	}
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		xs := x.fn(w, lo, hi)
		d := w.temps[t]
		loop(d[lo:hi], xs[lo:hi])
		return d
	}, typ: e.To}, nil
}

// Loads and stores check bounds per lane: an out-of-bounds load gives 0 and an
// out-of-bounds store does nothing. Storage never exceeds 2^32-1 words, so the u32
// index compares with the length exactly.

func loadLanes(d, idx, words []uint32) {
	d = d[:len(idx)]
	n := uint32(len(words))
	for i, k := range idx {
		if k < n {
			d[i] = words[k]
		} else {
			d[i] = 0
		}
	}
}

// loadLanesBool reads a bool shared array; any non-zero word (such as the poison
// pattern) reads as true, so bool registers always hold 0 or 1.
func loadLanesBool(d, idx, words []uint32) {
	d = d[:len(idx)]
	n := uint32(len(words))
	for i, k := range idx {
		if k < n {
			d[i] = boolBits(words[k] != 0)
		} else {
			d[i] = 0
		}
	}
}

// loadLanesAtomic reads a buffer that atomics also update from other workgroups.
func loadLanesAtomic(d, idx, words []uint32) {
	d = d[:len(idx)]
	n := uint32(len(words))
	for i, k := range idx {
		if k < n {
			d[i] = atomic.LoadUint32(&words[k])
		} else {
			d[i] = 0
		}
	}
}

// storeLanes writes the active lanes in lane order, so the highest lane storing to an
// element wins.
func storeLanes(m *mask, idx, vals, words []uint32) {
	n := uint32(len(words))
	if m.dense {
		ix := idx[m.lo:m.hi]
		vals = vals[m.lo:m.hi]
		vals = vals[:len(ix)]
		for i, k := range ix {
			if k < n {
				words[k] = vals[i]
			}
		}
		return
	}
	for i := m.lo; i < m.hi; i++ {
		if k := idx[i]; m.on[i] && k < n {
			words[k] = vals[i]
		}
	}
}

func storeLanesAtomic(m *mask, idx, vals, words []uint32) {
	n := uint32(len(words))
	for i := m.lo; i < m.hi; i++ {
		if k := idx[i]; m.on[i] && k < n {
			atomic.StoreUint32(&words[k], vals[i])
		}
	}
}

// combineFn computes an atomic's new element value from the old one, the operand v
// and, for cas, the compare operand.
type combineFn func(old, v, cmp uint32) uint32

// applyFn applies an atomic to *p and returns the old value.
type applyFn func(p *uint32, v, cmp uint32) uint32

// atomicCombine returns the new element value of op given the old one and the
// operands, comparing as i32 when signed; nil for an unknown op.
func atomicCombine(op ir.AtomicOp, signed bool) combineFn {
	switch op {
	case ir.AtomicAdd:
		return func(old, v, _ uint32) uint32 { return old + v }
	case ir.AtomicAnd:
		return func(old, v, _ uint32) uint32 { return old & v }
	case ir.AtomicOr:
		return func(old, v, _ uint32) uint32 { return old | v }
	case ir.AtomicXor:
		return func(old, v, _ uint32) uint32 { return old ^ v }
	case ir.AtomicExchange:
		return func(_, v, _ uint32) uint32 { return v }
	case ir.AtomicCompareExchange:
		return func(old, v, cmp uint32) uint32 {
			if old == cmp {
				return v
			}
			return old
		}
	case ir.AtomicMin:
		if signed {
			return func(old, v, _ uint32) uint32 { return minI32(old, v) }
		}
		return func(old, v, _ uint32) uint32 { return min(old, v) }
	case ir.AtomicMax:
		if signed {
			return func(old, v, _ uint32) uint32 { return maxI32(old, v) }
		}
		return func(old, v, _ uint32) uint32 { return max(old, v) }
	}
	return nil
}

// plainApply updates a shared array element: one workgroup runs on one goroutine, so
// its atomics need no synchronization.
func plainApply(combine combineFn) applyFn {
	return func(p *uint32, v, cmp uint32) uint32 {
		old := *p
		*p = combine(old, v, cmp)
		return old
	}
}

// atomicApply updates a buffer element that other workgroups may update at the same
// time, returning the old value.
func atomicApply(op ir.AtomicOp, combine combineFn) applyFn {
	switch op {
	case ir.AtomicAdd:
		return func(p *uint32, v, _ uint32) uint32 { return atomic.AddUint32(p, v) - v }
	case ir.AtomicAnd:
		return func(p *uint32, v, _ uint32) uint32 { return atomic.AndUint32(p, v) }
	case ir.AtomicOr:
		return func(p *uint32, v, _ uint32) uint32 { return atomic.OrUint32(p, v) }
	case ir.AtomicExchange:
		return func(p *uint32, v, _ uint32) uint32 { return atomic.SwapUint32(p, v) }
	case ir.AtomicCompareExchange:
		return func(p *uint32, v, cmp uint32) uint32 {
			for {
				old := atomic.LoadUint32(p)
				if old != cmp || atomic.CompareAndSwapUint32(p, old, v) {
					return old
				}
			}
		}
	}
	return func(p *uint32, v, cmp uint32) uint32 {
		for {
			old := atomic.LoadUint32(p)
			if atomic.CompareAndSwapUint32(p, old, combine(old, v, cmp)) {
				return old
			}
		}
	}
}
