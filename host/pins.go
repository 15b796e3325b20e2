package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/internal/tomlstore"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// Plugin pinning (see docs/design.md, "Plugin trust and operation"): the pin
// file, on the host's side, records the SHA-256 of each trusted plugin
// executable by its absolute path. Pins are kept per plugins directory: a
// directory that has pins in the file is pinned, and the host runs only its
// pinned plugins whose executable still has the pinned checksum (checked with
// go-plugin's SecureConfig right before each launch); a directory without pins
// is not pinned. `kiln plugins pin` writes the file, under its lock and
// atomically; `kiln plugins pin --off` (or `unpin --all`) removes a
// directory's pins, which turns its pinning off.

// pinSchema is the pin file's schema number.
const pinSchema = 1

// Pin is one pinned plugin executable.
type Pin struct {
	// Path is the executable's absolute path in its plugins directory.
	Path string `toml:"path"`
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string `toml:"sha256"`
}

type pinFile struct {
	Schema int64 `toml:"schema"`
	Pins   []Pin `toml:"pin"`
}

// DefaultPinPath is $XDG_CONFIG_HOME/kiln/pins.toml.
func DefaultPinPath() (string, error) {
	dir, err := xdg.ConfigHome(xdg.Process())
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kiln", "pins.toml"), nil
}

// LoadPins reads the pin file at path. A missing file gives no pins and exists
// false (pinning is off); a malformed one is an error.
func LoadPins(path string) (pins []Pin, exists bool, err error) {
	data, exists, err := tomlstore.Read(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading pin file %s: %w. Fix: make it readable", path, err)
	}
	if !exists {
		return nil, false, nil
	}
	var f pinFile
	if err := tomlstore.Decode(data, pinSchema, &f); err != nil {
		return nil, true, fmt.Errorf("pin file %s: %w. Fix: repair it, or remove it and run `kiln plugins pin` again", path, err)
	}
	for _, p := range f.Pins {
		if _, err := decodeSum(p.SHA256); err != nil || !filepath.IsAbs(p.Path) {
			return nil, true, fmt.Errorf("pin file %s: pin %q: a pin needs an absolute path and a 64-digit hex sha256. Fix: repair it, or remove it and run `kiln plugins pin` again", path, p.Path)
		}
	}
	return f.Pins, true, nil
}

// FileSHA256 returns the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func decodeSum(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err == nil && len(b) != sha256.Size {
		err = errors.New("not 32 bytes")
	}
	return b, err
}

// PinPlugins records the SHA-256 of each executable in paths in the pin file
// at pinPath (creating it, which turns pinning on), keeping the other pins. It
// takes the file's lock, re-reads it and replaces it atomically, so concurrent
// pinners lose nothing. It returns the pins it wrote.
func PinPlugins(ctx context.Context, pinPath string, paths []string) ([]Pin, error) {
	var pins []Pin
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		sum, err := FileSHA256(abs)
		if err != nil {
			return nil, fmt.Errorf("pinning %s: %w. Fix: make it readable", abs, err)
		}
		pins = append(pins, Pin{Path: abs, SHA256: sum})
	}
	err := updatePins(ctx, pinPath, func(byPath map[string]string) {
		for _, p := range pins {
			byPath[p.Path] = p.SHA256
		}
	})
	return pins, err
}

// UnpinPlugins removes the pins of paths (whatever spelling of their
// directory pinned them; every pin of every directory when paths is empty) and
// returns how many it removed. A directory whose last pin is removed is no
// longer pinned.
func UnpinPlugins(ctx context.Context, pinPath string, paths []string) (int, error) {
	removed := 0
	err := updatePins(ctx, pinPath, func(byPath map[string]string) {
		removed = 0
		if len(paths) == 0 {
			removed = len(byPath)
			clear(byPath)
			return
		}
		for _, p := range paths {
			key, name := dirKey(filepath.Dir(p)), filepath.Base(p)
			for path := range byPath {
				if filepath.Base(path) == name && dirKey(filepath.Dir(path)) == key {
					delete(byPath, path)
					removed++
				}
			}
		}
	})
	return removed, err
}

// UnpinDir removes every pin of the plugins directory dir, which turns
// pinning off for it, and returns how many it removed; the pins of other
// directories stay.
func UnpinDir(ctx context.Context, pinPath, dir string) (int, error) {
	key := dirKey(dir)
	removed := 0
	err := updatePins(ctx, pinPath, func(byPath map[string]string) {
		removed = 0
		for path := range byPath {
			if dirKey(filepath.Dir(path)) == key {
				delete(byPath, path)
				removed++
			}
		}
	})
	return removed, err
}

