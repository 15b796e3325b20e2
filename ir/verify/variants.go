package verify

import (
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Variant is a rewriting of a program whose outputs a backend may give instead of
// the program's own: docs/design.md allows fma to be evaluated as a rounded
// multiply then add, and denormals to be flushed to zero.
type Variant struct {
	// Name says what the variant allows: "unfused fma", "flushed denormals", or
	// both.
	Name string
	// Program is the rewritten program, valid when the original is.
	Program *ir.Program
}

// Variants returns the accepted variants of p (none for a program without fma
// and without f32 arithmetic):
//
//   - "unfused fma": every fma(a, b, c) becomes add(mul(a, b), c);
//   - "flushed denormals": every operand and every f32 result of an f32 operation
//     (arithmetic, math functions, rounding, neg, abs, min, max, comparisons,
//     subgroup add, min and max), and of an f16 operation (IR v1.2), is
//     flushed: a denormal becomes the zero of its sign. Loads, stores, selects, casts, bitcasts, shuffles and broadcasts move
//     values unchanged, as they do on hardware that flushes;
//   - both rewritings together.
//
// An output element matches when it matches the program's own reference or any
// variant's (Compare), so a backend that fuses no fma or flushes denormals
// everywhere passes; one that mixes both ways within one program may not.
func Variants(p *ir.Program) []Variant {
	probe := newRewriter(p, false, false)
	probe.block(p.Body)
	var out []Variant
	add := func(name string, unfuse, flush bool) {
		r := newRewriter(p, unfuse, flush)
		q := *p
		q.Body = r.block(p.Body)
		out = append(out, Variant{Name: name, Program: &q})
	}
	if probe.sawFma {
		add("unfused fma", true, false)
	}
	if probe.sawF32Op {
		add("flushed denormals", false, true)
	}
	if probe.sawFma && probe.sawF32Op {
		add("unfused fma, flushed denormals", true, true)
	}
	return out
}

// smallestNormal is 2^-126: an f32 of smaller magnitude is zero or denormal;
// smallestNormalF16 is f16's, 2^-14.
const (
	smallestNormal    = 0x1p-126
	smallestNormalF16 = 0x1p-14
)

// rewriter rewrites a program's body, tracking the types of locals through block
// scopes. Flushing hoists the values it tests into fresh lets placed before the
// statement that uses them, so no expression is duplicated.
type rewriter struct {
	prog          *ir.Program
	unfuse, flush bool
	prefix        string
	n             int
	scopes

	sawFma, sawF32Op bool
}

func newRewriter(p *ir.Program, unfuse, flush bool) *rewriter {
	return &rewriter{prog: p, unfuse: unfuse, flush: flush, prefix: freshPrefix(p)}
}

// freshPrefix returns a name prefix that no name of p starts with, so the lets
// the rewriter adds never shadow or collide.
func freshPrefix(p *ir.Program) string {
	names := map[string]bool{}
	for _, d := range p.Params {
		names[d.Name] = true
	}
	for _, d := range p.Buffers {
		names[d.Name] = true
	}
	for _, d := range p.Shared {
		names[d.Name] = true
	}
	for _, d := range p.Uniforms {
		names[d.Name] = true
	}
	for _, d := range p.Matrices {
		names[d.Name] = true
	}
	collectLocals(p.Body, names)
	prefix := "kiln_flush"
	for {
		clash := false
		for n := range names {
			clash = clash || strings.HasPrefix(n, prefix)
		}
		if !clash {
			return prefix
		}
		prefix += "_"
	}
}

// collectLocals adds the name of every local that stmts declare to names.
func collectLocals(stmts []ir.Stmt, names map[string]bool) {
	ir.Inspect(stmts, func(n any) bool {
		switch s := n.(type) {
		case ir.LetStmt:
			names[s.Name] = true
		case ir.VarStmt:
			names[s.Name] = true
		case ir.AtomicStmt:
			names[s.Result] = true
		case ir.ForStmt:
			names[s.Var] = true
		}
		_, stmt := n.(ir.Stmt) // expressions declare nothing
		return stmt
	})
}

func (r *rewriter) fresh() string {
	r.n++
	return r.prefix + strconv.Itoa(r.n)
}

func (r *rewriter) block(stmts []ir.Stmt) []ir.Stmt {
	r.push(map[string]ir.Type{})
	defer r.pop()
	out := make([]ir.Stmt, 0, len(stmts))
	for _, s := range stmts {
		out = append(out, r.stmt(s)...)
	}
	return out
}

// stmt rewrites s into the statements that replace it: the lets its expressions
// need, then s itself.
func (r *rewriter) stmt(s ir.Stmt) []ir.Stmt {
	var pre []ir.Stmt
	switch s := s.(type) {
	case ir.LetStmt:
		v, t := r.expr(s.Value, &pre)
		r.declare(s.Name, t)
		return append(pre, ir.LetStmt{Name: s.Name, Value: v})
	case ir.VarStmt:
		v, _ := r.expr(s.Value, &pre)
		r.declare(s.Name, s.Type)
		return append(pre, ir.VarStmt{Name: s.Name, Type: s.Type, Value: v})
	case ir.AssignStmt:
		v, _ := r.expr(s.Value, &pre)
		return append(pre, ir.AssignStmt{Name: s.Name, Value: v})
	case ir.StoreStmt:
		i, _ := r.expr(s.Index, &pre)
		v, _ := r.expr(s.Value, &pre)
		return append(pre, ir.StoreStmt{Target: s.Target, Index: i, Value: v})
	case ir.IfStmt:
		c, _ := r.expr(s.Cond, &pre)
		return append(pre, ir.IfStmt{Cond: c, Then: r.block(s.Then), Else: r.block(s.Else)})
	case ir.ForStmt:
		from, _ := r.expr(s.From, &pre)
		to, _ := r.expr(s.To, &pre)
		step, _ := r.expr(s.Step, &pre)
		r.push(map[string]ir.Type{s.Var: s.Type})
		body := r.block(s.Body)
		r.pop()
		return append(pre, ir.ForStmt{Var: s.Var, Type: s.Type, From: from, To: to, Step: step, Body: body})
	case ir.WhileStmt:
		// The condition's lets must run before every test, so a condition that
		// needs them becomes: while true { lets; if !cond { break }; body }.
		r.push(map[string]ir.Type{})
		c, _ := r.expr(s.Cond, &pre)
		body := r.block(s.Body)
		r.pop()
		if len(pre) == 0 {
			return []ir.Stmt{ir.WhileStmt{Cond: c, Body: body}}
		}
		loop := append(pre, ir.IfStmt{Cond: ir.Not(c), Then: []ir.Stmt{ir.BreakStmt{}}})
		return []ir.Stmt{ir.WhileStmt{Cond: ir.LitBool(true), Body: append(loop, body...)}}
	case ir.AtomicStmt:
		i, _ := r.expr(s.Index, &pre)
		v, _ := r.expr(s.Value, &pre)
		var c ir.Expr
		if s.Compare != nil {
			c, _ = r.expr(s.Compare, &pre)
		}
		if s.Result != "" {
			r.declare(s.Result, elemType(r.prog, s.Target))
		}
		return append(pre, ir.AtomicStmt{Op: s.Op, Target: s.Target, Index: i, Value: v, Result: s.Result, Compare: c})
	}
	return []ir.Stmt{s}
}

// expr rewrites e, appending the lets it needs to pre, and returns its type.
func (r *rewriter) expr(e ir.Expr, pre *[]ir.Stmt) (ir.Expr, ir.Type) {
	switch e := e.(type) {
	case ir.Literal:
		return e, e.Type
	case ir.LocalRef:
		return e, r.local(e.Name)
	case ir.ParamRef:
		d, _ := r.prog.Param(e.Name)
		return e, d.Type
	case ir.UniformRef:
		d, _ := r.prog.Uniform(e.Name)
		return e, d.Type
	case ir.BuiltinRef, ir.LenExpr:
		return e, ir.U32
	case ir.LoadExpr:
		i, _ := r.expr(e.Index, pre)
		return ir.LoadExpr{Target: e.Target, Index: i}, elemType(r.prog, e.Target)
	case ir.UnaryExpr:
		x, t := r.expr(e.X, pre)
		if !arith(t) {
			return ir.UnaryExpr{Op: e.Op, X: x}, t
		}
		r.sawF32Op = true
		return r.flushed(ir.UnaryExpr{Op: e.Op, X: r.flushed(x, t, pre)}, t, pre), t
	case ir.BinaryExpr:
		x, t := r.expr(e.X, pre)
		y, _ := r.expr(e.Y, pre)
		rt := t
		if e.Op.IsComparison() || e.Op == ir.OpLAnd || e.Op == ir.OpLOr {
			rt = ir.Bool
		}
		if !arith(t) {
			return ir.BinaryExpr{Op: e.Op, X: x, Y: y}, rt
		}
		r.sawF32Op = true
		res := ir.Expr(ir.BinaryExpr{Op: e.Op, X: r.flushed(x, t, pre), Y: r.flushed(y, t, pre)})
		if rt == t {
			res = r.flushed(res, t, pre)
		}
		return res, rt
	case ir.FmaExpr:
		r.sawFma, r.sawF32Op = true, true
		a, t := r.expr(e.A, pre)
		b, _ := r.expr(e.B, pre)
		c, _ := r.expr(e.C, pre)
		a, b, c = r.flushed(a, t, pre), r.flushed(b, t, pre), r.flushed(c, t, pre)
		if r.unfuse {
			return r.flushed(ir.Add(r.flushed(ir.Mul(a, b), t, pre), c), t, pre), t
		}
		return r.flushed(ir.FmaExpr{A: a, B: b, C: c}, t, pre), t
	case ir.SelectExpr:
		c, _ := r.expr(e.Cond, pre)
		a, t := r.expr(e.A, pre)
		b, _ := r.expr(e.B, pre)
		return ir.SelectExpr{Cond: c, A: a, B: b}, t
	case ir.CastExpr:
		x, _ := r.expr(e.X, pre)
		return ir.CastExpr{To: e.To, X: x}, e.To
	case ir.BitcastExpr:
		x, _ := r.expr(e.X, pre)
		return ir.BitcastExpr{To: e.To, X: x}, e.To
	case ir.SubgroupExpr:
		x, t := r.expr(e.X, pre)
		var lane ir.Expr
		if e.Lane != nil {
			lane, _ = r.expr(e.Lane, pre)
		}
		if t != ir.F32 || e.Op.HasLane() {
			// Shuffles and broadcasts move values; integer reductions are exact.
			return ir.SubgroupExpr{Op: e.Op, X: x, Lane: lane}, t
		}
		r.sawF32Op = true
		return r.flushed(ir.SubgroupExpr{Op: e.Op, X: r.flushed(x, t, pre), Lane: lane}, t, pre), t
	}
	return e, 0
}

// arith reports whether t is a type whose operations the flushed-denormals
// variant flushes: f32, and f16 (IR v1.2), the float types with arithmetic.
func arith(t ir.Type) bool { return t == ir.F32 || t == ir.F16 }

// flushed returns x (of type t, f32 or f16) with a denormal replaced by the
// zero of its sign when the rewriter flushes, x itself otherwise. A compound x
// is bound to a fresh let first, since the flush reads it three times.
func (r *rewriter) flushed(x ir.Expr, t ir.Type, pre *[]ir.Stmt) ir.Expr {
	if !r.flush {
		return x
	}
	switch x.(type) {
	case ir.Literal, ir.LocalRef, ir.ParamRef:
	default:
		name := r.fresh()
		*pre = append(*pre, ir.LetStmt{Name: name, Value: x})
		x = ir.LocalRef{Name: name}
	}
	// A denormal times +0 is the zero of its sign; NaN and infinities fail the
	// test and pass through.
	if t == ir.F16 {
		return ir.Select(ir.Lt(ir.Abs(x), ir.LitF16(smallestNormalF16)), ir.Mul(x, ir.LitF16(0)), x)
	}
	return ir.Select(ir.Lt(ir.Abs(x), ir.LitF32(smallestNormal)), ir.Mul(x, ir.LitF32(0)), x)
}
