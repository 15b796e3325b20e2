package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"gocloud.dev/blob"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pgo"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Options configure Open. The zero value works: plugins are looked up in the
// default places and logs are discarded.
type Options struct {
	// PluginDir is the plugins directory. Empty: $KILN_PLUGIN_DIR, else a plugins
	// directory beside the executable, else $XDG_DATA_HOME/kiln/plugins.
	PluginDir string
	// Logger receives the host's log lines and every plugin's stderr, under the
	// plugin's file name. Nil sends them to Slog.
	Logger hclog.Logger
	// Slog receives them instead when Logger is nil: levels map to slog's
	// (hclog's Trace is slog.LevelDebug-4), a plugin's name is the "logger"
	// attribute, and Slog's handler decides which levels pass. Both nil
	// discards them.
	Slog *slog.Logger
	// StartTimeout bounds one plugin's start, handshake and description (default
	// 10s). Relaunches run under it too, never under a caller's context.
	StartTimeout time.Duration
	// RestartBackoff is the wait before relaunching a crashed plugin; it doubles
	// with each consecutive crash up to MaxRestartBackoff (defaults 100ms and 10s).
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// HangTimeout is how long a plugin with calls in flight may leave the host's
	// health checks unanswered before it counts as hung, is killed, and its calls
	// fail with a TimeoutError (default 10s). A plugin that answers is busy, not
	// hung: its calls run as long as their contexts allow. One that leaves its
	// data plane's request ring full (reads no requests) that long is hung too.
	HangTimeout time.Duration
	// FailureThreshold crashes within FailureWindow make a plugin failing: it is
	// not chosen implicitly until a dispatch on it succeeds (defaults 3 and 1m).
	FailureThreshold int
	FailureWindow    time.Duration
	// LogLinesPerSecond rate-limits each plugin's log lines (default 100, with a
	// burst of ten seconds' worth); dropped lines are counted in Stats.
	LogLinesPerSecond int
	// PinFile is the plugin pin file (default DefaultPinPath()). While it
	// pins plugins of the plugins directory, only those whose SHA-256 still
	// matches run; pins of other directories do not matter. NoPinning ignores it.
	PinFile   string
	NoPinning bool
	// NoMTLS turns off the authentication of the plugin connections. By
	// default, on Linux, the plugin accepts a connection only from the host's
	// process (the kernel's peer credentials of its unix socket) that sends
	// the random token the host passed this start, and the host connects only
	// to the plugin process it started; elsewhere the host generates one
	// P-256 key per Host and issues each plugin start a certificate signed by
	// it, and the plugin accepts only connections that present the host's
	// certificate (mutual TLS). See docs/design.md, "Plugin transport
	// authentication". Plugins built with an older SDK fall back to
	// go-plugin's AutoMTLS. Without authentication the plugin's socket still
	// lives in a directory only this user can enter.
	NoMTLS bool
	// tlsOnly keeps mutual TLS where peer credentials would do (tests).
	tlsOnly bool

	// Cache is the pipeline cache every compile goes through: the host reads the
	// entry for the pipeline's key, sends it with the compile request and stores
	// the blob the plugin returns. Nil opens the cache at cache.DefaultRoot()
	// ($XDG_CACHE_HOME/kiln/pipelines) unless $KILN_CACHE is "off"; NoCache turns
	// it off. A cache that cannot be opened is logged and left off.
	Cache   PipelineCache
	NoCache bool
	// Remote is the fleet tier's URL (s3://bucket/prefix?region=…, gs://…,
	// azblob://…, file:///shared/dir; see package remote): a *cache.DiskCache
	// reads through it and uploads behind compiles, autotune records and
	// routes are read through and published. Empty reads $KILN_REMOTE; "off"
	// runs without one. A remote outage never fails a dispatch. file:// is
	// built in; s3://, gs:// and azblob:// need their driver imported by the
	// application (import _ "github.com/kiln-dev/kiln/remote/s3", remote/gcs,
	// remote/azure): a URL without one is logged, with that import as the Fix,
	// and the host runs without the tier.
	Remote string
	// RemoteBucket is a fleet tier bucket the application opened itself
	// (gocloud.dev/blob, with the driver it imports; blob.PrefixedBucket for a
	// prefix). When set it is the fleet tier, with remote's default deadlines,
	// and Remote and $KILN_REMOTE are not read. The host does not close it:
	// close it after Close.
	RemoteBucket *blob.Bucket
	// Autotune holds tuned workgroup sizes that compiles use when the caller
	// gives none. Nil loads autotune.DefaultPath(); NoAutotune turns it off. A
	// store that cannot be loaded is logged and left off (kiln doctor says why).
	Autotune   *autotune.Store
	NoAutotune bool
	// PGO is the routing table Dispatch follows when the launch names no backend.
	// Nil loads pgo.DefaultPath(); NoPGO turns routing off. A table that cannot
	// be loaded is logged and left off (kiln doctor says why).
	PGO   *pgo.Table
	NoPGO bool

	// Trace, when set, receives a timeline of the host's work as Chrome
	// trace-event JSON (open it in ui.perfetto.dev or chrome://tracing):
	// the host's slices (open, plugin starts, compiles with their cache
	// outcome, submits, waits, transfers, dispatches), each plugin's (decode,
	// queue, run) and each adapter's device time, tied together by flows
	// across the processes (docs/design.md, "Tracing"). TraceFile names a
	// file for it instead (created anew: a second Host on the same file
	// replaces it); with neither, $KILN_TRACE does; "off" turns both off.
	// Close ends the document (and closes a file the host opened). Nil and
	// empty: no trace, and the host times nothing for one.
	Trace     io.Writer
	TraceFile string
	// Hook, when set, sees every dispatch, submit and compile as it ends
	// (package host/hostotel makes OpenTelemetry spans of them, package
	// host/hostprom histograms). Nil costs nothing.
	Hook Hook

	// MaxProtocol caps the wire protocol the host offers its plugins:
	// pluginapi.ProtocolV1 runs every plugin as a protocol-1 plugin (no
	// buffers kept in the plugin, bytes inline over gRPC). 0 offers the newest.
	MaxProtocol int
}

