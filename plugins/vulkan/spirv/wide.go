package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/wide"
)

// Wide 16-bit accesses, as in the PTX emitter (plugins/cuda/ptx/wide.go; see
// docs/design.md, "Wide 16-bit accesses"). A run of package wide (N = 8, 4 or
// 2 consecutive loads, or stores, of elements base+0 … base+N−1) on a 16-bit
// buffer reached through its descriptor is one OpLoad or OpStore of a uvec4, uvec2 or u32 through a second
// variable at the same descriptor set and binding whose runtime array has
// that element (ArrayStride 16, 8 or 4): a view of the buffer. A binding starts
// at a multiple of minStorageBufferOffsetAlignment (the backend copies a
// binding that does not to an aligned scratch range), which Vulkan makes at
// least what the view's element needs, so element base/N of the view is
// elements base … base+N−1 when base is a multiple of N. The wide access runs
// when base is a multiple of N and the run lies inside the buffer (count > N−1
// and base < count − (N−1)); otherwise the statements run as written, each
// with its bounds check. A word holds two elements, the lower index in its low
// half. Where the buffer is written, both its variables are Aliased (and not
// Restrict), so a compiler orders the accesses through the two as written.
// Buffers reached through a device address (Target.BufferAddresses) and
// shared arrays keep the scalar statements.

// decorationAliased is SPIR-V's Aliased decoration.
const decorationAliased = 20

// wideTargets returns the buffers of p that some run accesses, so that
// declareBuffers makes those that are written Aliased.
func wideTargets(p *ir.Program) map[string]bool {
	is16 := map[string]bool{}
	for _, b := range p.Buffers {
		is16[b.Name] = b.Type.Is16Bit()
	}
	out := map[string]bool{}
	var walk func(stmts []ir.Stmt)
	walk = func(stmts []ir.Stmt) {
		for i := range stmts {
			if run, ok := wide.Match(stmts[i:], func(t string) bool { return is16[t] }); ok {
				out[run.Target] = true
			}
			switch s := stmts[i].(type) {
			case ir.IfStmt:
				walk(s.Then)
				walk(s.Else)
			case ir.ForStmt:
				walk(s.Body)
			case ir.WhileStmt:
				walk(s.Body)
			}
		}
	}
	walk(p.Body)
	return out
}

// wideView returns the variable that views buffer b's binding as an array of
// words (n = 2), uvec2 (n = 4) or uvec4 (n = 8), declaring it on first use.
func (e *emitter) wideView(b ir.BufferDecl, n int) (view, elem uint32) {
	elem = e.u32()
	if n > 2 {
		elem = e.typ(typeKey{op: opTypeVector, a: e.u32(), b: uint32(n / 2)}, e.u32(), uint32(n/2))
	}
	key := [2]uint32{b.Binding, uint32(n)}
	if v, ok := e.wideViews[key]; ok {
		return v, elem
	}
	st := e.global(opTypeStruct, false, e.runtimeArray(elem, uint32(2*n)))
	e.decorate(st, decorationBlock)
	e.memberDecorate(st, 0, decorationOffset, 0)
	switch b.Access {
	case ir.Read:
		e.memberDecorate(st, 0, decorationNonWritable)
	case ir.Write:
		e.memberDecorate(st, 0, decorationNonReadable)
	}
	v := e.global(opVariable, true, e.pointer(storageStorageBuffer, st), storageStorageBuffer)
	e.decorate(v, decorationDescriptorSet, 0)
	e.decorate(v, decorationBinding, b.Binding)
	if b.Access != ir.Read {
		e.decorate(v, decorationAliased)
	}
	e.name(v, fmt.Sprintf("%s_x%d", b.Name, n))
	if e.wideViews == nil {
		e.wideViews = map[[2]uint32]uint32{}
	}
	e.wideViews[key] = v
	return v, elem
}

