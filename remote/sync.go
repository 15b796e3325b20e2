package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/pgo"
)

// transfers is how many objects Push and Pull move at once.
const transfers = 8

// PushReport is what [Store.Push] did.
type PushReport struct {
	// Pipelines were uploaded; PipelinesPresent were there already.
	Pipelines, PipelinesPresent int
	// Records and Routes were published.
	Records, Routes int
	// Skipped says, per record or route, why it was not published.
	Skipped []string
}

// Push seeds the fleet tier from this machine: it uploads every valid local
// pipeline entry the remote lacks, publishes every autotune record keyed by a
// device ([autotune.DeviceAdapter]) and every PGO route. Any of the local
// stores may be nil. Unlike the automatic traffic, a failure is returned: push
// is a command a person waits on.
func (s *Store) Push(ctx context.Context, local *cache.DiskCache, tune *autotune.Store, routes *pgo.Table) (PushReport, error) {
	var r PushReport
	if local != nil {
		names, err := s.listRetrying(ctx, "pipelines", "pipelines/", "pipelines")
		if err != nil {
			return r, err
		}
		present := map[string]bool{}
		for _, n := range names {
			present[strings.TrimPrefix(n, layout+"pipelines/")] = true
		}
		var (
			mu   sync.Mutex
			errs []error
			wg   sync.WaitGroup
			sem  = make(chan struct{}, transfers)
		)
		err = local.Walk(ctx, func(key cache.Key, entry []byte) error {
			if present[key.Hex()] {
				r.PipelinesPresent++
				return nil
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := s.PutEntry(ctx, key, entry)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else {
					r.Pipelines++
				}
			}()
			return nil
		})
		wg.Wait()
		if err := errors.Join(append(errs, err)...); err != nil {
			return r, err
		}
	}
	if tune != nil {
		for k, rec := range tune.Records() {
			id, fp, ok := autotune.SplitDeviceAdapter(k.Adapter())
			if !ok {
				r.Skipped = append(r.Skipped, fmt.Sprintf("autotune record %s: its adapter %q names no device fingerprint", k, k.Adapter()))
				continue
			}
			err := s.PublishTuning(ctx, TuningRecord{Key: k.Hex(), BackendID: id, Fingerprint: fp, Record: rec, MeasuredAt: RecordTime(rec)})
			if err != nil {
				return r, err
			}
			r.Records++
		}
	}
	if routes != nil {
		for op, route := range routes.Routes() {
			if route.AdapterFingerprint == "" {
				r.Skipped = append(r.Skipped, fmt.Sprintf("PGO route %s: no adapter fingerprint", op))
				continue
			}
			if err := s.PublishRoute(ctx, op, route); err != nil {
				return r, err
			}
			r.Routes++
		}
	}
	return r, nil
}

// PullReport is what [Store.Pull] did.
type PullReport struct {
	// Pipelines were downloaded; PipelinesPresent were here already;
	// PipelinesBad were objects that are not valid entries (left alone).
	Pipelines, PipelinesPresent, PipelinesBad int
	// Records and Routes were taken into the local stores.
	Records, Routes int
}

// Pull seeds this machine from the fleet tier: it downloads every pipeline
// entry the local cache lacks (each verified against its name before it is
// written), takes the newest publication of every tuning record that is newer
// than the local one (or missing here), and for each op the newest route whose
// backend is live here (see [Store.Route]) when the local route is missing,
// stale or older; then it saves the autotune store and the PGO table. Any of
// the local stores may be nil.
func (s *Store) Pull(ctx context.Context, local *cache.DiskCache, tune *autotune.Store, routes *pgo.Table, live []pgo.Live) (PullReport, error) {
	var r PullReport
	if local != nil {
		if err := s.pullPipelines(ctx, local, &r); err != nil {
			return r, err
		}
	}
	if tune != nil {
		if err := s.pullTuning(ctx, tune, &r); err != nil {
			return r, err
		}
		if _, err := tune.SaveIfDirty(ctx); err != nil {
			return r, err
		}
	}
	if routes != nil {
		if err := s.pullRoutes(ctx, routes, live, &r); err != nil {
			return r, err
		}
		if _, err := routes.Save(ctx); err != nil {
			return r, err
		}
	}
	return r, nil
}

