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

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/internal/tomlstore"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// Plugin pinning (see docs/design.md, "Plugin trust and operation"): the pin
// file, on the host's side, records the SHA-256 of each trusted plugin
// executable by its absolute path. While the file exists, pinning is on: the
// host runs only pinned plugins whose executable still has the pinned checksum
// (checked with go-plugin's SecureConfig right before each launch). `kiln
// plugins pin` writes it, under its lock and atomically.

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

// UnpinPlugins removes the pins of paths (every pin when paths is empty) and
// returns how many it removed. The file stays, so pinning stays on.
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
			abs, err := filepath.Abs(p)
			if err != nil {
				continue
			}
			if _, ok := byPath[abs]; ok {
				delete(byPath, abs)
				removed++
			}
		}
	})
	return removed, err
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

// pinSet is what a host checks plugins against; nil when pinning is off.
type pinSet struct {
	file   string
	byPath map[string]string
	err    error // the pin file exists but cannot be used: nothing runs
}

// loadPinSet loads the pins at path; it returns nil when the file is missing.
func loadPinSet(path string) *pinSet {
	pins, exists, err := LoadPins(path)
	if !exists && err == nil {
		return nil
	}
	s := &pinSet{file: path, byPath: map[string]string{}, err: err}
	for _, p := range pins {
		s.byPath[p.Path] = p.SHA256
	}
	return s
}

// refusedError says the host will not run a plugin executable.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// check verifies the executable at path against its pin with go-plugin's
// SecureConfig; it passes everything when pinning is off.
func (s *pinSet) check(path string) error {
	if s == nil {
		return nil
	}
	if s.err != nil {
		return &refusedError{fmt.Sprintf("pinning is on but the pin file cannot be used (%v)", s.err)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return &refusedError{err.Error()}
	}
	want, ok := s.byPath[abs]
	if !ok {
		return &refusedError{fmt.Sprintf("pinning is on (%s) and this plugin is not pinned; run `kiln plugins pin` to trust it", s.file)}
	}
	sum, _ := decodeSum(want)
	if err := secureCheck(&goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}, abs); err != nil {
		got, herr := FileSHA256(abs)
		if herr != nil {
			got = herr.Error()
		}
		return &refusedError{fmt.Sprintf("its SHA-256 is %s, not the pinned %s (%v); if you trust the new executable, run `kiln plugins pin` again", got, want, err)}
	}
	return nil
}

// pinned returns the pinned checksum of path and whether pinning is on.
func (s *pinSet) pinned(path string) (sum string, on bool) {
	if s == nil {
		return "", false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", true
	}
	return s.byPath[abs], true
}
