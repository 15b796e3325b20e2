package host

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"gocloud.dev/blob"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote"
)

// RemoteOff as Options.Remote or $KILN_REMOTE runs without a fleet tier.
const RemoteOff = "off"

// openRemote opens the fleet tier — bucket when the application gave one, else
// the one at url (else $KILN_REMOTE) — and puts it behind the stores: the
// pipeline cache reads through it and uploads behind compiles, and the
// autotune records and PGO routes the stores save are published to it. A URL
// that does not open is logged and the host runs without the tier.
func (s *stores) openRemote(url string, bucket *blob.Bucket, getenv func(string) string, log hclog.Logger) {
	var r *remote.Store
	if bucket != nil {
		r = remote.New(bucket, remote.Options{Logger: log})
	} else {
		if url == "" {
			url = getenv(remote.Env)
		}
		if url == "" || url == RemoteOff {
			return
		}
		var err error
		r, err = remote.Open(context.Background(), url, remote.Options{Logger: log})
		if err != nil {
			log.Warn("running without the fleet tier", "error", err)
			return
		}
	}
	s.remote = r
	if local, ok := s.cache.(*cache.DiskCache); ok {
		s.cache = remote.NewCache(local, r)
	}
	if s.tune != nil {
		s.tune.OnSaved(func(saved map[autotune.Key]autotune.Record) {
			if s.closed.Load() {
				return
			}
			for k, rec := range saved {
				if id, fp, ok := autotune.SplitDeviceAdapter(k.Adapter()); ok {
					r.QueueTuning(remote.TuningRecord{Key: k.Hex(), BackendID: id, Fingerprint: fp, Record: rec, MeasuredAt: remote.RecordTime(rec)})
				}
			}
		})
	}
	if s.pgo != nil {
		s.pgo.OnSaved(func(saved map[string]pgo.Route) {
			if s.closed.Load() {
				return
			}
			for op, route := range saved {
				if route.AdapterFingerprint != "" {
					r.QueueRoute(op, route)
				}
			}
		})
	}
}

// remoteTuning looks a tuning record up in the fleet tier, within one call
// deadline.
func (s *stores) remoteTuning(backendID, fingerprint, keyHex string) (remote.TuningRecord, bool) {
	if s.remote == nil {
		return remote.TuningRecord{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.remote.Timeout())
	defer cancel()
	return s.remote.Tuning(ctx, backendID, fingerprint, keyHex)
}

// remoteRoute looks op's route up in the fleet tier, within one call deadline.
func (s *stores) remoteRoute(op string, live []pgo.Live) (pgo.Route, bool) {
	if s == nil || s.remote == nil {
		return pgo.Route{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.remote.Timeout())
	defer cancel()
	return s.remote.Route(ctx, op, live)
}

// Remote returns the fleet tier the host reads through and publishes to, nil
// when it has none (see Options.Remote).
func (h *Host) Remote() *remote.Store {
	if h.stores == nil {
		return nil
	}
	return h.stores.remote
}

// PublishRoutes queues the publication of routes (by op) to the fleet tier,
// for routes saved to a table the host did not load itself (kiln certify's);
// the host's own table publishes what it saves. Without a fleet tier it does
// nothing. Close waits, bounded, for the queue.
func (h *Host) PublishRoutes(routes map[string]pgo.Route) {
	r := h.Remote()
	if r == nil {
		return
	}
	for op, route := range routes {
		if route.AdapterFingerprint != "" {
			r.QueueRoute(op, route)
		}
	}
}
