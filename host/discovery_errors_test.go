package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotFoundSaysWhyDiscoveryFoundNothing pins issue 23 item 9: a missing
// plugins directory, a plugin file given as the directory and a plugin refused
// for its permissions each get an error naming the path and the reason with a
// Fix, from Acquire and from AcquirePreferred, instead of "not found (known:
// none)".
func TestNotFoundSaysWhyDiscoveryFoundNothing(t *testing.T) {
	ctx := context.Background()
	plugins := pluginDir(t)
	exe := copyFixture(t, plugins, "fx-zeros")
	writable := t.TempDir()
	open := copyFixture(t, writable, "fx-zeros")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		says      []string
	}{
		{"missing directory", filepath.Join(t.TempDir(), "nowhere"), []string{"nowhere does not exist", "Fix: create it"}},
		{"file as directory", exe, []string{exe + " is a file, not a directory", "Fix: name the directory that holds it: --plugins " + plugins}},
		{"world-writable plugin", writable, []string{open, "writable by every user", "Fix: chmod o-w " + open}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := Open(ctx, Options{PluginDir: c.dir, NoCache: true, NoAutotune: true, NoPGO: true})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			_, err = h.Acquire(ctx, "fx-zeros")
			var de *DiscoveryError
			if !errors.As(err, &de) {
				t.Fatalf("Acquire: %v, want a DiscoveryError", err)
			}
			_, perr := h.AcquirePreferred(ctx)
			for _, want := range c.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Acquire: %v\nwant it to say %q", err, want)
				}
				if perr == nil || !strings.Contains(perr.Error(), want) {
					t.Errorf("AcquirePreferred: %v\nwant it to say %q", perr, want)
				}
			}
			if strings.Contains(err.Error(), "known: none") {
				t.Errorf("Acquire: %v, want the reason, not the known ids", err)
			}
		})
	}
}
