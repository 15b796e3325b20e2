package pgo

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/tomlstore"
)

// Schema is the table file schema this package reads and writes.
const Schema = 1

// fileDoc is the file as decoded; pointers tell a missing field from a zero one.
type fileDoc struct {
	Schema int64               `toml:"schema"`
	Routes map[string]routeDoc `toml:"routes"`
}

type routeDoc struct {
	Backend            *string    `toml:"backend"`
	AdapterFingerprint string     `toml:"adapter_fingerprint"`
	PluginVersion      string     `toml:"plugin_version"`
	MeasuredAt         *time.Time `toml:"measured_at"`
	Observations       []obsDoc   `toml:"observations"`
}

type obsDoc struct {
	Backend  *string `toml:"backend"`
	MedianNs *int64  `toml:"median_ns"`
}

// fileOut is the file as written.
type fileOut struct {
	Schema int                 `toml:"schema"`
	Routes map[string]routeOut `toml:"routes,omitempty"`
}

type routeOut struct {
	Backend            string    `toml:"backend"`
	AdapterFingerprint string    `toml:"adapter_fingerprint"`
	PluginVersion      string    `toml:"plugin_version"`
	MeasuredAt         time.Time `toml:"measured_at"`
	Observations       []obsOut  `toml:"observations,omitempty"`
}

type obsOut struct {
	Backend  string `toml:"backend"`
	MedianNs int64  `toml:"median_ns"`
}

// parse decodes a table file. Errors are *tomlstore.FormatError or
// *tomlstore.NewerSchemaError.
func parse(data []byte) (map[string]Route, error) {
	var doc fileDoc
	if err := tomlstore.Decode(data, Schema, &doc); err != nil {
		return nil, err
	}
	routes := make(map[string]Route, len(doc.Routes))
	for op, d := range doc.Routes {
		if d.Backend == nil {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q", op), Msg: "backend is required"}
		}
		r := Route{Backend: *d.Backend, AdapterFingerprint: d.AdapterFingerprint, PluginVersion: d.PluginVersion}
		if d.MeasuredAt != nil {
			r.MeasuredAt = d.MeasuredAt.UTC()
		}
		for i, o := range d.Observations {
			if o.Backend == nil || o.MedianNs == nil {
				return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q observation %d", op, i+1), Msg: "backend and median_ns are required"}
			}
			r.Observations = append(r.Observations, Observation{Backend: *o.Backend, MedianNs: *o.MedianNs})
		}
		if err := checkRoute(op, r); err != nil {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q", op), Msg: err.Error()}
		}
		routes[op] = r
	}
	return routes, nil
}

// checkRoute says why a route cannot be stored, or nil.
func checkRoute(op string, r Route) error {
	switch {
	case op == "":
		return fmt.Errorf("the op id is empty")
	case r.Backend == "":
		return fmt.Errorf("the backend is empty")
	case r.MeasuredAt.UTC().Year() < 0 || r.MeasuredAt.UTC().Year() > 9999:
		return fmt.Errorf("measured_at %v is outside the years 0 to 9999 TOML can hold", r.MeasuredAt)
	}
	for _, s := range []string{op, r.Backend, r.AdapterFingerprint, r.PluginVersion} {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%q is not valid UTF-8", s)
		}
	}
	for _, o := range r.Observations {
		switch {
		case o.Backend == "" || !utf8.ValidString(o.Backend):
			return fmt.Errorf("observation backend %q is empty or not valid UTF-8", o.Backend)
		case o.MedianNs < 0:
			return fmt.Errorf("observation of %s has a negative median %d ns", o.Backend, o.MedianNs)
		}
	}
	return nil
}

// encode writes routes as a schema-1 file.
func encode(routes map[string]Route) ([]byte, error) {
	out := fileOut{Schema: Schema, Routes: make(map[string]routeOut, len(routes))}
	for op, r := range routes {
		ro := routeOut{Backend: r.Backend, AdapterFingerprint: r.AdapterFingerprint, PluginVersion: r.PluginVersion, MeasuredAt: r.MeasuredAt.UTC()}
		for _, o := range r.Observations {
			ro.Observations = append(ro.Observations, obsOut(o))
		}
		out.Routes[op] = ro
	}
	return tomlstore.Encode(out)
}
