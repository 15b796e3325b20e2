package kit

import (
	"context"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/verify"
	"github.com/kiln-dev/kiln/pluginapi"
)

// expectation is what the outputs of one launch are verified against: the CPU
// reference at every subgroup size the program allows (one for a program that
// uses no subgroups or requires a size; for one that runs with any size, each
// size its workgroup allows, the adapter's first). Each reference remembers the
// outputs of the program itself.
type expectation struct {
	p     *ir.Program
	sizes []uint32
	refs  []verify.Reference
}

// expect builds the expectation of p on launch c; unordered sorts every output's
// words (see semantic.unordered).
func (r *runner) expect(p *ir.Program, c launch, unordered bool) expectation {
	e := expectation{p: p, sizes: r.subgroupSizes(p, c)}
	for _, size := range e.sizes {
		c := c
		c.subgroup = size
		var cached [][]byte
		var cachedErr error
		done := false
		ref := func(q *ir.Program) ([][]byte, error) {
			if q == p && done {
				return cached, cachedErr
			}
			outs, err := r.reference(context.Background(), q, c)
			if unordered {
				outs = sortWords(outs)
			}
			if q == p {
				cached, cachedErr, done = outs, err, true
			}
			return outs, err
		}
		e.refs = append(e.refs, ref)
	}
	return e
}

// verify checks got with verify.Outputs against the reference at each size: it passes
// when the outputs match at one of them, and otherwise reports the error at the
// first size tried.
func (e expectation) verify(got [][]byte) error {
	var first error
	for _, ref := range e.refs {
		_, err := verify.Outputs(e.p, got, ref)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if len(e.refs) > 1 {
		return fmt.Errorf("%w (the outputs match the reference at none of the subgroup sizes %v)", first, e.sizes)
	}
	return first
}

// compileOrSkip compiles p for the launch and releases the pipeline when the test
// ends. A program that uses subgroups, or f16 or bf16 (IR v1.2), may be
// rejected (pluginapi.RejectedError) by a backend whose adapter profile does
// not claim what it needs; the test is then skipped with the reason ("not
// supported" for the 16-bit types). Any other failure fails the test.
func (r *runner) compileOrSkip(t T, p *ir.Program, c launch, blob []byte) *pluginapi.CompileResult {
	t.Helper()
	res, err := r.tryCompile(p, c, blob)
	if err != nil {
		var rejected *pluginapi.RejectedError
		if uses, _ := subgroupUse(p.Body); uses && errors.As(err, &rejected) && !r.claims(p) {
			t.Skipf("the backend rejects this subgroup program, and its profile (subgroup size %d, subgroup operations %v, shuffles %v) does not claim it: %v",
				r.profile.SubgroupSize, r.profile.SupportsSubgroupOps, r.profile.HasSubgroupShuffle, err)
		}
		if f16, bf16 := types16(p); (f16 || bf16) && errors.As(err, &rejected) && !r.claims16(f16, bf16) {
			t.Skipf("not supported: the backend rejects this program's 16-bit types, and its profile (supports_f16 %v, supports_bf16 %v) does not claim them: %v",
				r.profile.SupportsF16, r.profile.SupportsBF16, err)
		}
		t.Fatalf("Compile %s: %v", p.Name, err)
	}
	r.releaseAtEnd(t, res.Pipeline)
	return res
}

// subgroupSizes returns the subgroup sizes the reference runs p with: 0 (the
// program's own) for a program that requires a size or uses no subgroups, and
// for one that runs with any size, every size its workgroup allows, the
// adapter's first.
func (r *runner) subgroupSizes(p *ir.Program, c launch) []uint32 {
	if uses, _ := subgroupUse(p.Body); !uses || p.SubgroupSize != 0 {
		return []uint32{0}
	}
	wg := p.WorkgroupSize
	if c.WorkgroupSize != ([3]uint32{}) {
		wg = c.WorkgroupSize
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
	_, lanes := subgroupUse(p.Body)
	return pr.HasSubgroupShuffle || !lanes
}

// types16 reports whether p uses f16 and whether it uses bf16 (IR v1.2): in a
// buffer, shared array or matrix declaration, or in an expression or local of
// its body.
func types16(p *ir.Program) (f16, bf16 bool) {
	note := func(t ir.Type) {
		f16 = f16 || t == ir.F16
		bf16 = bf16 || t == ir.BF16
	}
	for _, d := range p.Buffers {
		note(d.Type)
	}
	for _, d := range p.Shared {
		note(d.Type)
	}
	for _, d := range p.Matrices {
		note(d.Type)
	}
	ir.Inspect(p.Body, func(n any) bool {
		switch x := n.(type) {
		case ir.Literal:
			note(x.Type)
		case ir.CastExpr:
			note(x.To)
		case ir.VarStmt:
			note(x.Type)
		}
		return true
	})
	return f16, bf16
}

// claims16 reports whether the adapter's profile claims the 16-bit types a
// program uses: supports_f16 for f16, supports_bf16 for bf16.
func (r *runner) claims16(f16, bf16 bool) bool {
	return (!f16 || r.profile.SupportsF16) && (!bf16 || r.profile.SupportsBF16)
}

// subgroupUse reports whether stmts use subgroup builtins or operations, and
// whether they read other lanes (subgroup_shuffle, subgroup_broadcast).
func subgroupUse(stmts []ir.Stmt) (uses, lanes bool) {
	ir.Inspect(stmts, func(n any) bool {
		switch e := n.(type) {
		case ir.SubgroupExpr:
			uses = true
			lanes = lanes || e.Op.HasLane()
		case ir.BuiltinRef:
			uses = uses || !e.Kind.HasAxis()
		}
		return true
	})
	return uses, lanes
}
