package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/pgo"
)

// Tuning records and routes are published as small JSON objects, one per
// publication, never overwritten: a record's newest publication wins, so
// machines publishing at once lose nothing. Their names sort by measurement
// time:
//
//	kiln/v1/autotune/<fingerprint>/<backend id>/<key>/<stamp>.json
//	kiln/v1/routes/<fingerprint>/<sha256(op), 32 hex>/<stamp>.json
//
// where <stamp> is the measurement time in Unix nanoseconds, 20 digits, a dash
// and 16 random hex digits. A machine lists only the fingerprints of its own
// adapters.
const (
	tuningFormat = 1
	routeFormat  = 1
	// maxRecordBytes bounds a record or route object.
	maxRecordBytes = 64 << 10
	// maxFetched bounds the decoded objects a Store remembers.
	maxFetched = 4096
)

// TuningRecord is an autotune record as the fleet tier holds it: the record,
// the device it was measured on, and when.
type TuningRecord struct {
	// Key is the autotune key's hex ([autotune.Key.Hex]).
	Key string
	// BackendID and Fingerprint name the device: the backend's id ("vulkan")
	// and the adapter's identity fingerprint.
	BackendID, Fingerprint string
	Record                 autotune.Record
	// MeasuredAt decides which of two publications of one record wins.
	MeasuredAt time.Time
}

// tuningDoc is a tuning object's JSON.
type tuningDoc struct {
	Format        int       `json:"kiln_tuning"`
	Key           string    `json:"key"`
	Backend       string    `json:"backend"`
	Fingerprint   string    `json:"fingerprint"`
	WorkgroupSize [3]uint32 `json:"workgroup_size"`
	Unroll        uint32    `json:"unroll"`
	Tile          [3]uint32 `json:"tile"`
	// Params are the tunables' values (autotune.Record.Params), when any.
	Params     string    `json:"params,omitempty"`
	RecordedAt string    `json:"recorded_at"`
	MeasuredAt time.Time `json:"measured_at"`
}

// routeDoc is a route object's JSON.
type routeDoc struct {
	Format             int              `json:"kiln_route"`
	Op                 string           `json:"op"`
	Backend            string           `json:"backend"`
	AdapterFingerprint string           `json:"adapter_fingerprint"`
	PluginVersion      string           `json:"plugin_version"`
	MeasuredAt         time.Time        `json:"measured_at"`
	Observations       []observationDoc `json:"observations"`
	// Classes are the routes per size class (pgo.Route.Classes), when any.
	Classes []classDoc `json:"classes,omitempty"`
}

// classDoc is one size class of a route object.
type classDoc struct {
	Bytes              int64            `json:"bytes"`
	Backend            string           `json:"backend"`
	AdapterFingerprint string           `json:"adapter_fingerprint"`
	PluginVersion      string           `json:"plugin_version"`
	Observations       []observationDoc `json:"observations"`
}

