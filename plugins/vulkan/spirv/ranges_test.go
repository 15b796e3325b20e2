package spirv

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/ranges/rangetest"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// The tests of bounds-check elision (see docs/design.md, "Value ranges and
// bounds-check elision"): a shared access keeps its check unless its index's
// range lies below the array's count; the interpreter of interp_test.go, which
// fails on any access outside the memory bound, runs the modules next to the
// oracle, and spirv-val checks each one.

// accessCounts are a shared array's accesses with and without a bounds check.
type accessCounts struct{ checked, unchecked int }

// sharedAccesses counts, per shared array, the access chains into it whose index
// is compared with the array's count: a store's or an atomic's index itself
// (the guard of its selection construct), or a load's, which reads from the
// select of that index or 0.
func sharedAccesses(t *testing.T, m *Module) map[string]accessCounts {
	_, insts := decode(t, m.Words)
	defs := resultIDs(insts)
	arrays := map[uint32]string{}
	length := map[uint32]uint32{} // shared variable -> the id of its length constant
	for name, id := range names(insts) {
		if v, ok := defs[id]; ok && v.op == opVariable && v.args[2] == storageWorkgroup {
			arrays[id] = name
			array := defs[defs[v.args[0]].args[2]] // pointer type -> array type
			length[id] = array.args[2]
		}
	}
	// guards are the bools a select picks by or a selection construct (not a
	// loop header) branches on, and the operands of a guard that is their
	// conjunction (a speculated if's store runs on cond && index < count).
	guards := map[uint32]bool{}
	for i, in := range insts {
		switch {
		case in.op == opSelect:
			guards[in.args[2]] = true
		case in.op == opBranchConditional && i > 0 && insts[i-1].op == opSelectionMerge:
			guards[in.args[0]] = true
		}
	}
	for i := len(insts) - 1; i >= 0; i-- {
		if in := insts[i]; in.op == opLogicalAnd && guards[in.args[1]] {
			guards[in.args[2]], guards[in.args[3]] = true, true
		}
	}
	type pair struct{ x, n uint32 }
	compared := map[pair]bool{} // x < n guards something
	for _, in := range insts {
		if in.op == opULessThan && guards[in.args[1]] {
			compared[pair{in.args[2], in.args[3]}] = true
		}
	}
	out := map[string]accessCounts{}
	for _, in := range insts {
		if in.op != opAccessChain {
			continue
		}
		name, ok := arrays[in.args[2]]
		if !ok {
			continue
		}
		index, n := in.args[3], length[in.args[2]]
		c := out[name]
		if sel, ok := defs[index]; compared[pair{index, n}] || ok && sel.op == opSelect && compared[pair{sel.args[3], n}] {
			c.checked++
		} else {
			c.unchecked++
		}
		out[name] = c
	}
	return out
}

// runBoth runs m, emitted from p, on the interpreter and p on the oracle and
// fails the test when the outputs differ.
func runBoth(t *testing.T, name string, p *ir.Program, m *Module, c kernels.Case) {
	t.Helper()
	got, err := dispatchCase(p, m, c, c.Uniforms, [3]uint32{65535, 65535, 65535})
	if err != nil {
		t.Fatalf("%s: interpreter: %v", name, err)
	}
	if err := kit.MatchOracle(p, c, got); err != nil {
		t.Errorf("%s: differs from the oracle: %v", name, err)
	}
}

// TestSharedBoundsChecks: the accesses of rangetest's safe arrays lose their
// checks, those of its risky arrays keep them, and the results equal the
// oracle's (out-of-bounds loads give 0, stores and atomics do nothing).
func TestSharedBoundsChecks(t *testing.T) {
	val := spirvVal(t)
	for _, c := range rangetest.Cases() {
		m := mustEmit(t, c.Name, c.Prog)
		validate(t, val, c.Name, m)
		got := sharedAccesses(t, m)
		for name, n := range got {
			switch {
			case strings.HasPrefix(name, "safe") && (n.checked != 0 || n.unchecked == 0):
				t.Errorf("%s: %s has %d checked and %d unchecked accesses, want none checked", c.Name, name, n.checked, n.unchecked)
			case strings.HasPrefix(name, "risky") && (n.unchecked != 0 || n.checked == 0):
				t.Errorf("%s: %s has %d checked and %d unchecked accesses, want all checked", c.Name, name, n.checked, n.unchecked)
			}
		}
		if len(got) != len(c.Prog.Shared) {
			t.Errorf("%s: accesses to %d shared arrays found, want %d", c.Name, len(got), len(c.Prog.Shared))
		}
		runBoth(t, c.Name, c.Prog, m, c.Launch)
	}
}

