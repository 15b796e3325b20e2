package remote

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote/remotetest"
)

// fleets are the two kinds of remote every test runs against: a real S3
// protocol server on loopback and a shared directory.
var fleets = []struct {
	name string
	url  func(t testing.TB, extra ...string) string
}{
	{"s3", func(t testing.TB, extra ...string) string { return remotetest.S3(t, "team/a", extra...) }},
	{"file", func(t testing.TB, extra ...string) string { return remotetest.Dir(t, extra...) }},
}

// onEachFleet runs test as a subtest on each of fleets, with the fleet's URL.
func onEachFleet(t *testing.T, test func(t *testing.T, url string)) {
	for _, f := range fleets {
		t.Run(f.name, func(t *testing.T) { test(t, f.url(t)) })
	}
}

func open(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// bucket is the remote's bucket, for planting objects.
func bucket(t testing.TB, s *Store) *blob.Bucket { return s.bucket }

func localCache(t testing.TB) *cache.DiskCache {
	t.Helper()
	c, err := cache.OpenOptions(filepath.Join(t.TempDir(), "pipelines"), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func key(n int) cache.Key {
	return cache.Key{ProgramDigest: [32]byte{byte(n), byte(n >> 8)}, WorkgroupSize: [3]uint32{64, 1, 1},
		BackendID: "vulkan", PluginVersion: "1.0.0", DeviceFingerprint: "00112233445566778899aabbccddeeff"}
}

func get(t testing.TB, c *Cache, k cache.Key) cache.Lookup {
	t.Helper()
	l, err := c.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestOpenParsesTheURL(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, remotetest.S3URL("http://127.0.0.1:1", "a/b", "kiln_timeout=250ms", "kiln_flush_timeout=2s"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Timeout() != 250*time.Millisecond || s.opts.FlushTimeout != 2*time.Second {
		t.Fatalf("timeouts %v, %v", s.Timeout(), s.opts.FlushTimeout)
	}
	for _, bad := range []string{
		"not a url",
		"nosuch://bucket",
		remotetest.S3URL("http://127.0.0.1:1", "", "kiln_timeout=soon"),
		remotetest.S3URL("http://127.0.0.1:1", "", "kiln_timeout=-1s"),
		remotetest.S3URL("http://127.0.0.1:1", "p", "prefix=q/"),
	} {
		if _, err := Open(ctx, bad, Options{}); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("Open(%q) = %v, want an error with a Fix", bad, err)
		}
	}
}

// Two machines with separate local caches: the second gets a hit for what the
// first compiled, keeps it locally, and the next read is local.
func TestASecondMachineHitsWhatTheFirstCompiled(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		first := NewCache(localCache(t), open(t, url))
		second := NewCache(localCache(t), open(t, url))
		k := key(1)
		if err := first.Write(k, []byte("compiled code")); err != nil {
			t.Fatal(err)
		}
		if err := first.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if l := get(t, second, k); !l.Hit() || !l.Remote || string(l.Payload) != "compiled code" {
			t.Fatalf("second machine: %+v, want a remote hit", l)
		}
		if l := get(t, second, k); !l.Hit() || l.Remote {
			t.Fatalf("second read: %+v, want a local hit", l)
		}
		if l := get(t, second, key(2)); l.Hit() || l.Miss != cache.MissAbsent {
			t.Fatalf("unknown key: %+v", l)
		}
		u := second.Remote().Usage()
		if u.Hits != 1 || u.Misses[cache.MissAbsent] != 1 || u.Errors != 0 || first.Remote().Usage().Writes != 1 {
			t.Fatalf("usage: second %+v, first %+v", u, first.Remote().Usage())
		}
		// A remote miss is asked once per key per process.
		get(t, second, key(2))
		if n := second.Remote().Usage().MissCount(); n != 1 {
			t.Fatalf("%d remote misses after asking twice, want 1", n)
		}
		if err := second.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		usage, err := second.Local().Usage()
		if err != nil || usage.Remote.Hits != 1 || usage.Local.Hits != 1 {
			t.Fatalf("usage file: %+v, %v", usage, err)
		}
	})
}

// A remote object is only ever a hit for its exact key: corrupt, truncated,
// foreign and oversize objects are misses, counted by reason and never loaded.
func TestBadRemoteObjectsAreMisses(t *testing.T) {
	for _, f := range fleets {
		t.Run(f.name, func(t *testing.T) {
			s := open(t, f.url(t))
			c := NewCache(localCache(t), s)
			k := key(7)
			good, err := cache.EncodeEntry(k, bytes.Repeat([]byte("p"), 100))
			if err != nil {
				t.Fatal(err)
			}
			foreign, _ := cache.EncodeEntry(key(8), []byte("another key's code"))
			flipped := bytes.Clone(good)
			flipped[len(flipped)-1] ^= 1
			cases := []struct {
				name string
				data []byte
				why  cache.MissReason
			}{
				{"corrupt", flipped, cache.MissCorrupt},
				{"truncated", good[:len(good)-10], cache.MissTruncated},
				{"foreign", foreign, cache.MissForeignKey},
				{"garbage", []byte("<html><body>an error page from a proxy, not an entry</body></html>"), cache.MissCorrupt},
			}
			if f.name == "file" {
				cases = append(cases, struct {
					name string
					data []byte
					why  cache.MissReason
				}{"oversize", make([]byte, cache.MaxEntryFileBytes+1), cache.MissOversize})
			}
			for _, bad := range cases {
				if err := bucket(t, s).WriteAll(context.Background(), entryName(k.Hex()), bad.data, nil); err != nil {
					t.Fatal(err)
				}
				before := s.Usage().Misses[bad.why]
				c.absent = map[string]bool{}
				if l := get(t, c, k); l.Hit() || l.Payload != nil {
					t.Fatalf("%s: %+v, want a miss", bad.name, l)
				}
				if got := s.Usage().Misses[bad.why]; got != before+1 {
					t.Fatalf("%s: %d %s misses, want %d", bad.name, got, bad.why, before+1)
				}
				if _, err := c.Local().Get(k); err != nil {
					t.Fatal(err)
				}
				if ok, _ := bucket(t, s).Exists(context.Background(), entryName(k.Hex())); ok {
					t.Fatalf("%s: the bad object was not deleted", bad.name)
				}
			}
			if n := s.Usage().Hits; n != 0 {
				t.Fatalf("%d hits from bad objects", n)
			}
			// After the bad objects are gone, an upload replaces them.
			if err := c.Write(k, []byte("good")); err != nil {
				t.Fatal(err)
			}
			c.Flush(context.Background())
			if got, why := s.GetEntry(context.Background(), k); why != cache.MissNone || string(got) != "good" {
				t.Fatalf("after the upload: %q, %s", got, why)
			}
		})
	}
}

func TestEntriesAreImmutable(t *testing.T) {
	s := open(t, remotetest.S3(t, ""))
	k := key(3)
	for _, payload := range []string{"first", "second"} {
		entry, _ := cache.EncodeEntry(k, []byte(payload))
		if err := s.PutEntry(context.Background(), k, entry); err != nil {
			t.Fatal(err)
		}
	}
	if got, why := s.GetEntry(context.Background(), k); why != cache.MissNone || string(got) != "first" {
		t.Fatalf("after two uploads: %q, %s; want the first kept", got, why)
	}
}

func tuning(n int, fp string, at time.Time) TuningRecord {
	k := autotune.NewKey(autotuneSpec(n), "")
	return TuningRecord{Key: k.Hex(), BackendID: "vulkan", Fingerprint: fp, MeasuredAt: at,
		Record: autotune.Record{WorkgroupSize: [3]uint32{uint32(64 + n), 1, 1}, Unroll: uint32(n), RecordedAt: at.Format(time.RFC3339Nano)}}
}

func TestTuningRecordsNewestMeasurementWins(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		const fp = "5f0c0000000000000000000000000001"
		now := time.Now().UTC()
		a, b := open(t, url), open(t, url)
		newer, older := tuning(1, fp, now), tuning(1, fp, now.Add(-time.Hour))
		newer.Record.Unroll, older.Record.Unroll = 8, 2
		// The newer measurement is published first: the older one, arriving
		// late, must not win.
		if err := a.PublishTuning(context.Background(), newer); err != nil {
			t.Fatal(err)
		}
		if err := b.PublishTuning(context.Background(), older); err != nil {
			t.Fatal(err)
		}
		got, ok := open(t, url).Tuning(context.Background(), "vulkan", fp, newer.Key)
		if !ok || got.Record.Unroll != 8 || !got.MeasuredAt.Equal(newer.MeasuredAt) {
			t.Fatalf("Tuning = %+v, %v; want the newer measurement", got, ok)
		}
		if _, ok := open(t, url).Tuning(context.Background(), "vulkan", "ffff0000000000000000000000000000", newer.Key); ok {
			t.Fatal("a record was found for another device")
		}
		if _, ok := open(t, url).Tuning(context.Background(), "cuda", fp, newer.Key); ok {
			t.Fatal("a record was found for another backend")
		}
	})
}

