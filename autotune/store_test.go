package autotune

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/filelock"
	"github.com/kiln-dev/kiln/internal/xdg"
	"github.com/kiln-dev/kiln/ir"
)

func sampleSpec(specHash uint64) ir.SpecCacheKey {
	return ir.SpecCacheKey{ShaderHash: 0xdeadbeef, BindingSig: 0xfacefeed, WorkgroupSize: [3]uint32{128, 1, 1}, SpecHash: specHash}
}

func sampleRecord(unroll uint32) Record {
	return Record{WorkgroupSize: [3]uint32{128, 1, 1}, Unroll: unroll, Tile: [3]uint32{16, 16, 1}, RecordedAt: "2026-05-02"}
}

func load(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *Store, k Key, r Record) {
	t.Helper()
	if err := s.Put(k, r); err != nil {
		t.Fatal(err)
	}
}

func save(t *testing.T, s *Store) bool {
	t.Helper()
	wrote, err := s.SaveIfDirty(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return wrote
}

func storePath(t *testing.T) string { return filepath.Join(t.TempDir(), "autotune.toml") }

func TestKeyFoldsAsTheSeed(t *testing.T) {
	k := NewKey(sampleSpec(1), "adapter-x")
	// spec 01.., ^ workgroup fold 0x0000000100010080; shader efbeadde.. ^ binding edfecefa..
	if k.Hex() != "81000100010000000240632400000000" || k.Adapter() != "adapter-x" {
		t.Fatalf("NewKey = %s", k)
	}
}

func TestKeyChangesWithEverySpecField(t *testing.T) {
	base := sampleSpec(1)
	cases := map[string]func(*ir.SpecCacheKey){
		"SpecHash":        func(s *ir.SpecCacheKey) { s.SpecHash = 2 },
		"ShaderHash":      func(s *ir.SpecCacheKey) { s.ShaderHash++ },
		"BindingSig":      func(s *ir.SpecCacheKey) { s.BindingSig++ },
		"WorkgroupSize.x": func(s *ir.SpecCacheKey) { s.WorkgroupSize[0] = 256 },
		"WorkgroupSize.y": func(s *ir.SpecCacheKey) { s.WorkgroupSize[1] = 2 },
		"WorkgroupSize.z": func(s *ir.SpecCacheKey) { s.WorkgroupSize[2] = 2 },
	}
	for name, change := range cases {
		s := base
		change(&s)
		if NewKey(s, "x") == NewKey(base, "x") {
			t.Errorf("changing %s leaves the key unchanged", name)
		}
	}
	if NewKey(base, "x") == NewKey(base, "y") {
		t.Error("the adapter does not take part in the key")
	}
}

func TestEmptyStoreReturnsNothing(t *testing.T) {
	s := load(t, storePath(t))
	if _, ok := s.Get(NewKey(sampleSpec(1), "adapter-x")); ok || s.Len() != 0 || s.IsDirty() {
		t.Fatal("an empty store is not empty and clean")
	}
}

func TestPutThenGetRoundTripsAndDirties(t *testing.T) {
	s := load(t, storePath(t))
	k := NewKey(sampleSpec(1), "adapter-x")
	put(t, s, k, sampleRecord(4))
	if r, ok := s.Get(k); !ok || r != sampleRecord(4) || s.Len() != 1 || !s.IsDirty() {
		t.Fatalf("Get = %+v, %v; Len %d, dirty %v", r, ok, s.Len(), s.IsDirty())
	}
}

func TestDistinctSpecsOrAdaptersGetDistinctRecords(t *testing.T) {
	s := load(t, storePath(t))
	a, b, c := NewKey(sampleSpec(1), "adapter-x"), NewKey(sampleSpec(2), "adapter-x"), NewKey(sampleSpec(1), "adapter-y")
	put(t, s, a, sampleRecord(4))
	put(t, s, b, sampleRecord(8))
	put(t, s, c, sampleRecord(16))
	if s.Len() != 3 {
		t.Fatalf("Len = %d", s.Len())
	}
	for k, want := range map[Key]uint32{a: 4, b: 8, c: 16} {
		if r, _ := s.Get(k); r.Unroll != want {
			t.Errorf("%s: unroll %d, want %d", k, r.Unroll, want)
		}
	}
}

func TestSaveThenLoadRoundTripsThroughTOML(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	k := NewKey(sampleSpec(7), "adapter-x")
	put(t, s, k, sampleRecord(4))
	put(t, s, NewKey(sampleSpec(8), "vulkan:0"), Record{WorkgroupSize: [3]uint32{8, 8, 1}})
	if !save(t, s) {
		t.Fatal("a dirty store did not write")
	}
	if s.IsDirty() {
		t.Fatal("save did not clear the dirty flag")
	}
	got := load(t, path)
	if got.Len() != 2 {
		t.Fatalf("loaded %d records", got.Len())
	}
	if r, ok := got.Get(k); !ok || r != sampleRecord(4) {
		t.Fatalf("loaded %+v, %v", r, ok)
	}
	if r, _ := got.Get(NewKey(sampleSpec(8), "vulkan:0")); r.RecordedAt != "" || r.WorkgroupSize != [3]uint32{8, 8, 1} {
		t.Fatalf("record without a date loaded as %+v", r)
	}
}

func TestSchemaAndSeedFormatWritten(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	put(t, s, NewKey(sampleSpec(1), "adapter"), sampleRecord(2))
	save(t, s)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"schema = 1", "[[record]]", "key = ", "adapter = ", "workgroup_size = [128, 1, 1]", "unroll = 2", "tile = [16, 16, 1]", "recorded_at = "} {
		if !strings.Contains(text, want) {
			t.Errorf("file lacks %q:\n%s", want, text)
		}
	}
}