// TestMatmulRegSharedLoadsUnchecked: with the specialization folded
// (Target.FoldSpec), matmul_reg at bm = bn = 8, tk = 16 on a 16×16 workgroup has
// no check on any of its 18 shared accesses (the 16 loads of the inner loop and
// the two fill stores), the ifs on bm and bn are gone and the inner loop, of
// 16 constant steps, and the two fill loops, of 8, ask to be unrolled (stages
// is 1: the pipelined loop is folded away); with specialization constants, whose
// values the emitter does not know, both k loops are emitted, every access of
// the plain loop and every load and fill of the pipelined one keeps its check
// (36), only the pipelined loop's 16 prefetch stores, guarded by their trip
// and element bounds, are proven in range, and no loop has constant bounds.
// Both equal the oracle at odd sizes.
func TestMatmulRegSharedLoadsUnchecked(t *testing.T) {
	val := spirvVal(t)
	k, _ := kernels.Lookup("matmul_reg")
	p := k.Program()
	target := fullTarget
	target.WorkgroupSize = [3]uint32{16, 16, 1}
	spec := target
	folded := target
	foldedSpec := rangetest.MatmulRegSpec()
	folded.FoldSpec = &foldedSpec
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name                       string
		target                     Target
		checked, unchecked, unroll int
	}{
		{"folded", folded, 0, 18, 3},
		{"specialization constants", spec, 36, 16, 0},
	} {
		m, err := EmitFor(p, tc.target)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, val, "matmul_reg "+tc.name, m)
		var total accessCounts
		for _, n := range sharedAccesses(t, m) {
			total.checked += n.checked
			total.unchecked += n.unchecked
		}
		if total != (accessCounts{tc.checked, tc.unchecked}) {
			t.Errorf("%s: %d checked and %d unchecked shared accesses, want %d and %d", tc.name, total.checked, total.unchecked, tc.checked, tc.unchecked)
		}
		_, insts := decode(t, m.Words)
		unroll := 0
		for _, in := range insts {
			if in.op == opLoopMerge && in.args[2] == loopControlUnroll {
				unroll++
			}
		}
		if unroll != tc.unroll {
			t.Errorf("%s: %d loops ask to be unrolled, want %d", tc.name, unroll, tc.unroll)
		}
		if tc.target.FoldSpec != nil && len(m.ParamIDs) != 0 {
			t.Errorf("%s: ParamIDs %v, want none", tc.name, m.ParamIDs)
		}
		for _, size := range []int{1, 17, 40} {
			c := k.NewCase(rng, size)
			c.Spec = rangetest.MatmulRegSpec()
			c.WorkgroupSize = target.WorkgroupSize
			c.Grid = ir.GridFor(k.Invocations(c), c.WorkgroupSize)
			runBoth(t, "matmul_reg "+tc.name, p, m, c)
		}
	}
}

// TestFoldSpecRejectsWrongTypes: a folded specialization value must have its
// parameter's type and name a declared parameter.
func TestFoldSpecRejectsWrongTypes(t *testing.T) {
	k, _ := kernels.Lookup("matmul_reg")
	for _, set := range []func(*ir.SpecMap){
		func(m *ir.SpecMap) { m.Set("bm", ir.SpecF32(8)) },
		func(m *ir.SpecMap) { m.Set("nope", ir.SpecU32(8)) },
	} {
		var spec ir.SpecMap
		set(&spec)
		if _, err := EmitFor(k.Program(), Target{FoldSpec: &spec}); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("spec %v: error %v, want a refusal with a fix", spec.Names(), err)
		}
	}
}