func TestRoutesFollowTheDeviceNotItsIndex(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		const fp = "5f0c0000000000000000000000000002"
		at := time.Now().UTC().Truncate(time.Second)
		route := pgo.Route{Backend: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0", MeasuredAt: at,
			Observations: []pgo.Observation{{Backend: "vulkan:0", MedianNs: 10}, {Backend: "cuda:0", MedianNs: 20}}}
		if err := open(t, url).PublishRoute(context.Background(), "kiln.op", route); err != nil {
			t.Fatal(err)
		}
		older := route
		older.Backend, older.MeasuredAt = "vulkan:0", at.Add(-time.Hour)
		older.Observations = []pgo.Observation{{Backend: "vulkan:0", MedianNs: 99}}
		if err := open(t, url).PublishRoute(context.Background(), "kiln.op", older); err != nil {
			t.Fatal(err)
		}
		live := []pgo.Live{{ID: "cuda:0", AdapterFingerprint: "other", PluginVersion: "2"}, {ID: "vulkan:1", AdapterFingerprint: fp, PluginVersion: "1.0"}}
		got, ok := open(t, url).Route(context.Background(), "kiln.op", live)
		if !ok || got.Backend != "vulkan:1" || got.Observations[0].Backend != "vulkan:1" || !got.MeasuredAt.Equal(at) || got.Observations[0].MedianNs != 10 {
			t.Fatalf("Route = %+v, %v; want the newest route renamed to vulkan:1", got, ok)
		}
		live[1].PluginVersion = "1.1"
		if got, ok := open(t, url).Route(context.Background(), "kiln.op", live); ok {
			t.Fatalf("a route measured with another plugin version was used: %+v", got)
		}
		if _, ok := open(t, url).Route(context.Background(), "kiln.other", live); ok {
			t.Fatal("a route was found for another op")
		}
	})
}

