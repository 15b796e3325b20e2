package ptx

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/ranges/rangetest"
)

// The tests of bounds-check elision (see docs/design.md, "Value ranges and
// bounds-check elision"): a shared access keeps its check unless its index's
// range lies below the array's count, and the interpreter of interp_test.go,
// which fails on any access outside an allocation, runs the results next to
// the oracle.

// accessCounts are a shared array's accesses with and without a bounds check.
type accessCounts struct{ checked, unchecked int }

var (
	sharedDecl = regexp.MustCompile(`(?m)^\t\.shared \.align 4 \.b8 (kiln_shared\d+)\[\d+\]; // (\w+): (\d+) x`)
	sharedBase = regexp.MustCompile(`(?m)^\tmov\.u32 (%r\d+), (kiln_shared\d+);`)
	sharedAddr = regexp.MustCompile(`(?m)^\tmad\.lo\.u32 %r\d+, (%r\d+), 4, (%r\d+);`)
)

// sharedAccesses counts, per shared array, the accesses of m (one address
// computation each) whose index register is compared with the array's count.
func sharedAccesses(m *Module) map[string]accessCounts {
	names, counts, bases := map[string]string{}, map[string]string{}, map[string]string{}
	for _, d := range sharedDecl.FindAllStringSubmatch(m.Text, -1) {
		names[d[1]], counts[d[1]] = d[2], d[3]
	}
	for _, b := range sharedBase.FindAllStringSubmatch(m.Text, -1) {
		bases[b[1]] = b[2]
	}
	out := map[string]accessCounts{}
	for _, a := range sharedAddr.FindAllStringSubmatch(m.Text, -1) {
		sym, ok := bases[a[2]]
		if !ok {
			continue
		}
		c := out[names[sym]]
		if strings.Contains(m.Text, "\tsetp.lt.u32 %p") && regexp.MustCompile(`(?m)^\tsetp\.lt\.u32 %p\d+, `+regexp.QuoteMeta(a[1])+`, `+counts[sym]+`;`).MatchString(m.Text) {
			c.checked++
		} else {
			c.unchecked++
		}
		out[names[sym]] = c
	}
	return out
}

// TestSharedBoundsChecks: the accesses of rangetest's safe arrays lose their
// checks, those of its risky arrays keep them, and the results equal the
// oracle's (out-of-bounds loads give 0, stores and atomics do nothing).
func TestSharedBoundsChecks(t *testing.T) {
	for _, c := range rangetest.Cases() {
		m := mustEmit(t, c.Name, c.Prog, Options{NonCoherentReads: true})
		for name, n := range sharedAccesses(m) {
			switch {
			case strings.HasPrefix(name, "safe") && (n.checked != 0 || n.unchecked == 0):
				t.Errorf("%s: %s has %d checked and %d unchecked accesses, want none checked", c.Name, name, n.checked, n.unchecked)
			case strings.HasPrefix(name, "risky") && (n.unchecked != 0 || n.checked == 0):
				t.Errorf("%s: %s has %d checked and %d unchecked accesses, want all checked", c.Name, name, n.checked, n.unchecked)
			}
		}
		if len(sharedAccesses(m)) != len(c.Prog.Shared) {
			t.Errorf("%s: accesses to %d shared arrays found, want %d", c.Name, len(sharedAccesses(m)), len(c.Prog.Shared))
		}
		runBoth(t, c.Name, c.Prog, c.Launch)
	}
}

