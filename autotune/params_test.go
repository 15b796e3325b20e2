package autotune

import (
	"context"
	"os"
	"strings"
	"testing"
)

// A store is written as schema 1 while no record has params, so a kiln that
// reads only schema 1 keeps reading it; a record with params makes it schema 2.
func TestSchemaFollowsParams(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	put(t, s, NewKey(sampleSpec(1), "vulkan/fp"), sampleRecord(1))
	if _, err := s.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "schema = 1\n") || strings.Contains(string(data), "params") {
		t.Fatalf("a store without params:\n%s", data)
	}
	r := sampleRecord(2)
	r.Params = "bm=8 tk=16"
	put(t, s, NewKey(sampleSpec(2), "vulkan/fp"), r)
	if _, err := s.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if !strings.HasPrefix(string(data), "schema = 2\n") || !strings.Contains(string(data), `params = 'bm=8 tk=16'`) {
		t.Fatalf("a store with params:\n%s", data)
	}
	again := load(t, path)
	if got, ok := again.Get(NewKey(sampleSpec(2), "vulkan/fp")); !ok || got != r {
		t.Fatalf("read back %+v, want %+v", got, r)
	}
}

// A record's program name makes the store schema 3 and is read back; a
// store whose records have no program name keeps the older schema.
func TestSchemaFollowsProgramNames(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	r := sampleRecord(1)
	r.Params = "epi=2"
	put(t, s, NewKey(sampleSpec(1), "vulkan/fp"), r)
	if _, err := s.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), "schema = 2\n") || strings.Contains(string(data), "program") {
		t.Fatalf("a store without program names:\n%s", data)
	}
	named := sampleRecord(2)
	named.Program = "t.tune.prog"
	put(t, s, NewKey(sampleSpec(2), "vulkan/fp"), named)
	if _, err := s.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "schema = 3\n") || !strings.Contains(string(data), `program = 't.tune.prog'`) {
		t.Fatalf("a store with a program name:\n%s", data)
	}
	again := load(t, path)
	if got, ok := again.Get(NewKey(sampleSpec(2), "vulkan/fp")); !ok || got != named {
		t.Fatalf("read back %+v, want %+v", got, named)
	}
}

func TestParamsFormatErrors(t *testing.T) {
	const rec = "[[record]]\nkey = \"81000100010000000240632400000000\"\nadapter = \"a\"\nworkgroup_size = [1, 1, 1]\nunroll = 0\ntile = [0, 0, 0]\n"
	for name, tc := range map[string]struct{ file, want string }{
		"params in schema 1":  {"schema = 1\n" + rec + "params = \"x=1\"\n", "params needs schema 2"},
		"unsorted params":     {"schema = 2\n" + rec + "params = \"y=1 x=2\"\n", "sorted"},
		"schema 0":            {"schema = 0\n", "want 1 to 3"},
		"program in schema 2": {"schema = 2\n" + rec + "program = \"p\"\n", "program needs schema 3"},
		"empty program":       {"schema = 3\n" + rec + "program = \"\"\n", "program is empty"},
	} {
		if _, err := parse([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	s := load(t, storePath(t))
	if err := s.Put(NewKey(sampleSpec(1), "a"), Record{Params: "b=1 a=2"}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("Put of unsorted params: %v", err)
	}
}
