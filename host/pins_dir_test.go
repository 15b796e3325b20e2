package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pinReport opens a host on dir with the pin file pinPath and returns its report.
func pinReport(t *testing.T, dir, pinPath string) Report {
	t.Helper()
	h, err := Open(context.Background(), Options{PluginDir: dir, PinFile: pinPath, NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	return h.Report()
}

// pluginStatus returns the status of the plugin file name in r.
func pluginStatus(t *testing.T, r Report, name string) PluginStatus {
	t.Helper()
	for _, p := range r.Plugins {
		if filepath.Base(p.Path) == name {
			return p
		}
	}
	t.Fatalf("no %s in %s", name, r.Dir)
	return PluginStatus{}
}

// TestPinsArePerDirectory pins issue 22 item 4: pinning one plugins directory
// leaves every other directory unpinned; a refusal's Fix is the exact command
// to run; removing a directory's pins (UnpinDir, `kiln plugins pin --off`,
// `unpin --all`) turns its pinning off and keeps the other directories' pins;
// every spelling of a directory has its pins.
func TestPinsArePerDirectory(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	zerosA := copyFixture(t, a, "fx-zeros")
	copyFixture(t, a, "fx-blob")
	zerosB := copyFixture(t, b, "fx-zeros")
	pinPath := filepath.Join(t.TempDir(), "pins.toml")
	if _, err := PinPlugins(ctx, pinPath, []string{zerosA}); err != nil {
		t.Fatal(err)
	}

	ra := pinReport(t, a, pinPath)
	if !ra.Pinning || pluginStatus(t, ra, "kiln-backend-fx-zeros").Err != nil {
		t.Fatalf("the pinned directory: pinning %v, fx-zeros %v", ra.Pinning, pluginStatus(t, ra, "kiln-backend-fx-zeros").Err)
	}
	blob := pluginStatus(t, ra, "kiln-backend-fx-blob").Err
	var se *StartError
	if !errors.As(blob, &se) || se.Stage != StartRefused || !strings.HasSuffix(blob.Error(), "Fix: if you trust it, run `kiln plugins pin --plugins "+a+" kiln-backend-fx-blob`; to turn pinning off for this directory, run `kiln plugins pin --off --plugins "+a+"`") {
		t.Fatalf("an unpinned plugin of the pinned directory: %v, want refused with the command to run", blob)
	}
	rb := pinReport(t, b, pinPath)
	if rb.Pinning || pluginStatus(t, rb, "kiln-backend-fx-zeros").Err != nil {
		t.Fatalf("another directory: pinning %v, fx-zeros %v; want it not pinned", rb.Pinning, pluginStatus(t, rb, "kiln-backend-fx-zeros").Err)
	}

	// A link to the pinned directory is the pinned directory.
	link := filepath.Join(t.TempDir(), "plugins")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	if rl := pinReport(t, link, pinPath); !rl.Pinning || pluginStatus(t, rl, "kiln-backend-fx-zeros").Err != nil || pluginStatus(t, rl, "kiln-backend-fx-blob").Err == nil {
		t.Fatalf("the pinned directory through a link: pinning %v", rl.Pinning)
	}

	// Turning pinning off for a keeps b's pin.
	if _, err := PinPlugins(ctx, pinPath, []string{zerosB}); err != nil {
		t.Fatal(err)
	}
	if n, err := UnpinDir(ctx, pinPath, link); err != nil || n != 1 {
		t.Fatalf("UnpinDir: %d, %v", n, err)
	}
	ra = pinReport(t, a, pinPath)
	if ra.Pinning || pluginStatus(t, ra, "kiln-backend-fx-blob").Err != nil {
		t.Fatalf("after UnpinDir: pinning %v, fx-blob %v; want every plugin to run", ra.Pinning, pluginStatus(t, ra, "kiln-backend-fx-blob").Err)
	}
	if pins, err := PinsOf(pinPath, b); err != nil || len(pins) != 1 || pins[0].Path != zerosB {
		t.Fatalf("b's pins after turning a's off: %+v, %v", pins, err)
	}
}

// TestPinFileFormatKeepsReadingAndFailsClosed: a pin file written by an
// earlier kiln (one schema-1 file for every directory) is read as it is and
// pinning a directory keeps every other pin; a malformed file refuses every
// plugin with a Fix that names the file and the command, and is never
// overwritten by a pin.
func TestPinFileFormatKeepsReadingAndFailsClosed(t *testing.T) {
	ctx := context.Background()
	a := t.TempDir()
	zeros := copyFixture(t, a, "fx-zeros")
	sum, err := FileSHA256(zeros)
	if err != nil {
		t.Fatal(err)
	}
	other := "/elsewhere/kiln-backend-cuda"
	pinPath := filepath.Join(t.TempDir(), "pins.toml")
	old := "schema = 1\n\n[[pin]]\npath = \"" + other + "\"\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\n\n[[pin]]\npath = \"" + zeros + "\"\nsha256 = \"" + sum + "\"\n"
	if err := os.WriteFile(pinPath, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := pinReport(t, a, pinPath); !r.Pinning || pluginStatus(t, r, "kiln-backend-fx-zeros").Pin != sum {
		t.Fatalf("an earlier kiln's pin file: pinning %v", r.Pinning)
	}
	blob := copyFixture(t, a, "fx-blob")
	if _, err := PinPlugins(ctx, pinPath, []string{blob}); err != nil {
		t.Fatal(err)
	}
	pins, _, err := LoadPins(pinPath)
	if err != nil || len(pins) != 3 {
		t.Fatalf("after pinning one more: %+v, %v; want the earlier two kept", pins, err)
	}

	bad := []byte("schema = 1\npin = 3\n")
	if err := os.WriteFile(pinPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	r := pinReport(t, a, pinPath)
	err = pluginStatus(t, r, "kiln-backend-fx-zeros").Err
	if !r.Pinning || err == nil || !strings.Contains(err.Error(), "Fix: repair "+pinPath) || !strings.Contains(err.Error(), "kiln plugins pin --plugins "+a) {
		t.Fatalf("a malformed pin file: pinning %v, %v; want every plugin refused with a Fix", r.Pinning, err)
	}
	if _, err := PinPlugins(ctx, pinPath, []string{zeros}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("pinning over a malformed file: %v, want an error with a Fix", err)
	}
	if got, _ := os.ReadFile(pinPath); string(got) != string(bad) {
		t.Fatalf("the malformed pin file was overwritten: %q", got)
	}
}
