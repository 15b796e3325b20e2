package pgo

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/kiln-dev/kiln/internal/tomlstore"
)

// Schema is the newest table file schema this package reads and writes.
// Schema 2 adds routes per size class; a table is written as schema 1 while
// no route has classes, so a kiln that reads only schema 1 keeps reading it
// (and one that meets schema 2 refuses it rather than regenerating it).
const Schema = 2

// oldestSchema is the oldest schema this package reads.
const oldestSchema = 1

// fileDoc is the file as decoded but for its routes, which
// tomlstore.DecodeSplit decodes one by one into routeDoc; pointers there tell a
// missing field from a zero one.
type fileDoc struct {
	Schema int64 `toml:"schema"`
}

type routeDoc struct {
	Backend            *string    `toml:"backend"`
	AdapterFingerprint string     `toml:"adapter_fingerprint"`
	PluginVersion      string     `toml:"plugin_version"`
	MeasuredAt         *time.Time `toml:"measured_at"`
	Observations       []obsDoc   `toml:"observations"`
	Classes            []classDoc `toml:"classes"`
}

type classDoc struct {
	Bytes              *int64   `toml:"bytes"`
	Backend            *string  `toml:"backend"`
	AdapterFingerprint string   `toml:"adapter_fingerprint"`
	PluginVersion      string   `toml:"plugin_version"`
	Observations       []obsDoc `toml:"observations"`
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
	Backend            string     `toml:"backend"`
	AdapterFingerprint string     `toml:"adapter_fingerprint"`
	PluginVersion      string     `toml:"plugin_version"`
	MeasuredAt         time.Time  `toml:"measured_at"`
	Observations       []obsOut   `toml:"observations,omitempty"`
	Classes            []classOut `toml:"classes,omitempty"`
}

type classOut struct {
	Bytes              int64    `toml:"bytes"`
	Backend            string   `toml:"backend"`
	AdapterFingerprint string   `toml:"adapter_fingerprint"`
	PluginVersion      string   `toml:"plugin_version"`
	Observations       []obsOut `toml:"observations,omitempty"`
}

type obsOut struct {
	Backend  string `toml:"backend"`
	MedianNs int64  `toml:"median_ns"`
}

// parse decodes a table file. Errors are *tomlstore.FormatError or
// *tomlstore.NewerSchemaError.
func parse(data []byte) (map[string]Route, error) {
	var doc fileDoc
	schema, docs, err := tomlstore.DecodeSplit[routeDoc](data, oldestSchema, Schema, "routes", &doc)
	if err != nil {
		return nil, err
	}
	routes := make(map[string]Route, len(docs))
	for op, d := range docs {
		if d.Backend == nil {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q", op), Msg: "backend is required"}
		}
		r := Route{Backend: *d.Backend, AdapterFingerprint: d.AdapterFingerprint, PluginVersion: d.PluginVersion}
		if d.MeasuredAt != nil {
			r.MeasuredAt = d.MeasuredAt.UTC()
		}
		if r.Observations, err = observations(d.Observations, fmt.Sprintf("route %q", op)); err != nil {
			return nil, err
		}
		if len(d.Classes) > 0 && schema < 2 {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q", op), Msg: "classes need schema 2"}
		}
		for i, c := range d.Classes {
			where := fmt.Sprintf("route %q class %d", op, i+1)
			if c.Bytes == nil || c.Backend == nil {
				return nil, &tomlstore.FormatError{Where: where, Msg: "bytes and backend are required"}
			}
			cr := ClassRoute{Bytes: *c.Bytes, Backend: *c.Backend, AdapterFingerprint: c.AdapterFingerprint, PluginVersion: c.PluginVersion}
			if cr.Observations, err = observations(c.Observations, where); err != nil {
				return nil, err
			}
			r.Classes = append(r.Classes, cr)
		}
		if err := checkRoute(op, r); err != nil {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("route %q", op), Msg: err.Error()}
		}
		routes[op] = r
	}
	return routes, nil
}

// observations converts decoded observations; where locates them for errors.
func observations(docs []obsDoc, where string) ([]Observation, error) {
	var out []Observation
	for i, o := range docs {
		if o.Backend == nil || o.MedianNs == nil {
			return nil, &tomlstore.FormatError{Where: fmt.Sprintf("%s observation %d", where, i+1), Msg: "backend and median_ns are required"}
		}
		out = append(out, Observation{Backend: *o.Backend, MedianNs: *o.MedianNs})
	}
	return out, nil
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
	if err := checkObservations(r.Observations); err != nil {
		return err
	}
	for i, c := range r.Classes {
		switch {
		case c.Bytes < 0:
			return fmt.Errorf("size class %d has negative bytes %d", i+1, c.Bytes)
		case i > 0 && c.Bytes <= r.Classes[i-1].Bytes:
			return fmt.Errorf("size classes must be distinct and in ascending bytes; %d follows %d", c.Bytes, r.Classes[i-1].Bytes)
		case c.Backend == "":
			return fmt.Errorf("size class %d bytes has an empty backend", c.Bytes)
		}
		for _, s := range []string{c.Backend, c.AdapterFingerprint, c.PluginVersion} {
			if !utf8.ValidString(s) {
				return fmt.Errorf("%q is not valid UTF-8", s)
			}
		}
		if err := checkObservations(c.Observations); err != nil {
			return fmt.Errorf("size class %d bytes: %w", c.Bytes, err)
		}
	}
	return nil
}

func checkObservations(obs []Observation) error {
	for _, o := range obs {
		switch {
		case o.Backend == "" || !utf8.ValidString(o.Backend):
			return fmt.Errorf("observation backend %q is empty or not valid UTF-8", o.Backend)
		case o.MedianNs < 0:
			return fmt.Errorf("observation of %s has a negative median %d ns", o.Backend, o.MedianNs)
		}
	}
	return nil
}

// encode writes routes as a schema-1 file when no route has classes, else
// as schema 2.
func encode(routes map[string]Route) ([]byte, error) {
	out := fileOut{Schema: oldestSchema, Routes: make(map[string]routeOut, len(routes))}
	for op, r := range routes {
		ro := routeOut{Backend: r.Backend, AdapterFingerprint: r.AdapterFingerprint, PluginVersion: r.PluginVersion, MeasuredAt: r.MeasuredAt.UTC()}
		for _, o := range r.Observations {
			ro.Observations = append(ro.Observations, obsOut(o))
		}
		for _, c := range r.Classes {
			co := classOut{Bytes: c.Bytes, Backend: c.Backend, AdapterFingerprint: c.AdapterFingerprint, PluginVersion: c.PluginVersion}
			for _, o := range c.Observations {
				co.Observations = append(co.Observations, obsOut(o))
			}
			ro.Classes = append(ro.Classes, co)
			out.Schema = Schema
		}
		out.Routes[op] = ro
	}
	return tomlstore.Encode(out)
}
