package ir

import (
	"math"
	"strings"
	"testing"
)

func TestSpecMapHashIgnoresInsertionOrder(t *testing.T) {
	var a, b SpecMap
	a.Set("A", SpecU32(1))
	a.Set("B", SpecU32(2))
	b.Set("B", SpecU32(2))
	b.Set("A", SpecU32(1))
	if a.CacheHash() != b.CacheHash() {
		t.Fatal("SpecMap hash depends on insertion order")
	}
	if got := a.Names(); len(got) != 2 || got[0] != "A" || got[1] != "B" {
		t.Fatalf("Names() = %v, want sorted [A B]", got)
	}
}

func TestSpecMapSetReplaces(t *testing.T) {
	var m SpecMap
	m.Set("k", SpecU32(1))
	m.Set("k", SpecU32(2))
	if v, ok := m.Get("k"); !ok || v != SpecU32(2) || m.Len() != 1 {
		t.Fatalf("after replace: %v %v len %d", v, ok, m.Len())
	}
	var empty SpecMap
	if _, ok := empty.Get("k"); ok || empty.Len() != 0 {
		t.Fatal("zero SpecMap is not empty")
	}
}

func TestSpecCacheKeyDiffersBySpecHash(t *testing.T) {
	var a, b SpecMap
	a.Set("K", SpecU32(1))
	b.Set("K", SpecU32(2))
	if NewSpecCacheKey(0xdead, 0xbeef, [3]uint32{64, 1, 1}, a) == NewSpecCacheKey(0xdead, 0xbeef, [3]uint32{64, 1, 1}, b) {
		t.Fatal("keys equal for different specialization values")
	}
}

func TestSpecMapHashSeparatesNameAndValue(t *testing.T) {
	var a, b SpecMap
	a.Set("ab", SpecU32(1))
	b.Set("a", SpecU32(1))
	b.Set("b", SpecU32(1))
	if a.CacheHash() == b.CacheHash() {
		t.Fatal("different maps hash equal")
	}
	var empty SpecMap
	if empty.CacheHash() == a.CacheHash() {
		t.Fatal("empty map hashes like a non-empty one")
	}
}

func TestSpecValueVariantsNeverCollide(t *testing.T) {
	zero := []SpecValue{SpecU32(0), SpecI32(0), SpecF32(0), SpecBool(false), SpecDType(U32)}
	seen := map[uint64]SpecValue{}
	for _, v := range zero {
		h := v.CacheHash()
		if prev, dup := seen[h]; dup {
			t.Fatalf("%v and %v share cache hash %#x", prev, v, h)
		}
		seen[h] = v
	}
}

func TestSpecF32HashesByBits(t *testing.T) {
	if SpecF32(0).CacheHash() == SpecF32(float32(math.Copysign(0, -1))).CacheHash() {
		t.Fatal("+0 and -0 hash equal; f32 values must hash by their bits")
	}
	nan1 := math.Float32frombits(0x7fc00000)
	nan2 := math.Float32frombits(0x7fc00001)
	if SpecF32(nan1).CacheHash() == SpecF32(nan2).CacheHash() {
		t.Fatal("NaN payloads hash equal")
	}
	if a, b := SpecF32(nan1), SpecF32(math.Float32frombits(0x7fc00000)); a.CacheHash() != b.CacheHash() {
		t.Fatal("NaN hash not stable")
	}
}

func TestDTypeSpecValues(t *testing.T) {
	if d, ok := SpecDType(F32).DType(); !ok || d != F32 {
		t.Fatalf("DType round trip: %v %v", d, ok)
	}
	if _, ok := SpecU32(1).DType(); ok {
		t.Fatal("u32 value claims to be a dtype")
	}
	if _, ok := SpecDType(F32).Literal(); ok {
		t.Fatal("dtype value claims to be a literal")
	}
	if a, b := SpecDType(F32), SpecDType(F32); a.CacheHash() != b.CacheHash() {
		t.Fatal("equal dtypes hash differently")
	}
	hashes := map[uint64]Type{}
	for _, typ := range Types() {
		h := SpecDType(typ).CacheHash()
		if prev, dup := hashes[h]; dup {
			t.Fatalf("dtypes %s and %s hash equal", prev, typ)
		}
		hashes[h] = typ
	}
	var a, b SpecMap
	a.Set("dtype", SpecDType(F32))
	b.Set("dtype", SpecDType(U32))
	if a.CacheHash() == b.CacheHash() {
		t.Fatal("dtype-keyed maps hash equal")
	}
}

