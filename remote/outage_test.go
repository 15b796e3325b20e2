package remote

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote/remotetest"
)

func autotuneSpec(n int) ir.SpecCacheKey {
	return ir.SpecCacheKey{ShaderHash: 0xdeadbeef, BindingSig: 0xfacefeed, WorkgroupSize: [3]uint32{64, 1, 1}, SpecHash: uint64(n)}
}

// A remote that hangs costs one call its deadline, then nothing while it is
// down: later reads and uploads make no connection and fail nothing.
func TestAHangingRemoteCostsOneDeadlineThenNothing(t *testing.T) {
	h := remotetest.NewHanging(t)
	s := open(t, remotetest.S3URL(h.Endpoint, "", "kiln_timeout=300ms", "kiln_flush_timeout=5s"))
	c := NewCache(localCache(t), s)
	if l := get(t, c, key(1)); l.Hit() || l.Miss != cache.MissAbsent {
		t.Fatalf("first read: %+v, want the local miss", l)
	}
	u := s.Usage()
	if u.Errors != 1 || u.Misses[cache.MissUnavailable] != 1 {
		t.Fatalf("after the first read: %+v, want one error and one unavailable miss", u)
	}
	conns := h.Connections()
	for i := 2; i < 10; i++ {
		get(t, c, key(i))
		if err := c.Write(key(i), []byte("code")); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.Tuning(context.Background(), "vulkan", "00", "00000000000000000000000000000000"); ok {
		t.Fatal("a tuning record from a hanging remote")
	}
	if _, ok := s.Route(context.Background(), "op", []pgo.Live{{ID: "vulkan:0", AdapterFingerprint: "00"}}); ok {
		t.Fatal("a route from a hanging remote")
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := h.Connections(); got != conns {
		t.Fatalf("%d more connections while the remote was down, want none", got-conns)
	}
	u = s.Usage()
	if u.Errors != 1 || u.Misses[cache.MissUnavailable] != 9 || u.Dropped != 8 || u.Writes != 0 {
		t.Fatalf("usage: %+v; want 1 error, 9 unavailable misses, 8 dropped uploads", u)
	}
	for i := 2; i < 10; i++ {
		if l := get(t, c, key(i)); !l.Hit() || l.Remote {
			t.Fatalf("entry %d: %+v, want a local hit", i, l)
		}
	}
}

func TestARefusingRemoteFailsNothing(t *testing.T) {
	s := open(t, remotetest.S3URL(remotetest.Refusing(t), "", "kiln_timeout=2s"))
	c := NewCache(localCache(t), s)
	if l := get(t, c, key(1)); l.Hit() {
		t.Fatalf("read: %+v", l)
	}
	if err := c.Write(key(1), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage(); u.Errors != 1 || u.Dropped != 1 {
		t.Fatalf("usage: %+v", u)
	}
	if l := get(t, c, key(1)); !l.Hit() || l.Remote {
		t.Fatalf("after the write: %+v, want a local hit", l)
	}
}

// A remote that comes back is used again once the backoff has passed.
func TestTheRemoteIsTriedAgainAfterTheBackoff(t *testing.T) {
	url := remotetest.S3(t, "")
	s := open(t, url)
	s.fail("test", context.DeadlineExceeded)
	if _, why := s.GetEntry(context.Background(), key(1)); why != cache.MissUnavailable {
		t.Fatalf("read while down: %s", why)
	}
	s.mu.Lock()
	s.downUntil = s.downUntil.Add(-2 * s.backoff)
	s.mu.Unlock()
	if _, why := s.GetEntry(context.Background(), key(1)); why != cache.MissAbsent {
		t.Fatalf("read after the backoff: %s, want the remote's answer", why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.backoff != 0 {
		t.Fatal("a success did not end the backoff")
	}
}