// Host runs the backend plugins of one plugins directory. It is safe for
// concurrent use. Close it to stop the plugins.
type Host struct {
	dir       string
	dirSource DirSource
	dirErr    error
	files     []File
	log       hclog.Logger
	stores    *stores
	pinFile   string
	pins      *pinSet

	ctx    context.Context // ends at Close; plugin launches run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // first starts

	plugins []*plugin // one per accepted file, in path order; fixed at Open

	failovers atomic.Uint64 // launches that ran on another backend after a failure

	obs *observer // the trace and the hook; nil when neither

	mu      sync.Mutex
	closed  bool
	byID    map[string]*plugin // the started plugin that provides each id
	changed chan struct{}      // closed and replaced when a start finishes
}

// Open discovers the plugins. It starts none of them: plugins start lazily, in
// parallel, when first needed (see docs/design.md, "Supervision and
// reliability"). Acquire of an id starts the plugin whose file name matches it
// (kiln-backend-<id>, dashes ignored) and waits only for that one; anything
// that needs every backend (AcquirePreferred, Survey, Report, IDs) starts and
// waits for all. A plugin that fails (bad handshake, junk on stdout, exit,
// hang, duplicate id, refused pin) is recorded with the reason and never stops
// the others; Open itself fails only when the plugins directory cannot be
// determined (or, unless NoMTLS, the host's transport key cannot be generated).
func Open(ctx context.Context, opts Options) (*Host, error) {
	env := processEnvironment()
	dir, source, err := resolvePluginDir(opts.PluginDir, env)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	switch {
	case log != nil:
	case opts.Slog != nil:
		log = fromSlog(opts.Slog)
	default:
		log = hclog.NewNullLogger()
	}
	began := time.Now()
	obs, err := newObserver(opts, env.xdg.Getenv)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &Host{obs: obs, dir: dir, dirSource: source, log: log, byID: map[string]*plugin{}, changed: make(chan struct{}), ctx: hctx, cancel: cancel}
	set := settings{
		startTimeout:  orDefault(opts.StartTimeout, 10*time.Second),
		backoff:       orDefault(opts.RestartBackoff, 100*time.Millisecond),
		maxBackoff:    orDefault(opts.MaxRestartBackoff, 10*time.Second),
		hangTimeout:   orDefault(opts.HangTimeout, 10*time.Second),
		failThreshold: opts.FailureThreshold,
		failWindow:    orDefault(opts.FailureWindow, time.Minute),
		logRate:       opts.LogLinesPerSecond,
		log:           log,
		ctx:           hctx,
		maxProtocol:   opts.MaxProtocol,
		obs:           obs,
	}
	if !opts.NoMTLS {
		if set.auth, err = newTransportAuth(); err != nil {
			cancel()
			_ = obs.close()
			return nil, err
		}
		set.auth.tlsOnly = opts.tlsOnly
	}
	if set.failThreshold <= 0 {
		set.failThreshold = 3
	}
	if set.logRate <= 0 {
		set.logRate = defaultLogLinesPerSecond
	}
	if !opts.NoPinning {
		h.pinFile = opts.PinFile
		if h.pinFile == "" {
			if h.pinFile, err = DefaultPinPath(); err != nil {
				log.Warn("no pin file location; pinning is off", "error", err)
			}
		}
		if h.pinFile != "" {
			h.pins = loadPinSet(h.pinFile, dir)
		}
	}
	set.pins = h.pins
	set.stores = openStores(opts, env.xdg.Getenv, set.log)
	h.stores = set.stores
	h.files, h.dirErr = discover(dir)
	if h.dirErr != nil {
		h.log.Warn("no plugins", "error", h.dirErr)
	}
	for _, f := range h.files {
		if f.Accepted {
			h.plugins = append(h.plugins, newPlugin(f.Path, set))
		}
	}
	if obs != nil && obs.tr != nil {
		obs.tr.span("open", began, time.Now(), trace.String("plugins", dir), trace.Int("files", int64(len(h.files))))
	}
	return h, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// ensure starts p in the background unless it was started already.
func (h *Host) ensure(p *plugin) {
	p.startOnce.Do(func() {
		p.ensured.Store(true)
		h.mu.Lock()
		closed := h.closed
		if !closed {
			h.wg.Add(1)
		}
		h.mu.Unlock()
		if closed {
			p.mu.Lock()
			p.startErr = &ClosedError{}
			p.mu.Unlock()
			close(p.started)
			return
		}
		go func() {
			defer h.wg.Done()
			p.start()
			h.register(p)
			close(p.started)
			h.mu.Lock()
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		}()
	})
}

// register enters a started plugin in the registry. Of two plugins with one
// id, the one with the higher version wins, then the one earlier in path order
// (outranks), whichever started first; the other is shadowed: refused with a
// StartError of stage StartDuplicate that names the winner, and logged.
func (h *Host) register(p *plugin) {
	if p.startError() != nil {
		h.log.Error("plugin failed to start", "path", p.path, "error", p.startError())
		return
	}
	id := p.desc.ID
	h.mu.Lock()
	defer h.mu.Unlock()
	other, dup := h.byID[id]
	if !dup {
		h.byID[id] = p
		return
	}
	loser, winner := p, other
	if outranks(p, other) {
		loser, winner = other, p
		h.byID[id] = p
		h.reshadow(id, other, p)
	}
	err := shadowedError(id, loser, winner)
	h.log.Warn("plugin shadowed: another plugin provides its backend id", "id", id, "shadowed", loser.path, "version", loser.desc.Version, "by", winner.path, "winner_version", winner.desc.Version)
	loser.refuse(err)
}

// all starts every plugin and waits until each has started or failed, or ctx
// is done.
func (h *Host) all(ctx context.Context) error {
	for _, p := range h.plugins {
		h.ensure(p)
	}
	for _, p := range h.plugins {
		select {
		case <-p.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// matchesName reports whether a plugin file is named after backend id: its
// name is kiln-backend-<id>, ignoring dashes and underscores and case
// (kiln-backend-cpuref provides cpu-ref).
func matchesName(path, id string) bool {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	}
	return norm(fileID(path)) == norm(id)
}

// find returns the started plugin that provides id. It starts the plugins named
// after id first and returns as soon as one provides it; only when none does
// does it start (and wait for) the others.
func (h *Host) find(ctx context.Context, id string) (*plugin, error) {
	for _, p := range h.plugins {
		if matchesName(p.path, id) {
			h.ensure(p)
		}
	}
	for _, p := range h.plugins {
		if matchesName(p.path, id) {
			select {
			case <-p.started:
			case <-ctx.Done():
				return nil, waitError(ctx, id, "the plugin to start")
			}
		}
	}
	if p := h.lookup(id); p != nil {
		return p, nil
	}
	for _, p := range h.plugins {
		h.ensure(p)
	}
	for {
		h.mu.Lock()
		p, changed := h.byID[id], h.changed
		h.mu.Unlock()
		if p != nil {
			return p, nil
		}
		pending := false
		for _, q := range h.plugins {
			select {
			case <-q.started:
			default:
				pending = true
			}
		}
		if !pending {
			for _, q := range h.plugins {
				if err := q.startError(); err != nil && matchesName(q.path, id) {
					return nil, fmt.Errorf("backend %q: its plugin did not start: %w", id, err)
				}
			}
			return nil, h.notFound(id)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, waitError(ctx, id, "the plugins to start")
		}
	}
}

// lookup returns the registered plugin for id, nil if none (it starts nothing).
func (h *Host) lookup(id string) *plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byID[id]
}

// running returns the registered plugins sorted by id, after starting all.
func (h *Host) running() []*plugin {
	_ = h.all(h.ctx) // ends early only when the host is closed
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*plugin, 0, len(h.byID))
	for _, p := range h.byID {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].desc.ID < out[j].desc.ID })
	return out
}

