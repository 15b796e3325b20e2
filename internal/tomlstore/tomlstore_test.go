package tomlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type doc struct {
	Schema int64    `toml:"schema"`
	Names  []string `toml:"names"`
}

func TestDecode(t *testing.T) {
	var d doc
	if err := Decode([]byte("schema = 2\nnames = ['a', 'b']\n"), 2, &d); err != nil || len(d.Names) != 2 {
		t.Fatalf("Decode = %+v, %v", d, err)
	}
	cases := []struct {
		name, data, where, msg string
	}{
		{"no schema", "names = []\n", "", "no schema line"},
		{"older schema", "schema = 1\n", "", "schema 1, want 2"},
		{"unknown field", "schema = 2\n\nextra = 1\n", "line 3, column 1", "unknown field extra"},
		{"syntax", "schema = 2\nnames = [\n", "line 2", ""},
		{"wrong type", "schema = 2\nnames = 5\n", "line 2", ""},
		{"schema twice", "schema = 2\nschema = 2\n", "line 2", "already defined"},
		{"schema not a number", "schema = 'two'\n", "line 1", ""},
	}
	for _, c := range cases {
		var d doc
		err := Decode([]byte(c.data), 2, &d)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Where, c.where) || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s: err = %#v, want a FormatError at %q containing %q", c.name, err, c.where, c.msg)
		}
	}
	var ne *NewerSchemaError
	if err := Decode([]byte("schema = 3\nwhatever = 'new field'\n"), 2, &d); !errors.As(err, &ne) || ne.Found != 3 || ne.Supported != 2 {
		t.Fatalf("newer schema: err = %v", err)
	}
}

func TestReadMissingFile(t *testing.T) {
	data, exists, err := Read(filepath.Join(t.TempDir(), "missing.toml"))
	if data != nil || exists || err != nil {
		t.Fatalf("Read = %q, %v, %v", data, exists, err)
	}
}

func TestUpdateCreatesMergesAndCleansUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "s.toml")
	ctx := context.Background()
	err := Update(ctx, path, 0o644, func(cur []byte, exists bool) ([]byte, error) {
		if exists || cur != nil {
			t.Fatalf("first Update saw %q, %v", cur, exists)
		}
		return []byte("one\n"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(filepath.Dir(path), ".s.toml.tmp-123")
	os.WriteFile(stale, []byte("partial"), 0o644)
	err = Update(ctx, path, 0o644, func(cur []byte, exists bool) ([]byte, error) {
		return append(cur, "two\n"...), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "one\ntwo\n" {
		t.Fatalf("file = %q", got)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("a stale temporary file survived Update")
	}
	boom := errors.New("merge failed")
	if err := Update(ctx, path, 0o644, func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the merge error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "one\ntwo\n" {
		t.Fatalf("a failed merge changed the file to %q", got)
	}
}

func TestUpdatesFromGoroutinesAllLand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.toml")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				err := Update(context.Background(), path, 0o644, func(cur []byte, _ bool) ([]byte, error) {
					return append(cur, fmt.Sprintf("%d.%d\n", g, i)...), nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, _ := os.ReadFile(path)
	if n := strings.Count(string(got), "\n"); n != 80 {
		t.Fatalf("%d lines, want 80", n)
	}
}
