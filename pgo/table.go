package pgo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/internal/tomlstore"
	"github.com/kiln-dev/kiln/internal/xdg"
)

// Observation is one backend's median latency for an op.
type Observation struct {
	// Backend is the backend's routing id ("vulkan:0").
	Backend string
	// MedianNs is the median of the timed dispatches, in nanoseconds.
	MedianNs int64
}

// Route is the routing decision for one op.
type Route struct {
	// Backend is the routing id of the fastest backend.
	Backend string
	// AdapterFingerprint and PluginVersion identify what Backend was when it was
	// measured; a route is stale once they no longer match the live backend.
	AdapterFingerprint string
	PluginVersion      string
	// Observations are every measured backend, fastest first (ties by id).
	Observations []Observation
	// MeasuredAt is when the route was certified, in UTC.
	MeasuredAt time.Time
}

// Table maps op ids to routes for one table file. It is safe for concurrent
// use; Save holds the Table while it waits for the file's lock.
type Table struct {
	path string

	mu     sync.Mutex
	routes map[string]Route
	// sets and removes are the changes since the last load or save; an op is in
	// at most one of them, the last change made to it.
	sets    map[string]Route
	removes map[string]bool
}

// DefaultPath is $XDG_CONFIG_HOME/kiln/pgo.toml, with xdg's fallbacks
// (~/.config, ~/Library/Application Support on macOS, %AppData% on Windows).
func DefaultPath() (string, error) { return defaultPath(xdg.Process()) }

func defaultPath(env xdg.Env) (string, error) {
	dir, err := xdg.ConfigHome(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kiln", "pgo.toml"), nil
}

// New returns an empty table for path without reading the file.
func New(path string) *Table {
	return &Table{path: path, routes: map[string]Route{}, sets: map[string]Route{}, removes: map[string]bool{}}
}

// Load reads the table at path. A missing file gives an empty table. A malformed
// file, or one of a newer schema, is an error ending in a Fix, and the file is
// left as it is.
func Load(path string) (*Table, error) {
	data, exists, err := tomlstore.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read PGO table %s: %w. Fix: make it readable", path, err)
	}
	t := New(path)
	if !exists {
		return t, nil
	}
	if t.routes, err = parse(data); err != nil {
		return nil, loadError(path, err)
	}
	return t, nil
}

// loadError adds the path and a Fix to a parse error.
func loadError(path string, err error) error {
	var newer *tomlstore.NewerSchemaError
	if errors.As(err, &newer) {
		return fmt.Errorf("PGO table %s: %w. Fix: use a kiln that reads schema %d, or regenerate it with 'kiln certify'", path, err, newer.Found)
	}
	return fmt.Errorf("PGO table %s is malformed: %w. Fix: regenerate it with 'kiln certify'", path, err)
}

// Path returns the table file's path.
func (t *Table) Path() string { return t.path }

// Route returns op's route, fresh or not.
func (t *Table) Route(op string) (Route, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.routes[op]
	return r, ok
}

// Fastest returns the backend op's route names, fresh or not; Fresh also checks
// the route against the live backends.
func (t *Table) Fastest(op string) (string, bool) {
	r, ok := t.Route(op)
	return r.Backend, ok
}

// Ops returns the op ids that have a route, sorted.
func (t *Table) Ops() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.routes))
}

// Len returns the number of routes.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.routes)
}

// Set stores op's route, replacing any earlier one. It refuses an empty op or
// backend, strings that are not valid UTF-8 and negative latencies.
func (t *Table) Set(op string, r Route) error {
	if err := checkRoute(op, r); err != nil {
		return fmt.Errorf("PGO route for %q: %w. Fix: pass the op's program name and the backend's routing id", op, err)
	}
	r.Observations = slices.Clone(r.Observations)
	r.MeasuredAt = r.MeasuredAt.UTC()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.routes[op] = r
	t.sets[op] = r
	delete(t.removes, op)
	return nil
}