func TestPushSeedsAnotherMachineThroughPull(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		ctx := context.Background()
		const fp = "5f0c0000000000000000000000000003"
		dir := t.TempDir()
		// The tuned machine.
		localA := localCache(t)
		for i := 0; i < 5; i++ {
			if err := localA.Write(key(i), []byte(fmt.Sprint("code ", i))); err != nil {
				t.Fatal(err)
			}
		}
		tuneA, _ := autotune.Load(filepath.Join(dir, "a", "autotune.toml"))
		rec := autotune.Record{WorkgroupSize: [3]uint32{256, 1, 1}, Unroll: 4, RecordedAt: time.Now().UTC().Format(time.RFC3339)}
		k := autotune.NewKey(autotuneSpec(1), autotune.DeviceAdapter("vulkan", fp))
		tuneA.Put(k, rec)
		tuneA.Put(autotune.NewKey(autotuneSpec(2), "vulkan:0"), rec)
		routesA := pgo.New(filepath.Join(dir, "a", "pgo.toml"))
		routesA.Set("kiln.op", pgo.Route{Backend: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0", MeasuredAt: time.Now().UTC().Truncate(time.Second)})
		pushed, err := open(t, url).Push(ctx, localA, tuneA, routesA)
		if err != nil || pushed.Pipelines != 5 || pushed.Records != 1 || pushed.Routes != 1 || len(pushed.Skipped) != 1 {
			t.Fatalf("Push = %+v, %v", pushed, err)
		}
		again, err := open(t, url).Push(ctx, localA, nil, nil)
		if err != nil || again.Pipelines != 0 || again.PipelinesPresent != 5 {
			t.Fatalf("second Push = %+v, %v", again, err)
		}
		// A fresh machine with the same GPU at another index.
		localB := localCache(t)
		localB.Write(key(0), []byte("code 0"))
		tuneB, _ := autotune.Load(filepath.Join(dir, "b", "autotune.toml"))
		routesB, _ := pgo.Load(filepath.Join(dir, "b", "pgo.toml"))
		live := []pgo.Live{{ID: "vulkan:2", AdapterFingerprint: fp, PluginVersion: "1.0"}}
		pulled, err := open(t, url).Pull(ctx, localB, tuneB, routesB, live)
		if err != nil || pulled.Pipelines != 4 || pulled.PipelinesPresent != 1 || pulled.Records != 1 || pulled.Routes != 1 {
			t.Fatalf("Pull = %+v, %v", pulled, err)
		}
		for i := 0; i < 5; i++ {
			if l, _ := localB.Get(key(i)); !l.Hit() || string(l.Payload) != fmt.Sprint("code ", i) {
				t.Fatalf("entry %d after Pull: %+v", i, l)
			}
		}
		saved, err := autotune.Load(tuneB.Path())
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := saved.Get(k); !ok || got != rec {
			t.Fatalf("record after Pull: %+v, %v", got, ok)
		}
		table, err := pgo.Load(routesB.Path())
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := table.Route("kiln.op"); !ok || r.Backend != "vulkan:2" || r.StaleReason(live) != "" {
			t.Fatalf("route after Pull: %+v, %v", r, ok)
		}
		// Nothing newer: a second pull takes nothing.
		if pulled, err := open(t, url).Pull(ctx, localB, tuneB, routesB, live); err != nil || pulled.Records+pulled.Routes+pulled.Pipelines != 0 {
			t.Fatalf("second Pull = %+v, %v", pulled, err)
		}
	})
}

