package autotune

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
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
	// RecordedAt is when the record was made, YYYY-MM-DD by convention; it may be
	// empty.
	RecordedAt string
}

// Store is the (Key → Record) map of one store file. It is safe for concurrent
// use; SaveIfDirty holds the Store while it waits for the file's lock.
type Store struct {
	path string

	mu      sync.Mutex
	records map[Key]Record
	// puts and forgets are the changes since the last load or save; a key is in
	// at most one of them, the last change made to it.
	puts    map[Key]Record
	forgets map[Key]bool
}

// DefaultPath is $XDG_CONFIG_HOME/kiln/autotune.toml, with xdg's fallbacks
// (~/.config, ~/Library/Application Support on macOS, %AppData% on Windows).
func DefaultPath() (string, error) { return defaultPath(xdg.Process()) }

func defaultPath(env xdg.Env) (string, error) {
	dir, err := xdg.ConfigHome(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kiln", "autotune.toml"), nil
}

// Load reads the store file at path. A missing file gives an empty store (saved
// to path by SaveIfDirty). A malformed file, or one of a newer schema, is an
// error ending in a Fix, and the file is left as it is.
func Load(path string) (*Store, error) {
	data, exists, err := tomlstore.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read autotune store %s: %w. Fix: make it readable", path, err)
	}
	s := &Store{path: path, records: map[Key]Record{}, puts: map[Key]Record{}, forgets: map[Key]bool{}}
	if !exists {
		return s, nil
	}
	if s.records, err = parse(data); err != nil {
		return nil, loadError(path, err)
	}
	return s, nil
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
func (s *Store) Path() string { return s.path }

// Get returns key's record.
func (s *Store) Get(key Key) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[key]
	return r, ok
}

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
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[key] = r
	s.puts[key] = r
	delete(s.forgets, key)
	return nil
}

// Forget removes key's record and reports whether there was one; only then is
// the store marked dirty.
func (s *Store) Forget(key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[key]; !ok {
		return false
	}
	delete(s.records, key)
	delete(s.puts, key)
	s.forgets[key] = true
	return true
}

// Len returns the number of records.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// IsDirty reports whether the store has changes SaveIfDirty has not written.
func (s *Store) IsDirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.puts)+len(s.forgets) > 0
}

// SaveIfDirty writes the store's changes to its file and reports whether it
// wrote. A clean store writes nothing and creates no file. Otherwise it takes the
// file's lock (waiting until ctx is done), re-reads the file, applies this
// store's puts and forgets since the last load or save on top of what it holds,
// and replaces it atomically; the store then holds the merged records. If the
// file on disk is malformed or of a newer schema, nothing is written and the
// store stays dirty.
func (s *Store) SaveIfDirty(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.puts)+len(s.forgets) == 0 {
		return false, nil
	}
	var merged map[Key]Record
	err := tomlstore.Update(ctx, s.path, 0o644, func(current []byte, exists bool) ([]byte, error) {
		merged = map[Key]Record{}
		if exists {
			disk, err := parse(current)
			if err != nil {
				return nil, loadError(s.path, err)
			}
			merged = disk
		}
		for k := range s.forgets {
			delete(merged, k)
		}
		maps.Copy(merged, s.puts)
		return encode(merged)
	})
	if err != nil {
		return false, fmt.Errorf("save autotune store: %w", err)
	}
	s.records = merged
	clear(s.puts)
	clear(s.forgets)
	return true, nil
}
