package wide

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestMatch(t *testing.T) {
	base := ir.Local("i")
	at := func(k uint32) ir.Expr {
		if k == 0 {
			return base
		}
		return ir.Add(base, ir.LitU32(k))
	}
	loads := func(target string, n int) []ir.Stmt {
		var s []ir.Stmt
		for k := range n {
			s = append(s, ir.LetStmt{Name: string(rune('a' + k)), Value: ir.Load(target, at(uint32(k)))})
		}
		return s
	}
	stores := func(n int, v ir.Expr) []ir.Stmt {
		var s []ir.Stmt
		for k := range n {
			s = append(s, ir.StoreStmt{Target: "out", Index: at(uint32(k)), Value: v})
		}
		return s
	}
	half := func(target string) bool { return target != "words" }
	for _, tc := range []struct {
		name  string
		stmts []ir.Stmt
		want  Run
		ok    bool
	}{
		{"8 loads", loads("x", 8), Run{Target: "x", Base: "i", N: 8}, true},
		{"9 loads take 8", loads("x", 9), Run{Target: "x", Base: "i", N: 8}, true},
		{"7 loads take 4", loads("x", 7), Run{Target: "x", Base: "i", N: 4}, true},
		{"3 loads take 2", loads("x", 3), Run{Target: "x", Base: "i", N: 2}, true},
		{"1 load", loads("x", 1), Run{}, false},
		{"a buffer that does not qualify", loads("words", 8), Run{}, false},
		{"4 stores", stores(4, ir.Local("v")), Run{Target: "out", Base: "i", N: 4, Store: true}, true},
		{"stored values that load", stores(4, ir.Load("x", ir.LitU32(0))), Run{}, false},
		{"two buffers", append(loads("x", 1), loads("y", 8)[1:]...), Run{}, false},
		{"indices out of order", []ir.Stmt{loads("x", 2)[1], loads("x", 2)[0]}, Run{}, false},
		{"a load that rebinds the base", append(loads("x", 1), ir.LetStmt{Name: "i", Value: ir.Load("x", at(1))}), Run{}, false},
		{"a store between loads", append(append(loads("x", 1), stores(1, ir.Local("v"))...), loads("x", 2)[1]), Run{}, false},
		{"nothing", nil, Run{}, false},
	} {
		got, ok := Match(tc.stmts, half)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: Match = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