// TestDTypeTagCoversEveryType fails when a Type is added without a tag.
func TestDTypeTagCoversEveryType(t *testing.T) {
	tags := map[uint32]Type{}
	for typ := Type(1); typ < typeEnd; typ++ {
		tag := DTypeTag(typ)
		if tag == 0xFFFFFFFF {
			t.Fatalf("type %s has no dtype tag. Fix: add it to dtypeTags in spec.go", typ)
		}
		if prev, dup := tags[tag]; dup {
			t.Fatalf("types %s and %s share dtype tag %#x", prev, typ, tag)
		}
		tags[tag] = typ
	}
	if len(dtypeTags) != len(Types()) {
		t.Fatalf("dtypeTags has %d entries for %d types", len(dtypeTags), len(Types()))
	}
}

func TestArtifactKeySeparatesVariableLengthFields(t *testing.T) {
	if ArtifactKey(1, "ab", "cd") == ArtifactKey(1, "abc", "d") {
		t.Fatal("artifact key does not length-prefix its fields")
	}
	if ArtifactKey(1, "ab", "cd") == ArtifactKey(2, "ab", "cd") {
		t.Fatal("artifact key ignores the cache version")
	}
	k := ArtifactKey(1, "ab", "cd")
	if len(k) != 64 || k != ArtifactKey(1, "ab", "cd") {
		t.Fatalf("artifact key %q is not a stable 64-digit hex string", k)
	}
}

// TestParamValues: every parameter gets the spec's value or its default; an
// undeclared name and a value of another type are errors with a Fix.
func TestParamValues(t *testing.T) {
	b := NewBuilder("test.params", 1, 1, 1)
	b.Param("n", U32, LitU32(7))
	b.Param("scale", F32, LitF32(2))
	p := b.MustBuild()
	var spec SpecMap
	spec.Set("n", SpecU32(3))
	got, err := p.ParamValues(spec)
	if err != nil || got["n"] != LitU32(3) || got["scale"] != LitF32(2) || len(got) != 2 {
		t.Fatalf("ParamValues = %v, %v; want n=3 and the default scale", got, err)
	}
	for _, bad := range []struct {
		name string
		v    SpecValue
	}{{"missing", SpecU32(1)}, {"n", SpecF32(1)}} {
		var s SpecMap
		s.Set(bad.name, bad.v)
		if _, err := p.ParamValues(s); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("ParamValues(%s=%v) = %v, want an error with a Fix", bad.name, bad.v, err)
		}
	}
}

// TestSpecMapMerge: the merge holds both maps' names, the second's value where
// both set one, and leaves its operands unchanged.
func TestSpecMapMerge(t *testing.T) {
	var a, b SpecMap
	a.Set("x", SpecU32(1))
	a.Set("y", SpecU32(2))
	b.Set("y", SpecU32(3))
	b.Set("z", SpecBool(true))
	m := a.Merge(b)
	for name, want := range map[string]SpecValue{"x": SpecU32(1), "y": SpecU32(3), "z": SpecBool(true)} {
		if v, ok := m.Get(name); !ok || v != want {
			t.Errorf("merge %s = %v, %v; want %v", name, v, ok, want)
		}
	}
	if m.Len() != 3 || a.Len() != 2 || b.Len() != 2 {
		t.Errorf("lengths: merge %d, a %d, b %d; want 3, 2, 2", m.Len(), a.Len(), b.Len())
	}
	if v, _ := a.Get("y"); v != SpecU32(2) {
		t.Errorf("merge changed a's y to %v", v)
	}
	m.Set("x", SpecU32(9))
	if v, _ := a.Get("x"); v != SpecU32(1) {
		t.Error("the merge shares entries with a")
	}
	if (SpecMap{}).Merge(SpecMap{}).Len() != 0 {
		t.Error("merging empty maps is not empty")
	}
}
