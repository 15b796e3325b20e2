package pgo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/xdg"
)

func tablePath(t *testing.T) string { return filepath.Join(t.TempDir(), "kiln", "pgo.toml") }

func sampleRoute(backend string) Route {
	return Route{
		Backend:            backend,
		AdapterFingerprint: "fp-" + backend,
		PluginVersion:      "1.0.0",
		Observations:       []Observation{{backend, 1200}, {"cpu-ref", 90_000}},
		MeasuredAt:         time.Date(2026, 5, 2, 10, 0, 0, 0, time.UTC),
	}
}

func loadTable(t *testing.T, path string) *Table {
	t.Helper()
	tbl, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func set(t *testing.T, tbl *Table, op string, r Route) {
	t.Helper()
	if err := tbl.Set(op, r); err != nil {
		t.Fatal(err)
	}
}

func saveTable(t *testing.T, tbl *Table) bool {
	t.Helper()
	wrote, err := tbl.Save(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return wrote
}

func TestLoadMissingTableIsEmpty(t *testing.T) {
	tbl := loadTable(t, tablePath(t))
	if tbl.Len() != 0 || tbl.IsDirty() {
		t.Fatal("not empty and clean")
	}
	if _, ok := tbl.Fastest("op"); ok {
		t.Fatal("Fastest on an empty table")
	}
}

func TestSaveThenLoadRoundTrips(t *testing.T) {
	path := tablePath(t)
	tbl := loadTable(t, path)
	set(t, tbl, "kiln.vector.add.f32", sampleRoute("vulkan:0"))
	set(t, tbl, "kiln.scan.u32", sampleRoute("cuda:0"))
	if !saveTable(t, tbl) || tbl.IsDirty() {
		t.Fatal("save did not write or left the table dirty")
	}
	got := loadTable(t, path)
	if ops := got.Ops(); !reflect.DeepEqual(ops, []string{"kiln.scan.u32", "kiln.vector.add.f32"}) {
		t.Fatalf("Ops = %v", ops)
	}
	r, _ := got.Route("kiln.vector.add.f32")
	if !reflect.DeepEqual(r, sampleRoute("vulkan:0")) {
		t.Fatalf("loaded %+v\nwant   %+v", r, sampleRoute("vulkan:0"))
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{"schema = 1", "backend = ", "adapter_fingerprint = ", "plugin_version = ", "measured_at = 2026-05-02T10:00:00Z", "median_ns = 1200"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("file lacks %q:\n%s", want, data)
		}
	}
}

func TestCleanTableSavesNothing(t *testing.T) {
	path := tablePath(t)
	if saveTable(t, loadTable(t, path)) {
		t.Fatal("a clean table wrote")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a clean save created the file")
	}
}

func TestSaveMergesWithOtherWriters(t *testing.T) {
	path := tablePath(t)
	a, b := loadTable(t, path), loadTable(t, path)
	set(t, a, "op.a", sampleRoute("vulkan:0"))
	set(t, b, "op.b", sampleRoute("cuda:0"))
	saveTable(t, a)
	saveTable(t, b)
	if got := loadTable(t, path); got.Len() != 2 {
		t.Fatalf("%d routes after two independent saves, want 2", got.Len())
	}
	if _, ok := b.Route("op.a"); !ok {
		t.Fatal("after saving, the table does not hold the other writer's route")
	}
	c := loadTable(t, path)
	if !b.Remove("op.a") || b.Remove("op.a") {
		t.Fatal("Remove reported wrongly")
	}
	set(t, c, "op.c", sampleRoute("cpu-ref"))
	saveTable(t, c)
	saveTable(t, b)
	got := loadTable(t, path)
	if ops := got.Ops(); !reflect.DeepEqual(ops, []string{"op.b", "op.c"}) {
		t.Fatalf("Ops = %v, want [op.b op.c]", ops)
	}
}

func TestSetRefusesWhatTheFileCannotHold(t *testing.T) {
	tbl := New(tablePath(t))
	bad := map[string]func() error{
		"empty op":         func() error { return tbl.Set("", sampleRoute("a")) },
		"empty backend":    func() error { return tbl.Set("op", Route{}) },
		"bad utf-8":        func() error { return tbl.Set("op\xff", sampleRoute("a")) },
		"negative latency": func() error { return tbl.Set("op", Route{Backend: "a", Observations: []Observation{{"a", -1}}}) },
		"empty obs id":     func() error { return tbl.Set("op", Route{Backend: "a", Observations: []Observation{{"", 1}}}) },
		"year 33658":       func() error { return tbl.Set("op", Route{Backend: "a", MeasuredAt: time.Unix(1e12, 0)}) },
	}
	for name, f := range bad {
		if err := f(); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if tbl.Len() != 0 {
		t.Fatal("a refused Set changed the table")
	}
}

var malformedTables = map[string]string{
	"syntax":             "schema = 1\n[routes.\n",
	"no schema":          "[routes.op]\nbackend = \"a\"\n",
	"empty file":         "",
	"missing backend":    "schema = 1\n[routes.op]\nplugin_version = \"1\"\n",
	"unknown field":      "schema = 1\n[routes.op]\nbackend = \"a\"\nspeed = \"fast\"\n",
	"negative median":    "schema = 1\n[routes.op]\nbackend = \"a\"\n[[routes.op.observations]]\nbackend = \"a\"\nmedian_ns = -5\n",
	"observation no ns":  "schema = 1\n[routes.op]\nbackend = \"a\"\n[[routes.op.observations]]\nbackend = \"a\"\n",
	"wrong type":         "schema = 1\n[routes.op]\nbackend = 3\n",
	"bad time":           "schema = 1\n[routes.op]\nbackend = \"a\"\nmeasured_at = \"yesterday\"\n",
	"routes not a table": "schema = 1\nroutes = 5\n",
	"truncated by crash": "schema = 1\n[routes.op]\nbackend = \"vul",
}

func TestMalformedTableIsAnErrorEndingWithTheFixAndUntouched(t *testing.T) {
	for name, content := range malformedTables {
		path := tablePath(t)
		stale := loadTable(t, path)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(content), 0o644)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: Load accepted it", name)
			continue
		}
		if !strings.HasSuffix(err.Error(), "Fix: regenerate it with 'kiln certify'") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v", name, err)
		}
		set(t, stale, "op", sampleRoute("a"))
		if wrote, err := stale.Save(context.Background()); wrote || err == nil {
			t.Errorf("%s: Save merged into a malformed table: %v, %v", name, wrote, err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("%s: the file was changed", name)
		}
	}
}

func TestNewerSchemaTableIsRefused(t *testing.T) {
	path := tablePath(t)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("schema = 3\n[routing]\nmode = \"new\"\n"), 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "schema 3") || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v", err)
	}
}

