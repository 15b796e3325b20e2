package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// semantic is one case of the semantics tables: a small program that exercises
// one rule of docs/design.md, "The program (IR)", on its edge values, with a
// launch. The backend's outputs are compared with the CPU reference's (Verify).
type semantic struct {
	name string
	prog *ir.Program
	c    launch
	// pinned, when set, holds for each output buffer the leading elements the
	// table states (docs/design.md's values); the CPU reference must give them
	// (any NaN for a NaN), or the case fails as a kiln bug before the backend runs.
	pinned [][]uint32
	// unordered compares every output as a multiset of words: the order in which
	// contending atomics ran is free, the values they returned are not.
	unordered bool
	// err is a mistake in building the case (a kiln bug), reported when it runs.
	err error
	// subgroup marks a case that uses subgroups (IR v1.1): the backend may reject
	// it at compile time, unless its profile claims what it needs, and a program
	// that runs with any subgroup size matches the reference at some size.
	subgroup bool
}

// table is one group of the semantics subtest.
type table struct {
	name  string
	cases []semantic
}

// semanticTables lists every table in the order Run runs them.
func semanticTables() []table {
	return []table{
		{"operator", operatorCases()},
		{"cast", castCases()},
		{"memory", memoryCases()},
		{"control", controlCases()},
		{"atomic", atomicCases()},
		{"uniform", uniformCases()},
		{"subgroup", subgroupCases()},
	}
}

// SemanticCases is the number of cases of the semantics subtest.
func SemanticCases() int {
	n := 0
	for _, t := range semanticTables() {
		n += len(t.cases)
	}
	return n
}

// semantics runs every table, one subtest per table and case.
func (r *runner) semantics(t *testing.T) {
	for _, tab := range semanticTables() {
		t.Run(tab.name, func(t *testing.T) {
			for _, s := range tab.cases {
				t.Run(s.name, func(t *testing.T) { r.semanticCase(t, s) })
			}
		})
	}
}

func (r *runner) semanticCase(t *testing.T, s semantic) {
	if s.err != nil {
		t.Fatalf("the kit's case is broken (a kiln bug): %v", s.err)
	}
	if err := ir.Validate(s.prog); err != nil {
		t.Fatalf("the kit's program %q is invalid (a kiln bug): %v", s.prog.Name, err)
	}
	sizes := r.subgroupSizes(s)
	refs := make([]Reference, len(sizes))
	for k, size := range sizes {
		c := s.c
		c.subgroup = size
		refs[k] = r.referenceFor(c)
		if s.unordered {
			refs[k] = sortedReference(refs[k])
		}
		want, err := refs[k](s.prog)
		if err != nil {
			t.Fatalf("CPU reference failed on %q (a kiln bug): %v", s.prog.Name, err)
		}
		if err := checkPinned(s, want); err != nil {
			t.Fatalf("the CPU reference disagrees with the kit's table (a kiln bug): %v", err)
		}
	}
	comp, err := r.tryCompile(s.prog, s.c, nil)
	if err != nil {
		var rejected *pluginapi.RejectedError
		if s.subgroup && errors.As(err, &rejected) && !r.claims(s.prog) {
			t.Skipf("the backend rejects this subgroup program, and its profile (subgroup size %d, subgroup operations %v, shuffles %v) does not claim it: %v",
				r.profile.SubgroupSize, r.profile.SupportsSubgroupOps, r.profile.HasSubgroupShuffle, err)
		}
		t.Fatalf("Compile %s: %v", s.prog.Name, err)
	}
	r.releaseAtEnd(t, comp.Pipeline)
	res, err := r.dispatch(comp.Pipeline, s.c)
	if err != nil {
		t.Fatalf("Dispatch %s: %v", s.prog.Name, err)
	}
	got := res.Outputs
	if s.unordered {
		got = sortWords(got)
	}
	// A program that runs with any subgroup size passes when the outputs match the
	// reference at one of the sizes it allows; the error reported is the one at
	// the first size tried, the adapter's own.
	var first error
	for _, ref := range refs {
		_, err := Verify(s.prog, got, ref)
		if err == nil {
			return
		}
		if first == nil {
			first = err
		}
	}
	if len(refs) > 1 {
		first = fmt.Errorf("%w (the outputs match the reference at none of the subgroup sizes %v)", first, sizes)
	}
	t.Error(first)
}

