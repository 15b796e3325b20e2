package tomlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/filelock"
)

// pairs is a schema-1 store file of string pairs.
type pairs struct {
	Schema int64             `toml:"schema"`
	Pairs  map[string]string `toml:"pairs"`
}

var pairCodec = Codec[string, string]{
	Parse: func(data []byte) (map[string]string, error) {
		var p pairs
		if err := Decode(data, 1, &p); err != nil {
			return nil, err
		}
		if p.Pairs == nil {
			p.Pairs = map[string]string{}
		}
		return p.Pairs, nil
	},
	Encode: func(items map[string]string) ([]byte, error) {
		return Encode(pairs{Schema: 1, Pairs: items})
	},
	LoadError: func(path string, err error) error { return fmt.Errorf("pairs %s: %w", path, err) },
}

func loadPairs(t *testing.T, path string) *Map[string, string] {
	t.Helper()
	m, err := LoadMap(path, pairCodec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func savePairs(t *testing.T, m *Map[string, string]) SaveResult {
	t.Helper()
	r, err := m.Save(context.Background(), SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMapSavesOnlyItsChangesOnTopOfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.toml")
	a, b := loadPairs(t, path), loadPairs(t, path)
	a.Set("x", "1")
	a.Set("gone", "soon")
	savePairs(t, a)
	b.Set("y", "2")
	if r := savePairs(t, b); !r.Wrote || r.Replaced {
		t.Fatalf("Save = %+v", r)
	}
	if !a.Delete("gone") || a.Delete("never") {
		t.Fatal("Delete reported the wrong presence")
	}
	savePairs(t, a)
	got := loadPairs(t, path).Items()
	if want := map[string]string{"x": "1", "y": "2"}; !maps.Equal(got, want) {
		t.Fatalf("file holds %v, want %v", got, want)
	}
	if r := savePairs(t, a); r.Wrote {
		t.Fatal("a clean Map wrote")
	}
}

// hookedCtx closes waiting once Done has been called more than skip times:
// Save selects on Done once while it takes its turn among saves (before it
// snapshots the changes) and again while it waits for the file's lock, so a
// skip of 1 fires the hook only once the snapshot is taken. (Firing on the
// first call let the test's change race the snapshot: a flake under load.)
type hookedCtx struct {
	context.Context
	mu      sync.Mutex
	calls   int
	skip    int
	waiting chan struct{}
}

func (c *hookedCtx) Done() <-chan struct{} {
	c.mu.Lock()
	c.calls++
	if c.calls == c.skip+1 {
		close(c.waiting)
	}
	c.mu.Unlock()
	return c.Context.Done()
}

func TestSaveWaitingForTheLockDoesNotBlockTheMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.toml")
	m := loadPairs(t, path)
	m.Set("before", "1")
	lock, err := filelock.Acquire(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &hookedCtx{Context: context.Background(), skip: 1, waiting: make(chan struct{})}
	saved := make(chan error, 1)
	go func() {
		_, err := m.Save(ctx, SaveOptions{})
		saved <- err
	}()
	<-ctx.waiting
	used := make(chan struct{})
	go func() {
		defer close(used)
		for i := 0; i < 100; i++ {
			m.Get("before")
			m.Len()
			runtime.Gosched()
		}
		m.Set("during", "2")
	}()
	select {
	case <-used:
	case <-time.After(30 * time.Second):
		t.Fatal("Get and Set blocked while Save waited for the file lock")
	}
	lock.Unlock()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if !m.IsDirty() {
		t.Fatal("the change made during the save is not pending")
	}
	if got := loadPairs(t, path).Items(); !maps.Equal(got, map[string]string{"before": "1"}) {
		t.Fatalf("first save wrote %v", got)
	}
	if v, ok := m.Get("during"); !ok || v != "2" {
		t.Fatal("the change made during the save was lost from memory")
	}
	savePairs(t, m)
	if got := loadPairs(t, path).Items(); len(got) != 2 {
		t.Fatalf("second save wrote %v", got)
	}
}

func TestReplaceMalformedIsDecidedUnderTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.toml")
	m := NewMap(path, pairCodec)
	m.Set("mine", "1")
	os.WriteFile(path, []byte("not toml ]]"), 0o644)
	if _, err := m.Save(context.Background(), SaveOptions{}); err == nil {
		t.Fatal("Save merged into a malformed file")
	}
	r, err := m.Save(context.Background(), SaveOptions{ReplaceMalformed: true})
	if err != nil || !r.Wrote || !r.Replaced {
		t.Fatalf("Save = %+v, %v; want the malformed file replaced", r, err)
	}
	if got := loadPairs(t, path).Items(); !maps.Equal(got, map[string]string{"mine": "1"}) {
		t.Fatalf("file holds %v", got)
	}
	os.WriteFile(path, []byte("schema = 9\n"), 0o644)
	m.Set("more", "2")
	var newer *NewerSchemaError
	if _, err := m.Save(context.Background(), SaveOptions{ReplaceMalformed: true}); !errors.As(err, &newer) {
		t.Fatalf("err = %v, want a NewerSchemaError", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "schema = 9\n" {
		t.Fatal("a newer-schema file was replaced")
	}
}

func TestOnSavedGetsTheSavedEntries(t *testing.T) {
	m := loadPairs(t, filepath.Join(t.TempDir(), "p.toml"))
	var got []map[string]string
	m.OnSaved(func(saved map[string]string) { got = append(got, saved) })
	m.Set("a", "1")
	m.Set("b", "2")
	savePairs(t, m)
	m.Delete("a")
	savePairs(t, m)
	savePairs(t, m)
	if len(got) != 2 || !maps.Equal(got[0], map[string]string{"a": "1", "b": "2"}) || len(got[1]) != 0 {
		t.Fatalf("OnSaved saw %v", got)
	}
}

func TestSaveKeepsASymlinkedStoreALinkAndItsMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "p.toml")
	os.MkdirAll(filepath.Dir(target), 0o755)
	if err := os.WriteFile(target, []byte("schema = 1\n[pairs]\nold = 'x'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config", "kiln", "p.toml")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink("../../dotfiles/p.toml", link); err != nil {
		t.Fatal(err)
	}
	m := loadPairs(t, link)
	m.Set("new", "y")
	savePairs(t, m)
	st, err := os.Lstat(link)
	if err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the store is no longer a symbolic link: %v, %v", st.Mode(), err)
	}
	st, err = os.Stat(target)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("target mode = %v, %v; want 0600 kept", st.Mode().Perm(), err)
	}
	if got := loadPairs(t, target).Items(); !maps.Equal(got, map[string]string{"old": "x", "new": "y"}) {
		t.Fatalf("target holds %v", got)
	}
}
