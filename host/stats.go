package host

import (
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Plugin states, as Stats and Report give them.
const (
	// StateNotStarted: the plugin has not been needed yet (plugins start lazily).
	StateNotStarted = "not started"
	// StateStarting: the plugin's first start is in progress.
	StateStarting = "starting"
	// StateReady: a process runs.
	StateReady = "ready"
	// StateDown: the process crashed; the plugin relaunches on next use.
	StateDown = "down"
	// StateFailing: the plugin crashed too often; see Options.FailureThreshold.
	StateFailing = "failing"
	// StateFailed: the plugin did not start (or was refused); see its error.
	StateFailed = "failed"
	// StateClosed: the host was closed.
	StateClosed = "closed"
)

// Error kinds, as ErrorKind names them and Stats counts them.
const (
	KindCrashed     = "crashed"
	KindHung        = "hung"
	KindTimeout     = "timeout"
	KindBadResult   = "bad_result"
	KindRejected    = "rejected"
	KindDevice      = "device"
	KindUnavailable = "unavailable"
	KindPlugin      = "plugin"
	KindLaunch      = "launch"
	KindLostBuffer  = "lost_buffer"
	KindUnsupported = "unsupported"
	KindStart       = "start"
	KindClosed      = "closed"
	KindOther       = "other"
)

// ErrorKind names the kind of an error the host returned: one of the Kind
// constants (KindCrashed for a *CrashedError, KindHung for a *TimeoutError of a
// hung plugin, …), KindOther for anything else.
func ErrorKind(err error) string {
	var (
		crashed     *CrashedError
		timeout     *TimeoutError
		bad         *BadResultError
		rejected    *RejectedError
		device      *DeviceError
		unavailable *UnavailableError
		plain       *PluginError
		launch      *LaunchError
		buffer      *BufferError
		lost        *LostBufferError
		unsupported *UnsupportedError
		start       *StartError
		closed      *ClosedError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &lost): // before crashed: a loss may wrap the crash
		return KindLostBuffer
	case errors.As(err, &crashed):
		return KindCrashed
	case errors.As(err, &timeout) && timeout.Hung:
		return KindHung
	case errors.As(err, &timeout):
		return KindTimeout
	case errors.As(err, &bad):
		return KindBadResult
	case errors.As(err, &rejected):
		return KindRejected
	case errors.As(err, &device):
		return KindDevice
	case errors.As(err, &unavailable):
		return KindUnavailable
	case errors.As(err, &plain):
		return KindPlugin
	case errors.As(err, &launch), errors.As(err, &buffer):
		return KindLaunch
	case errors.As(err, &unsupported):
		return KindUnsupported
	case errors.As(err, &start):
		return KindStart
	case errors.As(err, &closed):
		return KindClosed
	}
	return KindOther
}

// LatencyBounds are the upper bounds of the dispatch latency histogram's
// buckets, from 10µs to 60s.
func LatencyBounds() []time.Duration {
	return []time.Duration{
		10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
		250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
		5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
	}
}

// Histogram counts observations by bucket.
type Histogram struct {
	// Bounds are the buckets' upper bounds (LatencyBounds).
	Bounds []time.Duration
	// Counts has one count per bound (observations above the previous bound and
	// at most this one) and a last one for observations above every bound.
	Counts []uint64
	// Count and Sum are the number and the total of the observations.
	Count uint64
	Sum   time.Duration
}

// Stats is a snapshot of what a host measured, per backend plugin (see
// docs/design.md, "Plugin trust and operation").
type Stats struct {
	// Backends are in path order of their plugins.
	Backends []BackendStats
	// Failovers counts launches Host.Dispatch ran on another backend after the
	// first one failed.
	Failovers uint64
}

// BackendStats is what the host measured of one backend plugin since Open.
type BackendStats struct {
	// ID is the backend id; for a plugin that never started, its file name
	// without the kiln-backend- prefix.
	ID string
	// Path is the plugin executable.
	Path string
	// State is one of the State constants.
	State string
	// Dispatches and Compiles count the successful ones.
	Dispatches, Compiles uint64
	// Errors counts the errors calls on the backend returned, by ErrorKind.
	Errors map[string]uint64
	// Restarts counts relaunches after crashes, hangs and deaths while idle.
	Restarts uint64
	// Latency is the host-measured round trip of successful dispatches.
	Latency Histogram
	// BytesIn and BytesOut are the buffer bytes sent to and received from the
	// plugin by successful dispatches.
	BytesIn, BytesOut uint64
	// CacheHits and CacheMisses count compiles that found (or did not find) an
	// entry in the pipeline cache.
	CacheHits, CacheMisses uint64
	// LogLinesDropped counts the plugin's log lines the rate limit dropped.
	LogLinesDropped uint64
}

// pluginStats are one plugin's counters.
type pluginStats struct {
	dispatches, compiles, restarts atomic.Uint64
	bytesIn, bytesOut              atomic.Uint64
	cacheHits, cacheMisses         atomic.Uint64

	mu      sync.Mutex
	errors  map[string]uint64
	latency Histogram
}

func newPluginStats() *pluginStats {
	bounds := LatencyBounds()
	return &pluginStats{errors: map[string]uint64{}, latency: Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}}
}

// dispatched records a successful dispatch.
func (s *pluginStats) dispatched(took time.Duration, in, out int) {
	s.dispatches.Add(1)
	s.bytesIn.Add(uint64(in))
	s.bytesOut.Add(uint64(out))
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.latency
	i := sort.Search(len(h.Bounds), func(i int) bool { return took <= h.Bounds[i] })
	h.Counts[i]++
	h.Count++
	h.Sum += took
}

// compiled records a successful compile and the cache's part in it.
func (s *pluginStats) compiled(cacheStatus string) {
	s.compiles.Add(1)
	switch cacheStatus {
	case CacheHit, CacheRemoteHit:
		s.cacheHits.Add(1)
	case CacheMiss:
		s.cacheMisses.Add(1)
	}
}

// failed records err (nil is ignored) and returns it.
func (s *pluginStats) failed(err error) error {
	if err == nil {
		return nil
	}
	kind := ErrorKind(err)
	s.mu.Lock()
	s.errors[kind]++
	s.mu.Unlock()
	return err
}

// snapshot copies the counters into out.
func (s *pluginStats) snapshot(out *BackendStats) {
	out.Dispatches, out.Compiles, out.Restarts = s.dispatches.Load(), s.compiles.Load(), s.restarts.Load()
	out.BytesIn, out.BytesOut = s.bytesIn.Load(), s.bytesOut.Load()
	out.CacheHits, out.CacheMisses = s.cacheHits.Load(), s.cacheMisses.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	out.Errors = make(map[string]uint64, len(s.errors))
	for k, v := range s.errors {
		out.Errors[k] = v
	}
	out.Latency = Histogram{Bounds: slices.Clone(s.latency.Bounds), Counts: slices.Clone(s.latency.Counts), Count: s.latency.Count, Sum: s.latency.Sum}
}

// Stats returns what the host measured per backend since Open. It starts
// nothing: plugins not needed yet are StateNotStarted.
func (h *Host) Stats() Stats {
	var out Stats
	for _, p := range h.plugins {
		b := BackendStats{Path: p.path, State: p.state(), LogLinesDropped: p.logs.dropped.Load()}
		b.ID = p.fileID()
		select {
		case <-p.started:
			if p.desc != nil {
				b.ID = p.desc.ID
			}
		default:
		}
		p.stats.snapshot(&b)
		out.Backends = append(out.Backends, b)
	}
	out.Failovers = h.failovers.Load()
	return out
}