func TestSeedFormatFileLoads(t *testing.T) {
	path := storePath(t)
	seed := `schema = 1

[[record]]
key = "0123456789abcdef0123456789abcdef"   # 32-hex
adapter = "portable-vk-rtx5090"
workgroup_size = [128, 1, 1]
unroll = 4
tile = [16, 16, 1]
recorded_at = "2026-05-02"

[[record]]
key = "0123456789abcdef0123456789abcdef"
adapter = "native-sm_90"
workgroup_size = [256, 1, 1]
unroll = 1
tile = [0, 0, 0]
`
	os.WriteFile(path, []byte(seed), 0o644)
	s := load(t, path)
	if s.Len() != 2 {
		t.Fatalf("Len = %d", s.Len())
	}
	if r, ok := s.Get(Key{"0123456789abcdef0123456789abcdef", "native-sm_90"}); !ok || r.WorkgroupSize[0] != 256 || r.RecordedAt != "" {
		t.Fatalf("Get = %+v, %v", r, ok)
	}
}

func TestSaveIfDirtyNoOpWhenClean(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	if save(t, s) {
		t.Fatal("a clean store wrote")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a clean save created the file")
	}
	if _, err := os.Stat(path + ".lock"); !os.IsNotExist(err) {
		t.Fatal("a clean save created the lock file")
	}
}

func TestLoadMissingFileReturnsEmptyStore(t *testing.T) {
	s := load(t, filepath.Join(t.TempDir(), "does_not_exist.toml"))
	if s.Len() != 0 {
		t.Fatal("not empty")
	}
}

func TestForgetRemovesRecordAndDirties(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	k := NewKey(sampleSpec(1), "adapter-x")
	put(t, s, k, sampleRecord(4))
	save(t, s)
	if !s.Forget(k) || !s.IsDirty() || s.Len() != 0 {
		t.Fatal("Forget of a present record did not remove it and dirty the store")
	}
	if s.Forget(k) {
		t.Fatal("second Forget reported a removal")
	}
	save(t, s)
	if load(t, path).Len() != 0 {
		t.Fatal("the forgotten record is still on disk")
	}
	clean := load(t, path)
	if clean.Forget(k) || clean.IsDirty() {
		t.Fatal("Forget of an absent record dirtied the store")
	}
}

func TestPutRefusesWhatTheFileCannotHold(t *testing.T) {
	s := load(t, storePath(t))
	for name, err := range map[string]error{
		"zero key":    s.Put(Key{}, sampleRecord(1)),
		"bad adapter": s.Put(NewKey(sampleSpec(1), "bad\xff"), sampleRecord(1)),
		"bad date":    s.Put(NewKey(sampleSpec(1), "a"), Record{RecordedAt: "\xfe"}),
	} {
		if err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: err = %v, want an error with a Fix", name, err)
		}
	}
	if s.IsDirty() || s.Len() != 0 {
		t.Fatal("a refused Put changed the store")
	}
}

