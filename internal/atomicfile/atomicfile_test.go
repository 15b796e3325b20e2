package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/proctest"
)

// childEnv makes the re-executed test binary act as a writer process.
const childEnv = "KILN_ATOMICFILE_TEST_CHILD"

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteReplacesContentWithMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.toml")
	if err := WriteBytes(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("new content"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new content" {
		t.Fatalf("content = %q, %v; want %q", got, err, "new content")
	}
	if runtime.GOOS != "windows" {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o640 {
			t.Fatalf("mode = %v, want 0640", st.Mode().Perm())
		}
	}
	if names := listDir(t, filepath.Dir(path)); len(names) != 1 {
		t.Fatalf("directory holds %v, want only the target", names)
	}
}

func TestWriteNoSyncReplacesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "entry.bin")
	for _, content := range []string{"first", "second"} {
		err := WriteNoSync(path, 0o644, func(w io.Writer) error {
			_, err := io.WriteString(w, content)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
}

func TestFailingWriterLeavesTargetAndNoTemp(t *testing.T) {
	for _, durable := range []bool{true, false} {
		dir := t.TempDir()
		path := filepath.Join(dir, "store.toml")
		if err := WriteBytes(path, []byte("original"), 0o644); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("writer failed")
		err := replace(path, 0o644, func(w io.Writer) error {
			if _, err := w.Write(bytes.Repeat([]byte("x"), 200<<10)); err != nil {
				return err
			}
			return boom
		}, durable)
		if !errors.Is(err, boom) {
			t.Fatalf("durable=%v: err = %v, want the writer's error", durable, err)
		}
		if got, _ := os.ReadFile(path); string(got) != "original" {
			t.Fatalf("durable=%v: target changed to %d bytes", durable, len(got))
		}
		if names := listDir(t, dir); len(names) != 1 || names[0] != "store.toml" {
			t.Fatalf("durable=%v: directory holds %v, want only store.toml", durable, names)
		}
	}
}

func TestPanickingWriterRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.toml")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the writer's panic did not propagate")
			}
		}()
		_ = Write(path, 0o644, func(w io.Writer) error {
			_, _ = w.Write([]byte("partial"))
			panic("writer panicked")
		})
	}()
	if names := listDir(t, dir); len(names) != 0 {
		t.Fatalf("directory holds %v after a panicking writer, want nothing", names)
	}
}

func TestWriteIntoMissingDirectoryFailsWithFix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	err := WriteBytes(path, []byte("x"), 0o644)
	if err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v, want an error with a Fix", err)
	}
}

func TestTempTarget(t *testing.T) {
	cases := []struct {
		name, target string
		ok           bool
	}{
		{".pgo.toml.tmp-12345", "pgo.toml", true},
		{".a.tmp-b.tmp-9", "a.tmp-b", true},
		{"pgo.toml", "", false},
		{".pgo.toml", "", false},
		{".tmp-1", "", false},
		{"x.tmp-1", "", false},
	}
	for _, c := range cases {
		target, ok := TempTarget(c.name)
		if target != c.target || ok != c.ok || IsTemp(c.name) != c.ok {
			t.Errorf("TempTarget(%q) = %q, %v; want %q, %v", c.name, target, ok, c.target, c.ok)
		}
	}
}

func TestRemoveTempsRemovesOnlyTheTargetsTemps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.toml", ".a.toml.tmp-1", ".a.toml.tmp-22", ".b.toml.tmp-3", "b.toml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveTemps(filepath.Join(dir, "a.toml"))
	if err != nil || n != 2 {
		t.Fatalf("RemoveTemps = %d, %v; want 2, nil", n, err)
	}
	got := strings.Join(listDir(t, dir), " ")
	if got != ".b.toml.tmp-3 a.toml b.toml" {
		t.Fatalf("left %q", got)
	}
}

func TestSyncFileAndDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, dir} {
		if err := Sync(p); err != nil {
			t.Fatalf("Sync(%s): %v", p, err)
		}
	}
	if err := Sync(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Sync of a missing path succeeded")
	}
}

// content is what the writer child writes on its n-th replacement: 256 KiB of one
// repeated byte, so a torn file is easy to spot.
func content(n int) []byte { return bytes.Repeat([]byte{'a' + byte(n%26)}, 256<<10) }

// TestHelperProcess is the writer child of TestKilledWriterNeverTearsTheFile: it
// replaces the file named by the environment in a tight loop until it is killed.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		return
	}
	for n := 0; ; n++ {
		if err := WriteBytes(path, content(n), 0o644); err != nil {
			os.Exit(2)
		}
		if n == 0 {
			proctest.Ready()
		}
	}
}

func TestKilledWriterNeverTearsTheFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills 20 processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "big.bin")
	for round := 0; round < 20; round++ {
		proctest.KillWhenReady(t, proctest.Child(childEnv+"="+path), 20*time.Millisecond)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(got) != 256<<10 || !bytes.Equal(got, bytes.Repeat(got[:1], len(got))) {
			t.Fatalf("round %d: file torn: %d bytes", round, len(got))
		}
	}
	if _, err := RemoveTemps(path); err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, dir); len(names) != 1 {
		t.Fatalf("after RemoveTemps the directory holds %v", names)
	}
}

func TestMkdirAllSyncsTheParentOfEachNewDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	var synced []string
	dir := filepath.Join(root, "a", "b", "c")
	err := mkdirAll(dir, 0o755, func(p string) error {
		synced = append(synced, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if strings.Join(synced, "|") != strings.Join(want, "|") {
		t.Fatalf("synced %v, want %v", synced, want)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("%s not created: %v", dir, err)
	}
	synced = nil
	if err := mkdirAll(dir, 0o755, func(p string) error { synced = append(synced, p); return nil }); err != nil || len(synced) != 0 {
		t.Fatalf("existing directory: synced %v, err %v", synced, err)
	}
	file := filepath.Join(root, "f")
	os.WriteFile(file, nil, 0o644)
	if err := MkdirAll(filepath.Join(file, "x"), 0o755); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("MkdirAll under a file: %v", err)
	}
	if err := MkdirAll(filepath.Join(root, "real", "one"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestResolveFollowsLinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x"), 0o644)
	os.Symlink("target", filepath.Join(dir, "rel"))
	os.Symlink(filepath.Join(dir, "rel"), filepath.Join(dir, "abs"))
	os.Symlink("missing", filepath.Join(dir, "dangling"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	for name, want := range map[string]string{
		"target": target, "rel": target, "abs": target,
		"dangling": filepath.Join(dir, "missing"), "absent": filepath.Join(dir, "absent"),
	} {
		got, err := Resolve(filepath.Join(dir, name))
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := Resolve(filepath.Join(dir, "loop")); err == nil {
		t.Error("Resolve of a link loop succeeded")
	}
}
