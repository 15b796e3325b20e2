package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFixture copies the fixture executable into dir as kiln-backend-<mode>.
func copyFixture(t *testing.T, dir, mode string) string {
	t.Helper()
	pluginDir(t) // builds the binaries
	data, err := os.ReadFile(filepath.Join(binaries.dir, "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, PluginPrefix+mode)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func accepted(t *testing.T, dir string) map[string]File {
	t.Helper()
	files, err := discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]File{}
	for _, f := range files {
		out[filepath.Base(f.Path)] = f
	}
	return out
}

func TestDiscoveryRefusesWhatOthersCanChange(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir, "fx-zeros")
	if f := accepted(t, dir)[filepath.Base(path)]; !f.Accepted {
		t.Fatalf("a private plugin was refused: %s", f.Reason)
	}

	if err := os.Chmod(path, 0o757); err != nil {
		t.Fatal(err)
	}
	if f := accepted(t, dir)[filepath.Base(path)]; f.Accepted || !strings.Contains(f.Reason, "writable by every user") || !strings.Contains(f.Reason, "Fix: chmod o-w") {
		t.Fatalf("a world-writable plugin: %+v", f)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}

	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if f := accepted(t, dir)[filepath.Base(path)]; f.Accepted || !strings.Contains(f.Reason, "plugins directory") {
		t.Fatalf("a plugin in a world-writable directory: %+v", f)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}

	// A link is judged by its target and the directory the target lives in.
	shared := t.TempDir()
	target := copyFixture(t, shared, "fx-blob")
	links := t.TempDir()
	if err := os.Symlink(target, filepath.Join(links, PluginPrefix+"fx-blob")); err != nil {
		t.Fatal(err)
	}
	if f := accepted(t, links)[PluginPrefix+"fx-blob"]; !f.Accepted {
		t.Fatalf("a link to a private plugin was refused: %s", f.Reason)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(shared, 0o700)
	if f := accepted(t, links)[PluginPrefix+"fx-blob"]; f.Accepted || !strings.Contains(f.Reason, "directory of the plugin's target") {
		t.Fatalf("a link into a world-writable directory: %+v", f)
	}
}

func TestJudgeOwnership(t *testing.T) {
	const me = 1000
	for _, tc := range []struct {
		o    ownership
		want string
	}{
		{ownership{mode: 0o755, uid: me}, ""},
		{ownership{mode: 0o755, uid: 0}, ""},
		{ownership{mode: 0o755, uid: -1}, ""},
		{ownership{mode: 0o775, uid: me}, ""},
		{ownership{mode: 0o757, uid: me}, "writable by every user"},
		{ownership{mode: fs.ModeDir | 0o777, uid: 0}, "writable by every user"},
		{ownership{mode: 0o755, uid: 4242}, "owned by user 4242, neither you (1000) nor root"},
	} {
		got := judgeOwnership("plugin", "/p", tc.o, me)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
		if got != "" && !strings.Contains(got, "Fix:") {
			t.Errorf("%q has no Fix", got)
		}
	}
}

// TestDiscoveryRefusesForeignOwners checks a real file owned by another user;
// only root can make one.
func TestDiscoveryRefusesForeignOwners(t *testing.T) {
	if os.Getuid() != 0 {
		t.Log("not root: TestJudgeOwnership covers the rule without a real foreign file")
		return
	}
	dir := t.TempDir()
	path := copyFixture(t, dir, "fx-zeros")
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if f := accepted(t, dir)[filepath.Base(path)]; f.Accepted || !strings.Contains(f.Reason, "owned by user 4242") {
		t.Fatalf("a foreign plugin: %+v", f)
	}
}
