package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/host/trace"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TraceEnv names the environment variable that names a file the host writes
// its trace to when Options.Trace and Options.TraceFile are unset.
const TraceEnv = "KILN_TRACE"

// Hook sees the host's dispatches, submits and compiles as they end
// (Options.Hook); package host/hostotel turns them into OpenTelemetry spans
// and package host/hostprom into histograms. Observe runs on the caller's
// goroutine, after the work and before the call returns: it must be quick
// and must not call back into the host.
type Hook interface {
	Observe(ctx context.Context, op Operation)
}

// Hooks is a Hook that passes each operation to every hook in it, in order
// (a nil one is skipped): Options.Hook takes one.
type Hooks []Hook

// Observe implements Hook.
func (hs Hooks) Observe(ctx context.Context, op Operation) {
	for _, h := range hs {
		if h != nil {
			h.Observe(ctx, op)
		}
	}
}

// Operation kinds, as Operation.Kind names them.
const (
	OpDispatch = "dispatch"
	OpSubmit   = "submit"
	OpCompile  = "compile"
)

// Operation is one dispatch, submit or compile that ended.
type Operation struct {
	// Kind is OpDispatch, OpSubmit or OpCompile.
	Kind string
	// Backend names the adapter it ran on ("vulkan:0"); Device is the
	// adapter's name.
	Backend, Device string
	// Program is the program's name (dispatch, compile; a submit's first
	// dispatch's).
	Program string
	// Cache is the pipeline cache's part (dispatch, compile): CacheHit,
	// CacheMiss or CacheOff.
	Cache string
	// Commands is a submit's number of commands.
	Commands int
	// Start is when the host began it; Took is the host-measured time to its
	// end.
	Start time.Time
	Took  time.Duration
	// PluginTime and DeviceTime are what the plugin measured (zero when it
	// did not say; DeviceTime is zero when the backend cannot time the
	// device).
	PluginTime, DeviceTime time.Duration
	// Err is why it failed; nil when it succeeded.
	Err error
}

// observer is what the host reports its work to: the trace and the hook. A
// host with neither has none (settings.obs is nil), and its paths test only
// that pointer.
type observer struct {
	tr   *tracer
	hook Hook
}

// newObserver opens the trace that opts (or $KILN_TRACE) asks for; nil when
// there is neither a trace nor a hook.
func newObserver(opts Options, getenv func(string) string) (*observer, error) {
	o := &observer{hook: opts.Hook}
	w := opts.Trace
	var file *os.File
	if w == nil {
		path := opts.TraceFile
		if path == "" {
			path = getenv(TraceEnv)
		}
		if path != "" && path != "off" {
			f, err := os.Create(path)
			if err != nil {
				return nil, fmt.Errorf("open the trace file: %w. Fix: name a file in a directory you can write (Options.TraceFile, --trace or %s)", err, TraceEnv)
			}
			w, file = f, f
		}
	}
	if w != nil {
		o.tr = newTracer(w, file)
	}
	if o.tr == nil && o.hook == nil {
		return nil, nil
	}
	return o, nil
}

// tracer returns the trace; nil when there is none (o may be nil).
func (o *observer) tracer() *tracer {
	if o == nil {
		return nil
	}
	return o.tr
}

// observe reports op to the hook.
func (o *observer) observe(ctx context.Context, op Operation) {
	if o.hook != nil {
		o.hook.Observe(ctx, op)
	}
}

// compiled reports a compile of program on b that began at began.
func (o *observer) compiled(ctx context.Context, b *Backend, program, cache string, began time.Time, err error) {
	end := time.Now()
	if o.tr != nil {
		o.tr.span("compile", began, end, trace.String("program", program), trace.String("backend", b.Name()), trace.String("cache", cache))
	}
	o.observe(ctx, Operation{Kind: OpCompile, Backend: b.Name(), Device: b.adapter.Name, Program: program, Cache: cache, Start: began, Took: end.Sub(began), Err: err})
}

// dispatched reports a Backend.Dispatch of pl that began at began (res is nil
// when it failed).
func (o *observer) dispatched(ctx context.Context, b *Backend, pl *Pipeline, began time.Time, res *Result, err error) {
	if o.hook == nil {
		return
	}
	op := Operation{Kind: OpDispatch, Backend: b.Name(), Device: b.adapter.Name, Start: began, Took: time.Since(began), Err: err}
	if pl != nil {
		op.Program = pl.prog.Name
	}
	if res != nil {
		op.Cache, op.PluginTime, op.DeviceTime = res.Cache, res.PluginTime, res.DeviceTime
	}
	o.hook.Observe(ctx, op)
}

// submitted reports a submit of n commands (program: its first dispatch's)
// that began at began.
func (o *observer) submitted(ctx context.Context, b *Backend, program string, n int, began time.Time, res *SubmitResult, err error) {
	if o.hook == nil {
		return
	}
	op := Operation{Kind: OpSubmit, Backend: b.Name(), Device: b.adapter.Name, Program: program, Commands: n, Start: began, Took: time.Since(began), Err: err}
	if res != nil {
		op.Took, op.PluginTime, op.DeviceTime = res.Submit, res.PluginTime, res.DeviceTime
	}
	o.hook.Observe(ctx, op)
}

// close ends the trace.
func (o *observer) close() error {
	if o == nil || o.tr == nil {
		return nil
	}
	return o.tr.close()
}

// Process ids of the trace's tracks that are not processes: one per adapter
// (deviceTrackBase + n).
const deviceTrackBase = 1 << 30

// tracer writes the host's trace: its own slices on the host's process, the
// plugins' spans on each plugin's process, and the device spans on one track
// per adapter, all on the monotonic clock host and plugins share.
type tracer struct {
	w     *trace.Writer
	clock trace.Clock
	pid   int
	file  *os.File // opened by the host (TraceFile, $KILN_TRACE); closed by it

	mu      sync.Mutex
	devices map[deviceKey]deviceTrack
	plugins map[int]bool // plugin pids named
}

