package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/xdg"
)

func fakeEnv(vars map[string]string, exe string) environment {
	return environment{
		xdg: xdg.Env{Getenv: func(k string) string { return vars[k] }, GOOS: "linux"},
		executable: func() (string, error) {
			if exe == "" {
				return "", errors.New("no executable")
			}
			return exe, nil
		},
	}
}

func TestPluginDirOrder(t *testing.T) {
	root := t.TempDir()
	exeDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(filepath.Join(exeDir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "kiln")
	vars := map[string]string{PluginDirEnv: "/env/plugins", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}

	check := func(option string, env environment, wantDir string, wantSrc DirSource) {
		t.Helper()
		dir, src, err := resolvePluginDir(option, env)
		if err != nil || dir != wantDir || src != wantSrc {
			t.Fatalf("got %q (%s), %v; want %q (%s)", dir, src, err, wantDir, wantSrc)
		}
	}
	check("/opt/p", fakeEnv(vars, exe), "/opt/p", DirFromOptions)
	check("", fakeEnv(vars, exe), "/env/plugins", DirFromEnv)
	delete(vars, PluginDirEnv)
	check("", fakeEnv(vars, exe), filepath.Join(exeDir, "plugins"), DirBesideExe)
	check("", fakeEnv(vars, filepath.Join(root, "elsewhere", "kiln")), "/xdg/kiln/plugins", DirFromXDGDataHome)
	check("", fakeEnv(vars, ""), "/xdg/kiln/plugins", DirFromXDGDataHome)
	vars["XDG_DATA_HOME"] = "relative/ignored"
	check("", fakeEnv(vars, ""), "/home/u/.local/share/kiln/plugins", DirFromXDGDataHome)
	delete(vars, "HOME")
	if _, _, err := resolvePluginDir("", fakeEnv(vars, "")); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("no HOME and no XDG_DATA_HOME: got %v, want an error with a Fix", err)
	}
}

func TestDiscoverAcceptsOnlyPluginExecutables(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("kiln-backend-good", 0o755)
	write("kiln-backend-noexec", 0o644)
	write("kiln-backend-", 0o755)
	write("README.txt", 0o644)
	write("other-tool", 0o755)
	if err := os.Mkdir(filepath.Join(dir, "kiln-backend-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "kiln-backend-good"), filepath.Join(dir, "kiln-backend-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "kiln-backend-dangling")); err != nil {
		t.Fatal(err)
	}
	files, err := discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"README.txt":            "does not start",
		"kiln-backend-":         "nothing after the prefix",
		"kiln-backend-dangling": "cannot stat",
		"kiln-backend-dir":      "directory",
		"kiln-backend-good":     "",
		"kiln-backend-link":     "",
		"kiln-backend-noexec":   "chmod +x",
		"other-tool":            "does not start",
	}
	if len(files) != len(want) {
		t.Fatalf("got %d files, want %d: %+v", len(files), len(want), files)
	}
	for i, f := range files {
		name := filepath.Base(f.Path)
		if i > 0 && files[i-1].Path >= f.Path {
			t.Errorf("files are not sorted: %s after %s", f.Path, files[i-1].Path)
		}
		reason, ok := want[name]
		if !ok {
			t.Fatalf("unexpected file %s", name)
		}
		if f.Accepted != (reason == "") {
			t.Errorf("%s: accepted=%v (%s)", name, f.Accepted, f.Reason)
		}
		if reason != "" && !strings.Contains(f.Reason, reason) {
			t.Errorf("%s: reason %q does not say %q", name, f.Reason, reason)
		}
	}
	if _, err := discover(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("missing directory: got %v, want an error with a Fix", err)
	}
}
