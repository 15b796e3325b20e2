package scope

import (
	"errors"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestStackShadowsAndPops(t *testing.T) {
	var s Stack[int]
	s.Push(nil)
	s.Bind("x", 1)
	s.Push(map[string]int{"i": 7})
	s.Bind("x", 2)
	if x, ok := s.Lookup("x"); !ok || x != 2 {
		t.Errorf("inner x = %d, %v; want 2", x, ok)
	}
	if i, ok := s.Lookup("i"); !ok || i != 7 {
		t.Errorf("the loop counter i = %d, %v; want 7", i, ok)
	}
	s.Pop()
	if x, ok := s.Lookup("x"); !ok || x != 1 {
		t.Errorf("outer x after Pop = %d, %v; want 1", x, ok)
	}
	if _, ok := s.Lookup("i"); ok {
		t.Error("i is bound after its scope closed")
	}
}

// TestBlockStopsWhereTheCodeEnds: statements after one that closes the block
// are not emitted, the block's bindings go with it, and an error stops it.
func TestBlockStopsWhereTheCodeEnds(t *testing.T) {
	var s Stack[int]
	s.Push(nil)
	open := true
	var emitted []string
	stmt := func(sts []string) (int, error) {
		switch st := sts[0]; st {
		case "return":
			open = false
		case "bad":
			return 0, errors.New("bad statement")
		case "pair": // a run: this statement and the next emitted as one
			emitted = append(emitted, st+"+"+sts[1])
			return 2, nil
		default:
			s.Bind(st, len(emitted))
		}
		emitted = append(emitted, sts[0])
		return 1, nil
	}
	if err := Block(&s, []string{"a", "return", "b"}, &open, stmt); err != nil {
		t.Fatal(err)
	}
	if len(emitted) != 2 || len(s) != 1 {
		t.Errorf("emitted %v with %d scopes left; want a and return, and 1", emitted, len(s))
	}
	if _, ok := s.Lookup("a"); ok {
		t.Error("the block's binding outlived it")
	}
	open, emitted = true, nil
	if err := Block(&s, []string{"pair", "x", "c"}, &open, stmt); err != nil || !slices.Equal(emitted, []string{"pair+x", "c"}) {
		t.Errorf("a run of two then one: emitted %v, %v; want [pair+x c]", emitted, err)
	}
	if err := Block(&s, []string{"bad", "c"}, &open, stmt); err == nil || len(s) != 1 {
		t.Errorf("a failing statement: %v, %d scopes left", err, len(s))
	}
}

func TestTyped(t *testing.T) {
	type value struct{ t ir.Type }
	typeOf := func(v value) ir.Type { return v.t }
	expr := func(x ir.Expr) (value, error) { return value{ir.U32}, nil }
	if v, err := Typed(ir.LitU32(1), ir.U32, "the index", expr, typeOf); err != nil || v.t != ir.U32 {
		t.Errorf("a u32 as u32: %v, %v", v, err)
	}
	_, err := Typed(ir.LitU32(1), ir.F32, "the index", expr, typeOf)
	if want := "the index has type u32, want f32. Fix: run ir.Validate and correct the program"; err == nil || err.Error() != want {
		t.Errorf("a u32 as f32: %v, want %q", err, want)
	}
	failing := func(ir.Expr) (value, error) { return value{}, errors.New("no") }
	if _, err := Typed(ir.LitU32(1), ir.U32, "x", failing, typeOf); err == nil || err.Error() != "no" {
		t.Errorf("expr's error: %v", err)
	}
}