func TestSavesMergeWithOtherWriters(t *testing.T) {
	path := storePath(t)
	k1, k2, k3 := NewKey(sampleSpec(1), "a"), NewKey(sampleSpec(2), "a"), NewKey(sampleSpec(3), "a")
	a, b := load(t, path), load(t, path)
	put(t, a, k1, sampleRecord(1))
	put(t, b, k2, sampleRecord(2))
	save(t, a)
	save(t, b)
	if got := load(t, path); got.Len() != 2 {
		t.Fatalf("after two independent saves the file holds %d records, want 2", got.Len())
	}
	if _, ok := b.Get(k1); !ok {
		t.Fatal("after saving, the store does not hold the other writer's record")
	}
	// a forgets k1 while c adds k3; a put of k2 by c must survive a's forget.
	c := load(t, path)
	if !b.Forget(k1) {
		t.Fatal("Forget")
	}
	put(t, c, k3, sampleRecord(3))
	put(t, c, k2, sampleRecord(22))
	save(t, c)
	save(t, b)
	got := load(t, path)
	if _, ok := got.Get(k1); ok {
		t.Fatal("a forgotten record came back")
	}
	if r, _ := got.Get(k2); r.Unroll != 22 || got.Len() != 2 {
		t.Fatalf("merge lost an update: k2 = %+v, len %d", r, got.Len())
	}
}

func TestConcurrentGoroutineSavesKeepEveryRecord(t *testing.T) {
	// The seed's test kept exactly one writer's record; kiln keeps both.
	path := storePath(t)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Load(path)
			if err != nil {
				t.Error(err)
				return
			}
			s.Put(NewKey(sampleSpec(uint64(101*(i+1))), "adapter"), sampleRecord(uint32(i)))
			if _, err := s.SaveIfDirty(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := load(t, path); got.Len() != 2 {
		t.Fatalf("%d records, want 2", got.Len())
	}
}

// malformed files, each of which must be refused with a Fix and left untouched.
var malformed = map[string]string{
	"syntax":               "schema = 1\n[[record]\n",
	"no schema":            "[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\nunroll = 1\ntile = [0,0,0]\n",
	"schema zero":          "schema = 0\n",
	"short array":          "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1]\nunroll = 1\ntile = [0,0,0]\n",
	"long tile":            "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\nunroll = 1\ntile = [0,0,0,0]\n",
	"negative":             "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,-1,1]\nunroll = 1\ntile = [0,0,0]\n",
	"bad key":              "schema = 1\n[[record]]\nkey = \"xyz\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\nunroll = 1\ntile = [0,0,0]\n",
	"missing unroll":       "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\ntile = [0,0,0]\n",
	"unknown field":        "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\nunroll = 1\ntile = [0,0,0]\ncolour = \"red\"\n",
	"duplicate":            "schema = 1\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [1,1,1]\nunroll = 1\ntile = [0,0,0]\n[[record]]\nkey = \"0123456789abcdef0123456789abcdef\"\nadapter = \"a\"\nworkgroup_size = [2,1,1]\nunroll = 1\ntile = [0,0,0]\n",
	"empty file":           "",
	"truncated by a crash": "schema = 1\n[[record]]\nkey = \"0123456789abcdef01234",
}

func TestMalformedFileIsAnErrorWithFixAndUntouched(t *testing.T) {
	for name, content := range malformed {
		path := storePath(t)
		// s was loaded before the file went bad; it must not overwrite the file.
		s := load(t, path)
		os.WriteFile(path, []byte(content), 0o644)
		old := time.Now().Add(-time.Hour)
		os.Chtimes(path, old, old)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: Load accepted it", name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, "malformed") || !strings.Contains(msg, "Fix:") {
			t.Errorf("%s: err = %v", name, err)
		}
		put(t, s, NewKey(sampleSpec(1), "a"), sampleRecord(1))
		if wrote, err := s.SaveIfDirty(context.Background()); wrote || err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: SaveIfDirty over a malformed file = %v, %v", name, wrote, err)
		}
		if !s.IsDirty() {
			t.Errorf("%s: a failed save cleared the dirty flag", name)
		}
		got, _ := os.ReadFile(path)
		st, _ := os.Stat(path)
		if string(got) != content || st.ModTime().Sub(old).Abs() > time.Second {
			t.Errorf("%s: the file was touched", name)
		}
	}
}

