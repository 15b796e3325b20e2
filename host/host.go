package host

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/autotune"
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
	// plugin's file name. Nil discards them.
	Logger hclog.Logger
	// StartTimeout bounds one plugin's start, handshake and description (default 10s).
	StartTimeout time.Duration
	// RestartBackoff is the wait before relaunching a crashed plugin; it doubles
	// with each consecutive crash up to MaxRestartBackoff (defaults 100ms and 10s).
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration

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
	// runs without one. A remote outage never fails a dispatch.
	Remote string
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

	plugins []*plugin // started, sorted by id
	byID    map[string]*plugin
	failed  []PluginStatus // plugins that did not start

	mu     sync.Mutex
	closed bool
}

// Open discovers the plugins, starts them in parallel and reads their
// descriptions. A plugin that fails (bad handshake, junk on stdout, exit, start
// timeout, duplicate id) is recorded with the reason and never stops the others;
// Open itself fails only when the plugins directory cannot be determined.
func Open(ctx context.Context, opts Options) (*Host, error) {
	set := settings{
		startTimeout: orDefault(opts.StartTimeout, 10*time.Second),
		backoff:      orDefault(opts.RestartBackoff, 100*time.Millisecond),
		maxBackoff:   orDefault(opts.MaxRestartBackoff, 10*time.Second),
		log:          opts.Logger,
	}
	if set.log == nil {
		set.log = hclog.NewNullLogger()
	}
	env := processEnvironment()
	dir, source, err := resolvePluginDir(opts.PluginDir, env)
	if err != nil {
		return nil, err
	}
	set.stores = openStores(opts, env.xdg.Getenv, set.log)
	h := &Host{dir: dir, dirSource: source, log: set.log, stores: set.stores, byID: map[string]*plugin{}}
	h.files, h.dirErr = discover(dir)
	if h.dirErr != nil {
		h.log.Warn("no plugins", "error", h.dirErr)
	}

	var candidates []*plugin
	for _, f := range h.files {
		if f.Accepted {
			candidates = append(candidates, newPlugin(f.Path, set))
		}
	}
	errs := make([]error, len(candidates))
	var wg sync.WaitGroup
	for i, p := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.start(ctx)
		}()
	}
	wg.Wait()

	for i, p := range candidates {
		err := errs[i]
		if err == nil {
			if other, dup := h.byID[p.desc.ID]; dup {
				p.close(ctx)
				err = fmt.Errorf("backend id %q is already provided by %s. Fix: remove one of the two plugins", p.desc.ID, other.path)
			}
		}
		if err != nil {
			h.log.Error("plugin failed to start", "path", p.path, "error", err)
			h.failed = append(h.failed, PluginStatus{Path: p.path, Err: err})
			continue
		}
		h.byID[p.desc.ID] = p
		h.plugins = append(h.plugins, p)
	}
	sort.Slice(h.plugins, func(i, j int) bool { return h.plugins[i].desc.ID < h.plugins[j].desc.ID })
	return h, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Close stops every plugin (in parallel), makes further calls fail with a
// ClosedError and flushes the pipeline cache, returning the flush's error. It is
// safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range h.plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.close(context.Background())
		}()
	}
	wg.Wait()
	return h.stores.flush(context.Background())
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

// IDs returns the ids of the running backends, sorted.
func (h *Host) IDs() []string {
	ids := make([]string, len(h.plugins))
	for i, p := range h.plugins {
		ids[i] = p.desc.ID
	}
	return ids
}

// Description returns the description of the backend id.
func (h *Host) Description(id string) (*pluginapi.Description, error) {
	p, ok := h.byID[id]
	if !ok {
		return nil, &NotFoundError{Name: id, Known: h.IDs(), Failed: len(h.failed)}
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
	// Err says why the plugin did not start; nil when it did.
	Err error
	// Description is what the plugin reported; nil when it did not start.
	Description *pluginapi.Description
	// Protocol is the wire protocol version negotiated in the handshake.
	Protocol int
	// StartTime is how long the first start, handshake and description took.
	StartTime time.Duration
	// Pid is the running process, 0 when none runs now.
	Pid int
	// Restarts counts relaunches after crashes and timeouts.
	Restarts int
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
}

// Report describes the plugins directory, every file in it and every plugin.
func (h *Host) Report() Report {
	r := Report{Dir: h.dir, Source: h.dirSource, DirErr: h.dirErr, Files: append([]File(nil), h.files...)}
	r.Plugins = append(r.Plugins, h.failed...)
	for _, p := range h.plugins {
		pid, restarts := p.status()
		r.Plugins = append(r.Plugins, PluginStatus{
			Path: p.path, Description: cloneDescription(p.desc), Protocol: p.protocol, StartTime: p.startTime, Pid: pid, Restarts: restarts,
		})
	}
	sort.Slice(r.Plugins, func(i, j int) bool { return r.Plugins[i].Path < r.Plugins[j].Path })
	return r
}

// startFailures lists the plugins that did not start, for error messages.
func (h *Host) startFailures() []string {
	out := make([]string, len(h.failed))
	for i, f := range h.failed {
		out[i] = f.Err.Error()
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
// index the first available adapter is used.
func (h *Host) Acquire(ctx context.Context, name string) (*Backend, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	id, index, err := parseName(name)
	if err != nil {
		return nil, err
	}
	p, ok := h.byID[id]
	if !ok {
		return nil, &NotFoundError{Name: name, Known: h.IDs(), Failed: len(h.failed)}
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

// AcquirePreferred returns the best backend by DESIGN.md's order: capability
// score, timing quality and memory bandwidth (high first), precedence and
// measured acquisition time (low first), then id. Backends that do not dispatch
// and reference oracles are never chosen here. When nothing qualifies the error
// is a NoBackendError listing every failure.
func (h *Host) AcquirePreferred(ctx context.Context) (*Backend, error) {
	if err := h.checkOpen(); err != nil {
		return nil, err
	}
	pick, err := choosePreferred(ctx, h.descriptions(), h.startFailures(), h.opener())
	if err != nil {
		if nb, ok := err.(*NoBackendError); ok {
			nb.Dir = h.dir
		}
		return nil, err
	}
	return &Backend{p: h.byID[pick.ID], adapter: adapterOf(h.byID[pick.ID].desc, pick.Adapter)}, nil
}

func (h *Host) descriptions() []*pluginapi.Description {
	out := make([]*pluginapi.Description, len(h.plugins))
	for i, p := range h.plugins {
		out[i] = p.desc
	}
	return out
}

// opener opens adapters of the running plugins for choosePreferred.
func (h *Host) opener() opener {
	return func(ctx context.Context, id string, index int) (time.Duration, error) {
		p := h.byID[id]
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