// TestMatmulRegSharedLoadsUnchecked: in matmul_reg at bm = bn = 8, tk = 16 on a
// 16×16 workgroup every shared index is provably inside its 4096-element tile,
// so none of the 16 loads of each step of the inner loop (8 of b, 8 of a), which
// is unrolled into 16 copies, nor the 16 fill stores (the fill loops of
// 128·16 / 256 = 8 trips each unroll) has a check, and the
// workgroup_size and u(j)·wx products are folded; the kernel still equals the
// oracle at odd sizes.
func TestMatmulRegSharedLoadsUnchecked(t *testing.T) {
	k, _ := kernels.Lookup("matmul_reg")
	p := k.Program()
	opts := Options{Target: Target{SM: 80}, Spec: rangetest.MatmulRegSpec(), WorkgroupSize: [3]uint32{16, 16, 1}, NonCoherentReads: true}
	m := mustEmit(t, "matmul_reg", p, opts)
	if n := count(m, `^\tld\.shared\.b32 %r\d+, \[%r\d+\];`); n != 16*16 {
		t.Errorf("%d unpredicated shared loads, want %d", n, 16*16)
	}
	if n := count(m, `ld\.shared`); n != 16*16 {
		t.Errorf("%d shared loads in all, want %d", n, 16*16)
	}
	if n := count(m, `^\tst\.shared\.b32 \[%r\d+\], %r\d+;`); n != 16 {
		t.Errorf("%d unpredicated shared stores, want 16", n)
	}
	if n := count(m, `^\tsetp\.lt\.u32 %p\d+, %r\d+, 4096;`); n != 0 {
		t.Errorf("%d shared bounds checks, want none", n)
	}
	for name, n := range sharedAccesses(m) {
		if n.checked != 0 {
			t.Errorf("%s: %d checked accesses, want none", name, n.checked)
		}
	}
	// The workgroup size is a constant: no register multiplies two copies of it.
	if n := count(m, `^\tmul\.lo\.u32 (%r\d+), (%r\d+), (%r\d+);$`); n > 0 {
		for _, line := range regexp.MustCompile(`(?m)^\tmul\.lo\.u32 %r\d+, (%r\d+), (%r\d+);$`).FindAllStringSubmatch(m.Text, -1) {
			if line[1] == line[2] {
				t.Errorf("%q squares a register: the workgroup size is not folded", line[0])
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{1, 17, 40} {
		c := k.NewCase(rng, size)
		c.Spec = rangetest.MatmulRegSpec()
		c.WorkgroupSize = [3]uint32{16, 16, 1}
		c.Grid = ir.GridFor(k.Invocations(c), c.WorkgroupSize)
		runBoth(t, "matmul_reg", p, c)
	}
}

// TestMatmulRegTunedUnrolls: at the tuner's H200 winner (workgroup 8×16, bm =
// bn = 8, tk = 32) the inner loop unrolls into 32 copies of its 16 loads, none
// checked, and stays within the unrolled-statement budget.
func TestMatmulRegTunedUnrolls(t *testing.T) {
	k, _ := kernels.Lookup("matmul_reg")
	p := k.Program()
	var spec ir.SpecMap
	spec.Set("bm", ir.SpecU32(8))
	spec.Set("bn", ir.SpecU32(8))
	spec.Set("tk", ir.SpecU32(32))
	wg := [3]uint32{8, 16, 1}
	m := mustEmit(t, "matmul_reg", p, Options{Target: Target{SM: 80}, Spec: spec, WorkgroupSize: wg, NonCoherentReads: true})
	if n := count(m, `^\tld\.shared\.b32 %r\d+, \[%r\d+\];`); n != 32*16 {
		t.Errorf("%d unpredicated shared loads, want %d", n, 32*16)
	}
	if n := count(m, `ld\.shared`); n != 32*16 {
		t.Errorf("%d shared loads in all, want %d", n, 32*16)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, size := range []int{5, 33} {
		c := k.NewCase(rng, size)
		c.Spec, c.WorkgroupSize = spec, wg
		c.Grid = ir.GridFor(k.Invocations(c), wg)
		runBoth(t, "matmul_reg tuned", p, c)
	}
}

// TestVarReadsInPlace: a var is read from its own register, and what keeps the
// value beyond the statement (a let, the condition of a predicated if, the i of
// an i < len(buf) fact) keeps a copy, so assigning the var later changes none of
// them.
func TestVarReadsInPlace(t *testing.T) {
	b := ir.NewBuilder("test.var_reads", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.ReadWrite)
	i := b.Var("i", ir.U32, ir.GlobalID(0))
	flag := b.Var("flag", ir.Bool, ir.Lt(ir.GlobalID(0), ir.LitU32(40)))
	kept := b.Let("kept", i)
	// Predicated: the store must run under the flag as it was at the if.
	b.If(flag, func(k *ir.Block) {
		k.Assign("flag", ir.LitBool(false))
		k.Store(out, kept, ir.LitU32(7))
		k.Assign("flag", ir.LitBool(true))
	})
	// A bound fact on i, then i moves past the end: the store keeps its check.
	b.If(ir.Lt(i, ir.Len(out)), func(k *ir.Block) {
		k.Assign("i", ir.Add(i, ir.LitU32(1000)))
		k.Store(out, i, ir.LitU32(9))
		k.Store(out, kept, ir.Add(ir.Load(out, kept), ir.Cast(ir.U32, flag)))
		// A loop, so the if branches instead of being predicated.
		k.While(ir.Lt(i, ir.LitU32(0)), func(w *ir.Block) { w.Break() })
	})
	p := b.MustBuild()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, size := range []int{0, 20, 64} {
		in := make([]uint32, size)
		for j := range in {
			in[j] = rng.Uint32()
		}
		runBoth(t, "var_reads", p, kernels.Case{Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{kernels.U32Bytes(in)}, OutputCounts: []uint32{0}})
	}
}
