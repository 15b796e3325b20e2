package host

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote/remotetest"
)

// machine is one host's own stores, as on a machine of its own.
type machine struct {
	cache  *cache.DiskCache
	tune   *autotune.Store
	routes *pgo.Table
}

func newMachine(t *testing.T) machine {
	t.Helper()
	dir := t.TempDir()
	tune, err := autotune.Load(filepath.Join(dir, "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	routes, err := pgo.Load(filepath.Join(dir, "pgo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return machine{cache: testCache(t, cache.Options{}), tune: tune, routes: routes}
}

func (m machine) options(url string) Options {
	return Options{Cache: m.cache, Autotune: m.tune, PGO: m.routes, Remote: url}
}

// Two hosts with separate local stores share one fleet tier: the second gets a
// cache hit for what the first compiled, the tuning record the first wrote and
// the route the first certified.
func TestTwoHostsShareThroughTheFleetTier(t *testing.T) {
	for _, fleet := range []struct {
		name string
		url  func(t testing.TB) string
	}{
		{"s3", func(t testing.TB) string { return remotetest.S3(t, "fleet") }},
		{"file", func(t testing.TB) string { return remotetest.Dir(t) }},
	} {
		t.Run(fleet.name, func(t *testing.T) {
			url := fleet.url(t)
			ctx := context.Background()
			prog := fourBuffers(t)
			tuned := [3]uint32{32, 2, 1}

			first := newMachine(t)
			h1 := openWith(t, first.options(url), "fx-blob", "fx-zeros")
			if h1.Remote() == nil || h1.Remote().URL() != url {
				t.Fatalf("the host has no fleet tier: %v", h1.Remote())
			}
			rec := autotune.Record{WorkgroupSize: tuned, RecordedAt: time.Now().UTC().Format(time.RFC3339Nano)}
			if err := first.tune.Put(autotune.KeyFor(prog, ir.SpecMap{}, fixtureAdapter), rec); err != nil {
				t.Fatal(err)
			}
			if _, err := first.tune.SaveIfDirty(ctx); err != nil {
				t.Fatal(err)
			}
			preferred, err := h1.AcquirePreferred(ctx)
			if err != nil {
				t.Fatal(err)
			}
			other := "fx-blob:0"
			if preferred.Name() == other {
				other = "fx-zeros:0"
			}
			if err := first.routes.Set(prog.Name, routeTo(t, h1, prog.Name, other, map[string]int64{other: 10, preferred.Name(): 20})); err != nil {
				t.Fatal(err)
			}
			if _, err := first.routes.Save(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := h1.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWorkByInvocations()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Cache != CacheMiss || !res.Tuned {
				t.Fatalf("first host: cache %q, tuned %v", res.Cache, res.Tuned)
			}
			if err := h1.Close(); err != nil {
				t.Fatal(err)
			}

			second := newMachine(t)
			h2 := openWith(t, second.options(url), "fx-blob", "fx-zeros")
			res, err = h2.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWorkByInvocations()})
			if err != nil {
				t.Fatal(err)
			}
			verdict, got := blobReport(t, res)
			if !res.Tuned || got != tuned {
				t.Fatalf("second host: tuned %v with %v; want the first host's record %v", res.Tuned, got, tuned)
			}
			if res.Cache != CacheRemoteHit || verdict != 1 {
				t.Fatalf("second host: cache %q, plugin got blob verdict %d; want a remote hit sent to the plugin", res.Cache, verdict)
			}
			res, err = h2.Dispatch(ctx, prog, Launch{Work: fixtureWorkByInvocations()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Backend != other || !strings.HasPrefix(res.Selection, "pgo route") {
				t.Fatalf("second host ran on %s because %q; the first host's route names %s", res.Backend, res.Selection, other)
			}
			res, err = h2.Dispatch(ctx, prog, Launch{Backend: "fx-blob", Work: fixtureWorkByInvocations()})
			if err != nil || res.Cache != CacheHit {
				t.Fatalf("second host, again: %v, cache %q; want a local hit", err, res.Cache)
			}
			if err := h2.Close(); err != nil {
				t.Fatal(err)
			}
			u, err := second.cache.Usage()
			if err != nil || u.Remote.Hits != 1 || u.Local.Hits == 0 || u.Remote.Errors != 0 {
				t.Fatalf("second host's usage: %+v, %v", u, err)
			}
		})
	}
}

// A fleet tier that hangs or refuses connections never fails a dispatch: the
// first lookup costs its deadline, and while the remote is down no dispatch
// touches it.
func TestARemoteOutageNeverFailsADispatch(t *testing.T) {
	hanging := remotetest.NewHanging(t)
	for _, outage := range []struct {
		name, endpoint string
		connections    func() int64
	}{
		{"hanging", hanging.Endpoint, hanging.Connections},
		{"refusing", remotetest.Refusing(t), func() int64 { return 0 }},
	} {
		t.Run(outage.name, func(t *testing.T) {
			m := newMachine(t)
			url := remotetest.S3URL(outage.endpoint, "", "kiln_timeout=300ms", "kiln_flush_timeout=2s")
			h := openWith(t, m.options(url), "fx-blob")
			ctx := context.Background()
			var after int64
			for i := 0; i < 4; i++ {
				prog := fourBuffers(t)
				prog.Name = "test.outage." + string(rune('a'+i))
				res, err := h.Dispatch(ctx, prog, Launch{Work: fixtureWork()})
				if err != nil {
					t.Fatalf("dispatch %d with the remote out: %v", i, err)
				}
				if res.Cache != CacheMiss {
					t.Fatalf("dispatch %d: cache %q, want a miss", i, res.Cache)
				}
				if i == 0 {
					after = outage.connections()
				}
			}
			if got := outage.connections(); got != after {
				t.Fatalf("%d connections after the first dispatch, want none while the remote is down", got-after)
			}
			if u := h.Remote().Usage(); u.Errors != 1 || u.Hits != 0 {
				t.Fatalf("remote usage %+v, want the one failure counted", u)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
