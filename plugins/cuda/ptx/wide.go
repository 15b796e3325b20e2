package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Wide 16-bit accesses. A run of N consecutive statements (N = 8, 4 or 2) of
// one block that loads, or stores, elements base+0 … base+N−1 of one 16-bit
// buffer (f16 or bf16) is emitted as one access of 2N bytes when it may be:
//
//	loads:  let (or assign) d_k = load(buf, base+k)   for k = 0 … N−1
//	stores: store(buf, base+k, v_k)                   for k = 0 … N−1
//
// base is a local (let, var or loop counter) that no statement of the run
// rebinds; base+0 may be written base. The stored values v_k read no memory
// (no load), so computing them all before the first store is what the
// statements do one after the other. At run time the wide access
// (ld.global[.nc].v4.b32 / .v2.b32 / .b32, st.global.v4.b32 …) runs when the
// whole run is in bounds (base ≤ count − N, no wrap) and the element's address
// is a multiple of 2N bytes (a binding may start at any multiple of 4 bytes);
// otherwise the statements run as written, one predicated 16-bit access each,
// so an access out of bounds still loads 0 or writes nothing. A loaded word
// holds two elements, the lower index in its low half (little-endian), which
// and.b32/shr.u32 split into the zero-extended registers the 16-bit values
// live in; a stored word is packed the same way.

// wideWidths are the run lengths tried, longest first.
var wideWidths = []int{8, 4, 2}

// wideRun is a matched run: n statements on buffer target at base.
type wideRun struct {
	target string
	base   string
	n      int
	store  bool
}

