package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/kiln-dev/kiln/cache"
)

// entryName is the object holding key's pipeline-cache entry: immutable, named
// by the key, holding exactly the local entry file's bytes.
func entryName(hex string) string { return layout + "pipelines/" + hex }

// GetEntry reads key's pipeline-cache entry from the remote. The object must be
// a whole entry whose checksum holds and whose key echo is exactly key;
// anything else is a miss with its reason (a corrupt, truncated, foreign or
// oversize object is also deleted, best effort, so an upload can replace it). A
// failed, slow or skipped remote is a [cache.MissUnavailable] miss. Hits and
// misses are counted; GetEntry never returns an error.
func (s *Store) GetEntry(ctx context.Context, key cache.Key) ([]byte, cache.MissReason) {
	name := entryName(key.Hex())
	var data []byte
	oversize := false
	err := s.do(ctx, "get pipeline", func(ctx context.Context) error {
		r, err := s.bucket.NewReader(ctx, name, nil)
		if err != nil {
			return err
		}
		defer r.Close()
		if r.Size() > cache.MaxEntryFileBytes {
			oversize = true
			return nil
		}
		data, err = io.ReadAll(io.LimitReader(r, cache.MaxEntryFileBytes+1))
		return err
	})
	var why cache.MissReason
	var payload []byte
	switch {
	case isNotFound(err):
		why = cache.MissAbsent
	case err != nil:
		why = cache.MissUnavailable
	case oversize:
		why = cache.MissOversize
	default:
		payload, why = cache.DecodeEntry(data, key)
	}
	if why == cache.MissNone {
		s.counts.hits.Add(1)
		return payload, why
	}
	s.counts.miss(why)
	if why != cache.MissAbsent && why != cache.MissUnavailable {
		s.log.Warn("fleet tier object is not a usable entry; treated as a miss and deleted", "object", name, "reason", why)
		s.do(ctx, "delete bad pipeline", func(ctx context.Context) error { return s.bucket.Delete(ctx, name) })
	}
	return nil, why
}

// PutEntry uploads entry ([cache.EncodeEntry]'s bytes) as key's object, unless
// an object for key is there already (a conditional write): entries are
// immutable. It is a synchronous upload with the call deadline; Cache queues it
// behind a compile instead.
func (s *Store) PutEntry(ctx context.Context, key cache.Key, entry []byte) error {
	name := entryName(key.Hex())
	err := s.do(ctx, "put pipeline", func(ctx context.Context) error {
		err := s.bucket.WriteAll(ctx, name, entry, &blob.WriterOptions{IfNotExist: true, ContentType: "application/octet-stream"})
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return nil // there already
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("upload pipeline %s to the fleet tier: %w", key.Hex(), err)
	}
	s.counts.writes.Add(1)
	return nil
}

// maxRemembered bounds Cache's memory of keys the remote does not have.
const maxRemembered = 4096

// Cache is a local pipeline cache with the fleet tier behind it. [Cache.Get]
// reads the local directory first; only a local miss reads the remote (once per
// key per process: a remote miss is remembered), and a remote hit is verified,
// then written to the local directory. [Cache.Write] stores locally and queues
// the upload (write-behind), so no compile waits on the remote. It satisfies
// the host's pipeline-cache interface. See docs/design.md, "Fleet tier
// (remote)".
type Cache struct {
	local  *cache.DiskCache
	remote *Store

	mu      sync.Mutex
	absent  map[string]bool // keys the remote lacked
	flushMu sync.Mutex      // one usage report at a time
	// reported is what the usage file has been told of the remote's counts.
	reported cache.TierUsage
}

// NewCache puts remote behind local.
func NewCache(local *cache.DiskCache, remote *Store) *Cache {
	return &Cache{local: local, remote: remote, absent: map[string]bool{}}
}

// Local returns the local cache.
func (c *Cache) Local() *cache.DiskCache { return c.local }

// Remote returns the fleet tier.
func (c *Cache) Remote() *Store { return c.remote }

// Get returns key's entry from the local cache, else from the remote (see
// Cache). A remote failure is a miss, never an error; the error is the local
// cache's.
func (c *Cache) Get(key cache.Key) (cache.Lookup, error) {
	l, err := c.local.Get(key)
	if err != nil || l.Hit() {
		return l, err
	}
	hex := key.Hex()
	c.mu.Lock()
	known := c.absent[hex]
	c.mu.Unlock()
	if known {
		return l, nil
	}
	payload, why := c.remote.GetEntry(context.Background(), key)
	switch why {
	case cache.MissNone:
		if err := c.local.Write(key, payload); err != nil {
			c.remote.log.Debug("keeping a fleet tier entry locally failed", "error", err)
		}
		return cache.Lookup{Payload: payload, Remote: true}, nil
	case cache.MissUnavailable:
	default:
		c.mu.Lock()
		if len(c.absent) >= maxRemembered {
			clear(c.absent)
		}
		c.absent[hex] = true
		c.mu.Unlock()
	}
	return l, nil
}

// Write stores payload locally and queues its upload. Only the local write can
// fail.
func (c *Cache) Write(key cache.Key, payload []byte) error {
	if err := c.local.Write(key, payload); err != nil {
		return err
	}
	entry, err := cache.EncodeEntry(key, payload)
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.absent, key.Hex())
	c.mu.Unlock()
	c.remote.queue.add(task{op: "put pipeline", size: int64(len(entry)), run: func(ctx context.Context) error {
		return c.remote.PutEntry(ctx, key, entry)
	}})
	return nil
}

// Flush waits (bounded) for the queued uploads, flushes the local cache and
// adds the remote's counts to the local usage file.
func (c *Cache) Flush(ctx context.Context) error {
	c.remote.Flush(ctx)
	return errors.Join(c.local.Flush(ctx), c.reportUsage(ctx))
}

// reportUsage adds the remote counts not yet reported to the usage file.
func (c *Cache) reportUsage(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	now := c.remote.Usage()
	delta := now.Sub(c.reported)
	if delta.IsZero() {
		return nil
	}
	if err := c.local.AddUsage(ctx, cache.Usage{Remote: delta}); err != nil {
		return err
	}
	c.reported = now
	return nil
}
