package remote

import (
	"testing"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/remote/remotetest"
)

// A local hit never reaches the remote: not even a hanging one.
func TestALocalHitNeverTouchesTheRemote(t *testing.T) {
	h := remotetest.NewHanging(t)
	c := NewCache(localCache(t), open(t, remotetest.S3URL(h.Endpoint, "", "kiln_timeout=30s")))
	if err := c.Local().Write(key(1), []byte("code")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if l := get(t, c, key(1)); !l.Hit() || l.Remote {
			t.Fatalf("read %d: %+v, want a local hit", i, l)
		}
	}
	if n := h.Connections(); n != 0 || c.Remote().Usage().MissCount()+c.Remote().Usage().Hits != 0 {
		t.Fatalf("%d connections, usage %+v; a local hit must not touch the remote", n, c.Remote().Usage())
	}
}

// getter is a pipeline cache as the host reads it.
type getter interface {
	Get(cache.Key) (cache.Lookup, error)
}

// tiers are the caches the benchmarks compare: the local cache alone, and the
// same with a fleet tier behind it on an S3 server on loopback and on a shared
// directory.
func tiers(b *testing.B) []struct {
	name string
	c    getter
	put  func(cache.Key, []byte) error
} {
	local := localCache(b)
	s3 := NewCache(localCache(b), open(b, remotetest.S3(b, "bench")))
	dir := NewCache(localCache(b), open(b, remotetest.Dir(b)))
	return []struct {
		name string
		c    getter
		put  func(cache.Key, []byte) error
	}{
		{"local-only", local, local.Write},
		{"with-s3", s3, s3.Local().Write},
		{"with-file", dir, dir.Local().Write},
	}
}

// BenchmarkGet measures what a fleet tier adds to a pipeline-cache read: on a
// local hit (it must add nothing), on a miss of a new key (one remote
// round trip), and on a repeated miss (remembered, no remote call).
func BenchmarkGet(b *testing.B) {
	payload := make([]byte, 64<<10)
	for _, tier := range tiers(b) {
		if err := tier.put(key(1), payload); err != nil {
			b.Fatal(err)
		}
		b.Run("local-hit/"+tier.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if l, err := tier.c.Get(key(1)); err != nil || !l.Hit() {
					b.Fatal(l.Miss, err)
				}
			}
		})
		fresh := uint64(0) // a key never asked before, across runs
		b.Run("miss/"+tier.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fresh++
				k := key(1000)
				k.SpecHash = fresh
				if l, err := tier.c.Get(k); err != nil || l.Hit() {
					b.Fatal(l.Miss, err)
				}
			}
		})
		b.Run("repeated-miss/"+tier.name, func(b *testing.B) {
			k := key(2)
			for i := 0; i < b.N; i++ {
				if l, err := tier.c.Get(k); err != nil || l.Hit() {
					b.Fatal(l.Miss, err)
				}
			}
		})
	}
}
