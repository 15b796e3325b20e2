package verify

import (
	"math"
	"sort"

	"github.com/kiln-dev/kiln/ir"
)

// The per-operation bounds (see docs/design.md, "Conformance kit"). div and sqrt:
// 3 ULP. exp: 3 + 2·|x| ULP; log: 3 ULP, or 2^-21 absolute for arguments in
// [0.5, 2] (where |log x| ≤ ln 2); sin and cos: 2^-11 absolute (Vulkan's precision
// rules for GLSL.std.450, which bound sin and cos on [-π, π] only: kiln holds them
// to the same bound everywhere). fma needs no bound: the fused and the separately
// rounded results are both references (Variants).
//
// IR v1.2: f16 div and sqrt are within 1 ULP of f16 (ULP16 1), which is 2^13
// ULP of an f32 that holds the result cast exactly; and since a cast to f16 or
// bf16 of an inexact f32 may round the other way, any inexact operation lets
// 16-bit outputs be 1 ULP of their type off.
var opBounds = map[string]Bound{
	"div":      {ULP: 3},
	"sqrt":     {ULP: 3},
	"div.f16":  {ULP: f16ULPInF32, ULP16: 1},
	"sqrt.f16": {ULP: f16ULPInF32, ULP16: 1},
	"exp":      {ULP: 3, Exp: true},
	"log":      {ULP: 3, Abs: 0x1p-21, AbsBelow: logAbsBelow},
	"sin":      {ULP: 3, Abs: 0x1p-11},
	"cos":      {ULP: 3, Abs: 0x1p-11},
}

// f16ULPInF32 is one ULP of an f16 in units of an f32 of the same exponent:
// f32 carries 13 more fraction bits.
const f16ULPInF32 = 1 << 13

// subgroupAddBound is the bound of an f32 subgroup_add, which a backend may sum in
// any order: docs/design.md allows (S-1)·2^-23·Σ|x| for subgroups of S lanes,
// which the bound takes as (S-1)·2^-23·|sum| (exact when the lanes do not cancel),
// with S the program's subgroup size or, for a program that runs with any,
// ir.MaxSubgroupSize.
func subgroupAddBound(p *ir.Program) Bound {
	s := p.SubgroupSize
	if s == 0 {
		s = ir.MaxSubgroupSize
	}
	return Bound{Rel: float64(s-1) * 0x1p-23}
}

// logAbsBelow is ln 2 rounded up to f32: |log x| of an x in [0.5, 2] is at most
// that, and larger only outside it.
const logAbsBelow = 0.6931472

// BoundFor walks p and returns the bound for its float outputs: the loosest bound
// of the inexact f32 and f16 operations it uses anywhere (exact programs get the
// zero Bound). matrix_mma adds nothing: its outputs are compared bit for bit,
// which holds for inputs whose partial sums are exact in f32 (docs/design.md, "IR
// v1.2 semantics"); MMABound and Matmul check other inputs.
// The bound is per operation, not a propagated error analysis: a program whose
// outputs amplify an inexact result (cancellation after a div, an integer derived
// from a sqrt) can differ by more and should round robustly. p must be valid
// (ir.Validate).
func BoundFor(p *ir.Program) Bound {
	w := &walker{prog: p, ops: map[string]bool{}}
	w.block(p.Body)
	var b Bound
	everywhere := false
	for op := range w.ops {
		ob := opBounds[op]
		if op == "subgroup_add" {
			ob = subgroupAddBound(p)
		}
		b.ULP = max(b.ULP, ob.ULP)
		b.ULP16 = max(b.ULP16, ob.ULP16, 1)
		b.Exp = b.Exp || ob.Exp
		b.Rel = math.Max(b.Rel, ob.Rel)
		if ob.Abs > 0 {
			b.Abs = math.Max(b.Abs, ob.Abs)
			everywhere = everywhere || ob.AbsBelow == 0
			b.AbsBelow = math.Max(b.AbsBelow, ob.AbsBelow)
		}
		b.Ops = append(b.Ops, op)
	}
	if everywhere {
		b.AbsBelow = 0
	}
	if !p.Uses16BitTypes() {
		b.ULP16 = 0 // no 16-bit element to hold to it
	}
	sort.Strings(b.Ops)
	return b
}

