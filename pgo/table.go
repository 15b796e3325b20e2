package pgo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// Classes, when set, are the routes of the op at several launch sizes,
	// smallest first; a dispatch follows the class nearest its own size (see
	// [Route.ForSize]), and Backend, AdapterFingerprint, PluginVersion and
	// Observations above repeat the largest class, the route a reader that
	// knows no classes follows. See docs/design.md, "PGO routes".
	Classes []ClassRoute
}

// Table maps op ids to routes for one table file. It is safe for concurrent
// use, and [Table.Save] never holds the Table while it waits for the file's
// lock: [Table.Route] and [Table.Fresh] go on meanwhile.
type Table struct {
	m *tomlstore.Map[string, Route]
}

// codec reads and writes PGO table files.
var codec = tomlstore.Codec[string, Route]{Parse: parse, Encode: encode, LoadError: loadError}

// DefaultPath is $XDG_CONFIG_HOME/kiln/pgo.toml, with xdg's fallbacks
// (~/.config, ~/Library/Application Support on macOS, %AppData% on Windows).
func DefaultPath() (string, error) { return defaultPath(xdg.Process()) }

func defaultPath(env xdg.Env) (string, error) {
	return xdg.Join(xdg.ConfigHome, env, "kiln", "pgo.toml")
}

// New returns an empty table for path without reading the file.
func New(path string) *Table { return &Table{m: tomlstore.NewMap(path, codec)} }

// Load reads the table at path. A missing file gives an empty table. A
// malformed file, or one of a newer schema, is an error ending in a Fix, and
// the file is left as it is; errors.As finds a *[MalformedError] or a
// *[NewerSchemaError] in it.
func Load(path string) (*Table, error) {
	m, err := tomlstore.LoadMap(path, codec)
	if err != nil {
		return nil, err
	}
	return &Table{m: m}, nil
}

// NewerSchemaError is a table file written by a newer kiln. It is never
// overwritten.
type NewerSchemaError = tomlstore.NewerSchemaError

// MalformedError is a table file that does not parse.
type MalformedError = tomlstore.FormatError

// loadError adds the path and a Fix to a parse error.
func loadError(path string, err error) error {
	var newer *tomlstore.NewerSchemaError
	if errors.As(err, &newer) {
		return fmt.Errorf("PGO table %s: %w. Fix: use a kiln that reads schema %d, or move the file away and run 'kiln certify' again", path, err, newer.Found)
	}
	return fmt.Errorf("PGO table %s is malformed: %w. Fix: regenerate it with 'kiln certify'", path, err)
}

// Path returns the table file's path.
func (t *Table) Path() string { return t.m.Path() }

// Route returns op's route, fresh or not.
func (t *Table) Route(op string) (Route, bool) { return t.m.Get(op) }

// Fastest returns the backend op's route names, fresh or not; [Table.Fresh]
// also checks the route against the live backends.
func (t *Table) Fastest(op string) (string, bool) {
	r, ok := t.Route(op)
	return r.Backend, ok
}

// Ops returns the op ids that have a route, sorted.
func (t *Table) Ops() []string { return slices.Sorted(maps.Keys(t.m.Items())) }

// Routes returns a copy of every route, by op.
func (t *Table) Routes() map[string]Route { return t.m.Items() }

// Len returns the number of routes.
func (t *Table) Len() int { return t.m.Len() }

// Set stores op's route, replacing any earlier one. It refuses an empty op or
// backend, strings that are not valid UTF-8 and negative latencies.
func (t *Table) Set(op string, r Route) error {
	if err := checkRoute(op, r); err != nil {
		return fmt.Errorf("PGO route for %q: %w. Fix: pass the op's program name and the backend's routing id", op, err)
	}
	r.Observations = slices.Clone(r.Observations)
	r.Classes = slices.Clone(r.Classes)
	for i := range r.Classes {
		r.Classes[i].Observations = slices.Clone(r.Classes[i].Observations)
	}
	r.MeasuredAt = r.MeasuredAt.UTC()
	t.m.Set(op, r)
	return nil
}

// Remove drops op's route and reports whether there was one.
func (t *Table) Remove(op string) bool { return t.m.Delete(op) }

// IsDirty reports whether the table has changes [Table.Save] has not written.
func (t *Table) IsDirty() bool { return t.m.IsDirty() }

// OnSaved registers fn to be called after each save that wrote, with the routes
// that save set (removed ones are not passed).
func (t *Table) OnSaved(fn func(saved map[string]Route)) { t.m.OnSaved(fn) }

// Save writes the table's changes to its file and reports whether it wrote; a
// clean table writes nothing. It takes the file's lock (waiting until ctx is
// done), re-reads the file, applies this table's sets and removes since the last
// load or save on top, and replaces it atomically; the table then holds the
// merged routes. If the file on disk is malformed or of a newer schema, nothing
// is written and the table stays dirty.
func (t *Table) Save(ctx context.Context) (bool, error) {
	r, err := t.m.Save(ctx, tomlstore.SaveOptions{})
	if err != nil {
		return false, fmt.Errorf("save PGO table: %w", err)
	}
	return r.Wrote, nil
}

// SaveRegenerating is [Table.Save] for `kiln certify`, which regenerates a
// malformed table: whether the file is malformed is decided under its lock,
// when the save happens, and only then is it replaced by this table's routes
// (replaced reports it). A file that parses is merged into as Save does, so
// routes another process saved meanwhile are kept, and a file of a newer schema
// is refused, never overwritten.
func (t *Table) SaveRegenerating(ctx context.Context) (wrote, replaced bool, err error) {
	r, err := t.m.Save(ctx, tomlstore.SaveOptions{ReplaceMalformed: true})
	if err != nil {
		return false, false, fmt.Errorf("save PGO table: %w", err)
	}
	return r.Wrote, r.Replaced, nil
}

// Live identifies a backend the host has running now: its routing id, its
// adapter's fingerprint and its plugin's version.
type Live struct {
	ID, AdapterFingerprint, PluginVersion string
}

// Follow aims r at the live adapter it was measured on when the driver now
// numbers that device differently (CUDA_VISIBLE_DEVICES reordered, another
// machine of the fleet): the live backend with r's backend id, adapter
// fingerprint and plugin version. It returns r with Backend set to that live
// name (unchanged when it already is), or false when no live backend matches.
// Observations keep the names they were measured under.
func (r Route) Follow(live []Live) (Route, bool) {
	id, _, _ := strings.Cut(r.Backend, ":")
	for _, l := range live {
		lid, _, _ := strings.Cut(l.ID, ":")
		if lid == id && l.AdapterFingerprint == r.AdapterFingerprint && l.PluginVersion == r.PluginVersion {
			r.Backend = l.ID
			return r, true
		}
	}
	return Route{}, false
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
// otherwise it returns the zero [Route] and why ("no PGO route for …", or why
// it is stale), for the host to report beside the backend it chose instead.
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

// StaleRoute is a route [Table.Stale] found, with the reason.
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
			continue
		}
		for _, c := range r.Classes {
			if why := r.ForSize(c.Bytes).StaleReason(live); why != "" {
				out = append(out, StaleRoute{op, r, fmt.Sprintf("size class %d bytes: %s", c.Bytes, why)})
				break
			}
		}
	}
	return out
}
