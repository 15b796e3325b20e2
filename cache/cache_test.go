package cache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/xdg"
)

func openTest(t *testing.T, opts Options) *DiskCache {
	t.Helper()
	c, err := OpenOptions(filepath.Join(t.TempDir(), "pipelines"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func keyN(n int) Key {
	k := sampleKey()
	k.ProgramDigest[0], k.ProgramDigest[1] = byte(n), byte(n>>8)
	return k
}

func mustWrite(t *testing.T, c *DiskCache, k Key, payload []byte) {
	t.Helper()
	if err := c.Write(k, payload); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, c *DiskCache, k Key) ([]byte, bool) {
	t.Helper()
	p, ok, err := c.Read(k)
	if err != nil {
		t.Fatal(err)
	}
	return p, ok
}

func stats(t *testing.T, c *DiskCache) Stats {
	t.Helper()
	s, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func setAge(t *testing.T, path string, age time.Duration) time.Time {
	t.Helper()
	when := time.Now().Add(-age)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime()
}

func TestDefaultRoot(t *testing.T) {
	env := xdg.Env{GOOS: "linux", Getenv: func(k string) string {
		return map[string]string{"XDG_CACHE_HOME": "/xdg/cache", "HOME": "/home/u"}[k]
	}}
	if got, err := defaultRoot(env); err != nil || got != filepath.Join("/xdg/cache", "kiln", "pipelines") {
		t.Fatalf("defaultRoot = %q, %v", got, err)
	}
	env.Getenv = func(k string) string { return map[string]string{"HOME": "/Users/u"}[k] }
	env.GOOS = "darwin"
	if got, err := defaultRoot(env); err != nil || got != filepath.Join("/Users/u", "Library", "Caches", "kiln", "pipelines") {
		t.Fatalf("defaultRoot on macOS = %q, %v", got, err)
	}
	env.Getenv = func(string) string { return "" }
	if _, err := defaultRoot(env); err == nil {
		t.Fatal("defaultRoot without any variable succeeded")
	}
}

func TestOpenCreatesRootAndPathForShards(t *testing.T) {
	c := openTest(t, Options{})
	if st, err := os.Stat(c.Root()); err != nil || !st.IsDir() {
		t.Fatalf("root not created: %v", err)
	}
	k := sampleKey()
	h := k.Hex()
	if len(h) != 64 {
		t.Fatalf("Hex is %d digits", len(h))
	}
	if want := filepath.Join(c.Root(), h[:2], h+".bin"); c.PathFor(k) != want {
		t.Fatalf("PathFor = %s, want %s", c.PathFor(k), want)
	}
}

func TestWriteThenReadRoundTrips(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	if _, ok := mustRead(t, c, k); ok {
		t.Fatal("hit on an empty cache")
	}
	mustWrite(t, c, k, []byte("blob-1"))
	if p, ok := mustRead(t, c, k); !ok || string(p) != "blob-1" {
		t.Fatalf("Read = %q, %v", p, ok)
	}
	mustWrite(t, c, k, []byte("blob-2"))
	if p, ok := mustRead(t, c, k); !ok || string(p) != "blob-2" {
		t.Fatalf("Read after overwrite = %q, %v", p, ok)
	}
	mustWrite(t, c, keyN(7), nil)
	if p, ok := mustRead(t, c, keyN(7)); !ok || len(p) != 0 {
		t.Fatalf("empty payload: %q, %v", p, ok)
	}
	s := stats(t, c)
	if s.Entries != 2 || s.Hits != 3 || s.Misses != 1 || s.Corrupt != 0 {
		t.Fatalf("Stats = %+v", s)
	}
	if s.Bytes != fileSize(t, c.PathFor(k))+fileSize(t, c.PathFor(keyN(7))) {
		t.Fatalf("Stats.Bytes = %d", s.Bytes)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestOversizeWriteRejectedBeforeWriting(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	err := c.Write(k, make([]byte, MaxEntryBytes+1))
	if err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v, want a size error with a Fix", err)
	}
	if _, err := os.Stat(filepath.Dir(c.PathFor(k))); !os.IsNotExist(err) {
		t.Fatalf("the shard directory was created: %v", err)
	}
	mustWrite(t, c, k, make([]byte, MaxEntryBytes))
	if p, ok := mustRead(t, c, k); !ok || len(p) != MaxEntryBytes {
		t.Fatalf("a payload of exactly MaxEntryBytes did not round-trip: %d, %v", len(p), ok)
	}
}

func TestOverlongKeyRejected(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	k.DeviceFingerprint = strings.Repeat("f", maxKeyBytes)
	if err := c.Write(k, []byte("x")); err == nil {
		t.Fatal("a key over maxKeyBytes was written")
	}
}

func TestReadOverTheBoundIsAnError(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	mustWrite(t, c, k, []byte("x"))
	if err := os.Truncate(c.PathFor(k), maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	_, ok, err := c.Read(k)
	if ok || err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("Read = %v, %v; want an error with a Fix", ok, err)
	}
	r, err := c.Verify(context.Background())
	if err != nil || len(r.Removed) != 1 {
		t.Fatalf("Verify = %+v, %v; want the oversize file removed", r, err)
	}
}

// corruptions damage an entry file in every region of its layout.
func corruptions(t *testing.T, good []byte, foreign []byte) map[string][]byte {
	keyLen := int(good[12])
	flip := func(off int) []byte {
		b := append([]byte(nil), good...)
		b[off] ^= 0x10
		return b
	}
	return map[string][]byte{
		"empty":               {},
		"truncated header":    good[:20],
		"header only":         good[:headerSize],
		"truncated key":       good[:headerSize+keyLen/2],
		"truncated payload":   good[:len(good)-1],
		"extra byte":          append(append([]byte(nil), good...), 0),
		"flipped magic":       flip(0),
		"flipped version":     flip(8),
		"flipped key length":  flip(12),
		"flipped length":      flip(16),
		"flipped checksum":    flip(24),
		"flipped key":         flip(headerSize + 5),
		"flipped payload":     flip(len(good) - 3),
		"foreign text":        []byte("this is not a pipeline cache entry at all, just some text"),
		"another key's entry": foreign,
	}
}

func TestCorruptEntriesAreMissesRemovedAndCounted(t *testing.T) {
	c := openTest(t, Options{})
	k, other := sampleKey(), keyN(99)
	mustWrite(t, c, k, bytes.Repeat([]byte("payload!"), 100))
	mustWrite(t, c, other, []byte("other"))
	good, err := os.ReadFile(c.PathFor(k))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(c.PathFor(other))
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(0)
	for name, bad := range corruptions(t, good, foreign) {
		n++
		if err := os.WriteFile(c.PathFor(k), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		p, ok, err := c.Read(k)
		if ok || err != nil || p != nil {
			t.Fatalf("%s: Read = %q, %v, %v; want a plain miss", name, p, ok, err)
		}
		if _, err := os.Stat(c.PathFor(k)); !os.IsNotExist(err) {
			t.Fatalf("%s: corrupt entry not removed", name)
		}
		if s := stats(t, c); s.Corrupt != n || s.Misses != n {
			t.Fatalf("%s: Stats = %+v, want %d corrupt misses", name, s, n)
		}
	}
	if p, ok := mustRead(t, c, other); !ok || string(p) != "other" {
		t.Fatal("the other entry was disturbed")
	}
}

func TestHitRefreshesMtimeAtMostHourly(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	mustWrite(t, c, k, []byte("x"))
	path := c.PathFor(k)

	recent := setAge(t, path, 30*time.Minute)
	mustRead(t, c, k)
	if st, _ := os.Stat(path); !st.ModTime().Equal(recent) {
		t.Fatalf("a hit on a 30-minute-old entry rewrote its mtime: %v → %v", recent, st.ModTime())
	}
	old := setAge(t, path, 2*time.Hour)
	mustRead(t, c, k)
	if st, _ := os.Stat(path); st.ModTime().Sub(old) < time.Hour {
		t.Fatalf("a hit on a 2-hour-old entry did not refresh its mtime: %v → %v", old, st.ModTime())
	}
}

func TestTrimRemovesLeastRecentlyUsedFirst(t *testing.T) {
	c := openTest(t, Options{})
	var size int64
	for i := 0; i < 5; i++ {
		mustWrite(t, c, keyN(i), bytes.Repeat([]byte{byte(i)}, 1000))
		// Entry i was last used 10-i hours ago: entry 0 is the oldest.
		setAge(t, c.PathFor(keyN(i)), time.Duration(10-i)*time.Hour)
		size = fileSize(t, c.PathFor(keyN(i)))
	}
	// A hit on the oldest entry makes it the most recently used.
	mustRead(t, c, keyN(0))
	r, err := c.Trim(context.Background(), 3*size)
	if err != nil {
		t.Fatal(err)
	}
	if r.Removed != 2 || r.Entries != 3 || r.Bytes != 3*size || r.Freed != 2*size {
		t.Fatalf("Trim = %+v", r)
	}
	for i, want := range []bool{true, false, false, true, true} {
		if _, ok := mustRead(t, c, keyN(i)); ok != want {
			t.Errorf("entry %d present = %v, want %v", i, ok, want)
		}
	}
	if _, err := c.Trim(context.Background(), -1); err == nil {
		t.Fatal("Trim to a negative size succeeded")
	}
}

func TestFlushSyncsAndEnforcesTheCap(t *testing.T) {
	c := openTest(t, Options{MaxBytes: 10_000})
	for i := 0; i < 20; i++ {
		mustWrite(t, c, keyN(i), make([]byte, 1000))
	}
	if len(c.pending) != 20 {
		t.Fatalf("%d pending writes, want 20", len(c.pending))
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(c.pending) != 0 {
		t.Fatalf("%d writes still pending after Flush", len(c.pending))
	}
	if s := stats(t, c); s.Bytes > 10_000 || s.Entries == 0 {
		t.Fatalf("after Flush: %+v, want at most 10000 bytes", s)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), trimStamp)); err != nil {
		t.Fatalf("trim time not recorded: %v", err)
	}
}

func TestFlushSkipsRemovedEntriesAndTrimsOnlyWhenDue(t *testing.T) {
	c := openTest(t, Options{MaxBytes: 1 << 20})
	if _, err := c.Trim(context.Background(), c.MaxBytes()); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, keyN(1), []byte("a"))
	mustWrite(t, c, keyN(2), []byte("b"))
	if err := os.Remove(c.PathFor(keyN(1))); err != nil {
		t.Fatal(err)
	}
	stamp := setAge(t, filepath.Join(c.Root(), trimStamp), time.Minute)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush with a removed entry: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(c.Root(), trimStamp)); !st.ModTime().Equal(stamp) {
		t.Fatal("Flush trimmed although the last trim was a minute ago and little was written")
	}
	setAge(t, filepath.Join(c.Root(), trimStamp), 2*time.Hour)
	mustWrite(t, c, keyN(3), []byte("c"))
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(c.Root(), trimStamp)); time.Since(st.ModTime()) > time.Hour {
		t.Fatal("Flush did not trim although the last trim was two hours ago")
	}
}

func TestMaxBytesFromOptionsAndEnvironment(t *testing.T) {
	getenv := func(v string) func(string) string {
		return func(k string) string {
			if k == MaxBytesEnv {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		opts Options
		want int64
	}{
		{Options{}, DefaultMaxBytes},
		{Options{Getenv: getenv("")}, DefaultMaxBytes},
		{Options{Getenv: getenv("4096")}, 4096},
		{Options{Getenv: getenv("512MiB")}, 512 << 20},
		{Options{Getenv: getenv("2GiB")}, 2 << 30},
		{Options{Getenv: getenv("64 KiB")}, 64 << 10},
		{Options{MaxBytes: 100, Getenv: getenv("512MiB")}, 100},
	}
	for _, tc := range cases {
		c := openTest(t, tc.opts)
		if c.MaxBytes() != tc.want {
			t.Errorf("%+v: MaxBytes = %d, want %d", tc.opts, c.MaxBytes(), tc.want)
		}
	}
	for _, bad := range []string{"lots", "-1", "0", "1.5GiB", "1TB", "99999999999GiB"} {
		_, err := OpenOptions(t.TempDir(), Options{Getenv: getenv(bad)})
		if err == nil || !strings.Contains(err.Error(), MaxBytesEnv) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s=%q: err = %v, want an error naming it with a Fix", MaxBytesEnv, bad, err)
		}
	}
	if _, err := OpenOptions(t.TempDir(), Options{MaxBytes: -5}); err == nil {
		t.Error("a negative Options.MaxBytes was accepted")
	}
}

func TestStatsIgnoresUnknownFiles(t *testing.T) {
	c := openTest(t, Options{})
	mustWrite(t, c, sampleKey(), []byte("x"))
	shard := filepath.Dir(c.PathFor(sampleKey()))
	for _, p := range []string{filepath.Join(c.Root(), "README"), filepath.Join(shard, "notes.txt"), filepath.Join(c.Root(), "zz", "x.bin")} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s := stats(t, c); s.Entries != 1 {
		t.Fatalf("Stats = %+v, want 1 entry", s)
	}
	n, err := c.Clear(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Clear = %d, %v", n, err)
	}
	for _, p := range []string{filepath.Join(c.Root(), "README"), filepath.Join(shard, "notes.txt")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Clear removed the unknown file %s", p)
		}
	}
}

func TestVerifyRemovesCorruptEntriesAndStaleTemps(t *testing.T) {
	c := openTest(t, Options{})
	for i := 0; i < 4; i++ {
		mustWrite(t, c, keyN(i), []byte(fmt.Sprint("blob ", i)))
	}
	// Entry 1: bit flip. Entry 2: a valid entry moved under another key's name.
	data, _ := os.ReadFile(c.PathFor(keyN(1)))
	data[len(data)-1] ^= 1
	os.WriteFile(c.PathFor(keyN(1)), data, 0o644)
	moved := c.PathFor(keyN(50))
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(c.PathFor(keyN(2)), moved); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Dir(c.PathFor(keyN(0)))
	staleTemp := filepath.Join(shard, ".x.bin.tmp-1")
	freshTemp := filepath.Join(shard, ".y.bin.tmp-2")
	os.WriteFile(staleTemp, []byte("partial"), 0o644)
	os.WriteFile(freshTemp, []byte("partial"), 0o644)
	setAge(t, staleTemp, 2*time.Hour)

	r, err := c.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Checked != 4 || r.Valid != 2 || len(r.Removed) != 2 || r.TempsRemoved != 1 {
		t.Fatalf("Verify = %+v", r)
	}
	for _, p := range r.Removed {
		if p.Reason == "" || (p.Path != c.PathFor(keyN(1)) && p.Path != moved) {
			t.Errorf("unexpected removal %+v", p)
		}
	}
	if _, err := os.Stat(freshTemp); err != nil {
		t.Error("Verify removed a fresh temporary file a live writer may still rename")
	}
	if s := stats(t, c); s.Entries != 2 || s.Corrupt != 2 {
		t.Fatalf("Stats after Verify = %+v", s)
	}
}

func TestClearRemovesEverything(t *testing.T) {
	c := openTest(t, Options{})
	for i := 0; i < 10; i++ {
		mustWrite(t, c, keyN(i), []byte("x"))
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := c.Clear(context.Background())
	if err != nil || n != 10 {
		t.Fatalf("Clear = %d, %v", n, err)
	}
	left, _ := os.ReadDir(c.Root())
	if len(left) != 0 {
		t.Fatalf("root still holds %d files", len(left))
	}
	mustWrite(t, c, keyN(1), []byte("y"))
	if p, ok := mustRead(t, c, keyN(1)); !ok || string(p) != "y" {
		t.Fatal("the cache does not work after Clear")
	}
}

func TestInvalidateImpacted(t *testing.T) {
	c := openTest(t, Options{})
	type entry struct {
		digest byte
		fp     string
		flags  FeatureFlags
	}
	entries := []entry{
		{1, "dev-a", FeatureSubgroupOps},
		{2, "dev-a", 0},
		{3, "dev-a", FeatureF16},
		{1, "dev-b", FeatureSubgroupOps},
	}
	keyOf := func(e entry) Key {
		k := sampleKey()
		k.ProgramDigest = [32]byte{e.digest}
		k.DeviceFingerprint = e.fp
		k.Features = e.flags
		return k
	}
	cases := []struct {
		name    string
		mask    FeatureFlags
		digests [][32]byte
		fp      string
		removed []bool
	}{
		{"programs on one device", 0, [][32]byte{{1}, {2}}, "dev-a", []bool{true, true, false, false}},
		{"a feature on one device", FeatureSubgroupOps | FeatureBF16, nil, "dev-a", []bool{true, false, false, false}},
		{"a feature on every device", FeatureSubgroupOps, nil, "", []bool{true, false, false, true}},
		{"a program with a feature", FeatureF16, [][32]byte{{1}, {3}}, "dev-a", []bool{false, false, true, false}},
		{"one whole device", 0, nil, "dev-b", []bool{false, false, false, true}},
		{"an unknown device", 0, nil, "dev-z", []bool{false, false, false, false}},
	}
	for _, tc := range cases {
		for _, e := range entries {
			mustWrite(t, c, keyOf(e), []byte("blob"))
		}
		n, err := c.InvalidateImpacted(context.Background(), tc.mask, tc.digests, tc.fp)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for i, e := range entries {
			_, ok := mustRead(t, c, keyOf(e))
			if ok == tc.removed[i] {
				t.Errorf("%s: entry %+v present = %v", tc.name, e, ok)
			}
			if tc.removed[i] {
				want++
			}
		}
		if n != want {
			t.Errorf("%s: removed %d, want %d", tc.name, n, want)
		}
	}
}

func TestConcurrentWritersAndReadersNeverSeeCorruption(t *testing.T) {
	c := openTest(t, Options{})
	var wg sync.WaitGroup
	payload := func(w, i int) []byte { return bytes.Repeat([]byte{byte(w)}, 4096+i) }
	for w := 0; w < 4; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := c.Write(keyN(i%5), payload(w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p, ok, err := c.Read(keyN(i % 5))
				if err != nil {
					t.Error(err)
					return
				}
				if ok && !bytes.Equal(p, bytes.Repeat(p[:1], len(p))) {
					t.Error("read a mixed payload")
				}
			}
		}()
	}
	wg.Wait()
	if s := stats(t, c); s.Corrupt != 0 || s.Entries != 5 {
		t.Fatalf("Stats = %+v", s)
	}
}

func TestCheckHeadersReportsBadHeadersAndChangesNothing(t *testing.T) {
	c := openTest(t, Options{})
	for i := 0; i < 4; i++ {
		mustWrite(t, c, keyN(i), []byte(fmt.Sprint("blob ", i)))
	}
	// Entry 1: bad magic. Entry 2: a valid entry under another key's name.
	// Entry 3: a flipped payload byte, which only Verify's full read sees.
	data, _ := os.ReadFile(c.PathFor(keyN(1)))
	data[0] ^= 1
	os.WriteFile(c.PathFor(keyN(1)), data, 0o644)
	moved := c.PathFor(keyN(50))
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(c.PathFor(keyN(2)), moved); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(c.PathFor(keyN(3)))
	data[len(data)-1] ^= 1
	os.WriteFile(c.PathFor(keyN(3)), data, 0o644)

	r, err := c.CheckHeaders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Entries != 4 || r.Bytes == 0 || len(r.Bad) != 2 {
		t.Fatalf("CheckHeaders = %+v, want 4 entries with 2 bad", r)
	}
	for _, p := range r.Bad {
		if p.Reason == "" || (p.Path != c.PathFor(keyN(1)) && p.Path != moved) {
			t.Errorf("unexpected problem %+v", p)
		}
	}
	if s := stats(t, c); s.Entries != 4 || s.Corrupt != 0 {
		t.Fatalf("CheckHeaders changed the cache: %+v", s)
	}
}