func TestSaveRegeneratingReplacesAMalformedTable(t *testing.T) {
	path := tablePath(t)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("garbage ]]]"), 0o644)
	tbl := New(path)
	set(t, tbl, "op", sampleRoute("vulkan:0"))
	wrote, replaced, err := tbl.SaveRegenerating(context.Background())
	if err != nil || !wrote || !replaced {
		t.Fatalf("SaveRegenerating = %v, %v, %v; want a replacement", wrote, replaced, err)
	}
	if tbl.IsDirty() {
		t.Fatal("SaveRegenerating left the table dirty")
	}
	got := loadTable(t, path)
	if r, ok := got.Route("op"); !ok || !reflect.DeepEqual(r, sampleRoute("vulkan:0")) || got.Len() != 1 {
		t.Fatalf("after SaveRegenerating: %+v, %v", r, ok)
	}
}

// A table found malformed when certification started may be repaired by
// another process before certification saves: the decision is taken under the
// lock, so the other process's routes are merged, never overwritten.
func TestSaveRegeneratingKeepsRoutesSavedMeanwhile(t *testing.T) {
	path := tablePath(t)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte("garbage ]]]"), 0o644)
	if _, err := Load(path); err == nil {
		t.Fatal("the malformed table loaded")
	}
	certifying := New(path)
	set(t, certifying, "op.mine", sampleRoute("vulkan:0"))

	// Another process regenerates the table while this one measures.
	os.Remove(path)
	other := loadTable(t, path)
	set(t, other, "op.theirs", sampleRoute("cuda:0"))
	saveTable(t, other)

	wrote, replaced, err := certifying.SaveRegenerating(context.Background())
	if err != nil || !wrote || replaced {
		t.Fatalf("SaveRegenerating = %v, %v, %v; want a merge into the repaired table", wrote, replaced, err)
	}
	got := loadTable(t, path)
	if got.Len() != 2 {
		t.Fatalf("table holds %v, want op.mine and op.theirs", got.Ops())
	}
	if b, _ := got.Fastest("op.theirs"); b != "cuda:0" {
		t.Fatalf("op.theirs routes to %q, want the other process's cuda:0", b)
	}
}

