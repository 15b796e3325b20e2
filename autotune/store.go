package autotune

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/tomlstore"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// Record is one tuning decision.
type Record struct {
	// WorkgroupSize is the launch size the tuner chose.
	WorkgroupSize [3]uint32
	// Unroll is the inner loop's unroll depth.
	Unroll uint32
	// Tile is the output tile shape, [0 0 0] when the kernel is not tiled.
	Tile [3]uint32
	// Params are the values the tuner chose for the program's tunables (its
	// parameters with candidates), as FormatParams writes them ("bm=8 tk=16"),
	// empty when it has none. The host applies WorkgroupSize at compile;
	// Params are for callers that set a launch's geometry from them (see
	// ParseParams), since a tunable may change how much work each invocation
	// does.
	Params string
	// RecordedAt is when the record was made, YYYY-MM-DD by convention; it may be
	// empty.
	RecordedAt string
	// Program is the name of the program tuned (ir.Program.Name), so that a
	// record of a program file can be listed and forgotten by it; empty in
	// records older than schema 3 and in those of the fleet tier.
	Program string
}

// Store is the (Key → Record) map of one store file. It is safe for concurrent
// use, and SaveIfDirty never holds the Store while it waits for the file's
// lock: Get and Put go on meanwhile.
type Store struct {
	m *tomlstore.Map[Key, Record]
}

// codec reads and writes autotune store files.
var codec = tomlstore.Codec[Key, Record]{Parse: parse, Encode: encode, LoadError: loadError}

// DefaultPath is $XDG_CONFIG_HOME/kiln/autotune.toml, with xdg's fallbacks
// (~/.config, ~/Library/Application Support on macOS, %AppData% on Windows).
func DefaultPath() (string, error) { return defaultPath(xdg.Process()) }

func defaultPath(env xdg.Env) (string, error) {
	return xdg.Join(xdg.ConfigHome, env, "kiln", "autotune.toml")
}

// Load reads the store file at path. A missing file gives an empty store (saved
// to path by SaveIfDirty). A malformed file, or one of a newer schema, is an
// error ending in a Fix, and the file is left as it is.
func Load(path string) (*Store, error) {
	m, err := tomlstore.LoadMap(path, codec)
	if err != nil {
		return nil, fmt.Errorf("autotune store: %w", err)
	}
	return &Store{m: m}, nil
}

// loadError adds the path and a Fix to a parse error.
func loadError(path string, err error) error {
	var newer *tomlstore.NewerSchemaError
	if errors.As(err, &newer) {
		return fmt.Errorf("autotune store %s: %w. Fix: use a kiln that reads schema %d, or move the file away to start an empty store", path, err, newer.Found)
	}
	return fmt.Errorf("autotune store %s is malformed: %w. Fix: correct the file, or delete it to start an empty store (it holds tuning results only, which kiln can measure again); kiln leaves it untouched until then", path, err)
}

// Path returns the store file's path.
func (s *Store) Path() string { return s.m.Path() }

// Get returns key's record.
func (s *Store) Get(key Key) (Record, bool) { return s.m.Get(key) }

// Put inserts or replaces key's record and marks the store dirty. It refuses the
// zero Key and strings that are not valid UTF-8, which the file cannot hold.
func (s *Store) Put(key Key, r Record) error {
	switch {
	case !validHex(key.hex):
		return fmt.Errorf("autotune key %q is not a key made by NewKey. Fix: build keys with autotune.NewKey", key.hex)
	case !utf8.ValidString(key.adapter):
		return fmt.Errorf("autotune adapter id %q is not valid UTF-8. Fix: use the adapter id the backend reports", key.adapter)
	case !utf8.ValidString(r.RecordedAt):
		return fmt.Errorf("autotune recorded_at %q is not valid UTF-8. Fix: use a YYYY-MM-DD date", r.RecordedAt)
	case !utf8.ValidString(r.Program):
		return fmt.Errorf("autotune program name %q is not valid UTF-8. Fix: use the program's name (ir.Program.Name)", r.Program)
	}
	if err := checkParams(r.Params); err != nil {
		return fmt.Errorf("autotune params %q: %w. Fix: build them with autotune.FormatParams", r.Params, err)
	}
	s.m.Set(key, r)
	return nil
}

// Forget removes key's record and reports whether there was one; only then is
// the store marked dirty.
func (s *Store) Forget(key Key) bool { return s.m.Delete(key) }

// Len returns the number of records.
func (s *Store) Len() int { return s.m.Len() }

// Records returns a copy of every record.
func (s *Store) Records() map[Key]Record { return s.m.Items() }

// IsDirty reports whether the store has changes SaveIfDirty has not written.
func (s *Store) IsDirty() bool { return s.m.IsDirty() }

// OnSaved registers fn to be called after each SaveIfDirty that wrote, with the
// records that save put (forgotten ones are not passed).
func (s *Store) OnSaved(fn func(saved map[Key]Record)) { s.m.OnSaved(fn) }

// SaveIfDirty writes the store's changes to its file and reports whether it
// wrote. A clean store writes nothing and creates no file. Otherwise it takes the
// file's lock (waiting until ctx is done), re-reads the file, applies this
// store's puts and forgets since the last load or save on top of what it holds,
// and replaces it atomically; the store then holds the merged records (and any
// change made while it saved, still pending). If the file on disk is malformed
// or of a newer schema, nothing is written and the store stays dirty.
func (s *Store) SaveIfDirty(ctx context.Context) (bool, error) {
	r, err := s.m.Save(ctx, tomlstore.SaveOptions{})
	if err != nil {
		return false, fmt.Errorf("save autotune store: %w", err)
	}
	return r.Wrote, nil
}