// Close stops every plugin (in parallel, starts in progress included), makes
// further calls fail with a ClosedError and flushes the pipeline cache,
// returning the flush's error. It is safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	var wg sync.WaitGroup
	for _, p := range h.plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.close(context.Background())
		}()
	}
	wg.Wait()
	h.wg.Wait()
	for _, p := range h.plugins {
		p.close(context.Background()) // a start that ended during the first round
		p.wait()
	}
	err := h.stores.flush(context.Background())
	if terr := h.obs.close(); err == nil && terr != nil {
		err = fmt.Errorf("write the trace: %w", terr)
	}
	return err
}

func (h *Host) checkOpen() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &ClosedError{}
	}
	return nil
}

// PluginDir returns the plugins directory and where its name came from.
func (h *Host) PluginDir() (string, DirSource) { return h.dir, h.dirSource }

// Files returns the plugins directory's entries with the reason each counts or
// not (the discovery result). It starts nothing.
func (h *Host) Files() []File { return append([]File(nil), h.files...) }

// PinFile returns the pin file and whether pinning is on for the host's
// plugins directory (the file pins plugins of it, or cannot be read).
func (h *Host) PinFile() (path string, on bool) { return h.pinFile, h.pins != nil }

// IDs returns the ids of the running backends, sorted. It starts every plugin.
func (h *Host) IDs() []string {
	var ids []string
	for _, p := range h.running() {
		ids = append(ids, p.desc.ID)
	}
	return ids
}

