package ir

import (
	"reflect"
	"strings"
	"testing"
)

// withoutCandidates is p with every parameter's candidates dropped, as the
// binary encoding carries it.
func withoutCandidates(p *Program) *Program {
	q := *p
	q.Params = nil
	for _, d := range p.Params {
		d.Candidates = nil
		q.Params = append(q.Params, d)
	}
	return &q
}

// tunableProgram is a fill kernel with an elements-per-invocation tunable.
func tunableProgram(candidates ...Literal) *Program {
	b := NewBuilder("t.tunable", 64, 1, 1)
	epi := b.Tunable("epi", U32, LitU32(1), candidates...)
	out := b.Buffer("out", U32, Write)
	b.Store(out, GlobalID(0), epi)
	return b.Program()
}

func TestCandidatesLeaveTheDigestAlone(t *testing.T) {
	plain := tunableProgram()
	tuned := tunableProgram(LitU32(1), LitU32(2), LitU32(4))
	if err := Validate(tuned); err != nil {
		t.Fatal(err)
	}
	if plain.Digest() != tuned.Digest() {
		t.Fatal("declaring candidates changed the program digest")
	}
	a, _ := Encode(plain)
	b, _ := Encode(tuned)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("declaring candidates changed the binary encoding")
	}
	if got := tuned.Tunables(); len(got) != 1 || got[0].Name != "epi" || len(got[0].Candidates) != 3 {
		t.Fatalf("Tunables = %+v", got)
	}
	if len(plain.Tunables()) != 0 {
		t.Fatal("a parameter without candidates is not a tunable")
	}
}

func TestCandidatesJSONRoundTrip(t *testing.T) {
	p := tunableProgram(LitU32(1), LitU32(8))
	text, err := MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), `"candidates": [1, 8]`) {
		t.Fatalf("candidates not written:\n%s", text)
	}
	q, err := ParseJSON(text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip differs:\n got %#v\nwant %#v", q, p)
	}
	plain, _ := MarshalJSON(tunableProgram())
	if strings.Contains(string(plain), "candidates") {
		t.Fatalf("a parameter without candidates writes the key:\n%s", plain)
	}
}

func TestCandidatesValidation(t *testing.T) {
	many := make([]Literal, MaxCandidates+1)
	for i := range many {
		many[i] = LitU32(uint32(i))
	}
	for name, tc := range map[string]struct {
		cands []Literal
		want  string
	}{
		"wrong type":      {[]Literal{LitU32(1), LitI32(2)}, "candidate of type i32"},
		"duplicate":       {[]Literal{LitU32(1), LitU32(1)}, "twice"},
		"default missing": {[]Literal{LitU32(2), LitU32(4)}, "without its default"},
		"too many":        {many, "candidates"},
	} {
		err := Validate(tunableProgram(tc.cands...))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "params[0].candidates") {
			t.Errorf("%s: got %v, want an error at params[0].candidates mentioning %q", name, err, tc.want)
		}
	}
}

func TestCandidatesJSONErrors(t *testing.T) {
	for name, tc := range map[string]struct{ params, want string }{
		"not an array": {`{"name": "e", "type": "u32", "default": 1, "candidates": 4}`, "candidates must be an array"},
		"bad value":    {`{"name": "e", "type": "u32", "default": 1, "candidates": [1, -2]}`, "candidates[1]"},
		"no default":   {`{"name": "e", "type": "u32", "default": 1, "candidates": [2]}`, "without its default"},
	} {
		src := `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [` + tc.params + `], "body": []}`
		_, err := ParseJSON([]byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
