package host

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/internal/syncbuf"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/pluginapi"
)

// testCache opens a pipeline cache in a fresh directory.
func testCache(t *testing.T, opts cache.Options) *cache.DiskCache {
	t.Helper()
	c, err := cache.OpenOptions(filepath.Join(t.TempDir(), "pipelines"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openWith opens a host on the named plugins with opts (PluginDir filled in) and
// closes it when the test ends.
func openWith(t *testing.T, opts Options, names ...string) *Host {
	t.Helper()
	opts.PluginDir = pluginDir(t, names...)
	h, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// blobReport reads fx-blob's report from a result: the cached-blob verdict
// (0 none, 1 matching, 2 foreign) and the workgroup-size override it got.
func blobReport(t *testing.T, res *Result) (uint32, [3]uint32) {
	t.Helper()
	if len(res.Outputs) == 0 || len(res.Outputs[0]) < 16 {
		t.Fatalf("fx-blob result has no report: %d outputs", len(res.Outputs))
	}
	out := res.Outputs[0]
	u := func(i int) uint32 { return binary.LittleEndian.Uint32(out[4*i:]) }
	return u(0), [3]uint32{u(1), u(2), u(3)}
}

func verifyCache(t *testing.T, c *cache.DiskCache) cache.VerifyReport {
	t.Helper()
	r, err := c.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// strayFiles lists every file under the cache root that is not an entry or the
// trim record: temporary files a torn write would leave.
func strayFiles(t *testing.T, root string) []string {
	t.Helper()
	var stray []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(path, ".bin") && d.Name() != "trim.txt" {
			stray = append(stray, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return stray
}

func TestCompileGoesThroughThePipelineCache(t *testing.T) {
	c := testCache(t, cache.Options{})
	h := openWith(t, Options{Cache: c, NoAutotune: true, NoPGO: true}, "fx-blob")
	ctx := context.Background()
	prog := fourBuffers(t)
	launch := Launch{Backend: "fx-blob", Work: fixtureWork()}

	res, err := h.Dispatch(ctx, prog, launch)
	if err != nil {
		t.Fatal(err)
	}
	if verdict, _ := blobReport(t, res); res.Cache != CacheMiss || verdict != 0 || res.Compile <= 0 {
		t.Fatalf("first compile: cache %q, plugin got blob verdict %d, compile %v; want a miss with no blob sent", res.Cache, verdict, res.Compile)
	}
	// The entry is under the key the host documents.
	enc, err := ir.Encode(prog)
	if err != nil {
		t.Fatal(err)
	}
	want := cache.Key{
		ProgramDigest: sha256.Sum256(enc), BindingSignature: ir.BindingSignature(prog),
		PushConstantSize: 16, WorkgroupSize: [3]uint32{64, 1, 1}, Features: cache.FeaturePushConstants,
		SpecHash: ir.SpecMap{}.CacheHash(), BackendID: "fx-blob", PluginVersion: "0.0.1-fixture",
		DeviceFingerprint: pluginapi.DeviceIdentity{}.Fingerprint(),
	}
	l, err := c.Get(want)
	if err != nil || !l.Hit() || !strings.HasPrefix(string(l.Payload), "fx-blob ") {
		t.Fatalf("entry under the documented key: %+v, %v", l, err)
	}

	res, err = h.Dispatch(ctx, prog, launch)
	if err != nil {
		t.Fatal(err)
	}
	if verdict, _ := blobReport(t, res); res.Cache != CacheHit || verdict != 1 {
		t.Fatalf("second compile: cache %q, plugin got blob verdict %d; want a hit with the stored blob sent", res.Cache, verdict)
	}

	// A corrupt entry is a miss: nothing is sent, and the fresh blob replaces it.
	if err := os.WriteFile(c.PathFor(want), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = h.Dispatch(ctx, prog, launch)
	if err != nil {
		t.Fatal(err)
	}
	if verdict, _ := blobReport(t, res); res.Cache != CacheMiss || verdict != 0 {
		t.Fatalf("after corruption: cache %q, verdict %d; want a miss with no blob sent", res.Cache, verdict)
	}
	if r := verifyCache(t, c); r.Valid != 1 || len(r.Removed) != 0 {
		t.Fatalf("Verify after the rewrite = %+v, want one valid entry", r)
	}

}

func TestCacheCanBeTurnedOff(t *testing.T) {
	h := openWith(t, Options{NoCache: true, NoAutotune: true, NoPGO: true}, "fx-blob")
	for i := 0; i < 2; i++ {
		res, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-blob", Work: fixtureWork()})
		if err != nil {
			t.Fatal(err)
		}
		if verdict, _ := blobReport(t, res); res.Cache != CacheOff || verdict != 0 {
			t.Fatalf("dispatch %d without a cache: cache %q, verdict %d", i, res.Cache, verdict)
		}
	}
}

func TestDefaultStoresFollowXDGAndKILNCACHE(t *testing.T) {
	homes := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(homes, "cache"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(homes, "config"))
	log := hclog.NewNullLogger()
	env := func(v string) func(string) string { return func(string) string { return v } }

	s := openStores(Options{}, env(""), log)
	dc, ok := s.cache.(*cache.DiskCache)
	if !ok || dc.Root() != filepath.Join(homes, "cache", "kiln", "pipelines") {
		t.Fatalf("default cache: %v", s.cache)
	}
	if s.tune == nil || s.tune.Path() != filepath.Join(homes, "config", "kiln", "autotune.toml") {
		t.Fatalf("default autotune store: %v", s.tune)
	}
	if s.pgo == nil || s.pgo.Path() != filepath.Join(homes, "config", "kiln", "pgo.toml") {
		t.Fatalf("default PGO table: %v", s.pgo)
	}
	paths, err := DefaultStorePaths()
	if err != nil || paths.PipelineCache != dc.Root() || paths.Autotune != s.tune.Path() || paths.PGO != s.pgo.Path() {
		t.Fatalf("DefaultStorePaths = %+v, %v; the host opened %s, %s, %s", paths, err, dc.Root(), s.tune.Path(), s.pgo.Path())
	}
	if s := openStores(Options{}, env("off"), log); s.cache != nil {
		t.Fatal("KILN_CACHE=off left the cache on")
	}
	if s := openStores(Options{NoCache: true, NoAutotune: true, NoPGO: true}, env(""), log); s.cache != nil || s.tune != nil || s.pgo != nil {
		t.Fatal("the No* options left a store on")
	}

	// A malformed table or store turns that store off and never stops the host.
	for _, f := range []string{paths.Autotune, paths.PGO} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("schema = [not toml"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncbuf.Buffer
	s = openStores(Options{}, env(""), hclog.New(&hclog.LoggerOptions{Output: &logs}))
	if s.tune != nil || s.pgo != nil || s.cache == nil {
		t.Fatalf("malformed files: autotune %v, pgo %v, cache %v", s.tune, s.pgo, s.cache)
	}
	if !strings.Contains(logs.String(), "running without autotune records") || !strings.Contains(logs.String(), "running without PGO routes") {
		t.Fatalf("the log does not say which stores are off:\n%s", logs.String())
	}
}

func TestPluginKilledMidCompileLeavesTheCacheValid(t *testing.T) {
	var logs syncbuf.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: &logs})
	c := testCache(t, cache.Options{})
	h := openWith(t, Options{Cache: c, Logger: logger, NoAutotune: true, NoPGO: true}, "fx-blob", "fx-compile-hang")
	ctx := context.Background()
	prog := fourBuffers(t)
	if _, err := h.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWork()}); err != nil {
		t.Fatal(err)
	}

	hang, err := h.Acquire(ctx, "fx-compile-hang")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := hang.Compile(ctx, prog, CompileOptions{})
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "fixture: compiling "+prog.Name) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin never reached Compile:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pidOf(t, h, "fx-compile-hang"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var crashed *CrashedError
	if err := <-done; !errors.As(err, &crashed) || crashed.Op != "compile" {
		t.Fatalf("compile on a plugin killed mid-compile: got %v, want *CrashedError during compile", err)
	}

	if r := verifyCache(t, c); r.Checked != 1 || r.Valid != 1 || len(r.Removed) != 0 {
		t.Fatalf("Verify after the kill = %+v, want the one earlier entry, valid, nothing corrupt", r)
	}
	if stray := strayFiles(t, c.Root()); len(stray) != 0 {
		t.Fatalf("files other than entries in the cache: %v", stray)
	}
	// A compile on a healthy backend still stores a good entry, and the earlier
	// one still hits.
	renamed := fourBuffers(t)
	renamed.Name = "test.four.renamed"
	res, err := h.Dispatch(ctx, renamed, Launch{Backend: "fx-blob", Work: fixtureWork()})
	if err != nil || res.Cache != CacheMiss {
		t.Fatalf("compile after the kill: %v, cache %v", err, res)
	}
	if r := verifyCache(t, c); r.Checked != 2 || r.Valid != 2 {
		t.Fatalf("Verify after a healthy compile = %+v, want two valid entries", r)
	}
	res, err = h.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWork()})
	if verdict, _ := blobReport(t, res); err != nil || res.Cache != CacheHit || verdict != 1 {
		t.Fatalf("the earlier entry: %v, cache %q, verdict %d", err, res.Cache, verdict)
	}
}

func TestCloseFlushesTheCache(t *testing.T) {
	// The flush at Close adds the host's counts to the cache's usage file,
	// which shows that Close flushed.
	c := testCache(t, cache.Options{})
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "fx-blob"), Cache: c, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-blob", Work: fixtureWork()}); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Usage(); u.Local.Writes != 0 {
		t.Fatalf("before Close: %+v, want nothing flushed", u)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Usage(); u.Local.Writes != 1 || u.Local.Misses[cache.MissAbsent] != 1 {
		t.Fatalf("after Close: %+v; the flush did not run", u)
	}
}

// routeTo makes a fresh route for op to the backend named name of h.
func routeTo(t *testing.T, h *Host, op, name string, medians map[string]int64) pgo.Route {
	t.Helper()
	r := pgo.Route{Backend: name, MeasuredAt: time.Now()}
	for _, l := range h.Live() {
		if l.ID == name {
			r.AdapterFingerprint, r.PluginVersion = l.AdapterFingerprint, l.PluginVersion
		}
	}
	for b, ns := range medians {
		r.Observations = append(r.Observations, pgo.Observation{Backend: b, MedianNs: ns})
	}
	return r
}

func TestDispatchFollowsAFreshHealthyPGORoute(t *testing.T) {
	table := pgo.New(filepath.Join(t.TempDir(), "pgo.toml"))
	h := openWith(t, Options{PGO: table, NoCache: true, NoAutotune: true}, "cpuref", "fx-zeros", "fx-blob")
	ctx := context.Background()
	prog := fourBuffers(t)
	launch := Launch{Work: fixtureWork()}
	preferred, err := h.AcquirePreferred(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := "fx-blob:0"
	if preferred.Name() == other {
		other = "fx-zeros:0"
	}
	dispatch := func() *Result {
		t.Helper()
		res, err := h.Dispatch(ctx, prog, launch)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := dispatch(); res.Backend != preferred.Name() || res.Selection != "preferred: no PGO route for test.four" {
		t.Fatalf("no route: ran on %s because %q", res.Backend, res.Selection)
	}

	route := routeTo(t, h, prog.Name, other, map[string]int64{other: 42000, preferred.Name(): 50000})
	if err := table.Set(prog.Name, route); err != nil {
		t.Fatal(err)
	}
	if res := dispatch(); res.Backend != other || res.Selection != "pgo route: fastest of 2, median 42.0 µs" {
		t.Fatalf("fresh route to %s: ran on %s because %q", other, res.Backend, res.Selection)
	}
	explicit := launch
	explicit.Backend = preferred.Name()
	if res, err := h.Dispatch(ctx, prog, explicit); err != nil || res.Backend != preferred.Name() || res.Selection != SelectedExplicitly {
		t.Fatalf("a named backend wins over the route: %v, %+v", err, res)
	}

	stale := route
	stale.PluginVersion = "9.9.9"
	if err := table.Set(prog.Name, stale); err != nil {
		t.Fatal(err)
	}
	if res := dispatch(); res.Backend != preferred.Name() || !strings.HasPrefix(res.Selection, "preferred: the PGO route for test.four is stale") {
		t.Fatalf("stale route: ran on %s because %q", res.Backend, res.Selection)
	}

	oracle := routeTo(t, h, prog.Name, "cpu-ref:0", map[string]int64{"cpu-ref:0": 1000})
	if err := table.Set(prog.Name, oracle); err != nil {
		t.Fatal(err)
	}
	if res := dispatch(); res.Backend != preferred.Name() || !strings.Contains(res.Selection, "reference oracle") {
		t.Fatalf("route to the oracle: ran on %s because %q", res.Backend, res.Selection)
	}

	// The routed backend's process dies: the route is fresh but unhealthy.
	if err := table.Set(prog.Name, route); err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(other, ":")
	proc := h.lookup(id).running()
	if err := syscall.Kill(proc.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, proc.pid)
	if !proc.runner.waitExit(10 * time.Second) {
		t.Fatal("the host never saw the plugin exit")
	}
	if res := dispatch(); res.Backend != preferred.Name() || !strings.Contains(res.Selection, "is not usable") {
		t.Fatalf("route to a dead backend: ran on %s because %q", res.Backend, res.Selection)
	}
}

func TestPGORoutingCanBeTurnedOff(t *testing.T) {
	h := openWith(t, Options{NoPGO: true, NoCache: true, NoAutotune: true}, "fx-zeros")
	res, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Work: fixtureWork()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Selection != "preferred: PGO routing is off" {
		t.Fatalf("Selection = %q", res.Selection)
	}
}

// fixtureAdapter is the autotune adapter id of the fixture's adapter: its
// backend id and device fingerprint (the fixture reports an empty identity).
var fixtureAdapter = autotune.DeviceAdapter("fx-blob", pluginapi.DeviceIdentity{}.Fingerprint())

func TestPipelineKeyCarriesThePluginVersion(t *testing.T) {
	prog := fourBuffers(t)
	key := func(version string) cache.Key {
		t.Helper()
		b := &Backend{p: &plugin{desc: &pluginapi.Description{ID: "fx-blob", Version: version}}}
		k, err := pipelineKey(b, prog, ir.SpecMap{}, prog.WorkgroupSize)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if k := key("1.0"); k.PluginVersion != "1.0" || k.Hex() == key("1.1").Hex() {
		t.Fatalf("builds 1.0 and 1.1 share a pipeline key: %+v", k)
	}
}

// A blob an older build of the plugin compiled is never sent to this build.
func TestAnOlderBuildsBlobIsNotSent(t *testing.T) {
	c := testCache(t, cache.Options{})
	h := openWith(t, Options{Cache: c, NoAutotune: true, NoPGO: true}, "fx-blob")
	prog := fourBuffers(t)
	b, err := h.Acquire(context.Background(), "fx-blob")
	if err != nil {
		t.Fatal(err)
	}
	older, err := pipelineKey(b, prog, ir.SpecMap{}, prog.WorkgroupSize)
	if err != nil {
		t.Fatal(err)
	}
	older.PluginVersion = "0.0.0-older"
	if err := c.Write(older, []byte("fx-blob compiled by an older build")); err != nil {
		t.Fatal(err)
	}
	res, err := h.Dispatch(context.Background(), prog, Launch{Backend: "fx-blob", Work: fixtureWork()})
	if err != nil {
		t.Fatal(err)
	}
	if verdict, _ := blobReport(t, res); res.Cache != CacheMiss || verdict != 0 {
		t.Fatalf("cache %q, plugin got blob verdict %d; want a miss with no blob sent", res.Cache, verdict)
	}
}

func TestAutotuneRecordSetsTheWorkgroupSize(t *testing.T) {
	store, err := autotune.Load(filepath.Join(t.TempDir(), "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	c := testCache(t, cache.Options{})
	h := openWith(t, Options{Autotune: store, Cache: c, NoPGO: true}, "fx-blob")
	ctx := context.Background()
	prog := fourBuffers(t)
	run := func(l Launch) (*Result, [3]uint32) {
		t.Helper()
		// A record sets the size of launches by Invocations only.
		l.Backend, l.Work = "fx-blob", fixtureWorkByInvocations()
		res, err := h.Dispatch(ctx, prog, l)
		if err != nil {
			t.Fatal(err)
		}
		_, wg := blobReport(t, res)
		return res, wg
	}

	if res, got := run(Launch{}); res.Tuned || got != ([3]uint32{}) || res.WorkgroupSize != prog.WorkgroupSize {
		t.Fatalf("no record: tuned %v, plugin got %v, ran with %v", res.Tuned, got, res.WorkgroupSize)
	}
	tuned := [3]uint32{32, 2, 1}
	if err := store.Put(autotune.KeyFor(prog, ir.SpecMap{}, fixtureAdapter), autotune.Record{WorkgroupSize: tuned}); err != nil {
		t.Fatal(err)
	}
	if res, got := run(Launch{}); !res.Tuned || got != tuned || res.WorkgroupSize != tuned {
		t.Fatalf("with a record: tuned %v, plugin got %v, ran with %v; want %v", res.Tuned, got, res.WorkgroupSize, tuned)
	}
	byGrid, err := h.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWork()})
	if err != nil {
		t.Fatal(err)
	}
	if _, got := blobReport(t, byGrid); byGrid.Tuned || got != ([3]uint32{}) || byGrid.WorkgroupSize != prog.WorkgroupSize {
		t.Fatalf("a launch by Grid with a record: tuned %v, plugin got %v, ran with %v; want the program's size", byGrid.Tuned, got, byGrid.WorkgroupSize)
	}
	override := Launch{CompileOptions: CompileOptions{WorkgroupSize: [3]uint32{16, 1, 1}}}
	if res, got := run(override); res.Tuned || got != override.WorkgroupSize {
		t.Fatalf("an explicit override must win: tuned %v, plugin got %v", res.Tuned, got)
	}
	// The tuned size is part of the pipeline's cache key: three sizes, three entries.
	if s, _ := c.Stats(ctx); s.Entries != 3 {
		t.Fatalf("cache holds %d entries, want one per workgroup size", s.Entries)
	}
	// A record the adapter cannot run (the fixture allows 256 invocations) is ignored.
	if err := store.Put(autotune.KeyFor(prog, ir.SpecMap{}, fixtureAdapter), autotune.Record{WorkgroupSize: [3]uint32{512, 1, 1}}); err != nil {
		t.Fatal(err)
	}
	if res, got := run(Launch{}); res.Tuned || got != ([3]uint32{}) {
		t.Fatalf("an oversized record: tuned %v, plugin got %v", res.Tuned, got)
	}
}

func TestPGOCandidateCertifies(t *testing.T) {
	h := openWith(t, Options{NoCache: true, NoAutotune: true, NoPGO: true}, "fx-zeros", "fx-blob")
	ctx := context.Background()
	var backends []pgo.Candidate
	for _, name := range []string{"fx-zeros", "fx-blob"} {
		b, err := h.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		pb := NewPGOCandidate(b)
		defer pb.Close(ctx)
		if pb.Identity() != b.Live() || pb.Identity().ID != name+":0" || pb.Identity().PluginVersion != "0.0.1-fixture" {
			t.Fatalf("Identity = %+v", pb.Identity())
		}
		backends = append(backends, pb)
	}
	table := pgo.New(filepath.Join(t.TempDir(), "pgo.toml"))
	w := fixtureWork()
	prog := fourBuffers(t)
	r, err := table.Certify(ctx, prog.Name, prog, w.Inputs, pgo.Config{Launch: pgo.Launch{Grid: w.Grid, OutputCounts: w.OutputCounts}}, backends)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Observations) != 2 || r.Observations[0].MedianNs <= 0 {
		t.Fatalf("route %+v", r)
	}
	if fresh, why := table.Fresh(prog.Name, h.Live()); why != "" || fresh.Backend != r.Backend {
		t.Fatalf("the certified route is not fresh against the live backends: %q", why)
	}
}
