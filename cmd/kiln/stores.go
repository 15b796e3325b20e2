package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote"
)

// Store health, as kiln doctor reports it.
const (
	healthOK      = "ok"
	healthEmpty   = "empty"   // the file or directory does not exist yet
	healthOff     = "off"     // KILN_CACHE=off
	healthProblem = "problem" // see Error
)

// storesJSON is the stores part of `kiln doctor --json`.
type storesJSON struct {
	PipelineCache cacheHealthJSON  `json:"pipeline_cache"`
	Autotune      fileHealthJSON   `json:"autotune"`
	PGO           pgoHealthJSON    `json:"pgo"`
	Remote        remoteHealthJSON `json:"remote"`
}

// remoteHealthJSON is the fleet tier's health: off when $KILN_REMOTE is unset,
// else whether a probe object could be written and read back, and how long
// that took.
type remoteHealthJSON struct {
	URL            string `json:"url"`
	Health         string `json:"health"`
	Error          string `json:"error,omitempty"`
	Reachable      bool   `json:"reachable"`
	Writable       bool   `json:"writable"`
	WriteLatencyNs int64  `json:"write_latency_ns"`
	ReadLatencyNs  int64  `json:"read_latency_ns"`
}

type cacheHealthJSON struct {
	Path       string        `json:"path"`
	Health     string        `json:"health"`
	Error      string        `json:"error,omitempty"`
	Entries    int           `json:"entries"`
	Bytes      int64         `json:"bytes"`
	MaxBytes   int64         `json:"max_bytes"`
	BadEntries []problemJSON `json:"bad_entries"`
}

type fileHealthJSON struct {
	Path    string `json:"path"`
	Health  string `json:"health"`
	Error   string `json:"error,omitempty"`
	Bytes   int64  `json:"bytes"`
	Records int    `json:"records"`
}

type pgoHealthJSON struct {
	fileHealthJSON
	Stale []staleJSON `json:"stale"`
}

type staleJSON struct {
	Op      string `json:"op"`
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// checkStores reports each store at its default path: the pipeline cache's
// entries, size and unreadable headers (read-only; kiln cache verify repairs),
// whether the autotune store and the PGO table load, which PGO routes are
// stale against the live backends, and whether the fleet tier ($KILN_REMOTE)
// is reachable and writable. It writes nothing but the fleet tier's probe
// object, which it deletes.
func checkStores(ctx context.Context, paths host.StorePaths, live []pgo.Live) (storesJSON, []string) {
	var problems []string
	problem := func(format string, args ...any) string {
		msg := fmt.Sprintf(format, args...)
		problems = append(problems, msg)
		return msg
	}
	s := storesJSON{
		PipelineCache: cacheHealthJSON{Path: paths.PipelineCache, Health: healthOK, BadEntries: []problemJSON{}},
		Autotune:      fileHealthJSON{Path: paths.Autotune, Health: healthOK},
		PGO:           pgoHealthJSON{fileHealthJSON: fileHealthJSON{Path: paths.PGO, Health: healthOK}, Stale: []staleJSON{}},
	}

	pc := &s.PipelineCache
	switch st, err := os.Stat(pc.Path); {
	case os.Getenv(host.CacheEnv) == "off":
		pc.Health = healthOff
	case errors.Is(err, fs.ErrNotExist):
		pc.Health = healthEmpty
	case err != nil || !st.IsDir():
		pc.Health = healthProblem
		pc.Error = problem("pipeline cache %s is not a readable directory (%v). Fix: remove it; kiln creates it again", pc.Path, err)
	default:
		c, err := cache.Open(pc.Path)
		var r cache.HeaderReport
		if err == nil {
			r, err = c.CheckHeaders(ctx)
		}
		if err != nil {
			pc.Health, pc.Error = healthProblem, problem("%v", err)
			break
		}
		pc.Entries, pc.Bytes, pc.MaxBytes = r.Entries, r.Bytes, c.MaxBytes()
		for _, p := range r.Bad {
			pc.BadEntries = append(pc.BadEntries, problemJSON{p.Path, p.Reason})
		}
		if len(r.Bad) > 0 {
			pc.Health = healthProblem
			pc.Error = problem("pipeline cache %s has %d corrupt entries (they are misses, never used). Fix: run 'kiln cache verify' to remove them", pc.Path, len(r.Bad))
		}
	}

	at := &s.Autotune
	if at.Bytes, at.Health = fileSize(at.Path); at.Health == healthOK {
		if st, err := autotune.Load(at.Path); err != nil {
			at.Health, at.Error = healthProblem, problem("%v", err)
		} else {
			at.Records = st.Len()
		}
	}

	s.Remote = checkRemote(ctx)
	if s.Remote.Error != "" {
		problems = append(problems, s.Remote.Error)
	}

	pt := &s.PGO
	if pt.Bytes, pt.Health = fileSize(pt.Path); pt.Health == healthOK {
		if t, err := pgo.Load(pt.Path); err != nil {
			pt.Health, pt.Error = healthProblem, problem("%v", err)
		} else {
			pt.Records = t.Len()
			for _, r := range t.Stale(live) {
				pt.Stale = append(pt.Stale, staleJSON{Op: r.Op, Backend: r.Route.Backend, Reason: r.Reason})
			}
		}
	}
	return s, problems
}

// checkRemote probes the fleet tier named by $KILN_REMOTE (see remote.Check):
// each call within the tier's deadline; nothing is left behind.
func checkRemote(ctx context.Context) remoteHealthJSON {
	url := os.Getenv(remote.Env)
	h := remoteHealthJSON{URL: url, Health: healthOff}
	if url == "" || url == host.RemoteOff {
		return h
	}
	r, err := remote.Open(ctx, url, remote.Options{})
	if err != nil {
		h.Health, h.Error = healthProblem, err.Error()
		return h
	}
	defer r.Close(ctx)
	c := r.Check(ctx)
	h.Reachable, h.Writable = c.Reachable, c.Writable
	h.WriteLatencyNs, h.ReadLatencyNs = c.WriteLatency.Nanoseconds(), c.ReadLatency.Nanoseconds()
	h.Health = healthOK
	if c.Error != "" {
		h.Health, h.Error = healthProblem, c.Error
	}
	return h
}

// fileSize returns a store file's size and healthOK, or healthEmpty when it
// does not exist; a file that cannot be stat'ed is left to the store's Load to
// explain.
func fileSize(path string) (int64, string) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, healthEmpty
	}
	if err != nil {
		return 0, healthOK
	}
	return st.Size(), healthOK
}