// subgroupSizes returns the subgroup sizes the reference runs s with: the
// program's own for a program that requires one or uses no subgroups (0), and
// for one that runs with any, every size its workgroup allows, the adapter's
// first.
func (r *runner) subgroupSizes(s semantic) []uint32 {
	if !s.subgroup || s.prog.SubgroupSize != 0 {
		return []uint32{0}
	}
	wg := s.prog.WorkgroupSize
	if s.c.WorkgroupSize != ([3]uint32{}) {
		wg = s.c.WorkgroupSize
	}
	var sizes []uint32
	if ir.CheckSubgroupSize(wg, r.profile.SubgroupSize) == nil {
		sizes = append(sizes, r.profile.SubgroupSize)
	}
	for size := uint32(1); size <= ir.MaxSubgroupSize; size *= 2 {
		if size != r.profile.SubgroupSize && ir.CheckSubgroupSize(wg, size) == nil {
			sizes = append(sizes, size)
		}
	}
	return sizes
}

// claims reports whether the adapter's profile claims what subgroup program p
// needs: subgroup operations, shuffles when p reads other lanes, and p's
// required size as the adapter's subgroup size.
func (r *runner) claims(p *ir.Program) bool {
	pr := r.profile
	if !pr.SupportsSubgroupOps || p.SubgroupSize != 0 && p.SubgroupSize != pr.SubgroupSize {
		return false
	}
	return pr.HasSubgroupShuffle || !readsLanes(p.Body)
}

// readsLanes reports whether stmts use subgroup_shuffle or subgroup_broadcast.
func readsLanes(stmts []ir.Stmt) bool {
	found := false
	var expr func(e ir.Expr)
	expr = func(e ir.Expr) {
		switch e := e.(type) {
		case ir.SubgroupExpr:
			found = found || e.Op.HasLane()
			expr(e.X)
			if e.Lane != nil {
				expr(e.Lane)
			}
		case ir.UnaryExpr:
			expr(e.X)
		case ir.BinaryExpr:
			expr(e.X)
			expr(e.Y)
		case ir.FmaExpr:
			expr(e.A)
			expr(e.B)
			expr(e.C)
		case ir.SelectExpr:
			expr(e.Cond)
			expr(e.A)
			expr(e.B)
		case ir.CastExpr:
			expr(e.X)
		case ir.BitcastExpr:
			expr(e.X)
		case ir.LoadExpr:
			expr(e.Index)
		}
	}
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.LetStmt:
			expr(s.Value)
		case ir.VarStmt:
			expr(s.Value)
		case ir.AssignStmt:
			expr(s.Value)
		case ir.StoreStmt:
			expr(s.Index)
			expr(s.Value)
		case ir.IfStmt:
			expr(s.Cond)
			found = found || readsLanes(s.Then) || readsLanes(s.Else)
		case ir.ForStmt:
			expr(s.From)
			expr(s.To)
			expr(s.Step)
			found = found || readsLanes(s.Body)
		case ir.WhileStmt:
			expr(s.Cond)
			found = found || readsLanes(s.Body)
		case ir.AtomicStmt:
			expr(s.Index)
			expr(s.Value)
			if s.Compare != nil {
				expr(s.Compare)
			}
		}
	}
	return found
}

// referenceFor runs programs on the CPU reference with the launch of c.
func (r *runner) referenceFor(c launch) Reference {
	return func(p *ir.Program) ([][]byte, error) { return r.reference(context.Background(), p, c) }
}

// sortedReference returns ref with every output sorted as words.
func sortedReference(ref Reference) Reference {
	return func(p *ir.Program) ([][]byte, error) {
		outs, err := ref(p)
		return sortWords(outs), err
	}
}

// sortWords returns copies of bufs with their 4-byte words in ascending order; a
// trailing partial word stays last.
func sortWords(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		ws := wordsOf(b)
		slices.Sort(ws)
		out[i] = append(words(ws), b[4*len(ws):]...)
	}
	return out
}

// checkPinned checks the reference's outputs against the values s states.
func checkPinned(s semantic, want [][]byte) error {
	outs := s.prog.Outputs()
	for k, pins := range s.pinned {
		if k >= len(want) || 4*len(pins) > len(want[k]) {
			return fmt.Errorf("program %q: output %d is shorter than the %d values the table states", s.prog.Name, k, len(pins))
		}
		decl := s.prog.Buffers[outs[k]]
		for i, p := range pins {
			w := binary.LittleEndian.Uint32(want[k][4*i:])
			if w == p || decl.Type == ir.F32 && kernels.IsNaN(w) && kernels.IsNaN(p) {
				continue
			}
			return fmt.Errorf("program %q: %s[%d] is %s, the table says %s", s.prog.Name, decl.Name, i,
				kernels.Format(decl.Type, w), kernels.Format(decl.Type, p))
		}
	}
	return nil
}

// words encodes ws as little-endian buffer data.
func words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// wordsOf decodes little-endian buffer data; a trailing partial word is ignored.
func wordsOf(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}