// wideIndex reports whether x is base+k (or base, for k = 0) with base a local,
// returning base.
func wideIndex(x ir.Expr, k uint32) (string, bool) {
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

// readsMemory reports whether x contains a load.
func readsMemory(x ir.Expr) bool {
	switch x := x.(type) {
	case ir.LoadExpr:
		return true
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
	return true // anything else (a length, a subgroup operation): not matched
}

// wideStmt returns the k-th statement's parts if it fits a run: the buffer,
// the base, the destination name of a load ("" for a store) and whether it
// stores.
func wideStmt(s ir.Stmt, k uint32) (target, base, dst string, store, ok bool) {
	var value ir.Expr
	switch s := s.(type) {
	case ir.LetStmt:
		dst, value = s.Name, s.Value
	case ir.AssignStmt:
		dst, value = s.Name, s.Value
	case ir.StoreStmt:
		if readsMemory(s.Value) {
			return "", "", "", false, false
		}
		base, ok = wideIndex(s.Index, k)
		return s.Target, base, "", true, ok
	default:
		return "", "", "", false, false
	}
	ld, isLoad := value.(ir.LoadExpr)
	if !isLoad {
		return "", "", "", false, false
	}
	base, ok = wideIndex(ld.Index, k)
	return ld.Target, base, dst, false, ok
}

// matchWide finds the longest run at the start of stmts whose buffer is a 16-bit
// buffer for which is16 holds.
func matchWide(stmts []ir.Stmt, is16 func(target string) bool) (wideRun, bool) {
	target, base, dst, store, ok := wideStmt(stmts[0], 0)
	if !ok || !is16(target) || dst == base {
		return wideRun{}, false
	}
	n := 1
	for n < len(stmts) && n < wideWidths[0] {
		t, b, d, s, ok := wideStmt(stmts[n], uint32(n))
		if !ok || t != target || b != base || s != store || d == base {
			break
		}
		n++
	}
	for _, w := range wideWidths {
		if n >= w {
			return wideRun{target: target, base: base, n: w, store: store}, true
		}
	}
	return wideRun{}, false
}

// wide emits a run at the start of stmts as one wide access when one matches,
// returning how many statements it emitted (0: none matched). Inside a
// predicated if the statements run as written.
func (e *emitter) wide(stmts []ir.Stmt) (int, error) {
	if e.cond != "" {
		return 0, nil
	}
	run, ok := matchWide(stmts, func(target string) bool {
		a, ok := e.arrays[target]
		return ok && !a.shared && !a.local && a.elem.Is16Bit()
	})
	if !ok {
		return 0, nil
	}
	a := e.arrays[run.target]
	base, err := e.typedValue(ir.Local(run.base), ir.U32, "the index base")
	if err != nil {
		return 0, err
	}
	base = e.settle(base)
	stmts = stmts[:run.n]
	var vals []string
	if run.store {
		for _, s := range stmts {
			s := s.(ir.StoreStmt)
			v, err := e.typed(s.Value, a.elem, fmt.Sprintf("the value stored to %q", s.Target))
			if err != nil {
				return 0, err
			}
			vals = append(vals, v)
		}
	}
	// The wide access runs when count > n−1, base < count − (n−1) and the
	// address is a multiple of 2n bytes.
	last := uint32(run.n - 1)
	room, fits, in := e.r(), e.p(), e.p()
	e.inst("sub.u32 %s, %s, %d", room, a.count, last)
	e.inst("setp.gt.u32 %s, %s, %d", fits, a.count, last)
	e.inst("setp.lt.u32 %s, %s, %s", in, base.reg, room)
	e.inst("and.pred %s, %s, %s", in, in, fits)
	addr, _ := e.address(a, base.reg)
	low, rest, aligned := e.r(), e.r(), e.p()
	e.inst("cvt.u32.u64 %s, %s", low, addr)
	e.inst("and.b32 %s, %s, %d", rest, low, 2*run.n-1)
	e.inst("setp.eq.u32 %s, %s, 0", aligned, rest)
	e.inst("and.pred %s, %s, %s", in, in, aligned)
	scalar, end := e.label(), e.label()
	e.inst("@!%s bra %s", in, scalar)
	words := make([]string, run.n/2)
	for i := range words {
		words[i] = e.r()
	}
	vec := wideVector(words)
	if run.store {
		for i := range words {
			lo, hi := e.r(), e.r()
			e.inst("and.b32 %s, %s, 0x0000FFFF", lo, vals[2*i])
			e.inst("shl.b32 %s, %s, 16", hi, vals[2*i+1])
			e.inst("or.b32 %s, %s, %s", words[i], lo, hi)
		}
		e.inst("st.global%s [%s], %s", wideSuffix(run.n), addr, vec)
		e.jump(end)
		e.place(scalar)
		for k, s := range stmts {
			s := s.(ir.StoreStmt)
			index, err := e.typedValue(s.Index, ir.U32, "the store index")
			if err != nil {
				return 0, err
			}
			ok := e.inBounds(a, index)
			at, _ := e.address(a, index.reg)
			e.inst("%sst.global.b16 [%s], %s", guard(ok), at, vals[k])
		}
		e.place(end)
		return run.n, nil
	}
	// Loads: each destination is a fresh register for a let, the var's own for
	// an assign; both paths write them.
	dsts := make([]string, run.n)
	for k, s := range stmts {
		if as, ok := s.(ir.AssignStmt); ok {
			l, ok := e.lookup(as.Name)
			if !ok || !l.variable {
				return 0, fmt.Errorf("assign: %q is not a var in scope. Fix: declare it with var before assigning", as.Name)
			}
			if l.t != a.elem {
				return 0, fmt.Errorf("the value assigned to %q has type %s, want %s. Fix: run ir.Validate and correct the program", as.Name, a.elem, l.t)
			}
			dsts[k] = l.reg
			continue
		}
		dsts[k] = e.r()
	}
	space := "global"
	if a.nc {
		space = "global.nc"
	}
	e.inst("ld.%s%s %s, [%s]", space, wideSuffix(run.n), vec, addr)
	for i, w := range words {
		e.inst("and.b32 %s, %s, 0x0000FFFF", dsts[2*i], w)
		e.inst("shr.u32 %s, %s, 16", dsts[2*i+1], w)
	}
	e.jump(end)
	e.place(scalar)
	for k, s := range stmts {
		var x ir.Expr
		switch s := s.(type) {
		case ir.LetStmt:
			x = s.Value
		case ir.AssignStmt:
			x = s.Value
		}
		v, err := e.load(x.(ir.LoadExpr))
		if err != nil {
			return 0, err
		}
		e.inst("mov.b32 %s, %s", dsts[k], v.reg)
	}
	e.place(end)
	for k, s := range stmts {
		if l, ok := s.(ir.LetStmt); ok {
			e.bind(l.Name, local{value: value{reg: dsts[k], t: a.elem}})
		}
	}
	return run.n, nil
}

// wideSuffix is the vector and type suffix of an access of n 16-bit elements.
func wideSuffix(n int) string {
	switch n {
	case 8:
		return ".v4.b32"
	case 4:
		return ".v2.b32"
	}
	return ".b32"
}

// wideVector is the operand of the words of an access: {a, b, …} for a vector,
// the register itself for one word.
func wideVector(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	s := "{"
	for i, w := range words {
		if i > 0 {
			s += ", "
		}
		s += w
	}
	return s + "}"
}
