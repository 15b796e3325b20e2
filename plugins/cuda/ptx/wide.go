package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/wide"
)

// Wide 16-bit accesses. A run of package wide (N = 8, 4 or 2 consecutive loads,
// or stores, of elements base+0 … base+N−1 of one f16 or bf16 buffer) is
// emitted as one access of 2N bytes when it may be. At run time the wide
// access (ld.global[.nc].v4.b32 / .v2.b32 / .b32, st.global.v4.b32 …) runs when
// the whole run is in bounds (base ≤ count − N, no wrap) and the element's
// address is a multiple of 2N bytes (a binding may start at any multiple of 4
// bytes); otherwise the statements run as written, one predicated 16-bit
// access each, so an access out of bounds still loads 0 or writes nothing. A
// loaded word holds two elements, the lower index in its low half
// (little-endian), which and.b32/shr.u32 split into the zero-extended
// registers the 16-bit values live in; a stored word is packed the same way.

// wide emits a run at the start of stmts as one wide access when one matches,
// returning how many statements it emitted (0: none matched). Inside a
// predicated if the statements run as written.
func (e *emitter) wide(stmts []ir.Stmt) (int, error) {
	if e.cond != "" {
		return 0, nil
	}
	run, ok := wide.Match(stmts, func(target string) bool {
		a, ok := e.arrays[target]
		return ok && !a.shared && !a.local && a.elem.Is16Bit()
	})
	if !ok {
		return 0, nil
	}
	a := e.arrays[run.Target]
	base, err := e.typedValue(ir.Local(run.Base), ir.U32, "the index base")
	if err != nil {
		return 0, err
	}
	base = e.settle(base)
	stmts = stmts[:run.N]
	var vals []string
	if run.Store {
		if vals, err = wide.Values(stmts, a.elem, e.typed); err != nil {
			return 0, err
		}
	}
	// The wide access runs when count > n−1, base < count − (n−1) and the
	// address is a multiple of 2n bytes.
	last := uint32(run.N - 1)
	room, fits, in := e.r(), e.p(), e.p()
	e.inst("sub.u32 %s, %s, %d", room, a.count, last)
	e.inst("setp.gt.u32 %s, %s, %d", fits, a.count, last)
	e.inst("setp.lt.u32 %s, %s, %s", in, base.reg, room)
	e.inst("and.pred %s, %s, %s", in, in, fits)
	addr, _ := e.address(a, base.reg)
	low, rest, aligned := e.r(), e.r(), e.p()
	e.inst("cvt.u32.u64 %s, %s", low, addr)
	e.inst("and.b32 %s, %s, %d", rest, low, 2*run.N-1)
	e.inst("setp.eq.u32 %s, %s, 0", aligned, rest)
	e.inst("and.pred %s, %s, %s", in, in, aligned)
	scalar, end := e.label(), e.label()
	e.inst("@!%s bra %s", in, scalar)
	words := make([]string, run.N/2)
	for i := range words {
		words[i] = e.r()
	}
	vec := wideVector(words)
	if run.Store {
		for i := range words {
			lo, hi := e.r(), e.r()
			e.inst("and.b32 %s, %s, 0x0000FFFF", lo, vals[2*i])
			e.inst("shl.b32 %s, %s, 16", hi, vals[2*i+1])
			e.inst("or.b32 %s, %s, %s", words[i], lo, hi)
		}
		e.inst("st.global%s [%s], %s", wideSuffix(run.N), addr, vec)
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
		return run.N, nil
	}
	// Loads: each destination is a fresh register for a let, the var's own for
	// an assign; both paths write them.
	dsts := make([]string, run.N)
	for k, s := range stmts {
		if as, ok := s.(ir.AssignStmt); ok {
			l, ok := e.scopes.Lookup(as.Name)
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
	e.inst("ld.%s%s %s, [%s]", space, wideSuffix(run.N), vec, addr)
	for i, w := range words {
		e.inst("and.b32 %s, %s, 0x0000FFFF", dsts[2*i], w)
		e.inst("shr.u32 %s, %s, 16", dsts[2*i+1], w)
	}
	e.jump(end)
	e.place(scalar)
	for k, s := range stmts {
		_, x, _ := wide.Load(s)
		v, err := e.load(x)
		if err != nil {
			return 0, err
		}
		e.inst("mov.b32 %s, %s", dsts[k], v.reg)
	}
	e.place(end)
	for k, s := range stmts {
		if l, ok := s.(ir.LetStmt); ok {
			e.scopes.Bind(l.Name, local{value: value{reg: dsts[k], t: a.elem}})
		}
	}
	return run.N, nil
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