// Description returns the description of the backend id, starting its plugin
// if needed.
func (h *Host) Description(id string) (*pluginapi.Description, error) {
	p, err := h.find(h.ctx, id)
	if err != nil {
		return nil, err
	}
	return cloneDescription(p.desc), nil
}

func cloneDescription(d *pluginapi.Description) *pluginapi.Description {
	c := *d
	c.Features = append([]string(nil), d.Features...)
	c.Adapters = append([]pluginapi.Adapter(nil), d.Adapters...)
	if d.Precedence != nil {
		v := *d.Precedence
		c.Precedence = &v
	}
	return &c
}

// PluginStatus is what the host knows about one plugin executable.
type PluginStatus struct {
	// Path is the executable.
	Path string
	// Err says why the plugin did not start (a *StartError, or a ClosedError);
	// nil when it did.
	Err error
	// State is one of the State constants.
	State string
	// Description is what the plugin reported; nil when it did not start.
	Description *pluginapi.Description
	// Protocol is the wire protocol version negotiated in the handshake.
	Protocol int
	// Capabilities are the optional interfaces the plugin implements and its
	// data plane; Capabilities.Missing says what the host does instead.
	Capabilities pluginapi.Capabilities
	// StartTime is how long the first start, handshake and description took.
	StartTime time.Duration
	// Pid is the running process, 0 when none runs now.
	Pid int
	// Restarts counts relaunches after crashes, hangs and deaths while idle.
	Restarts int
	// Failing says why a failing plugin is failing (StateFailing), with its
	// last exit and stderr line.
	Failing string
	// LastExit and LastStderr describe the plugin's last crash, if any.
	LastExit, LastStderr string
	// Pin is the pinned SHA-256 when pinning is on ("" when not pinned).
	Pin string
	// LogLinesDropped counts log lines the rate limit dropped.
	LogLinesDropped uint64
}