func TestCheckReportsReachableWritableAndLatency(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		r := open(t, url).Check(context.Background())
		if !r.Reachable || !r.Writable || r.WriteLatency <= 0 || r.ReadLatency <= 0 || r.Error != "" {
			t.Fatalf("Check = %+v", r)
		}
	})
	r := open(t, remotetest.S3URL(remotetest.Refusing(t), "", "kiln_timeout=2s")).Check(context.Background())
	if r.Reachable || r.Writable || !strings.Contains(r.Error, "not reachable") || !strings.Contains(r.Error, "Fix:") {
		t.Fatalf("Check of a refusing endpoint = %+v", r)
	}
}

// A tuning record's params and a route's size classes survive the fleet tier.
func TestParamsAndClassesCrossTheFleet(t *testing.T) {
	onEachFleet(t, func(t *testing.T, url string) {
		const fp = "5f0c0000000000000000000000000003"
		at := time.Now().UTC().Truncate(time.Second)
		rec := tuning(7, fp, at)
		rec.Record.Params = "bm=8 bn=4 tk=16"
		if err := open(t, url).PublishTuning(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		got, ok := open(t, url).Tuning(context.Background(), "vulkan", fp, rec.Key)
		if !ok || got.Record.Params != rec.Record.Params {
			t.Fatalf("Tuning = %+v, %v; want params %q", got, ok, rec.Record.Params)
		}
		classes := []pgo.ClassRoute{
			{Bytes: 4096, Backend: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0", Observations: []pgo.Observation{{Backend: "vulkan:0", MedianNs: 5}}},
			{Bytes: 1 << 24, Backend: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0", Observations: []pgo.Observation{{Backend: "vulkan:0", MedianNs: 900}}},
		}
		route := pgo.Route{Backend: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0", MeasuredAt: at,
			Observations: classes[1].Observations, Classes: classes}
		if err := open(t, url).PublishRoute(context.Background(), "kiln.sized", route); err != nil {
			t.Fatal(err)
		}
		back, ok := open(t, url).Route(context.Background(), "kiln.sized", []pgo.Live{{ID: "vulkan:0", AdapterFingerprint: fp, PluginVersion: "1.0"}})
		if !ok || len(back.Classes) != 2 || back.Classes[0].Bytes != 4096 || back.Classes[1].Observations[0].MedianNs != 900 {
			t.Fatalf("Route = %+v, %v; want both size classes", back, ok)
		}
	})
}
