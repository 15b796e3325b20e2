package host

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/remote"
)

// CacheEnv is the environment variable that turns the default pipeline cache
// off when it is "off" (as Options.NoCache does).
const CacheEnv = "KILN_CACHE"

// The part the pipeline cache played in a compile, as Result.Cache and
// Pipeline.CacheStatus report it.
const (
	// CacheHit: an entry for the pipeline's key was found and sent to the plugin.
	CacheHit = "hit"
	// CacheMiss: no usable entry; whatever blob the plugin returned was stored.
	CacheMiss = "miss"
	// CacheOff: the host runs without a pipeline cache.
	CacheOff = "off"
)

// PipelineCache is the pipeline cache a host compiles through:
// *cache.DiskCache, or *remote.Cache (a DiskCache with the fleet tier behind
// it) — or any store with the same three methods.
type PipelineCache interface {
	// Get returns key's entry, or a miss with its reason; an error is logged
	// and counts as a miss.
	Get(key cache.Key) (cache.Lookup, error)
	// Write stores the blob a plugin returned under key.
	Write(key cache.Key, payload []byte) error
	// Flush makes the writes durable; the host calls it at Close.
	Flush(ctx context.Context) error
}

// stores are the persistent stores of one host; a nil one is off, and so are all
// of them when the *stores itself is nil. Only the host
// reads and writes them: plugins get a cached blob with a compile request and
// return a new one, and never touch a file.
type stores struct {
	cache  PipelineCache
	tune   *autotune.Store
	pgo    *pgo.Table
	remote *remote.Store // the fleet tier; nil when none
	// closed stops the publication of saves once the host is closed.
	closed atomic.Bool
}

// openStores takes the stores given in opts and opens or loads the others at
// their default paths, then puts the fleet tier (opts.Remote, else $KILN_REMOTE)
// behind them. A store that cannot be opened is logged and left off: it never
// stops the host (kiln doctor explains the problem).
func openStores(opts Options, getenv func(string) string, log hclog.Logger) *stores {
	s := &stores{cache: opts.Cache, tune: opts.Autotune, pgo: opts.PGO}
	if c, ok := s.cache.(*cache.DiskCache); ok && c == nil {
		s.cache = nil
	}
	switch {
	case opts.NoCache:
		s.cache = nil
	case s.cache == nil && getenv(CacheEnv) == "off":
		log.Debug("pipeline cache is off", "env", CacheEnv)
	case s.cache == nil:
		if c := openDefault(log, cache.DefaultRoot, cache.Open, "the pipeline cache"); c != nil {
			s.cache = c
		}
	}
	switch {
	case opts.NoAutotune:
		s.tune = nil
	case s.tune == nil:
		s.tune = openDefault(log, autotune.DefaultPath, autotune.Load, "autotune records")
	}
	switch {
	case opts.NoPGO:
		s.pgo = nil
	case s.pgo == nil:
		s.pgo = openDefault(log, pgo.DefaultPath, pgo.Load, "PGO routes")
	}
	s.openRemote(opts.Remote, opts.RemoteBucket, getenv, log)
	return s
}

// openDefault opens a store at its default path (defaultPath, then open); when
// either fails it logs that the host runs without what and returns the zero
// value.
func openDefault[T any](log hclog.Logger, defaultPath func() (string, error), open func(string) (T, error), what string) T {
	path, err := defaultPath()
	if err == nil {
		var store T
		if store, err = open(path); err == nil {
			return store
		}
	}
	log.Warn("running without "+what, "error", err)
	var zero T
	return zero
}

// routes returns the PGO table, nil when routing is off.
func (s *stores) routes() *pgo.Table {
	if s == nil {
		return nil
	}
	return s.pgo
}

// flush makes the pipeline cache's new entries durable and waits, bounded, for
// the fleet tier's queued uploads; publication of saves stops.
func (s *stores) flush(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.closed.Store(true)
	if s.cache == nil {
		if s.remote != nil {
			s.remote.Flush(ctx)
		}
		return nil
	}
	return s.cache.Flush(ctx)
}