// deviceKey is an adapter of a plugin.
type deviceKey struct {
	p       *plugin
	adapter int
}

// deviceTrack is an adapter's track and its backend's name.
type deviceTrack struct {
	pid     int
	backend string
}

func newTracer(w io.Writer, file *os.File) *tracer {
	clock := trace.NewClock()
	t := &tracer{w: trace.NewWriter(w, clock.Now()), clock: clock, pid: os.Getpid(), file: file, devices: map[deviceKey]deviceTrack{}, plugins: map[int]bool{}}
	t.w.Process(t.pid, "kiln host (pid "+strconv.Itoa(t.pid)+")", "host", 0)
	return t
}

func (t *tracer) close() error {
	err := t.w.Close()
	if t.file != nil {
		if cerr := t.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// span writes a host slice from began to end.
func (t *tracer) span(name string, began, end time.Time, args ...trace.Arg) trace.Track {
	tr, _ := t.w.Span(t.pid, name, "host", t.clock.At(began), t.clock.At(end), args...)
	return tr
}

// plugin names a plugin's process the first time it shows up.
func (t *tracer) plugin(pid int, path string) {
	t.mu.Lock()
	named := t.plugins[pid]
	t.plugins[pid] = true
	t.mu.Unlock()
	if !named {
		t.w.Process(pid, filepath.Base(path)+" (pid "+strconv.Itoa(pid)+")", "plugin", 1)
	}
}

// device returns the track of backend b's adapter, naming it the first time.
func (t *tracer) device(b *Backend) deviceTrack {
	k := deviceKey{b.p, b.adapter.Index}
	t.mu.Lock()
	d, ok := t.devices[k]
	if !ok {
		d = deviceTrack{pid: deviceTrackBase + len(t.devices), backend: b.Name()}
		t.devices[k] = d
	}
	t.mu.Unlock()
	if !ok {
		label := "device " + d.backend
		if b.adapter.Name != "" {
			label += " (" + b.adapter.Name + ")"
		}
		t.w.Process(d.pid, label, "queue", 2+d.pid-deviceTrackBase)
	}
	return d
}

// roundTrip writes one request to a plugin and its answer: the host's slices
// (name from began to sent, then "wait" from waitFrom to end; one slice from
// began to end when sent is end), the plugin's spans and the device's, placed
// inside the host's window [began, end], and a flow that ties them together
// across the processes. Without plugin spans (the gRPC transport, an older
// plugin) the device span is placed to end when the answer came; without
// device time (cpu-ref) the device track shows the backend's run.
func (t *tracer) roundTrip(b *Backend, proc *process, name string, began, sent, waitFrom, end time.Time, spans []pluginapi.Span, deviceNanos int64, args ...trace.Arg) {
	lo, hi := t.clock.At(began), t.clock.At(end)
	clamp := func(v int64) int64 { return min(max(v, lo), hi) }
	dev := t.device(b)
	var all [4]trace.Arg
	args = append(append(all[:0], args...), trace.String("backend", dev.backend))
	first, okFirst := t.w.Span(t.pid, name, "host", lo, min(t.clock.At(sent), hi), args...)
	last, okLast, lastAt := first, okFirst, lo
	if sent.Before(end) {
		lastAt = clamp(t.clock.At(waitFrom))
		last, okLast = t.w.Span(t.pid, "wait", "host", lastAt, hi)
	}
	// The flow's points: host, then each plugin run and device span, then
	// host again; a point goes only where its slice holds it in time order.
	var points [pluginapiMaxPoints]trace.Track
	var times [pluginapiMaxPoints]int64
	n := 0
	at := lo
	step := func(tr trace.Track, ok bool, start, stop int64) {
		if ok && max(at, start) <= stop && n < len(points) {
			at = max(at, start)
			points[n], times[n] = tr, at
			n++
		}
	}
	if proc != nil && len(spans) > 0 {
		t.plugin(proc.pid, b.p.path)
	}
	device := false
	var run pluginapi.Span
	for _, s := range spans {
		start, stop := clamp(s.Start), clamp(s.End)
		switch {
		case s.Kind == pluginapi.SpanDevice:
			device = true
			tr, ok := t.w.Span(dev.pid, name, "device", start, stop)
			step(tr, ok, start, stop)
		case proc != nil:
			tr, ok := t.w.Span(proc.pid, s.Kind.String(), "plugin", start, stop)
			if s.Kind == pluginapi.SpanRun {
				run = s
				step(tr, ok, start, stop)
			}
		}
	}
	switch {
	case device:
	case deviceNanos > 0:
		start := clamp(hi - deviceNanos)
		tr, ok := t.w.Span(dev.pid, name, "device", start, hi, trace.String("timed", "device time, placed to end when the answer came"))
		step(tr, ok, start, hi)
	case run.Kind == pluginapi.SpanRun:
		start, stop := clamp(run.Start), clamp(run.End)
		tr, ok := t.w.Span(dev.pid, name, "device", start, stop, trace.String("timed", "the backend's run: it has no device timer"))
		step(tr, ok, start, stop)
	}
	if !okFirst || !okLast {
		return
	}
	flow := t.w.NewFlow()
	t.w.Flow(flow, 's', name, first, lo)
	for i := range n {
		t.w.Flow(flow, 't', name, points[i], times[i])
	}
	t.w.Flow(flow, 'f', name, last, max(at, lastAt))
}

// pluginapiMaxPoints bounds a flow's points between its ends: the plugin's
// spans of one completion are bounded too.
const pluginapiMaxPoints = 8
