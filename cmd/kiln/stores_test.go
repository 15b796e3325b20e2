package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote"
	"github.com/kiln-dev/kiln/remote/remotetest"
)

// freshHomes points the XDG cache and config homes at a directory of the test's
// own and returns the stores' paths there.
func freshHomes(t *testing.T) host.StorePaths {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	paths, err := host.DefaultStorePaths()
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// kilnJSON runs kiln, requires exit status 0 and decodes stdout into v.
func kilnJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errOut := kiln(t, args...)
	if code != 0 {
		t.Fatalf("kiln %v: exit %d: %s\n%s", args, code, errOut, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kiln %v: %v\n%s", args, err, out)
	}
}

func TestRunJSONShowsTheCacheAndTheSelection(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "fx-blob")
	args := []string{"--plugins", dir, "run", "--kernel", "saxpy", "--size", "64", "--backend", "fx-blob", "--json"}
	for _, want := range []string{"miss", "hit"} {
		var r map[string]any
		kilnJSON(t, &r, args...)
		if r["cache"] != want || r["selection"] != "explicit" || r["tuned"] != false {
			t.Fatalf("run --json: cache %v, selection %v, tuned %v; want cache %q", r["cache"], r["selection"], r["tuned"], want)
		}
		if wg, ok := r["workgroup_size"].([]any); !ok || len(wg) != 3 || wg[0] == 0.0 {
			t.Fatalf("workgroup_size = %v", r["workgroup_size"])
		}
	}
	t.Setenv(host.CacheEnv, "off")
	var r map[string]any
	kilnJSON(t, &r, args...)
	if r["cache"] != "off" {
		t.Fatalf("with %s=off: cache %v", host.CacheEnv, r["cache"])
	}
	code, out, _ := kiln(t, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "64", "--backend", "fx-blob")
	if code != 0 || !strings.Contains(out, "pipeline cache off") || !strings.Contains(out, "(explicit)") {
		t.Fatalf("run table: exit %d\n%s", code, out)
	}
}

func TestCacheCommands(t *testing.T) {
	paths := freshHomes(t)
	c, err := cache.Open(paths.PipelineCache)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Write(cache.Key{BackendID: "test", SpecHash: uint64(i)}, bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	bad := c.PathFor(cache.Key{BackendID: "test", SpecHash: 2})
	if err := os.WriteFile(bad, []byte("not an entry"), 0o644); err != nil {
		t.Fatal(err)
	}

	var stats cacheStatsJSON
	kilnJSON(t, &stats, "cache", "stats", "--json")
	if stats.Root != paths.PipelineCache || stats.Entries != 3 || stats.Bytes == 0 || stats.MaxBytes != cache.DefaultMaxBytes {
		t.Fatalf("stats = %+v", stats)
	}
	var verify cacheVerifyJSON
	kilnJSON(t, &verify, "cache", "verify", "--json")
	if verify.Checked != 3 || verify.Valid != 2 || len(verify.Removed) != 1 || verify.Removed[0].Path != bad {
		t.Fatalf("verify = %+v", verify)
	}
	var trim cacheTrimJSON
	kilnJSON(t, &trim, "cache", "trim", "--max", "1", "--json")
	if trim.Removed != 2 || trim.Entries != 0 || trim.MaxBytes != 1 {
		t.Fatalf("trim = %+v", trim)
	}
	if err := c.Write(cache.Key{BackendID: "test"}, []byte("again")); err != nil {
		t.Fatal(err)
	}
	var clear cacheClearJSON
	kilnJSON(t, &clear, "cache", "clear", "--json")
	if clear.Removed != 1 {
		t.Fatalf("clear = %+v", clear)
	}
	for _, args := range [][]string{{"cache", "stats"}, {"cache", "verify"}, {"cache", "trim"}, {"cache", "clear"}} {
		code, out, errOut := kiln(t, args...)
		if code != 0 || !strings.Contains(out, paths.PipelineCache) {
			t.Errorf("%v: exit %d: %s\n%s", args, code, errOut, out)
		}
	}
	code, _, errOut := kiln(t, "cache", "trim", "--max", "lots")
	if code == 0 || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("trim --max lots: exit %d, %s", code, errOut)
	}
}

