package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPinnedPluginsOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	zeros := copyFixture(t, dir, "fx-zeros")
	copyFixture(t, dir, "fx-blob")
	pinPath := filepath.Join(t.TempDir(), "kiln", "pins.toml")
	pins, err := PinPlugins(ctx, pinPath, []string{zeros})
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 1 || len(pins[0].SHA256) != 64 {
		t.Fatalf("pins %+v", pins)
	}
	open := func() Report {
		t.Helper()
		h, err := Open(ctx, Options{PluginDir: dir, PinFile: pinPath, NoCache: true, NoAutotune: true, NoPGO: true})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		return h.Report()
	}
	status := func(r Report, mode string) PluginStatus {
		for _, p := range r.Plugins {
			if strings.HasSuffix(p.Path, mode) {
				return p
			}
		}
		t.Fatalf("no %s", mode)
		return PluginStatus{}
	}
	refused := func(p PluginStatus, why string) {
		t.Helper()
		var se *StartError
		if !errors.As(p.Err, &se) || se.Stage != StartRefused || !strings.Contains(p.Err.Error(), why) {
			t.Fatalf("%s: %v, want refused: %s", p.Path, p.Err, why)
		}
	}

	r := open()
	if !r.Pinning || r.PinFile != pinPath {
		t.Fatalf("pinning %v at %s", r.Pinning, r.PinFile)
	}
	if p := status(r, "fx-zeros"); p.Err != nil || p.Pin != pins[0].SHA256 {
		t.Fatalf("the pinned plugin: %+v", p)
	}
	refused(status(r, "fx-blob"), "not pinned")

	// The pinned executable changes: it no longer runs until pinned again.
	f, err := os.OpenFile(zeros, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	refused(status(open(), "fx-zeros"), "not the pinned "+pins[0].SHA256)
	if _, err := PinPlugins(ctx, pinPath, []string{zeros}); err != nil {
		t.Fatal(err)
	}
	if p := status(open(), "fx-zeros"); p.Err != nil {
		t.Fatalf("re-pinned: %v", p.Err)
	}

	// The directory's last pin goes: the directory is not pinned any more.
	if n, err := UnpinPlugins(ctx, pinPath, []string{zeros}); err != nil || n != 1 {
		t.Fatalf("unpin: %d, %v", n, err)
	}
	if r := open(); r.Pinning || status(r, "fx-blob").Err != nil {
		t.Fatalf("a directory without pins: pinning %v, fx-blob %v", r.Pinning, status(r, "fx-blob").Err)
	}

	// A pin file that cannot be read stops every plugin: pinning fails closed.
	if err := os.WriteFile(pinPath, []byte("schema = 1\npin = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(status(open(), "fx-zeros"), "cannot be used")

	h, err := Open(ctx, Options{PluginDir: dir, PinFile: pinPath, NoPinning: true, NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, on := h.PinFile(); on {
		t.Fatal("NoPinning must turn pinning off")
	}
}

// TestConcurrentPinnersLoseNothing pins the pin file's lock and atomic write.
func TestConcurrentPinnersLoseNothing(t *testing.T) {
	dir := t.TempDir()
	pinPath := filepath.Join(dir, "pins.toml")
	var paths []string
	for i := range 16 {
		p := filepath.Join(dir, fmt.Sprintf("kiln-backend-%d", i))
		if err := os.WriteFile(p, []byte{byte(i)}, 0o755); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	inParallel(t, len(paths), func(i int) error {
		_, err := PinPlugins(context.Background(), pinPath, []string{paths[i]})
		return err
	})
	pins, exists, err := LoadPins(pinPath)
	if err != nil || !exists || len(pins) != len(paths) {
		t.Fatalf("%d pins (%v), want %d", len(pins), err, len(paths))
	}
}

func TestLoadPinsRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"no schema":  "[[pin]]\npath = \"/a\"\nsha256 = \"00\"\n",
		"newer":      "schema = 2\n",
		"short sum":  "schema = 1\n[[pin]]\npath = \"/a\"\nsha256 = \"00\"\n",
		"relative":   "schema = 1\n[[pin]]\npath = \"a\"\nsha256 = \"" + strings.Repeat("0", 64) + "\"\n",
		"unknown":    "schema = 1\ncolour = 3\n",
		"not toml":   "{{{",
		"wrong type": "schema = 1\npin = 3\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, exists, err := LoadPins(path); err == nil || !exists || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: %v, want an error with a Fix", name, err)
		}
	}
	if pins, exists, err := LoadPins(filepath.Join(dir, "missing")); err != nil || exists || pins != nil {
		t.Errorf("missing file: %v %v %v", pins, exists, err)
	}
}

func FuzzLoadPins(f *testing.F) {
	f.Add([]byte("schema = 1\n[[pin]]\npath = \"/a/kiln-backend-x\"\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\n"))
	f.Add([]byte("schema = 1\n"))
	f.Add([]byte("schema = 1\npin = []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "pins.toml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		pins, _, err := LoadPins(path)
		if err != nil {
			return
		}
		for _, p := range pins {
			if !filepath.IsAbs(p.Path) || len(p.SHA256) != 64 {
				t.Fatalf("LoadPins accepted %+v", p)
			}
		}
	})
}