// PinsOf returns the pins of the plugins directory dir in the pin file at
// pinPath (none when the file is missing: dir is not pinned).
func PinsOf(pinPath, dir string) ([]Pin, error) {
	pins, _, err := LoadPins(pinPath)
	if err != nil {
		return nil, err
	}
	key := dirKey(dir)
	var out []Pin
	for _, p := range pins {
		if dirKey(filepath.Dir(p.Path)) == key {
			out = append(out, p)
		}
	}
	return out, nil
}

// dirKey is how pins name a plugins directory: its absolute path with links
// resolved, so that every spelling of one directory has the same pins (the
// absolute path as it is when it cannot be resolved).
func dirKey(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.Clean(dir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// updatePins applies change to the pins under the pin file's lock.
func updatePins(ctx context.Context, pinPath string, change func(map[string]string)) error {
	return tomlstore.Update(ctx, pinPath, 0o644, func(current []byte, exists bool) ([]byte, error) {
		byPath := map[string]string{}
		if exists {
			var f pinFile
			if err := tomlstore.Decode(current, pinSchema, &f); err != nil {
				return nil, fmt.Errorf("pin file %s: %w. Fix: repair it, or remove it and pin again", pinPath, err)
			}
			for _, p := range f.Pins {
				byPath[p.Path] = p.SHA256
			}
		}
		change(byPath)
		f := pinFile{Schema: pinSchema, Pins: []Pin{}}
		for path, sum := range byPath {
			f.Pins = append(f.Pins, Pin{Path: path, SHA256: sum})
		}
		sort.Slice(f.Pins, func(i, j int) bool { return f.Pins[i].Path < f.Pins[j].Path })
		return tomlstore.Encode(f)
	})
}

// pinSet is what a host checks its plugins against: the pins of its plugins
// directory; nil when the directory is not pinned.
type pinSet struct {
	file   string
	dir    string            // the plugins directory, absolute
	byName map[string]string // pinned checksum by the plugin's file name
	err    error             // the pin file cannot be used: nothing runs
}

// loadPinSet loads the pins of the plugins directory dir from the pin file at
// path; it returns nil when the directory has none (the file is missing, or
// pins only other directories). A file that cannot be read or parsed gives a
// set that refuses every plugin: pinning fails closed.
func loadPinSet(path, dir string) *pinSet {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	pins, err := PinsOf(path, dir)
	if err != nil {
		return &pinSet{file: path, dir: abs, err: err}
	}
	if len(pins) == 0 {
		return nil
	}
	s := &pinSet{file: path, dir: abs, byName: map[string]string{}}
	for _, p := range pins {
		s.byName[filepath.Base(p.Path)] = p.SHA256
	}
	return s
}

// refusedError says the host will not run a plugin executable, and what to
// run to change that.
type refusedError struct{ msg, fix string }

func (e *refusedError) Error() string { return e.msg + ". Fix: " + e.fix }

// pinCommand is the command that pins the plugin name of the directory dir.
func pinCommand(dir, name string) string {
	return fmt.Sprintf("kiln plugins pin --plugins %s %s", shellQuote(dir), shellQuote(name))
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// check verifies the executable at path against its pin with go-plugin's
// SecureConfig; it passes everything when pinning is off.
func (s *pinSet) check(path string) error {
	if s == nil {
		return nil
	}
	name := filepath.Base(path)
	if s.err != nil {
		return &refusedError{
			msg: fmt.Sprintf("the pin file cannot be used, so no plugin runs (pinning fails closed): %v", s.err),
			fix: fmt.Sprintf("repair %s; or move it away (mv %s %s.bad) and pin again: kiln plugins pin --plugins %s", s.file, shellQuote(s.file), shellQuote(s.file+".bad"), shellQuote(s.dir)),
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return &refusedError{msg: err.Error(), fix: "run kiln with an absolute --plugins directory"}
	}
	want, ok := s.byName[name]
	if !ok {
		return &refusedError{
			msg: fmt.Sprintf("pinning is on for %s (pin file %s) and this plugin is not pinned", s.dir, s.file),
			fix: fmt.Sprintf("if you trust it, run `%s`; to turn pinning off for this directory, run `kiln plugins pin --off --plugins %s`", pinCommand(s.dir, name), shellQuote(s.dir)),
		}
	}
	sum, _ := decodeSum(want)
	if err := secureCheck(&goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}, abs); err != nil {
		got, herr := FileSHA256(abs)
		if herr != nil {
			got = herr.Error()
		}
		return &refusedError{
			msg: fmt.Sprintf("its SHA-256 is %s, not the pinned %s (%v)", got, want, err),
			fix: fmt.Sprintf("if you trust the new executable, run `%s`; otherwise reinstall the one you pinned", pinCommand(s.dir, name)),
		}
	}
	return nil
}

// pinned returns the pinned checksum of path and whether pinning is on.
func (s *pinSet) pinned(path string) (sum string, on bool) {
	if s == nil {
		return "", false
	}
	return s.byName[filepath.Base(path)], true
}
