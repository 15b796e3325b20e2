package conform

import (
	"context"
	"sync"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Backend is the kit's pluginapi.Backend on top of one adapter of a running
// plugin: Compile and Dispatch go through host.Backend, so the kit checks the
// plugin over the wire (handshake, protocol, resident buffers or inline
// bytes, whatever the host uses with it). Pipeline handles are this adapter's
// own: an unknown or released handle fails here, before anything is sent (the
// host never sends one either). The host must be opened with Blobs as its
// pipeline cache and without autotune records or PGO routes, so that every
// compile is the kit's own.
type Backend struct {
	ctx   context.Context // ends every call when it ends (kiln's --timeout)
	b     *host.Backend
	blobs *Blobs

	mu        sync.Mutex
	next      uint64
	pipelines map[uint64]*host.Pipeline
}

var _ pluginapi.Backend = (*Backend)(nil)

// NewBackend returns the kit's view of b, whose host compiles through blobs.
// Every call ends when ctx ends, as well as when the kit's own context does.
func NewBackend(ctx context.Context, b *host.Backend, blobs *Blobs) *Backend {
	return &Backend{ctx: ctx, b: b, blobs: blobs, pipelines: map[uint64]*host.Pipeline{}}
}

// bound returns a context that ends when ctx or the Backend's context ends.
func (k *Backend) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(k.ctx, func() { cancel(context.Cause(k.ctx)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// Describe returns the description the plugin gave when the host started it.
func (k *Backend) Describe(context.Context) (*pluginapi.Description, error) {
	return k.b.Description(), nil
}

// Open accepts the adapter this Backend runs on (the host opened it when it
// was acquired) and rejects any other.
func (k *Backend) Open(_ context.Context, adapter int) error {
	if adapter != k.b.Adapter().Index {
		return pluginapi.Rejected("conformance runs on %s, not adapter %d", k.b.Name(), adapter)
	}
	return nil
}

// Compile compiles through the host. A cached blob in the request goes to the
// plugin as the pipeline cache's entry; the blob the plugin returns, if any,
// comes back in the result.
func (k *Backend) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	if err := k.Open(ctx, req.Adapter); err != nil {
		return nil, err
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.blobs.offer(req.CachedBlob)
	pl, err := k.b.Compile(ctx, req.Program, host.CompileOptions{Spec: req.Spec, WorkgroupSize: req.WorkgroupSize})
	blob := k.blobs.taken()
	if err != nil {
		return nil, err
	}
	k.next++
	k.pipelines[k.next] = pl
	return &pluginapi.CompileResult{Pipeline: k.next, Blob: blob}, nil
}

func (k *Backend) pipeline(handle uint64) (*host.Pipeline, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pl, ok := k.pipelines[handle]
	if !ok {
		return nil, pluginapi.Rejected("pipeline %d does not exist (never compiled, or released)", handle)
	}
	return pl, nil
}

// Dispatch runs a compiled pipeline through the host. The output count the
// kit gives a buffer of fixed count, which a plugin ignores, is left out: the
// host refuses a launch with one, so no plugin ever receives it.
func (k *Backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	pl, err := k.pipeline(req.Pipeline)
	if err != nil {
		return nil, err
	}
	counts := append([]uint32(nil), req.OutputCounts...)
	for _, d := range pl.Program().Buffers {
		if d.Count > 0 && int(d.Binding) < len(counts) {
			counts[d.Binding] = 0
		}
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	res, err := k.b.Dispatch(ctx, pl, host.Work{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: counts, Uniforms: req.Uniforms})
	if err != nil {
		return nil, err
	}
	return &pluginapi.DispatchResult{Outputs: res.Outputs, HostNanos: res.PluginTime.Nanoseconds(), DeviceNanos: res.DeviceTime.Nanoseconds()}, nil
}

// Release releases a pipeline on the plugin.
func (k *Backend) Release(ctx context.Context, handle uint64) error {
	pl, err := k.pipeline(handle)
	if err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.pipelines, handle)
	k.mu.Unlock()
	ctx, cancel := k.bound(ctx)
	defer cancel()
	return k.b.Release(ctx, pl)
}

// Close does nothing: the host owns the plugin.
func (k *Backend) Close(context.Context) error { return nil }

// Blobs is the pipeline cache (host.PipelineCache) of the host the kit runs
// through, in memory: the kit decides which blob a compile is sent (Backend
// offers it) and sees the blob the plugin returned. Without an offer it keeps
// the blobs of this run, as a pipeline cache would. It never touches a disk.
type Blobs struct {
	mu      sync.Mutex
	entries map[cache.Key][]byte
	offered []byte
	offer1  bool
	written []byte
}

var _ host.PipelineCache = (*Blobs)(nil)

// NewBlobs returns an empty cache.
func NewBlobs() *Blobs { return &Blobs{entries: map[cache.Key][]byte{}} }

// offer makes the next Get return blob (nil: the entry of the key, if any)
// and forgets the blob written last.
func (c *Blobs) offer(blob []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offered, c.offer1, c.written = blob, blob != nil, nil
}

// taken returns the blob written since offer, nil if none.
func (c *Blobs) taken() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offer1 = false
	return c.written
}

// Get returns the offered blob once, else key's entry.
func (c *Blobs) Get(key cache.Key) (cache.Lookup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offer1 {
		c.offer1 = false
		return cache.Lookup{Payload: c.offered}, nil
	}
	if b, ok := c.entries[key]; ok {
		return cache.Lookup{Payload: b}, nil
	}
	return cache.Lookup{Miss: cache.MissAbsent}, nil
}

// Write keeps the blob a plugin returned.
func (c *Blobs) Write(key cache.Key, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := append([]byte(nil), payload...)
	c.entries[key], c.written = b, b
	return nil
}

// Flush does nothing: the blobs live as long as the run.
func (c *Blobs) Flush(context.Context) error { return nil }