type observationDoc struct {
	Backend  string `json:"backend"`
	MedianNs int64  `json:"median_ns"`
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	if len(data) > maxRecordBytes {
		return fmt.Errorf("%d bytes, over the %d-byte bound", len(data), maxRecordBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}

// decodeTuning parses a tuning object and checks it names a record.
func decodeTuning(data []byte) (TuningRecord, error) {
	var d tuningDoc
	if err := decodeStrict(data, &d); err != nil {
		return TuningRecord{}, err
	}
	switch {
	case d.Format != tuningFormat:
		return TuningRecord{}, fmt.Errorf("tuning format %d, want %d", d.Format, tuningFormat)
	case !isHex(d.Key, 32):
		return TuningRecord{}, fmt.Errorf("key %q is not 32 hex digits", d.Key)
	case !validSegment(d.Backend) || !validSegment(d.Fingerprint):
		return TuningRecord{}, errors.New("no backend id or fingerprint")
	}
	return TuningRecord{Key: d.Key, BackendID: d.Backend, Fingerprint: d.Fingerprint, MeasuredAt: d.MeasuredAt.UTC(),
		Record: autotune.Record{WorkgroupSize: d.WorkgroupSize, Unroll: d.Unroll, Tile: d.Tile, Params: d.Params, RecordedAt: d.RecordedAt}}, nil
}

// decodeRoute parses a route object and checks it names a route.
func decodeRoute(data []byte) (string, pgo.Route, error) {
	var d routeDoc
	if err := decodeStrict(data, &d); err != nil {
		return "", pgo.Route{}, err
	}
	if d.Format != routeFormat {
		return "", pgo.Route{}, fmt.Errorf("route format %d, want %d", d.Format, routeFormat)
	}
	r := pgo.Route{Backend: d.Backend, AdapterFingerprint: d.AdapterFingerprint, PluginVersion: d.PluginVersion, MeasuredAt: d.MeasuredAt.UTC()}
	for _, o := range d.Observations {
		r.Observations = append(r.Observations, pgo.Observation(o))
	}
	for _, c := range d.Classes {
		cr := pgo.ClassRoute{Bytes: c.Bytes, Backend: c.Backend, AdapterFingerprint: c.AdapterFingerprint, PluginVersion: c.PluginVersion}
		for _, o := range c.Observations {
			cr.Observations = append(cr.Observations, pgo.Observation(o))
		}
		r.Classes = append(r.Classes, cr)
	}
	if err := pgo.New("").Set(d.Op, r); err != nil {
		return "", pgo.Route{}, err
	}
	if !validSegment(d.AdapterFingerprint) {
		return "", pgo.Route{}, errors.New("no adapter fingerprint")
	}
	return d.Op, r, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// validSegment reports whether s can be one segment of an object name.
func validSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// stamp names one publication made at t: sortable by time, unique by chance.
func stamp(t time.Time) string {
	return fmt.Sprintf("%020d-%016x.json", max(t.UnixNano(), 0), rand.Uint64())
}

// stampTime reads the time out of a stamp; ok is false for another name.
func stampTime(name string) (time.Time, bool) {
	if len(name) != 20+1+16+5 || name[20] != '-' || !strings.HasSuffix(name, ".json") {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n).UTC(), true
}

func tuningPrefix(fingerprint string) string {
	return layout + "autotune/" + url.PathEscape(fingerprint) + "/"
}

func tuningDir(backendID, fingerprint, key string) string {
	return tuningPrefix(fingerprint) + url.PathEscape(backendID) + "/" + key + "/"
}

func routePrefix(fingerprint string) string {
	return layout + "routes/" + url.PathEscape(fingerprint) + "/"
}

func opHash(op string) string {
	sum := sha256.Sum256([]byte(op))
	return hex.EncodeToString(sum[:16])
}

func routeDir(op, fingerprint string) string { return routePrefix(fingerprint) + opHash(op) + "/" }

// RecordTime is when an autotune record was measured, from its RecordedAt
// (RFC 3339, or a YYYY-MM-DD date); the zero time when it has neither.
func RecordTime(r autotune.Record) time.Time {
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, r.RecordedAt); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// PublishTuning uploads one publication of a tuning record, then removes the
// record's older publications (best effort: the newest wins anyway). A record
// measured at the zero time is stamped now.
func (s *Store) PublishTuning(ctx context.Context, r TuningRecord) error {
	if !isHex(r.Key, 32) || !validSegment(r.BackendID) || !validSegment(r.Fingerprint) {
		return fmt.Errorf("tuning record %q on %s/%s cannot be published. Fix: key records by autotune.DeviceAdapter", r.Key, r.BackendID, r.Fingerprint)
	}
	at := r.MeasuredAt
	if at.IsZero() {
		at = time.Now()
	}
	doc := tuningDoc{Format: tuningFormat, Key: r.Key, Backend: r.BackendID, Fingerprint: r.Fingerprint,
		WorkgroupSize: r.Record.WorkgroupSize, Unroll: r.Record.Unroll, Tile: r.Record.Tile, Params: r.Record.Params, RecordedAt: r.Record.RecordedAt, MeasuredAt: at.UTC()}
	return s.publish(ctx, "publish tuning record", tuningDir(r.BackendID, r.Fingerprint, r.Key), at, doc)
}

// PublishRoute uploads one publication of op's route (under its backend's
// adapter fingerprint), then removes the route's older publications there.
func (s *Store) PublishRoute(ctx context.Context, op string, r pgo.Route) error {
	if err := pgo.New("").Set(op, r); err != nil {
		return err
	}
	if !validSegment(r.AdapterFingerprint) {
		return fmt.Errorf("PGO route for %q has no adapter fingerprint. Fix: certify it again with 'kiln certify'", op)
	}
	doc := routeDoc{Format: routeFormat, Op: op, Backend: r.Backend, AdapterFingerprint: r.AdapterFingerprint,
		PluginVersion: r.PluginVersion, MeasuredAt: r.MeasuredAt.UTC()}
	for _, o := range r.Observations {
		doc.Observations = append(doc.Observations, observationDoc(o))
	}
	for _, c := range r.Classes {
		cd := classDoc{Bytes: c.Bytes, Backend: c.Backend, AdapterFingerprint: c.AdapterFingerprint, PluginVersion: c.PluginVersion}
		for _, o := range c.Observations {
			cd.Observations = append(cd.Observations, observationDoc(o))
		}
		doc.Classes = append(doc.Classes, cd)
	}
	return s.publish(ctx, "publish route", routeDir(op, r.AdapterFingerprint), r.MeasuredAt, doc)
}

// QueueTuning queues [Store.PublishTuning] behind the uploads already queued
// (write-behind): the caller never waits on the remote.
func (s *Store) QueueTuning(r TuningRecord) {
	s.queue.add(task{op: "publish tuning record", size: maxRecordBytes, run: func(ctx context.Context) error {
		return s.PublishTuning(ctx, r)
	}})
}

// QueueRoute queues [Store.PublishRoute] behind the uploads already queued.
func (s *Store) QueueRoute(op string, r pgo.Route) {
	s.queue.add(task{op: "publish route", size: maxRecordBytes, run: func(ctx context.Context) error {
		return s.PublishRoute(ctx, op, r)
	}})
}

// publish writes doc as a new object under dir (its name is unique: a time and
// 64 random bits) and deletes the objects there older than the newest.
func (s *Store) publish(ctx context.Context, op, dir string, at time.Time, doc any) error {
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	name := dir + stamp(at)
	err = s.do(ctx, op, func(ctx context.Context) error {
		return s.bucket.WriteAll(ctx, name, data, &blob.WriterOptions{ContentType: "application/json"})
	})
	if err != nil {
		return fmt.Errorf("%s to the fleet tier: %w", op, err)
	}
	s.counts.writes.Add(1)
	var names []string
	s.do(ctx, "list "+op, func(ctx context.Context) error {
		names, err = s.list(ctx, dir)
		return err
	})
	// Only publications are pruned: another writer's temporary file (a
	// shared directory shows them) is left alone.
	var stamped []string
	for _, n := range names {
		if !strings.HasPrefix(n, dir) {
			continue
		}
		if _, ok := stampTime(n[len(dir):]); ok {
			stamped = append(stamped, n)
		}
	}
	newest := ""
	for _, n := range stamped {
		newest = max(newest, n)
	}
	for _, n := range stamped {
		if n < newest {
			s.do(ctx, "prune "+op, func(ctx context.Context) error { return s.bucket.Delete(ctx, n) })
		}
	}
	return nil
}

// list returns the names of the objects under prefix.
func (s *Store) list(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return names, err
		}
		if !obj.IsDir {
			names = append(names, obj.Key)
		}
	}
}

// readSmall reads a record or route object.
func (s *Store) readSmall(ctx context.Context, name string) ([]byte, error) {
	var data []byte
	err := s.do(ctx, "read record", func(ctx context.Context) error {
		r, err := s.bucket.NewReader(ctx, name, nil)
		if err != nil {
			return err
		}
		defer r.Close()
		data, err = io.ReadAll(io.LimitReader(r, maxRecordBytes+1))
		return err
	})
	return data, err
}

// fleet is what a Store knows of the records and routes of the fingerprints
// it has been asked about: the newest object of each, listed once per
// fingerprint per process, and the objects it has read.
type fleet struct {
	mu      sync.Mutex
	indexes map[string]*fpIndex
	fetched map[string]any // object name → TuningRecord or fetchedRoute
}

// fpIndex holds the newest object name per record (backend id/key) and per
// route (op hash) of one fingerprint.
type fpIndex struct {
	ready  chan struct{}
	failed bool
	tuning map[string]string
	routes map[string]string
}

type fetchedRoute struct {
	op    string
	route pgo.Route
}

// index returns fingerprint's index, listing it on first use. A listing that
// fails gives an empty index, listed again on a later call once the remote is
// back.
func (s *Store) index(ctx context.Context, fingerprint string) *fpIndex {
	f := &s.fleet
	f.mu.Lock()
	if f.indexes == nil {
		f.indexes = map[string]*fpIndex{}
	}
	idx := f.indexes[fingerprint]
	if idx == nil {
		idx = &fpIndex{ready: make(chan struct{}), tuning: map[string]string{}, routes: map[string]string{}}
		f.indexes[fingerprint] = idx
		f.mu.Unlock()
		s.fill(ctx, fingerprint, idx)
		return idx
	}
	f.mu.Unlock()
	select {
	case <-idx.ready:
	case <-ctx.Done():
		return &fpIndex{}
	}
	return idx
}

// fill lists fingerprint's records and routes into idx.
func (s *Store) fill(ctx context.Context, fingerprint string, idx *fpIndex) {
	defer close(idx.ready)
	var tuning, routes []string
	err := s.do(ctx, "list records", func(ctx context.Context) error {
		var err error
		if tuning, err = s.list(ctx, tuningPrefix(fingerprint)); err != nil {
			return err
		}
		routes, err = s.list(ctx, routePrefix(fingerprint))
		return err
	})
	if err != nil {
		idx.failed = true
		s.fleet.mu.Lock()
		delete(s.fleet.indexes, fingerprint)
		s.fleet.mu.Unlock()
		return
	}
	newest := func(into map[string]string, id, name string) {
		if into[id] < name {
			into[id] = name
		}
	}
	for _, name := range tuning {
		parts := strings.Split(strings.TrimPrefix(name, tuningPrefix(fingerprint)), "/")
		if len(parts) == 3 && isHex(parts[1], 32) {
			if _, ok := stampTime(parts[2]); ok {
				newest(idx.tuning, parts[0]+"/"+parts[1], name)
			}
		}
	}
	for _, name := range routes {
		parts := strings.Split(strings.TrimPrefix(name, routePrefix(fingerprint)), "/")
		if len(parts) == 2 && isHex(parts[0], 32) {
			if _, ok := stampTime(parts[1]); ok {
				newest(idx.routes, parts[0], name)
			}
		}
	}
}

// fetch reads and decodes an object once per Store; a failed read is tried
// again on a later call, an object that does not decode is not.
func (s *Store) fetch(ctx context.Context, name string, decode func([]byte) (any, error)) (any, bool) {
	f := &s.fleet
	f.mu.Lock()
	v, ok := f.fetched[name]
	f.mu.Unlock()
	if ok {
		return v, v != nil
	}
	data, err := s.readSmall(ctx, name)
	if err != nil {
		return nil, false
	}
	v, err = decode(data)
	if err != nil {
		s.log.Warn("fleet tier object does not decode; ignored", "object", name, "error", err)
		v = nil
	}
	f.mu.Lock()
	if f.fetched == nil || len(f.fetched) >= maxFetched {
		f.fetched = map[string]any{}
	}
	f.fetched[name] = v
	f.mu.Unlock()
	return v, v != nil
}

// Tuning returns the newest publication of the tuning record keyHex measured
// on backendID's adapter with fingerprint, if the fleet tier has one. The
// fingerprint's listing is made once per Store, the object read once.
func (s *Store) Tuning(ctx context.Context, backendID, fingerprint, keyHex string) (TuningRecord, bool) {
	idx := s.index(ctx, fingerprint)
	name := idx.tuning[url.PathEscape(backendID)+"/"+keyHex]
	if name == "" {
		return TuningRecord{}, false
	}
	v, ok := s.fetch(ctx, name, func(data []byte) (any, error) {
		r, err := decodeTuning(data)
		if err == nil && (r.Key != keyHex || r.BackendID != backendID || r.Fingerprint != fingerprint) {
			err = errors.New("the record inside names another key or device")
		}
		return r, err
	})
	if !ok {
		return TuningRecord{}, false
	}
	return v.(TuningRecord), true
}

// Route returns the newest route for op the fleet tier holds whose backend is
// live here: the same backend id, adapter fingerprint and plugin version as
// one of live. The route's Backend is renamed to that live backend's routing
// name, since the measuring machine may number its adapters differently.
func (s *Store) Route(ctx context.Context, op string, live []pgo.Live) (pgo.Route, bool) {
	var best pgo.Route
	found := false
	seen := map[string]bool{}
	for _, l := range live {
		if seen[l.AdapterFingerprint] || !validSegment(l.AdapterFingerprint) {
			continue
		}
		seen[l.AdapterFingerprint] = true
		name := s.index(ctx, l.AdapterFingerprint).routes[opHash(op)]
		if name == "" {
			continue
		}
		v, ok := s.fetch(ctx, name, func(data []byte) (any, error) {
			got, r, err := decodeRoute(data)
			return fetchedRoute{got, r}, err
		})
		if !ok {
			continue
		}
		fr := v.(fetchedRoute)
		if fr.op != op {
			continue
		}
		r, ok := matchLive(fr.route, live)
		if ok && (!found || r.MeasuredAt.After(best.MeasuredAt)) {
			best, found = r, true
		}
	}
	return best, found
}

// matchLive renames r's backend to the live backend measured as it was
// (pgo.Route.Follow), and its observation of that backend with it.
func matchLive(r pgo.Route, live []pgo.Live) (pgo.Route, bool) {
	moved, ok := r.Follow(live)
	if !ok || moved.Backend == r.Backend {
		return moved, ok
	}
	moved.Observations = append([]pgo.Observation(nil), r.Observations...)
	for i, o := range moved.Observations {
		if o.Backend == r.Backend {
			moved.Observations[i].Backend = moved.Backend
		}
	}
	return moved, true
}