// Report is the host's view of its plugins directory, for diagnostics.
type Report struct {
	// Dir is the plugins directory, Source where its name came from.
	Dir    string
	Source DirSource
	// DirErr is set when the directory could not be read.
	DirErr error
	// Files are the directory's entries with the reason each counts or not.
	Files []File
	// Plugins are the accepted files, started or not, in path order.
	Plugins []PluginStatus
	// PinFile is the pin file; Pinning says whether pinning is on.
	PinFile string
	Pinning bool
}

// Report describes the plugins directory, every file in it and every plugin.
// It starts every plugin.
func (h *Host) Report() Report {
	_ = h.all(h.ctx)
	r := Report{Dir: h.dir, Source: h.dirSource, DirErr: h.dirErr, Files: append([]File(nil), h.files...), PinFile: h.pinFile, Pinning: h.pins != nil}
	for _, p := range h.plugins {
		r.Plugins = append(r.Plugins, p.report())
	}
	return r
}

// report is p's PluginStatus.
func (p *plugin) report() PluginStatus {
	s := PluginStatus{Path: p.path, State: p.state(), LogLinesDropped: p.logs.dropped.Load()}
	s.Pin, _ = p.set.pins.pinned(p.path)
	select {
	case <-p.started:
	default:
		return s
	}
	if err := p.startError(); err != nil {
		s.Err = err
		return s
	}
	s.Description, s.Protocol, s.StartTime = cloneDescription(p.desc), p.protocol, p.startTime
	s.Pid, s.Restarts = p.status()
	s.Capabilities = p.capabilities()
	p.mu.Lock()
	defer p.mu.Unlock()
	s.LastExit, s.LastStderr = p.failures.lastExit, p.failures.lastStderr
	if p.failures.failing {
		s.Failing = p.failures.reason(time.Now(), p.set.failWindow)
	}
	return s
}

// fileID is what a plugin file's name says its id is: the name without the
// kiln-backend- prefix.
func fileID(path string) string {
	name := path[strings.LastIndexByte(path, '/')+1:]
	return strings.TrimPrefix(name, PluginPrefix)
}

// fileID is p's file-name id.
func (p *plugin) fileID() string { return fileID(p.path) }

// state is one of the State constants.
func (p *plugin) state() string {
	select {
	case <-p.started:
	default:
		if p.ensured.Load() {
			return StateStarting
		}
		return StateNotStarted
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.startErr != nil:
		return StateFailed
	case p.closed:
		return StateClosed
	case p.failures.failing:
		return StateFailing
	case p.proc == nil:
		return StateDown
	}
	if exited, _, _ := p.proc.runner.exitInfo(); exited {
		return StateDown // it died while idle; the next use relaunches it
	}
	return StateReady
}

// startFailures lists the plugins that did not start, for error messages.
func (h *Host) startFailures() []string {
	var out []string
	for _, p := range h.plugins {
		select {
		case <-p.started:
		default:
			continue
		}
		if err := p.startError(); err != nil {
			var closed *ClosedError
			if !errors.As(err, &closed) {
				out = append(out, err.Error())
			}
		}
	}
	return out
}

// parseName splits "id" or "id:adapter"; adapter is -1 when not given.
func parseName(name string) (id string, adapter int, err error) {
	id, idx, found := strings.Cut(name, ":")
	if !found {
		return id, -1, nil
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("backend name %q: adapter %q is not a non-negative integer. Fix: write id or id:index, for example vulkan:1", name, idx)
	}
	return id, n, nil
}

// Acquire returns the backend name ("id", or "id:adapter" for one adapter), with
// its adapter opened. Reference oracles may be named here. Without an adapter
// index the first available adapter is used. Only the plugin that provides id
// is waited for (see Open); a plugin that is down is relaunched, waiting out its
// backoff within ctx.
func (h *Host) Acquire(ctx context.Context, name string) (*Backend, error) {
	p, index, err := h.findNamed(ctx, name)
	if err != nil {
		return nil, err
	}
	adapter, err := pickAdapter(p.desc, name, index)
	if err != nil {
		return nil, err
	}
	b := &Backend{p: p, adapter: adapter}
	if _, err := b.open(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// findNamed finds the plugin of a backend name ("vulkan", "vulkan:1") on an
// open host, and the adapter index the name gives (-1: none).
func (h *Host) findNamed(ctx context.Context, name string) (*plugin, int, error) {
	if err := h.checkOpen(); err != nil {
		return nil, 0, err
	}
	id, index, err := parseName(name)
	if err != nil {
		return nil, 0, err
	}
	p, err := h.find(ctx, id)
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			nf.Name = name
		}
		return nil, 0, err
	}
	return p, index, nil
}