// wide emits a run at the start of stmts as one wide access when one matches,
// returning how many statements it emitted (0: none matched).
func (e *emitter) wide(stmts []ir.Stmt) (int, error) {
	run, ok := wide.Match(stmts, func(target string) bool {
		a, ok := e.arrays[target]
		return ok && !a.shared && !a.addressed && a.elem.Is16Bit()
	})
	if !ok {
		return 0, nil
	}
	a := e.arrays[run.Target]
	decl, _ := e.prog.Buffer(run.Target)
	base, err := e.typed(ir.Local(run.Base), ir.U32, "the index base")
	if err != nil {
		return 0, err
	}
	stmts = stmts[:run.N]
	var vals []uint32
	if run.Store {
		if vals, err = wide.Values(stmts, a.elem, e.typed); err != nil {
			return 0, err
		}
	}
	u, b := e.u32(), e.bool()
	last := e.cu32(uint32(run.N - 1))
	count := e.count(a)
	fits := e.op(opUGreaterThan, b, count, last)
	in := e.op(opULessThan, b, base, e.op(opISub, u, count, last))
	aligned := e.op(opIEqual, b, e.op(opBitwiseAnd, u, base, last), e.cu32(0))
	cond := e.op(opLogicalAnd, b, e.op(opLogicalAnd, b, fits, in), aligned)
	wideL, scalarL, merge := e.id(), e.id(), e.id()
	e.inst(opSelectionMerge, merge, selectionControlNone)
	e.terminate(opBranchConditional, cond, wideL, scalarL)

	e.label(wideL)
	view, elem := e.wideView(decl, run.N)
	ptr := e.op(opAccessChain, e.pointer(storageStorageBuffer, elem), view, e.cu32(0),
		e.op(opShiftRightLogical, u, base, e.cu32(uint32(wideShift(run.N)))))
	words := run.N / 2
	if run.Store {
		parts := make([]uint32, words)
		for i := range parts {
			parts[i] = e.wideWord(a.elem, vals[2*i], vals[2*i+1])
		}
		word := parts[0]
		if words > 1 {
			word = e.op(opCompositeConstruct, elem, parts...)
		}
		e.inst(opStore, ptr, word)
		e.terminate(opBranch, merge)
		e.label(scalarL)
		for k, s := range stmts {
			index, err := e.typedValue(s.(ir.StoreStmt).Index, ir.U32, "the store index")
			if err != nil {
				return 0, err
			}
			e.storeAt(a, index, vals[k])
		}
		e.terminate(opBranch, merge)
		e.label(merge)
		return run.N, nil
	}
	vec := e.op(opLoad, elem, ptr)
	wideVals := make([]uint32, run.N)
	for i := range words {
		w := vec
		if words > 1 {
			w = e.op(opCompositeExtract, u, vec, uint32(i))
		}
		wideVals[2*i], wideVals[2*i+1] = e.wideHalves(a.elem, w)
	}
	wideLast := e.cur
	e.terminate(opBranch, merge)
	e.label(scalarL)
	scalarVals := make([]uint32, run.N)
	for k, s := range stmts {
		_, x, _ := wide.Load(s)
		v, err := e.load(x)
		if err != nil {
			return 0, err
		}
		scalarVals[k] = v.id
	}
	scalarLast := e.cur
	e.terminate(opBranch, merge)
	e.label(merge)
	t := e.scalar(a.elem)
	phis := make([]uint32, run.N)
	for k := range phis {
		phis[k] = e.op(opPhi, t, wideVals[k], wideLast, scalarVals[k], scalarLast)
	}
	for k, s := range stmts {
		v := phis[k]
		switch s := s.(type) {
		case ir.LetStmt:
			e.scopes.Bind(s.Name, local{value: value{id: v, t: a.elem}})
		case ir.AssignStmt:
			l, ok := e.scopes.Lookup(s.Name)
			if !ok || !l.variable || l.t != a.elem {
				return 0, fmt.Errorf("assign: %q is not a %s var in scope. Fix: declare it with var before assigning", s.Name, a.elem)
			}
			e.inst(opStore, l.id, v)
		}
	}
	return run.N, nil
}

// wideShift is log2 of n.
func wideShift(n int) int {
	switch n {
	case 8:
		return 3
	case 4:
		return 2
	}
	return 1
}

// wideWord is the u32 holding 16-bit values lo and hi of type t, lo in its low
// half: two f16 values as the bits of a half2, two bf16 values (u32 values
// already) packed.
func (e *emitter) wideWord(t ir.Type, lo, hi uint32) uint32 {
	u := e.u32()
	if t == ir.F16 {
		return e.op(opBitcast, u, e.op(opCompositeConstruct, e.half2(), lo, hi))
	}
	return e.op(opBitwiseOr, u, e.op(opBitwiseAnd, u, lo, e.cu32(0xFFFF)), e.op(opShiftLeftLogical, u, hi, e.cu32(16)))
}

// wideHalves are the two 16-bit values of type t a u32 word holds, the low half
// first.
func (e *emitter) wideHalves(t ir.Type, w uint32) (lo, hi uint32) {
	u := e.u32()
	if t == ir.F16 {
		h := e.f16()
		pair := e.op(opBitcast, e.half2(), w)
		return e.op(opCompositeExtract, h, pair, 0), e.op(opCompositeExtract, h, pair, 1)
	}
	return e.op(opBitwiseAnd, u, w, e.cu32(0xFFFF)), e.op(opShiftRightLogical, u, w, e.cu32(16))
}