// listRetrying lists the objects under layout+dir through s.do (the attempt
// named "list "+op, retried as every call is); its error says the fleet tier's
// what could not be listed.
func (s *Store) listRetrying(ctx context.Context, op, dir, what string) ([]string, error) {
	var names []string
	err := s.do(ctx, "list "+op, func(ctx context.Context) error {
		var err error
		names, err = s.list(ctx, layout+dir)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the fleet tier's %s: %w", what, err)
	}
	return names, nil
}

func (s *Store) pullPipelines(ctx context.Context, local *cache.DiskCache, r *PullReport) error {
	names, err := s.listRetrying(ctx, "pipelines", "pipelines/", "pipelines")
	if err != nil {
		return err
	}
	have, err := local.Names(ctx)
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, transfers)
	)
	for _, name := range names {
		hex := strings.TrimPrefix(name, layout+"pipelines/")
		if have[hex] {
			r.PipelinesPresent++
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var data []byte
			err := s.do(ctx, "get pipeline", func(ctx context.Context) error {
				var err error
				data, err = s.bucket.ReadAll(ctx, name)
				return err
			})
			var writeErr error
			key, payload, miss := cache.ParseEntry(data)
			if err == nil && miss == cache.MissNone && key.Hex() == hex {
				writeErr = local.Write(key, payload)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && !isNotFound(err):
				errs = append(errs, err)
			case writeErr != nil:
				errs = append(errs, writeErr)
			case err == nil && miss == cache.MissNone && key.Hex() == hex:
				r.Pipelines++
			case err == nil:
				r.PipelinesBad++
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, local.Flush(ctx))...)
}

func (s *Store) pullTuning(ctx context.Context, tune *autotune.Store, r *PullReport) error {
	names, err := s.listRetrying(ctx, "records", "autotune/", "tuning records")
	if err != nil {
		return err
	}
	newest := map[string]string{}
	for _, n := range names {
		dir := n[:strings.LastIndexByte(n, '/')+1]
		if _, ok := stampTime(n[len(dir):]); ok && newest[dir] < n {
			newest[dir] = n
		}
	}
	for _, name := range newest {
		v, ok := s.fetch(ctx, name, func(data []byte) (any, error) { return decodeTuning(data) })
		if !ok {
			continue
		}
		rec := v.(TuningRecord)
		if tuningDir(rec.BackendID, rec.Fingerprint, rec.Key)+name[strings.LastIndexByte(name, '/')+1:] != name {
			continue
		}
		key, err := autotune.ParseKey(rec.Key, autotune.DeviceAdapter(rec.BackendID, rec.Fingerprint))
		if err != nil {
			continue
		}
		if mine, ok := tune.Get(key); ok && !rec.MeasuredAt.After(RecordTime(mine)) {
			continue
		}
		if err := tune.Put(key, rec.Record); err != nil {
			return err
		}
		r.Records++
	}
	return nil
}

func (s *Store) pullRoutes(ctx context.Context, routes *pgo.Table, live []pgo.Live, r *PullReport) error {
	ops := map[string]bool{}
	seen := map[string]bool{}
	for _, l := range live {
		if seen[l.AdapterFingerprint] || !validSegment(l.AdapterFingerprint) {
			continue
		}
		seen[l.AdapterFingerprint] = true
		idx := s.index(ctx, l.AdapterFingerprint)
		if idx.failed {
			return fmt.Errorf("list the fleet tier's routes for adapter %s: the remote failed (see the log)", l.AdapterFingerprint)
		}
		for _, name := range idx.routes {
			v, ok := s.fetch(ctx, name, func(data []byte) (any, error) {
				op, route, err := decodeRoute(data)
				return fetchedRoute{op, route}, err
			})
			if ok {
				ops[v.(fetchedRoute).op] = true
			}
		}
	}
	for op := range ops {
		theirs, ok := s.Route(ctx, op, live)
		if !ok {
			continue
		}
		mine, have := routes.Route(op)
		if have && mine.StaleReason(live) == "" && !theirs.MeasuredAt.After(mine.MeasuredAt) {
			continue
		}
		if err := routes.Set(op, theirs); err != nil {
			return err
		}
		r.Routes++
	}
	return nil
}