// pipelineKey is the cache key of prog compiled on b with spec and the
// effective workgroup size wg. The push-constant range is the GPU backends'
// contract (one u32 element count per buffer), so FeaturePushConstants is set
// whenever it is non-empty.
func pipelineKey(b *Backend, prog *ir.Program, spec ir.SpecMap, wg [3]uint32) (cache.Key, error) {
	digest, err := cache.ProgramDigest(prog)
	if err != nil {
		return cache.Key{}, err
	}
	k := cache.Key{
		ProgramDigest:     digest,
		BindingSignature:  ir.BindingSignature(prog),
		PushConstantSize:  elementBytes * uint32(len(prog.Buffers)),
		WorkgroupSize:     wg,
		SpecHash:          spec.CacheHash(),
		BackendID:         b.p.desc.ID,
		PluginVersion:     b.p.desc.Version,
		DeviceFingerprint: b.adapter.Identity.ModelFingerprint(),
	}
	if k.PushConstantSize > 0 {
		k.Features = cache.FeaturePushConstants
	}
	return k, nil
}

// The part the fleet tier played in a compile, beside CacheHit and CacheMiss.
const (
	// CacheRemoteHit: the local cache missed and the fleet tier had a verified
	// entry for the key, now kept locally too.
	CacheRemoteHit = "remote-hit"
)

// readBlob returns the cached blob for key (nil on a miss) and the cache status.
// A miss that found an unusable entry is logged with its reason; a cache that
// cannot be read is logged and counts as a miss.
func (s *stores) readBlob(log hclog.Logger, key cache.Key) ([]byte, string) {
	if s == nil || s.cache == nil {
		return nil, CacheOff
	}
	l, err := s.cache.Get(key)
	switch {
	case err != nil:
		log.Warn("pipeline cache read failed; compiling without it", "backend", key.BackendID, "error", err)
		return nil, CacheMiss
	case l.Hit() && l.Remote:
		return l.Payload, CacheRemoteHit
	case l.Hit():
		return l.Payload, CacheHit
	case l.Miss != cache.MissAbsent:
		log.Warn("pipeline cache entry unusable; compiling again", "backend", key.BackendID, "reason", l.Miss)
	}
	return nil, CacheMiss
}

// storeBlob stores the blob a plugin returned for key, unless it is empty, the
// one the plugin was sent, or over the cache's entry bound (a plugin never
// decides what the host writes). Failures are logged: a compile never fails
// because its blob could not be kept.
func (s *stores) storeBlob(log hclog.Logger, key cache.Key, sent, got []byte) {
	switch {
	case s == nil || s.cache == nil || len(got) == 0 || bytes.Equal(sent, got):
		return
	case len(got) > cache.MaxEntryBytes:
		log.Warn("plugin returned a pipeline blob over the cache's entry bound; not stored", "backend", key.BackendID, "bytes", len(got), "limit", cache.MaxEntryBytes)
		return
	}
	if err := s.cache.Write(key, got); err != nil {
		log.Warn("pipeline cache write failed", "backend", key.BackendID, "error", err)
	}
}

// tunedRecord returns the autotune record for prog with spec on b's device,
// when there is one the adapter can run: the local record, or the fleet tier's
// when it was measured later.
func (s *stores) tunedRecord(log hclog.Logger, b *Backend, prog *ir.Program, spec ir.SpecMap) (autotune.Record, bool) {
	return s.recordOf(log, b, prog.Name, func(adapter string) autotune.Key { return autotune.KeyFor(prog, spec, adapter) })
}

// recordOf returns the record under the key keyOf makes of b's device adapter
// (see tunedRecord); what names the program or kernel in a warning.
func (s *stores) recordOf(log hclog.Logger, b *Backend, what string, keyOf func(adapter string) autotune.Key) (autotune.Record, bool) {
	if s == nil || s.tune == nil {
		return autotune.Record{}, false
	}
	fingerprint := b.adapter.Identity.Fingerprint()
	key := keyOf(autotune.DeviceAdapter(b.ID(), fingerprint))
	rec, ok := s.tune.Get(key)
	if theirs, found := s.remoteTuning(b.ID(), fingerprint, key.Hex()); found && (!ok || theirs.MeasuredAt.After(remote.RecordTime(rec))) {
		rec, ok = theirs.Record, true
	}
	if !ok {
		return autotune.Record{}, false
	}
	wg := rec.WorkgroupSize
	total := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2])
	limit := uint64(b.adapter.Profile.MaxInvocationsPerWorkgroup)
	if total == 0 || (limit > 0 && total > limit) {
		log.Warn("ignoring an autotune record the adapter cannot run", "program", what, "backend", b.Name(), "workgroup_size", wg, "max_invocations", limit)
		return autotune.Record{}, false
	}
	return rec, true
}