// pickAdapter finds adapter index of d (the first available one when index < 0).
func pickAdapter(d *pluginapi.Description, name string, index int) (pluginapi.Adapter, error) {
	var known, reasons []string
	for _, a := range d.Adapters {
		known = append(known, fmt.Sprintf("%s:%d", d.ID, a.Index))
		if index >= 0 && a.Index != index {
			continue
		}
		if a.Available {
			return a, nil
		}
		reasons = append(reasons, fmt.Sprintf("%s:%d (%s): %s", d.ID, a.Index, a.Name, a.Reason))
	}
	if len(reasons) == 0 {
		return pluginapi.Adapter{}, &NotFoundError{Name: name, Known: known}
	}
	return pluginapi.Adapter{}, fmt.Errorf("backend %s has no available adapter: %s", name, strings.Join(reasons, "; "))
}

// AcquirePreferred returns the best backend by the design's order (see
// docs/design.md, "Backend selection"): capability score, timing quality and
// memory bandwidth (high first), precedence and measured acquisition time (low
// first), then id. Backends that do not dispatch and reference oracles are
// never chosen here, and neither are failing plugins. A plugin that is down
// after a crash (in its backoff or relaunching) is skipped while any other
// backend qualifies; only when none does is it waited for. When nothing
// qualifies the error is a NoBackendError listing every failure.
func (h *Host) AcquirePreferred(ctx context.Context) (*Backend, error) {
	return h.acquirePreferred(ctx, nil)
}

// acquirePreferred is AcquirePreferred over the candidates keep accepts (all
// when keep is nil).
func (h *Host) acquirePreferred(ctx context.Context, keep func(candidate) bool) (*Backend, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	if err := h.all(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the plugins to start: %w", err)
	}
	descs := h.descriptions()
	skipped := false
	failures := append(h.discoveryFailures(), h.startFailures()...)
	pick, err := choosePreferred(ctx, descs, failures, h.opener(false, &skipped), keep)
	if err != nil && skipped {
		pick, err = choosePreferred(ctx, descs, failures, h.opener(true, nil), keep)
	}
	if err != nil {
		if nb, ok := err.(*NoBackendError); ok {
			nb.Dir = h.dir
		}
		return nil, err
	}
	p := h.lookup(pick.ID)
	return &Backend{p: p, adapter: adapterOf(p.desc, pick.Adapter)}, nil
}

func (h *Host) descriptions() []*pluginapi.Description {
	ps := h.running()
	out := make([]*pluginapi.Description, len(ps))
	for i, p := range ps {
		out[i] = p.desc
	}
	return out
}

// opener opens adapters of the running plugins for choosePreferred. Failing
// plugins are skipped (and probed in the background when their backoff has
// passed); plugins that are down are skipped and relaunched in the background
// unless wait is set, and skipped records that one was.
func (h *Host) opener(wait bool, skipped *bool) opener {
	return func(ctx context.Context, id string, index int) (time.Duration, error) {
		p := h.lookup(id)
		if p == nil {
			return 0, &NotFoundError{Name: id}
		}
		switch p.state() {
		case StateFailing:
			h.probeLater(p)
			p.mu.Lock()
			why := p.failures.reason(time.Now(), p.set.failWindow)
			p.mu.Unlock()
			return 0, errors.New("failing: " + why)
		case StateDown:
			if !wait {
				p.kick()
				*skipped = true
				return 0, errors.New("down after a crash; relaunching in the background")
			}
		}
		return (&Backend{p: p, adapter: adapterOf(p.desc, index)}).open(ctx)
	}
}

func adapterOf(d *pluginapi.Description, index int) pluginapi.Adapter {
	for _, a := range d.Adapters {
		if a.Index == index {
			return a
		}
	}
	return pluginapi.Adapter{Index: index}
}