// walker finds the inexact f32 operations of a program, tracking the types of
// locals through block scopes so that an f32 div is told apart from an integer one.
type walker struct {
	prog *ir.Program
	scopes
	ops map[string]bool
}

func (w *walker) block(stmts []ir.Stmt) {
	w.push(map[string]ir.Type{})
	defer w.pop()
	for _, s := range stmts {
		w.stmt(s)
	}
}

func (w *walker) stmt(s ir.Stmt) {
	switch s := s.(type) {
	case ir.LetStmt:
		w.declare(s.Name, w.expr(s.Value))
	case ir.VarStmt:
		w.expr(s.Value)
		w.declare(s.Name, s.Type)
	case ir.AssignStmt:
		w.expr(s.Value)
	case ir.StoreStmt:
		w.expr(s.Index)
		w.expr(s.Value)
	case ir.IfStmt:
		w.expr(s.Cond)
		w.block(s.Then)
		w.block(s.Else)
	case ir.ForStmt:
		w.expr(s.From)
		w.expr(s.To)
		w.expr(s.Step)
		w.push(map[string]ir.Type{s.Var: s.Type})
		w.block(s.Body)
		w.pop()
	case ir.WhileStmt:
		w.expr(s.Cond)
		w.block(s.Body)
	case ir.AtomicStmt:
		w.expr(s.Index)
		w.expr(s.Value)
		if s.Compare != nil {
			w.expr(s.Compare)
		}
		if s.Result != "" {
			w.declare(s.Result, elemType(w.prog, s.Target))
		}
	}
}

// expr records the inexact f32 operations of e and returns its type.
func (w *walker) expr(e ir.Expr) ir.Type {
	switch e := e.(type) {
	case ir.Literal:
		return e.Type
	case ir.LocalRef:
		return w.local(e.Name)
	case ir.ParamRef:
		d, _ := w.prog.Param(e.Name)
		return d.Type
	case ir.UniformRef:
		d, _ := w.prog.Uniform(e.Name)
		return d.Type
	case ir.BuiltinRef, ir.LenExpr:
		return ir.U32
	case ir.LoadExpr:
		w.expr(e.Index)
		return elemType(w.prog, e.Target)
	case ir.UnaryExpr:
		t := w.expr(e.X)
		switch e.Op {
		case ir.OpSqrt, ir.OpExp, ir.OpLog, ir.OpSin, ir.OpCos:
			w.ops[opName(e.Op.String(), t)] = true
		}
		return t
	case ir.BinaryExpr:
		t := w.expr(e.X)
		w.expr(e.Y)
		if e.Op == ir.OpDiv && (t == ir.F32 || t == ir.F16) {
			w.ops[opName("div", t)] = true
		}
		if e.Op.IsComparison() || e.Op == ir.OpLAnd || e.Op == ir.OpLOr {
			return ir.Bool
		}
		return t
	case ir.FmaExpr:
		t := w.expr(e.A)
		w.expr(e.B)
		w.expr(e.C)
		return t
	case ir.SelectExpr:
		w.expr(e.Cond)
		t := w.expr(e.A)
		w.expr(e.B)
		return t
	case ir.CastExpr:
		w.expr(e.X)
		return e.To
	case ir.BitcastExpr:
		w.expr(e.X)
		return e.To
	case ir.SubgroupExpr:
		t := w.expr(e.X)
		if e.Lane != nil {
			w.expr(e.Lane)
		}
		if e.Op == ir.SubgroupOpAdd && t == ir.F32 {
			w.ops["subgroup_add"] = true
		}
		return t
	}
	return 0
}

// opName is the key of an inexact operation of type t in opBounds: "div" for
// f32, "div.f16" for f16.
func opName(op string, t ir.Type) string {
	if t == ir.F16 {
		return op + ".f16"
	}
	return op
}