func TestNewerSchemaIsRefusedClearly(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	put(t, s, NewKey(sampleSpec(1), "a"), sampleRecord(1))
	content := "schema = 4\n[[tuning]]\nsomething = \"new\"\n"
	os.WriteFile(path, []byte(content), 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "schema 4") || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v, want a schema-4 error with a Fix", err)
	}
	if _, err := s.SaveIfDirty(context.Background()); err == nil {
		t.Fatal("SaveIfDirty overwrote a newer-schema file")
	}
	if got, _ := os.ReadFile(path); string(got) != content {
		t.Fatal("the newer-schema file was changed")
	}
}

func TestDefaultPath(t *testing.T) {
	env := xdg.Env{GOOS: "linux", Getenv: func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": "/cfg"}[k]
	}}
	if got, err := defaultPath(env); err != nil || got != filepath.Join("/cfg", "kiln", "autotune.toml") {
		t.Fatalf("defaultPath = %q, %v", got, err)
	}
	if _, err := defaultPath(xdg.Env{GOOS: "linux", Getenv: func(string) string { return "" }}); err == nil {
		t.Fatal("defaultPath with nothing set succeeded")
	}
}

func TestKeyForFollowsProgramSpecAndAdapter(t *testing.T) {
	build := func(name string, wg uint32) *ir.Program {
		b := ir.NewBuilder(name, wg, 1, 1)
		b.Param("a", ir.U32, ir.LitU32(1))
		out := b.Buffer("out", ir.U32, ir.Write)
		b.Store(out, ir.GlobalID(0), ir.LitU32(1))
		return b.MustBuild()
	}
	p := build("p", 64)
	var spec ir.SpecMap
	base := KeyFor(p, spec, "vulkan:0")
	want := NewKey(ir.SpecCacheKey{ShaderHash: p.Digest(), BindingSig: ir.BindingSignature(p), WorkgroupSize: [3]uint32{64, 1, 1}, SpecHash: spec.CacheHash()}, "vulkan:0")
	if base != want {
		t.Fatalf("KeyFor = %v, want %v", base, want)
	}
	if KeyFor(build("p", 64), spec, "vulkan:0") != base {
		t.Fatal("an equal program gives another key")
	}
	var set ir.SpecMap
	set.Set("a", ir.SpecU32(2))
	for name, k := range map[string]Key{
		"program":        KeyFor(build("q", 64), spec, "vulkan:0"),
		"workgroup size": KeyFor(build("p", 128), spec, "vulkan:0"),
		"spec":           KeyFor(p, set, "vulkan:0"),
		"adapter":        KeyFor(p, spec, "vulkan:1"),
	} {
		if k == base {
			t.Errorf("changing the %s leaves the key unchanged", name)
		}
	}
}

// doneHook closes waiting the first time someone selects on Done, which
// SaveIfDirty does while it waits for the store file's lock.
type doneHook struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *doneHook) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func TestSaveWaitingForTheLockDoesNotBlockGet(t *testing.T) {
	path := storePath(t)
	s := load(t, path)
	k := NewKey(sampleSpec(1), "vulkan:0")
	put(t, s, k, sampleRecord(2))
	lock, err := filelock.Acquire(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &doneHook{Context: context.Background(), waiting: make(chan struct{})}
	saved := make(chan error, 1)
	go func() {
		_, err := s.SaveIfDirty(ctx)
		saved <- err
	}()
	<-ctx.waiting
	got := make(chan bool, 1)
	go func() {
		_, ok := s.Get(k)
		got <- ok
	}()
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("Get lost the record while a save waited")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Get blocked while SaveIfDirty waited for the file lock")
	}
	lock.Unlock()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if load(t, path).Len() != 1 {
		t.Fatal("the save did not land")
	}
}

func TestSaveKeepsASymlinkedStoreALinkWithItsMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "autotune.toml")
	os.MkdirAll(filepath.Dir(target), 0o700)
	first := load(t, target)
	put(t, first, NewKey(sampleSpec(1), "a"), sampleRecord(1))
	save(t, first)
	if err := os.Chmod(target, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config", "autotune.toml")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	s := load(t, link)
	put(t, s, NewKey(sampleSpec(2), "a"), sampleRecord(2))
	save(t, s)
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the store is no longer a symbolic link: %v", err)
	}
	if st, err := os.Stat(target); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the store's mode became %v, want 0600", st.Mode().Perm())
	}
	if n := load(t, target).Len(); n != 2 {
		t.Fatalf("the link's target holds %d records, want 2", n)
	}
}
