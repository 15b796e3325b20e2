package tomlstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Codec turns one kind of store file into a map and back.
type Codec[K comparable, V any] struct {
	// Parse decodes a file. Its errors are *FormatError or *NewerSchemaError.
	Parse func(data []byte) (map[K]V, error)
	// Encode writes a file holding exactly items.
	Encode func(items map[K]V) ([]byte, error)
	// LoadError adds the file's path and a Fix to an error of Parse.
	LoadError func(path string, err error) error
}

// change is one unsaved Set or Delete; seq orders the changes of a Map.
type change[V any] struct {
	seq     uint64
	value   V
	deleted bool
}

// Map is the content of one store file in memory, with the changes made since
// it was loaded or last saved. It is the change tracking and merge that every
// TOML store shares: Save writes only this Map's changes, on top of what the
// file holds at that moment, so processes saving the same file never lose each
// other's entries. It is safe for concurrent use, and Save never holds the Map
// while it waits for the file's lock: Get, Set and Delete go on meanwhile, and
// changes made during a Save stay pending for the next one.
type Map[K comparable, V any] struct {
	path  string
	codec Codec[K, V]
	// saving admits one Save at a time; a channel, so waiting honours a context.
	saving chan struct{}

	mu      sync.Mutex
	items   map[K]V
	changes map[K]change[V]
	seq     uint64
	onSaved []func(map[K]V)
}

// NewMap returns an empty Map for path without reading the file.
func NewMap[K comparable, V any](path string, codec Codec[K, V]) *Map[K, V] {
	return &Map[K, V]{path: path, codec: codec, saving: make(chan struct{}, 1), items: map[K]V{}, changes: map[K]change[V]{}}
}

// LoadMap reads the file at path. A missing file gives an empty Map. A file
// that cannot be read, is malformed or is of a newer schema is an error (a
// parse error through codec.LoadError), and the file is left as it is.
func LoadMap[K comparable, V any](path string, codec Codec[K, V]) (*Map[K, V], error) {
	data, exists, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w. Fix: make it readable", path, err)
	}
	m := NewMap(path, codec)
	if !exists {
		return m, nil
	}
	if m.items, err = codec.Parse(data); err != nil {
		return nil, codec.LoadError(path, err)
	}
	return m, nil
}

// Path returns the file's path.
func (m *Map[K, V]) Path() string { return m.path }

// Get returns key's value.
func (m *Map[K, V]) Get(key K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.items[key]
	return v, ok
}

// Set stores value under key and records the change for the next Save.
func (m *Map[K, V]) Set(key K, value V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[key] = value
	m.seq++
	m.changes[key] = change[V]{seq: m.seq, value: value}
}

// Delete removes key and reports whether it was there; only then is the
// change recorded for the next Save.
func (m *Map[K, V]) Delete(key K) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.items[key]; !ok {
		return false
	}
	delete(m.items, key)
	m.seq++
	m.changes[key] = change[V]{seq: m.seq, deleted: true}
	return true
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// Items returns a copy of every entry.
func (m *Map[K, V]) Items() map[K]V {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.items)
}

// IsDirty reports whether there are changes Save has not written.
func (m *Map[K, V]) IsDirty() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.changes) > 0
}

// OnSaved registers fn to be called after each Save that wrote, with the
// entries that Save set (deletions are not passed). fn runs on the saving
// goroutine, after the file is replaced and without the Map held.
func (m *Map[K, V]) OnSaved(fn func(saved map[K]V)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onSaved = append(m.onSaved, fn)
}

// SaveOptions change how Save treats the file on disk.
type SaveOptions struct {
	// ReplaceMalformed replaces a file that does not parse (a *FormatError,
	// decided under the file's lock) with this Map's entries instead of
	// failing. A file of a newer schema is never replaced.
	ReplaceMalformed bool
}

// SaveResult says what Save did.
type SaveResult struct {
	// Wrote is set when the file was replaced; a Map without changes writes
	// nothing.
	Wrote bool
	// Replaced is set when the file was malformed and SaveOptions.
	// ReplaceMalformed replaced it.
	Replaced bool
}

// Save writes this Map's changes to its file. It takes the file's lock
// (waiting until ctx is done), re-reads the file, applies the changes made
// since the last load or save on top of what it holds, and replaces it
// atomically; the Map then holds the merged entries plus any changes made
// while Save ran, which stay pending. A malformed file (unless opts say to
// replace it) or one of a newer schema is an error, nothing is written and the
// changes stay pending.
func (m *Map[K, V]) Save(ctx context.Context, opts SaveOptions) (SaveResult, error) {
	select {
	case m.saving <- struct{}{}:
	case <-ctx.Done():
		return SaveResult{}, fmt.Errorf("wait for another save of %s: %w", m.path, ctx.Err())
	}
	defer func() { <-m.saving }()

	m.mu.Lock()
	pending := maps.Clone(m.changes)
	mine := maps.Clone(m.items)
	m.mu.Unlock()
	if len(pending) == 0 {
		return SaveResult{}, nil
	}
	var (
		merged   map[K]V
		replaced bool
	)
	err := Update(ctx, m.path, 0o644, func(current []byte, exists bool) ([]byte, error) {
		merged, replaced = map[K]V{}, false
		if exists {
			disk, err := m.codec.Parse(current)
			var format *FormatError
			switch {
			case err == nil:
				merged = disk
			case opts.ReplaceMalformed && errors.As(err, &format):
				merged, replaced = mine, true
			default:
				return nil, m.codec.LoadError(m.path, err)
			}
		}
		for k, c := range pending {
			if c.deleted {
				delete(merged, k)
			} else {
				merged[k] = c.value
			}
		}
		return m.codec.Encode(merged)
	})
	if err != nil {
		return SaveResult{}, err
	}

	m.mu.Lock()
	for k, c := range m.changes {
		if p, ok := pending[k]; ok && p.seq == c.seq {
			delete(m.changes, k)
		}
	}
	items := maps.Clone(merged)
	for k, c := range m.changes {
		if c.deleted {
			delete(items, k)
		} else {
			items[k] = c.value
		}
	}
	m.items = items
	hooks := slices.Clone(m.onSaved)
	m.mu.Unlock()

	if len(hooks) > 0 {
		saved := map[K]V{}
		for k, c := range pending {
			if !c.deleted {
				saved[k] = c.value
			}
		}
		for _, fn := range hooks {
			fn(saved)
		}
	}
	return SaveResult{Wrote: true, Replaced: replaced}, nil
}