// tunedSize returns the workgroup size an autotune record holds for prog with
// spec on b's device (see tunedRecord).
func (s *stores) tunedSize(log hclog.Logger, b *Backend, prog *ir.Program, spec ir.SpecMap) ([3]uint32, bool) {
	rec, ok := s.tunedRecord(log, b, prog, spec)
	return rec.WorkgroupSize, ok
}

// Tuning is what an autotune record holds for a program on a backend's device.
type Tuning struct {
	// WorkgroupSize is the tuned workgroup size.
	WorkgroupSize [3]uint32
	// Params are the tuned values of the program's tunables (parameters with
	// candidates, such as vector_add's epi), empty for records of the workgroup
	// size alone.
	Params ir.SpecMap
}

// Tuning returns the autotune record for prog with spec on b's device, the one
// kiln tune saved. Compile applies the record's workgroup size by itself (to
// launches by Invocations only; a launch by Grid keeps the program's size), but
// never its Params: a tunable can change how many invocations a launch needs
// (matmul_reg's bm and bn), which only the caller can recompute. A caller that
// can (kiln run does, for the corpus kernels) compiles with spec plus Params and
// the tuned workgroup size, and sizes its launch for them.
func (b *Backend) Tuning(prog *ir.Program, spec ir.SpecMap) (Tuning, bool) {
	rec, ok := b.p.set.stores.tunedRecord(b.p.log, b, prog, spec)
	if !ok {
		return Tuning{}, false
	}
	params, err := autotune.ParseParams(prog, rec.Params)
	if err != nil {
		b.p.log.Warn("ignoring an autotune record whose params do not fit the program", "program", prog.Name, "backend", b.Name(), "error", err)
		return Tuning{}, false
	}
	return Tuning{WorkgroupSize: rec.WorkgroupSize, Params: params}, true
}

// TunedOptions returns the searched options (a tile: "tk=64 tm=256 tn=128")
// that kiln tune recorded for the corpus kernel named kernel with its fixed
// options fixed (type=bf16) on b's device, under autotune.OptionsKey; ok is
// false when there is no record. The options build the kernel's program, so
// only the caller (kiln run, through kernels.Kernel.ParseTunedOptions) can
// apply them; the program they build then finds its own record for its
// workgroup size and tunables.
func (b *Backend) TunedOptions(kernel string, fixed ir.SpecMap) (string, bool) {
	rec, ok := b.p.set.stores.recordOf(b.p.log, b, kernel, func(adapter string) autotune.Key {
		return autotune.OptionsKey(kernel, fixed, adapter)
	})
	return rec.Params, ok
}

// Live returns the routing identity of every available adapter of every running
// backend, as pgo.Table.Fresh and Stale take them.
func (h *Host) Live() []pgo.Live {
	var out []pgo.Live
	for _, p := range h.running() {
		for _, a := range p.desc.Adapters {
			if a.Available {
				out = append(out, (&Backend{p: p, adapter: a}).Live())
			}
		}
	}
	return out
}

// Live returns the backend's routing identity: its name ("vulkan:0"), its
// adapter's fingerprint and its plugin's version.
func (b *Backend) Live() pgo.Live {
	return pgo.Live{ID: b.Name(), AdapterFingerprint: b.adapter.Identity.Fingerprint(), PluginVersion: b.p.desc.Version}
}

// Selection reasons that do not depend on a route.
const (
	// SelectedExplicitly: the launch named the backend.
	SelectedExplicitly = "explicit"
	// selectedPreferred prefixes why the preferred backend ran instead of a route.
	selectedPreferred = "preferred: "
)