func TestSaveRegeneratingRefusesANewerSchema(t *testing.T) {
	path := tablePath(t)
	tbl := loadTable(t, path)
	set(t, tbl, "op", sampleRoute("vulkan:0"))
	content := "schema = 3\n[routing]\nmode = \"new\"\n"
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(content), 0o644)
	wrote, replaced, err := tbl.SaveRegenerating(context.Background())
	var newer *NewerSchemaError
	if wrote || replaced || !errors.As(err, &newer) || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("SaveRegenerating = %v, %v, %v; want a NewerSchemaError with a Fix", wrote, replaced, err)
	}
	if got, _ := os.ReadFile(path); string(got) != content {
		t.Fatal("the newer-schema table was changed")
	}
	if !tbl.IsDirty() {
		t.Fatal("the refused route was dropped from the table")
	}
}

func TestStaleness(t *testing.T) {
	tbl := New(tablePath(t))
	set(t, tbl, "op.fresh", sampleRoute("vulkan:0"))
	set(t, tbl, "op.newdriver", sampleRoute("cuda:0"))
	set(t, tbl, "op.upgraded", sampleRoute("cpu-ref"))
	set(t, tbl, "op.gone", sampleRoute("metal:0"))
	live := []Live{
		{ID: "vulkan:0", AdapterFingerprint: "fp-vulkan:0", PluginVersion: "1.0.0"},
		{ID: "cuda:0", AdapterFingerprint: "fp-other-gpu", PluginVersion: "1.0.0"},
		{ID: "cpu-ref", AdapterFingerprint: "fp-cpu-ref", PluginVersion: "1.1.0"},
	}
	if r, why := tbl.Fresh("op.fresh", live); why != "" || r.Backend != "vulkan:0" {
		t.Fatalf("fresh route: %+v, %q", r, why)
	}
	for op, want := range map[string]string{
		"op.newdriver": "adapter",
		"op.upgraded":  "plugin version",
		"op.gone":      "not live",
		"op.unknown":   "no PGO route",
	} {
		r, why := tbl.Fresh(op, live)
		if r.Backend != "" || !strings.Contains(why, want) {
			t.Errorf("%s: Fresh = %+v, %q; want a reason about %q", op, r, why, want)
		}
	}
	stale := tbl.Stale(live)
	var ops []string
	for _, s := range stale {
		ops = append(ops, s.Op)
		if s.Reason == "" || s.Route.Backend == "" {
			t.Errorf("stale entry without reason or route: %+v", s)
		}
	}
	if !reflect.DeepEqual(ops, []string{"op.gone", "op.newdriver", "op.upgraded"}) {
		t.Fatalf("Stale ops = %v", ops)
	}
}

func TestDefaultPath(t *testing.T) {
	env := xdg.Env{GOOS: "linux", Getenv: func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/u"}[k]
	}}
	if got, err := defaultPath(env); err != nil || got != filepath.Join("/cfg", "kiln", "pgo.toml") {
		t.Fatalf("defaultPath = %q, %v", got, err)
	}
	env.Getenv = func(k string) string { return map[string]string{"HOME": "/home/u"}[k] }
	if got, _ := defaultPath(env); got != filepath.Join("/home/u", ".config", "kiln", "pgo.toml") {
		t.Fatalf("defaultPath without XDG_CONFIG_HOME = %q", got)
	}
}

// A route follows its device to the index the driver gives it now, and only
// to a live backend of the same id, fingerprint and plugin version.
func TestRouteFollowsItsDevice(t *testing.T) {
	r := Route{Backend: "cuda:0", AdapterFingerprint: "gpu-a", PluginVersion: "1", Observations: []Observation{{Backend: "cuda:0", MedianNs: 5}}}
	live := []Live{{ID: "cuda:0", AdapterFingerprint: "gpu-b", PluginVersion: "1"}, {ID: "cuda:1", AdapterFingerprint: "gpu-a", PluginVersion: "1"}}
	moved, ok := r.Follow(live)
	if !ok || moved.Backend != "cuda:1" || moved.Observations[0].Backend != "cuda:0" {
		t.Fatalf("Follow = %+v, %v; want cuda:1 with the observations as measured", moved, ok)
	}
	for _, l := range [][]Live{
		{{ID: "cuda:1", AdapterFingerprint: "gpu-a", PluginVersion: "2"}},
		{{ID: "vulkan:1", AdapterFingerprint: "gpu-a", PluginVersion: "1"}},
		{{ID: "cuda:1", AdapterFingerprint: "gpu-c", PluginVersion: "1"}},
	} {
		if got, ok := r.Follow(l); ok {
			t.Errorf("Follow(%v) = %+v; another version, backend or device must not match", l, got)
		}
	}
}