// Remove drops op's route and reports whether there was one.
func (t *Table) Remove(op string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.routes[op]; !ok {
		return false
	}
	delete(t.routes, op)
	delete(t.sets, op)
	t.removes[op] = true
	return true
}

// IsDirty reports whether the table has changes Save has not written.
func (t *Table) IsDirty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sets)+len(t.removes) > 0
}

// Save writes the table's changes to its file and reports whether it wrote; a
// clean table writes nothing. It takes the file's lock (waiting until ctx is
// done), re-reads the file, applies this table's sets and removes since the last
// load or save on top, and replaces it atomically; the table then holds the
// merged routes. If the file on disk is malformed or of a newer schema, nothing
// is written and the table stays dirty.
func (t *Table) Save(ctx context.Context) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.sets)+len(t.removes) == 0 {
		return false, nil
	}
	var merged map[string]Route
	err := tomlstore.Update(ctx, t.path, 0o644, func(current []byte, exists bool) ([]byte, error) {
		merged = map[string]Route{}
		if exists {
			disk, err := parse(current)
			if err != nil {
				return nil, loadError(t.path, err)
			}
			merged = disk
		}
		for op := range t.removes {
			delete(merged, op)
		}
		maps.Copy(merged, t.sets)
		return encode(merged)
	})
	if err != nil {
		return false, fmt.Errorf("save PGO table: %w", err)
	}
	t.routes = merged
	clear(t.sets)
	clear(t.removes)
	return true, nil
}

// Overwrite replaces the table file with exactly this table's routes, under the
// file's lock, whatever the file holds now, malformed or not. It is how `kiln
// certify` regenerates a table; everything else should Save.
func (t *Table) Overwrite(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := tomlstore.Update(ctx, t.path, 0o644, func([]byte, bool) ([]byte, error) {
		return encode(t.routes)
	})
	if err != nil {
		return fmt.Errorf("overwrite PGO table: %w", err)
	}
	clear(t.sets)
	clear(t.removes)
	return nil
}

// Live identifies a backend the host has running now: its routing id, its
// adapter's fingerprint and its plugin's version.
type Live struct {
	ID, AdapterFingerprint, PluginVersion string
}

// StaleReason says why r cannot be used with the live backends, or returns ""
// when r is fresh: its backend must be live with the same adapter fingerprint
// and plugin version it was measured on.
func (r Route) StaleReason(live []Live) string {
	for _, l := range live {
		if l.ID != r.Backend {
			continue
		}
		switch {
		case l.AdapterFingerprint != r.AdapterFingerprint:
			return fmt.Sprintf("%s was measured on adapter %q, the live one is %q", r.Backend, r.AdapterFingerprint, l.AdapterFingerprint)
		case l.PluginVersion != r.PluginVersion:
			return fmt.Sprintf("%s was measured with plugin version %q, the live one is %q", r.Backend, r.PluginVersion, l.PluginVersion)
		}
		return ""
	}
	return fmt.Sprintf("backend %s is not live", r.Backend)
}

// Fresh returns op's route when it is fresh against live, with an empty reason;
// otherwise it returns the zero Route and why ("no PGO route for …", or why it
// is stale), for the host to report beside the backend it chose instead.
func (t *Table) Fresh(op string, live []Live) (Route, string) {
	r, ok := t.Route(op)
	if !ok {
		return Route{}, fmt.Sprintf("no PGO route for %s", op)
	}
	if why := r.StaleReason(live); why != "" {
		return Route{}, fmt.Sprintf("the PGO route for %s is stale: %s", op, why)
	}
	return r, ""
}

// StaleRoute is a route Stale found, with the reason.
type StaleRoute struct {
	Op     string
	Route  Route
	Reason string
}

// Stale lists the routes that are stale against live, sorted by op.
func (t *Table) Stale(live []Live) []StaleRoute {
	var out []StaleRoute
	for _, op := range t.Ops() {
		r, _ := t.Route(op)
		if why := r.StaleReason(live); why != "" {
			out = append(out, StaleRoute{op, r, why})
		}
	}
	return out
}