// choose picks the backend for a launch of prog of size bytes (launchBytes):
// the named one; else the backend of prog's fresh PGO route (of the size
// class nearest bytes) when it is healthy (its process runs, it
// dispatches, it is no reference oracle and its adapter opens); else the
// preferred one. It returns why, for Result.Selection.
func (h *Host) choose(ctx context.Context, prog *ir.Program, name string, bytes int64) (*Backend, string, error) {
	if name != "" {
		b, err := h.Acquire(ctx, name)
		return b, SelectedExplicitly, err
	}
	why := "PGO routing is off"
	if t := h.stores.routes(); t != nil {
		route, stale, measuredAs := h.freshRoute(t, prog.Name, bytes)
		if stale != "" {
			why = stale
		} else if b, err := h.routed(ctx, route); err != nil {
			why = fmt.Sprintf("the PGO route for %s names %s, which is not usable: %v", prog.Name, route.Backend, err)
		} else {
			return b, routeReason(route, bytes, measuredAs), nil
		}
	}
	b, err := h.AcquirePreferred(ctx)
	return b, selectedPreferred + why, err
}

// routed acquires the backend of a fresh route if it is healthy.
func (h *Host) routed(ctx context.Context, r pgo.Route) (*Backend, error) {
	id, _, err := parseName(r.Backend)
	if err != nil {
		return nil, err
	}
	p := h.lookup(id)
	switch {
	case p == nil:
		return nil, &NotFoundError{Name: r.Backend, Known: h.IDs()}
	case IsReferenceOracle(p.desc):
		return nil, fmt.Errorf("%s is a reference oracle, used only when named", id)
	case !p.desc.Dispatches:
		return nil, fmt.Errorf("%s does not dispatch", id)
	case !p.alive():
		return nil, fmt.Errorf("%s is down after a crash", id)
	}
	return h.Acquire(ctx, r.Backend)
}

// PGOCandidate adapts a Backend to pgo.Candidate for pgo.Certify. It compiles the
// program once (again when the program, its specialization or its workgroup
// size changes) and reports each dispatch's host-measured round trip, so every
// backend is timed the same way. Close releases its pipeline. It is not safe
// for concurrent use; Certify measures one dispatch at a time.
type PGOCandidate struct {
	b *Backend

	// prog, spec and wg identify what pl was compiled for.
	prog *ir.Program
	spec uint64
	wg   [3]uint32
	pl   *Pipeline
}

// NewPGOCandidate returns b as a pgo.Candidate.
func NewPGOCandidate(b *Backend) *PGOCandidate { return &PGOCandidate{b: b} }

// Identity is b's routing identity (see Backend.Live).
func (t *PGOCandidate) Identity() pgo.Live { return t.b.Live() }

// Dispatch runs p once on inputs with l and returns the host-measured round trip
// of the dispatch (compiling first, untimed, when needed).
func (t *PGOCandidate) Dispatch(ctx context.Context, p *ir.Program, inputs [][]byte, l pgo.Launch) (time.Duration, error) {
	if t.pl == nil || t.prog != p || t.spec != l.Spec.CacheHash() || t.wg != l.WorkgroupSize {
		if err := t.Close(ctx); err != nil {
			return 0, err
		}
		pl, err := t.b.Compile(ctx, p, CompileOptions{Spec: l.Spec, WorkgroupSize: l.WorkgroupSize, byGrid: true})
		if err != nil {
			return 0, err
		}
		t.prog, t.spec, t.wg, t.pl = p, l.Spec.CacheHash(), l.WorkgroupSize, pl
	}
	res, err := t.b.Dispatch(ctx, t.pl, Work{Grid: l.Grid, Inputs: inputs, OutputCounts: l.OutputCounts, Uniforms: l.Uniforms})
	if err != nil {
		return 0, err
	}
	return res.Dispatch, nil
}

// Close releases the compiled pipeline, if any.
func (t *PGOCandidate) Close(ctx context.Context) error {
	if t.pl == nil {
		return nil
	}
	pl := t.pl
	t.pl, t.prog = nil, nil
	return t.b.Release(ctx, pl)
}

// PGOCandidate is what pgo.Certify measures.
var _ pgo.Candidate = (*PGOCandidate)(nil)