func TestCertifyWritesRoutesThatRunFollows(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref", "fx-zeros", "fx-blob")
	const op = "kiln.vector.saxpy.f32"
	// At size 0 the outputs are empty, so the fixtures' zeros are right.
	var c certifyJSON
	kilnJSON(t, &c, "--plugins", dir, "certify", "--kernel", "saxpy", "--size", "0", "--timed", "1", "--json")
	if !c.Saved || c.Regenerated || c.Table != paths.PGO || len(c.Ops) != 1 || c.Ops[0].Op != op || len(c.Ops[0].Observations) != 2 || len(c.Failures) != 0 {
		t.Fatalf("certify = %+v", c)
	}
	if strings.Join(c.Backends, ",") != "fx-blob:0,fx-zeros:0" {
		t.Fatalf("certified on %v; reference oracles must be left out", c.Backends)
	}
	table, err := pgo.Load(paths.PGO)
	if err != nil {
		t.Fatal(err)
	}
	route, ok := table.Route(op)
	if !ok || route.Backend != c.Ops[0].Backend {
		t.Fatalf("table route %+v, certify said %s", route, c.Ops[0].Backend)
	}
	var r map[string]any
	kilnJSON(t, &r, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "0", "--json")
	if r["backend"] != route.Backend || !strings.HasPrefix(r["selection"].(string), "pgo route: fastest of 2") {
		t.Fatalf("run without --backend: ran on %v because %v; the route says %s", r["backend"], r["selection"], route.Backend)
	}

	// Wrong outputs exclude a backend: no route is recorded, the old one stays.
	code, out, errOut := kiln(t, "--plugins", dir, "certify", "--kernel", "saxpy", "--size", "64", "--timed", "1")
	if code != 1 || !strings.Contains(errOut, "got no route") || !strings.Contains(out, "excluded fx-zeros:0") {
		t.Fatalf("certify with wrong outputs: exit %d: %s\n%s", code, errOut, out)
	}
	if table, err := pgo.Load(paths.PGO); err != nil || table.Len() != 1 {
		t.Fatalf("after a failed certification: %v, %v", table, err)
	}

	// A malformed table is regenerated.
	if err := os.WriteFile(paths.PGO, []byte("routes = [broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = kiln(t, "--plugins", dir, "certify", "--kernel", "vector_add", "--size", "0", "--timed", "1")
	if code != 0 || !strings.Contains(errOut, "regenerated") || !strings.Contains(errOut, "malformed") {
		t.Fatalf("certify over a malformed table: exit %d: %s", code, errOut)
	}
	table, err = pgo.Load(paths.PGO)
	if err != nil {
		t.Fatalf("the regenerated table does not load: %v", err)
	}
	if ops := table.Ops(); len(ops) != 1 || ops[0] != "kiln.vector.add.f32" {
		t.Fatalf("regenerated table holds %v", ops)
	}

	// A table written by a newer kiln is refused before anything runs, and kept.
	newer := "schema = 3\n[routes.x]\nwhatever = 1\n"
	if err := os.WriteFile(paths.PGO, []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = kiln(t, "--plugins", dir, "certify", "--kernel", "vector_add", "--size", "0", "--timed", "1")
	if code == 0 || !strings.Contains(errOut, "schema 3") || !strings.Contains(errOut, "Fix:") || out != "" {
		t.Fatalf("certify over a newer-schema table: exit %d: %s\n%s", code, errOut, out)
	}
	if got, _ := os.ReadFile(paths.PGO); string(got) != newer {
		t.Fatalf("certify changed a newer-schema table to %q", got)
	}

	for _, args := range [][]string{
		{"--plugins", plugins(t, "cpuref"), "certify", "--kernel", "saxpy"},
		{"--plugins", dir, "certify", "--kernel", "nope"},
	} {
		code, _, errOut := kiln(t, args...)
		if code == 0 || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

func TestDoctorReportsStoreHealth(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	c, err := cache.Open(paths.PipelineCache)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := c.Write(cache.Key{BackendID: "test", SpecHash: uint64(i)}, []byte("blob")); err != nil {
			t.Fatal(err)
		}
	}
	bad := c.PathFor(cache.Key{BackendID: "test", SpecHash: 1})
	if err := os.WriteFile(bad, []byte("not an entry"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(paths.Autotune), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths.Autotune, []byte("schema = [oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	table := pgo.New(paths.PGO)
	route := pgo.Route{Backend: "cpu-ref:0", PluginVersion: "0.0.0-old", Observations: []pgo.Observation{{Backend: "cpu-ref:0", MedianNs: 1}}, MeasuredAt: time.Now()}
	if err := table.Set("kiln.vector.add.f32", route); err != nil {
		t.Fatal(err)
	}
	if _, err := table.Save(context.Background()); err != nil {
		t.Fatal(err)
	}

	var d struct {
		Stores   storesJSON `json:"stores"`
		Problems []string   `json:"problems"`
		OK       bool       `json:"ok"`
	}
	kilnJSON(t, &d, "--plugins", dir, "doctor", "--json")
	pc := d.Stores.PipelineCache
	if pc.Path != paths.PipelineCache || pc.Entries != 2 || len(pc.BadEntries) != 1 || pc.Health != healthProblem || !strings.Contains(pc.Error, "kiln cache verify") {
		t.Fatalf("pipeline cache = %+v", pc)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Fatal("doctor removed a corrupt entry; it must only report")
	}
	if at := d.Stores.Autotune; at.Health != healthProblem || !strings.Contains(at.Error, "Fix:") || at.Bytes == 0 {
		t.Fatalf("autotune = %+v", at)
	}
	pt := d.Stores.PGO
	if pt.Health != healthOK || pt.Records != 1 || len(pt.Stale) != 1 || !strings.Contains(pt.Stale[0].Reason, "cpu-ref:0") {
		t.Fatalf("pgo = %+v", pt)
	}
	if !d.OK || len(d.Problems) != 2 {
		t.Fatalf("ok %v, problems %q; store problems are reported, not fatal", d.OK, d.Problems)
	}
	code, out, _ := kiln(t, "--plugins", dir, "doctor")
	for _, want := range []string{paths.PipelineCache, "2 entries", "kiln cache verify", paths.Autotune, "malformed", paths.PGO, "1 routes", "stale route", "kiln.vector.add.f32"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("doctor (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	freshHomes(t)
	var fresh struct {
		Stores   storesJSON `json:"stores"`
		Problems []string   `json:"problems"`
	}
	kilnJSON(t, &fresh, "--plugins", dir, "doctor", "--json")
	// The host doctor opens creates the cache directory.
	if s := fresh.Stores; s.PipelineCache.Health != healthOK || s.PipelineCache.Entries != 0 || s.Autotune.Health != healthEmpty || s.PGO.Health != healthEmpty || len(fresh.Problems) != 0 {
		t.Fatalf("fresh homes: %+v, problems %q", fresh.Stores, fresh.Problems)
	}
}

// The fleet tier from the command line: stats count both tiers, doctor probes
// the remote, push and pull seed machines, and an unreachable remote is a
// problem doctor reports, never a failure.
func TestFleetTierCommands(t *testing.T) {
	first := freshHomes(t)
	url := remotetest.S3(t, "cli")
	t.Setenv(remote.Env, url)
	dir := plugins(t, "fx-blob")
	run := []string{"--plugins", dir, "run", "--kernel", "saxpy", "--size", "64", "--backend", "fx-blob", "--json"}
	var r map[string]any
	kilnJSON(t, &r, run...)
	if r["cache"] != "miss" {
		t.Fatalf("first run: cache %v", r["cache"])
	}
	var stats cacheStatsJSON
	kilnJSON(t, &stats, "cache", "stats", "--json")
	if stats.RemoteURL != url || stats.Local.Writes != 1 || stats.Local.ByCause["absent"] != 1 || stats.Remote.ByCause["absent"] != 1 ||
		stats.Remote.Writes != 1 || stats.Remote.Errors != 0 || stats.Since == "" {
		t.Fatalf("stats after a compile = %+v", stats)
	}
	code, out, _ := kiln(t, "cache", "stats")
	for _, want := range []string{"local   hits 0, misses 1 (absent 1)", "remote  hits 0, misses 1 (absent 1), errors 0, writes 1", url} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("cache stats (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	kilnJSON(t, &stats, "cache", "stats", "--zero", "--json")
	if !stats.UsageZeroed || stats.Local.Writes != 0 || stats.Remote.Misses != 0 {
		t.Fatalf("stats --zero = %+v", stats)
	}

	var d struct {
		Stores   storesJSON `json:"stores"`
		Problems []string   `json:"problems"`
	}
	kilnJSON(t, &d, "--plugins", dir, "doctor", "--json")
	if rm := d.Stores.Remote; rm.URL != url || rm.Health != healthOK || !rm.Reachable || !rm.Writable || rm.WriteLatencyNs <= 0 || len(d.Problems) != 0 {
		t.Fatalf("doctor's fleet tier = %+v, problems %q", rm, d.Problems)
	}
	var push cachePushJSON
	kilnJSON(t, &push, "cache", "push", "--json")
	if push.Remote != url || push.Pipelines != 0 || push.PipelinesPresent != 1 {
		t.Fatalf("push = %+v; the run's entry was uploaded behind its compile", push)
	}

	// Another machine: empty stores, the same fleet tier.
	second := freshHomes(t)
	if second.PipelineCache == first.PipelineCache {
		t.Fatal("the second machine shares the first one's cache")
	}
	var pull cachePullJSON
	kilnJSON(t, &pull, "--plugins", dir, "cache", "pull", "--json")
	if pull.Pipelines != 1 || pull.PipelinesBad != 0 {
		t.Fatalf("pull = %+v", pull)
	}
	t.Setenv(remote.Env, "")
	kilnJSON(t, &r, run...)
	if r["cache"] != "hit" {
		t.Fatalf("run after the pull, without the fleet tier: cache %v, want a local hit", r["cache"])
	}
	code, _, errOut := kiln(t, "cache", "push")
	if code == 0 || !strings.Contains(errOut, remote.Env) || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("push without a fleet tier: exit %d: %s", code, errOut)
	}

	t.Setenv(remote.Env, remotetest.S3URL(remotetest.Refusing(t), "", "kiln_timeout=2s"))
	kilnJSON(t, &r, run...)
	if r["cache"] != "hit" {
		t.Fatalf("run with a refusing fleet tier: cache %v", r["cache"])
	}
	kilnJSON(t, &d, "--plugins", dir, "doctor", "--json")
	if rm := d.Stores.Remote; rm.Health != healthProblem || rm.Reachable || len(d.Problems) != 1 || !strings.Contains(d.Problems[0], "Fix:") {
		t.Fatalf("doctor with a refusing fleet tier: %+v, problems %q", rm, d.Problems)
	}
	code, out, _ = kiln(t, "--plugins", dir, "doctor")
	if code != 0 || !strings.Contains(out, "fleet tier") || !strings.Contains(out, "not reachable") {
		t.Fatalf("doctor (exit %d) with a refusing fleet tier:\n%s", code, out)
	}
}