// printStores writes the stores section of kiln doctor.
func (a *app) printStores(s storesJSON) {
	pc := s.PipelineCache
	line := fmt.Sprintf("  pipeline cache  %s: %s", pc.Path, pc.Health)
	switch {
	case pc.Health == healthOK || len(pc.BadEntries) > 0:
		line += fmt.Sprintf(", %d entries, %s of %s", pc.Entries, units.Bytes(pc.Bytes), units.Bytes(pc.MaxBytes))
	case pc.Health == healthOff:
		line += fmt.Sprintf(" (%s=off)", host.CacheEnv)
	case pc.Health == healthEmpty:
		line += " (created on first compile)"
	}
	fmt.Fprintln(a.out, line)
	if pc.Error != "" {
		fmt.Fprintf(a.out, "    problem: %s\n", pc.Error)
	}
	file := func(label, unit string, f fileHealthJSON) {
		line := fmt.Sprintf("  %-15s %s: %s", label, f.Path, f.Health)
		switch f.Health {
		case healthOK:
			line += fmt.Sprintf(", %d %s, %s", f.Records, unit, units.Bytes(f.Bytes))
		case healthEmpty:
			line += " (no file yet)"
		}
		fmt.Fprintln(a.out, line)
		if f.Error != "" {
			fmt.Fprintf(a.out, "    problem: %s\n", f.Error)
		}
	}
	file("autotune", "records", s.Autotune)
	file("pgo", "routes", s.PGO.fileHealthJSON)
	if len(s.PGO.Stale) > 0 {
		var names []string
		for _, r := range s.PGO.Stale {
			names = append(names, r.Op)
		}
		fmt.Fprintf(a.out, "    %d stale route(s), ignored by routing until 'kiln certify' measures again: %s\n", len(s.PGO.Stale), strings.Join(names, ", "))
		for _, r := range s.PGO.Stale {
			fmt.Fprintf(a.out, "      %s -> %s: %s\n", r.Op, r.Backend, r.Reason)
		}
	}
	rm := s.Remote
	switch {
	case rm.Health == healthOff:
		fmt.Fprintf(a.out, "  %-15s off (set %s to share pipelines, records and routes across machines)\n", "fleet tier", remote.Env)
	case rm.Reachable && rm.Writable:
		fmt.Fprintf(a.out, "  %-15s %s: %s, reachable, writable, write %v, read %v\n", "fleet tier", rm.URL, rm.Health,
			time.Duration(rm.WriteLatencyNs).Round(time.Microsecond), time.Duration(rm.ReadLatencyNs).Round(time.Microsecond))
	default:
		fmt.Fprintf(a.out, "  %-15s %s: %s (reachable %v, writable %v)\n", "fleet tier", rm.URL, rm.Health, rm.Reachable, rm.Writable)
	}
	if rm.Error != "" {
		fmt.Fprintf(a.out, "    problem: %s\n", rm.Error)
	}
}
