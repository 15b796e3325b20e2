package verify

import (
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// boundProgram is twoOutputs's program named t.bound.
func boundProgram(body func(b *ir.Builder)) *ir.Program { return threeBuffers("t.bound", body) }

func TestBoundForExactOps(t *testing.T) {
	p := boundProgram(func(b *ir.Builder) {
		v := b.Let("v", ir.Add(ir.Mul(loadX(0), loadX(0)), ir.Sub(loadX(0), ir.Min(loadX(0), ir.Max(loadX(0), ir.Abs(ir.Neg(loadX(0))))))))
		b.Store("out", ir.LitU32(0), ir.Select(ir.Lt(v, loadX(0)), ir.Floor(v), ir.Ceil(v)))
		b.Store("n", ir.LitU32(0), ir.Cast(ir.U32, v))
	})
	if got := BoundFor(p); !got.Exact() || got.String() != "bit-exact" {
		t.Errorf("BoundFor(exact ops) = %+v (%s), want bit-exact", got, got)
	}
}

func TestBoundForIntegerDivIsExact(t *testing.T) {
	p := boundProgram(func(b *ir.Builder) {
		q := b.Let("q", ir.Div(ir.Load("n", ir.LitU32(0)), ir.LitU32(3)))
		b.If(ir.Gt(q, ir.LitU32(0)), func(then *ir.Block) {
			r := then.Let("r", ir.Div(q, ir.LitU32(2))) // a u32 local read in a nested scope
			then.Store("n", ir.LitU32(0), r)
		})
	})
	if got := BoundFor(p); !got.Exact() {
		t.Errorf("BoundFor(u32 div) = %s, want bit-exact", got)
	}
}

func TestBoundForTracksLocalTypesThroughScopes(t *testing.T) {
	// Sibling blocks reuse the name "v" with different types; only the f32 one
	// divides as f32.
	p := boundProgram(func(b *ir.Builder) {
		b.IfElse(ir.LitBool(true), func(then *ir.Block) {
			v := then.Let("v", ir.LitU32(6))
			then.Store("n", ir.LitU32(0), ir.Div(v, v))
		}, func(els *ir.Block) {
			v := els.Var("v", ir.F32, loadX(0))
			els.Store("out", ir.LitU32(0), ir.Div(v, v))
		})
		b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(loop *ir.Block, k ir.Expr) {
			loop.Store("n", k, ir.Div(k, ir.LitU32(2)))
		})
	})
	got := BoundFor(p)
	if got.ULP != 3 || !reflect.DeepEqual(got.Ops, []string{"div"}) {
		t.Errorf("BoundFor = %+v, want 3 ULP from one f32 div", got)
	}
}

func TestBoundForInexactOps(t *testing.T) {
	cases := []struct {
		name string
		expr func(ir.Expr) ir.Expr
		want Bound
	}{
		{"div", func(v ir.Expr) ir.Expr { return ir.Div(v, v) }, Bound{ULP: 3, Ops: []string{"div"}}},
		{"sqrt", ir.Sqrt, Bound{ULP: 3, Ops: []string{"sqrt"}}},
		{"exp", ir.Exp, Bound{ULP: 3, Exp: true, Ops: []string{"exp"}}},
		{"log", ir.Log, Bound{ULP: 3, Abs: 0x1p-21, AbsBelow: logAbsBelow, Ops: []string{"log"}}},
		{"log and sin", func(v ir.Expr) ir.Expr { return ir.Add(ir.Log(v), ir.Sin(v)) }, Bound{ULP: 3, Abs: 0x1p-11, Ops: []string{"log", "sin"}}},
		{"sin", ir.Sin, Bound{ULP: 3, Abs: 0x1p-11, Ops: []string{"sin"}}},
		{"cos", ir.Cos, Bound{ULP: 3, Abs: 0x1p-11, Ops: []string{"cos"}}},
		{"fma is exact (its variants are references)", func(v ir.Expr) ir.Expr { return ir.Fma(v, v, v) }, Bound{}},
		{"fma and sin", func(v ir.Expr) ir.Expr { return ir.Sin(ir.Fma(v, v, v)) }, Bound{ULP: 3, Abs: 0x1p-11, Ops: []string{"sin"}}},
		{"in an atomic's index", nil, Bound{ULP: 3, Ops: []string{"sqrt"}}},
	}
	for _, c := range cases {
		p := boundProgram(func(b *ir.Builder) {
			if c.expr == nil {
				b.Atomic(ir.AtomicAdd, "n", ir.Cast(ir.U32, ir.Sqrt(loadX(0))), ir.LitU32(1))
				return
			}
			b.Store("out", ir.LitU32(0), c.expr(loadX(0)))
		})
		if got := BoundFor(p); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: BoundFor = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestBoundString(t *testing.T) {
	for _, c := range []struct {
		b    Bound
		want string
	}{
		{Bound{}, "bit-exact"},
		{Bound{ULP: 3, Abs: 0x1p-11, Exp: true, Ops: []string{"exp", "sin"}}, "3 ULP + 2·|x| ULP or 0.00048828125 absolute (exp, sin)"},
		{Bound{ULP: 3, Abs: 0.5, AbsBelow: 2, Ops: []string{"log"}}, "3 ULP or 0.5 absolute where |want| ≤ 2 (log)"},
		{Bound{Abs: 0.01, Rel: 0.1}, "0.01 + 0.1·|want|"},
		{Bound{Rel: 0.1}, "0.1·|want|"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.b, got, c.want)
		}
	}
}
