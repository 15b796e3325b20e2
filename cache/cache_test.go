package cache

import (
	"bytes"
	"context"
	"fmt"
	"maps"
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

// flipByte flips the low bit of byte i of k's entry file (i < 0 counts from
// the end).
func flipByte(c *DiskCache, k Key, i int) {
	data, _ := os.ReadFile(c.PathFor(k))
	if i < 0 {
		i += len(data)
	}
	data[i] ^= 1
	os.WriteFile(c.PathFor(k), data, 0o644)
}

// moveEntry moves from's entry file to to's place, a valid entry under another
// key's name, and returns that path.
func moveEntry(t *testing.T, c *DiskCache, from, to Key) string {
	t.Helper()
	moved := c.PathFor(to)
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(c.PathFor(from), moved); err != nil {
		t.Fatal(err)
	}
	return moved
}

// atOnce runs a and b in two goroutines released together and waits for both.
func atOnce(a, b func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, fn := range []func(){a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn()
		}()
	}
	close(start)
	wg.Wait()
}

func mustWrite(t *testing.T, c *DiskCache, k Key, payload []byte) {
	t.Helper()
	if err := c.Write(k, payload); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, c *DiskCache, k Key) ([]byte, bool) {
	t.Helper()
	l, err := c.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	return l.Payload, l.Hit()
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

func TestOversizeFileIsAMissRemoved(t *testing.T) {
	c := openTest(t, Options{})
	k := sampleKey()
	mustWrite(t, c, k, []byte("x"))
	if err := os.Truncate(c.PathFor(k), maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	l, err := c.Get(k)
	if err != nil || l.Hit() || l.Miss != MissOversize {
		t.Fatalf("Get = %+v, %v; want an oversize miss", l, err)
	}
	if _, err := os.Stat(c.PathFor(k)); !os.IsNotExist(err) {
		t.Fatal("the oversize file was kept")
	}
	if s := stats(t, c); s.MissesBy[MissOversize] != 1 || s.Corrupt != 1 {
		t.Fatalf("Stats = %+v", s)
	}
}

// corruption is a damaged entry file and the miss reason it must give.
type corruption struct {
	data []byte
	why  MissReason
}

// corruptions damage an entry file in every region of its layout.
func corruptions(t *testing.T, good []byte, foreign []byte) map[string]corruption {
	keyLen := int(good[12])
	flip := func(off int) []byte {
		b := append([]byte(nil), good...)
		b[off] ^= 0x10
		return b
	}
	// A length flipped longer makes the file shorter than its header says
	// (truncated); flipped shorter, it leaves bytes over (corrupt).
	length := func(off int) MissReason {
		if good[off]^0x10 > good[off] {
			return MissTruncated
		}
		return MissCorrupt
	}
	return map[string]corruption{
		"empty":               {[]byte{}, MissTruncated},
		"truncated header":    {good[:20], MissTruncated},
		"header only":         {good[:headerSize], MissTruncated},
		"truncated key":       {good[:headerSize+keyLen/2], MissTruncated},
		"truncated payload":   {good[:len(good)-1], MissTruncated},
		"extra byte":          {append(append([]byte(nil), good...), 0), MissCorrupt},
		"flipped magic":       {flip(0), MissCorrupt},
		"flipped version":     {flip(8), MissCorrupt},
		"flipped key length":  {flip(12), length(12)},
		"flipped length":      {flip(16), length(16)},
		"flipped checksum":    {flip(24), MissCorrupt},
		"flipped key":         {flip(headerSize + 5), MissCorrupt},
		"flipped payload":     {flip(len(good) - 3), MissCorrupt},
		"foreign text":        {[]byte("this is not a pipeline cache entry at all, just some text"), MissCorrupt},
		"another key's entry": {foreign, MissForeignKey},
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
	byReason := map[MissReason]uint64{}
	for name, bad := range corruptions(t, good, foreign) {
		n++
		byReason[bad.why]++
		if err := os.WriteFile(c.PathFor(k), bad.data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := c.Get(k)
		if l.Hit() || err != nil || l.Payload != nil || l.Miss != bad.why {
			t.Fatalf("%s: Get = %+v, %v; want a %s miss", name, l, err, bad.why)
		}
		if got, why := DecodeEntry(bad.data, k); got != nil || why != bad.why {
			t.Fatalf("%s: DecodeEntry = %q, %s; want a %s miss", name, got, why, bad.why)
		}
		if _, err := os.Stat(c.PathFor(k)); !os.IsNotExist(err) {
			t.Fatalf("%s: corrupt entry not removed", name)
		}
		if s := stats(t, c); s.Corrupt != n || s.Misses != n || !maps.Equal(s.MissesBy, byReason) {
			t.Fatalf("%s: Stats = %+v, want %d corrupt misses %v", name, s, n, byReason)
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
	c := openTest(t, Options{MaxBytes: 100_000})
	for i := 0; i < 20; i++ {
		mustWrite(t, c, keyN(i), make([]byte, 1000))
	}
	if len(c.pending) != 20 {
		t.Fatalf("%d pending writes, want 20", len(c.pending))
	}
	c.maxBytes = 10_000
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(c.pending) != 0 {
		t.Fatalf("%d writes still pending after Flush", len(c.pending))
	}
	if s := stats(t, c); s.Bytes > 10_000 || s.Entries == 0 || s.Trims != 1 {
		t.Fatalf("after Flush: %+v, want at most 10000 bytes after one trim", s)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), trimStamp)); err != nil {
		t.Fatalf("trim time not recorded: %v", err)
	}
}

// waitBackground waits until no background flush runs.
func waitBackground(c *DiskCache) {
	for {
		c.mu.Lock()
		bg := c.background
		c.mu.Unlock()
		if bg == nil {
			return
		}
		<-bg
	}
}

// A long-running host never calls Flush: once a quarter of the cap has been
// written since the last trim, writing starts a background flush that trims.
func TestWritingAQuarterOfTheCapTrimsInTheBackground(t *testing.T) {
	const limit = 40_000
	c := openTest(t, Options{MaxBytes: limit})
	entry := int64(0)
	for i := 0; i < 100; i++ {
		mustWrite(t, c, keyN(i), make([]byte, 1000))
		if entry == 0 {
			entry = fileSize(t, c.PathFor(keyN(i)))
		}
	}
	waitBackground(c)
	s := stats(t, c)
	if s.Trims == 0 || s.Bytes > limit+limit/4+entry {
		t.Fatalf("after writing %d bytes without a Flush: %+v; want trims keeping it near the %d-byte cap", 100*entry, s, limit)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), trimStamp)); err != nil {
		t.Fatalf("trim time not recorded: %v", err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
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
	flipByte(c, keyN(1), -1)
	moved := moveEntry(t, c, keyN(2), keyN(50))
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
	// Only the usage counts and the lock files (never removed) stay.
	left, _ := os.ReadDir(c.Root())
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "trim.txt.lock usage.json usage.json.lock" {
		t.Fatalf("root still holds %s", got)
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
				l, err := c.Get(keyN(i % 5))
				p, ok := l.Payload, l.Hit()
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
	flipByte(c, keyN(1), 0)
	moved := moveEntry(t, c, keyN(2), keyN(50))
	flipByte(c, keyN(3), -1)

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

// Writers racing a trim must never lose a fresh entry: the trim removes only
// files that are still the ones it listed. Three rounds, since one race may
// happen not to overlap.
func TestTrimRacingWritersKeepsFreshEntries(t *testing.T) {
	for round := 0; round < 3; round++ {
		c := openTest(t, Options{})
		const n = 200
		payload := func(b byte) []byte { return bytes.Repeat([]byte{b}, 2000) }
		for i := 0; i < n; i++ {
			mustWrite(t, c, keyN(i), payload('o'))
			setAge(t, c.PathFor(keyN(i)), 48*time.Hour)
			mustWrite(t, c, keyN(n+i), payload('m'))
			setAge(t, c.PathFor(keyN(n+i)), 24*time.Hour)
		}
		size := fileSize(t, c.PathFor(keyN(0)))
		atOnce(func() {
			for i := 0; i < n; i++ {
				if err := c.Write(keyN(i), payload('f')); err != nil {
					t.Error(err)
				}
			}
		}, func() {
			if _, err := c.Trim(context.Background(), n*size); err != nil {
				t.Error(err)
			}
		})
		lost := 0
		for i := 0; i < n; i++ {
			if p, ok := mustRead(t, c, keyN(i)); !ok || p[0] != 'f' {
				lost++
			}
		}
		if lost > 0 {
			t.Fatalf("round %d: a trim racing writers removed %d of %d fresh entries", round, lost, n)
		}
	}
}

// Of many processes flushing at once with a trim due, one trims: the trim
// record is taken under the trim lock before trimming.
func TestConcurrentFlushesTrimOnce(t *testing.T) {
	root := filepath.Join(t.TempDir(), "pipelines")
	caches := make([]*DiskCache, 8)
	for i := range caches {
		c, err := OpenOptions(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		caches[i] = c
	}
	for i := 0; i < 500; i++ {
		mustWrite(t, caches[0], keyN(i), make([]byte, 100))
	}
	if err := caches[0].Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	setAge(t, filepath.Join(root, trimStamp), 2*time.Hour)
	before := uint64(0)
	for i, c := range caches {
		mustWrite(t, c, keyN(1000+i), []byte("x"))
		before += stats(t, c).Trims
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range caches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := c.Flush(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	after := uint64(0)
	for _, c := range caches {
		after += stats(t, c).Trims
	}
	if after-before != 1 {
		t.Fatalf("%d of 8 concurrent flushes trimmed, want 1", after-before)
	}
}

func TestFlushAddsItsCountsToTheUsageFile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "pipelines")
	for round := 1; round <= 2; round++ {
		c, err := OpenOptions(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, c, keyN(1), []byte("a"))
		mustRead(t, c, keyN(1))
		mustRead(t, c, keyN(2))
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.AddUsage(context.Background(), Usage{Remote: TierUsage{Hits: 1, Errors: 2, Misses: map[MissReason]uint64{MissCorrupt: 1}}}); err != nil {
			t.Fatal(err)
		}
		u, err := c.Usage()
		if err != nil {
			t.Fatal(err)
		}
		r := uint64(round)
		if u.Local.Hits != r || u.Local.Writes != r || u.Local.Misses[MissAbsent] != r || u.Local.MissCount() != r ||
			u.Remote.Hits != r || u.Remote.Errors != 2*r || u.Remote.Misses[MissCorrupt] != r || u.Since.IsZero() {
			t.Fatalf("round %d: usage = %+v", round, u)
		}
	}
	c, _ := OpenOptions(root, Options{})
	if err := c.ZeroUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u, err := c.Usage(); err != nil || u.Local.Hits != 0 || u.Remote.MissCount() != 0 || u.Since.IsZero() {
		t.Fatalf("after ZeroUsage: %+v, %v", u, err)
	}
	os.WriteFile(filepath.Join(root, usageFile), []byte("{broken"), 0o644)
	if _, err := c.Usage(); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("a broken usage file: %v", err)
	}
	if err := c.AddUsage(context.Background(), Usage{Local: TierUsage{Hits: 5}}); err != nil {
		t.Fatal(err)
	}
	if u, err := c.Usage(); err != nil || u.Local.Hits != 5 {
		t.Fatalf("a broken usage file is started again: %+v, %v", u, err)
	}
}

func TestWalkAndNamesListTheEntries(t *testing.T) {
	c := openTest(t, Options{})
	for i := 0; i < 3; i++ {
		mustWrite(t, c, keyN(i), []byte{byte(i)})
	}
	os.WriteFile(c.PathFor(keyN(2)), []byte("broken"), 0o644)
	names, err := c.Names(context.Background())
	if err != nil || len(names) != 3 || !names[keyN(0).Hex()] {
		t.Fatalf("Names = %v, %v", names, err)
	}
	seen := map[Key][]byte{}
	err = c.Walk(context.Background(), func(k Key, entry []byte) error {
		seen[k] = entry
		return nil
	})
	if err != nil || len(seen) != 2 {
		t.Fatalf("Walk saw %d entries, %v; want the 2 valid ones", len(seen), err)
	}
	for k, entry := range seen {
		got, payload, miss := ParseEntry(entry)
		if miss != MissNone || got != k || len(payload) != 1 {
			t.Fatalf("ParseEntry of a walked entry: %+v %q %s", got, payload, miss)
		}
		want, err := EncodeEntry(k, payload)
		if err != nil || !bytes.Equal(want, entry) {
			t.Fatal("EncodeEntry does not give the entry file's bytes")
		}
	}
}

// removeListed removes the file that was listed, and never one a writer
// installed after the listing.
func TestRemoveListedKeepsAReplacedFile(t *testing.T) {
	c := openTest(t, Options{})
	k := keyN(1)
	mustWrite(t, c, k, []byte("old"))
	path := c.PathFor(k)
	listed, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, c, k, []byte("fresh"))
	if removed, err := removeListed(path, listed); removed || err != nil {
		t.Fatalf("removeListed of a replaced file = %v, %v", removed, err)
	}
	if p, ok := mustRead(t, c, k); !ok || string(p) != "fresh" {
		t.Fatalf("the fresh entry is gone: %q, %v", p, ok)
	}
	if stray := listAll(t, c.Root()); len(stray) != 1 {
		t.Fatalf("the shard holds %v, want only the entry", stray)
	}
	listed, _ = os.Lstat(path)
	if removed, err := removeListed(path, listed); !removed || err != nil {
		t.Fatalf("removeListed of the listed file = %v, %v", removed, err)
	}
	if removed, err := removeListed(path, listed); removed || err != nil {
		t.Fatalf("removeListed of a file already gone = %v, %v", removed, err)
	}
}

// listAll lists the files in root's shard directories.
func listAll(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	shards, _ := os.ReadDir(root)
	for _, s := range shards {
		if !s.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(root, s.Name()))
		for _, f := range files {
			names = append(names, f.Name())
		}
	}
	return names
}

// Writers repairing entries while Verify runs must never lose a repaired
// entry: Verify removes only the corrupt file it read. Twenty rounds, since
// the window of each race is short.
func TestVerifyRacingWritersKeepsRepairedEntries(t *testing.T) {
	for round := 0; round < 20; round++ {
		c := openTest(t, Options{})
		const n = 300
		for i := 0; i < n; i++ {
			mustWrite(t, c, keyN(i), []byte("x"))
			os.WriteFile(c.PathFor(keyN(i)), bytes.Repeat([]byte("corrupt!"), 500), 0o644)
		}
		atOnce(func() {
			for i := n - 1; i >= 0; i-- {
				if err := c.Write(keyN(i), bytes.Repeat([]byte("good"), 1000)); err != nil {
					t.Error(err)
				}
			}
		}, func() {
			if _, err := c.Verify(context.Background()); err != nil {
				t.Error(err)
			}
		})
		lost := 0
		for i := 0; i < n; i++ {
			if _, ok := mustRead(t, c, keyN(i)); !ok {
				lost++
			}
		}
		if lost > 0 {
			t.Fatalf("round %d: Verify racing writers removed %d of %d repaired entries", round, lost, n)
		}
	}
}
