package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/internal/echoplugin"
	"github.com/kiln-dev/kiln/internal/irprog"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Options say what to measure.
type Options struct {
	// Backend is measured ("cpu-ref" by default); the in-process comparison always
	// runs the CPU interpreter.
	Backend string
	// Starts is how many times the plugin is started (default 5).
	Starts int
	// EchoPlugin is an executable that serves internal/echoplugin (the kiln
	// binary does): each plugin start is timed right after a start of it, a
	// bare go-plugin plugin, so that load on the machine weighs on both alike.
	// Empty skips the bare starts.
	EchoPlugin string
	// RoundTrips is how many 1-element dispatches are timed per path (default
	// 1000).
	RoundTrips int
	// Bytes is the size of the large buffer, sent in and returned (default 256 MiB).
	Bytes int
	// Repeats is how many times each large transfer runs; the fastest counts
	// (default 5).
	Repeats int
	// Chain is the number of dependent 1-element dispatches in one submit
	// (default 100).
	Chain int
	// TraceFile, when set, is where the protocol-2 host, which runs the
	// round trips and the resident measurements, writes its trace
	// (host.Options.TraceFile).
	TraceFile string
	// Logger receives the hosts' logs; nil discards them.
	Logger hclog.Logger
	// Progress, when not nil, is told before each measurement: done of total
	// measurements, and what is measured.
	Progress func(done, total int, what string)
}

func (o *Options) defaults() {
	if o.Backend == "" {
		o.Backend = "cpu-ref"
	}
	if o.Starts <= 0 {
		o.Starts = 5
	}
	if o.RoundTrips <= 0 {
		o.RoundTrips = 1000
	}
	if o.Bytes <= 0 {
		o.Bytes = 256 << 20
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	if o.Chain <= 0 {
		o.Chain = 100
	}
}

// Latency is a distribution of round trips.
type Latency struct {
	MedianNs int64 `json:"median_ns"`
	MeanNs   int64 `json:"mean_ns"`
	N        int   `json:"n"`
	// PluginMedianNs is the median of the time the plugin reported for its
	// own part of each call (the backend's Submit), where it reports one: the
	// rest of MedianNs is the host and the transport.
	PluginMedianNs int64 `json:"plugin_median_ns,omitempty"`
}

// Bulk is one large in + out transfer: the fastest time, the bytes moved (in
// plus out) per second, and the time as a multiple of the in-process run.
type Bulk struct {
	Ns    int64   `json:"ns"`
	GBps  float64 `json:"gbps"`
	Ratio float64 `json:"in_process_ratio"`
	// Unavailable says why the figure was not measured (a GPU backend keeps
	// its buffers in device memory, which the host cannot map).
	Unavailable string `json:"unavailable,omitempty"`
}

// Report holds the figures. "Protocol 2" figures run on the plugin as it
// negotiates with the host (buffers in the plugin, shared memory and the fast
// path where it has them); "protocol 1" figures run the same plugin through a
// host that offers only protocol 1 (every byte inline over gRPC).
type Report struct {
	Backend string `json:"backend"`
	Machine string `json:"machine"`
	// Capabilities is what the plugin negotiated on protocol 2.
	Capabilities string `json:"capabilities"`
	// StartMedianNs and StartMinNs: plugin start + handshake + description.
	StartMedianNs int64 `json:"start_median_ns"`
	StartMinNs    int64 `json:"start_min_ns"`
	Starts        int   `json:"starts"`
	// BareStartMedianNs and BareStartMinNs: a bare go-plugin plugin's start +
	// handshake + one RPC (internal/echoplugin), interleaved with the plugin's
	// starts; 0 without Options.EchoPlugin.
	BareStartMedianNs int64 `json:"bare_start_median_ns"`
	BareStartMinNs    int64 `json:"bare_start_min_ns"`
	// RoundTrip is a 1-element dispatch through the v1 API (inputs in, outputs
	// out) on protocol 2; RoundTripSubmit a submit of one 1-element dispatch
	// over a resident buffer; RoundTripV1 the v1 API on protocol 1.
	RoundTrip       Latency `json:"round_trip"`
	RoundTripSubmit Latency `json:"round_trip_submit"`
	RoundTripV1     Latency `json:"round_trip_protocol1"`
	// Bytes went in and the same amount came out. InProcNs is the fastest
	// in-process run of the bench, which runs before the figures and again
	// before every repeat of each bulk figure; each Bulk's ratio is to the
	// fastest of the in-process runs made next to its own repeats, so that load
	// on the machine weighs on both alike.
	Bytes    int     `json:"bytes"`
	InProcNs int64   `json:"in_process_ns"`
	InProcGB float64 `json:"in_process_gbps"`
	// Bulk is the v1 API on protocol 2; BulkMapped the input copied into a
	// mapped resident buffer, a submit, and the output read in place (as the
	// in-process run copies its input once and returns its output without a
	// copy); BulkResident a Write, a submit and a Read of a resident buffer;
	// BulkV1 the v1 API on protocol 1.
	Bulk         Bulk `json:"bulk"`
	BulkMapped   Bulk `json:"bulk_mapped"`
	BulkResident Bulk `json:"bulk_resident"`
	BulkV1       Bulk `json:"bulk_protocol1"`
	// ChainNs is Chain dependent 1-element dispatches in one submit.
	Chain   int   `json:"chain"`
	ChainNs int64 `json:"chain_ns"`
	// RedispatchNs is a saxpy over two resident buffers of Bytes each, and
	// RedispatchMoved the bytes the host's traffic counter saw cross for it.
	RedispatchNs    int64 `json:"redispatch_ns"`
	RedispatchMoved int64 `json:"redispatch_moved_bytes"`
}

// Run measures the plugin of opts.Backend found by h. It starts private hosts on
// a directory holding only that plugin: one for the start figures and the
// protocol-2 figures, one capped at protocol 1.
func Run(ctx context.Context, h *host.Host, opts Options) (*Report, error) {
	opts.defaults()
	r := &Report{Backend: opts.Backend, Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	dir, err := privateDir(h, opts.Backend)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	const total = 11 // the steps below
	done := 0
	step := func(what string) {
		if opts.Progress != nil {
			opts.Progress(done, total, what)
		}
		done++
	}
	step("plugin starts")
	if err := measureStarts(ctx, dir, opts, r); err != nil {
		return nil, err
	}
	step("in-process reference")
	k, err := newKernels(ctx, opts)
	if err != nil {
		return nil, err
	}

	v2, b, err := acquire(ctx, dir, opts, 0)
	if err != nil {
		return nil, err
	}
	defer v2.Close()
	for _, p := range v2.Report().Plugins {
		r.Capabilities = p.Capabilities.String()
	}
	r.Backend = b.Name()
	steps := []struct {
		what string
		run  func() error
	}{
		{"round trips, protocol 2", func() (err error) { r.RoundTrip, err = k.roundTrips(ctx, b, opts.RoundTrips); return err }},
		{"submits over a resident buffer", func() (err error) {
			r.RoundTripSubmit, err = k.submitRoundTrips(ctx, b, opts.RoundTrips)
			return err
		}},
		{"bulk in + out, protocol 2", func() (err error) { r.Bulk, err = k.bulk(ctx, b, opts.Repeats); return err }},
		{"bulk through a mapped buffer", func() (err error) { r.BulkMapped, err = k.bulkMapped(ctx, b, opts.Repeats); return err }},
		{"bulk Write + submit + Read", func() (err error) { r.BulkResident, err = k.bulkResident(ctx, b, opts.Repeats); return err }},
		{"dependent dispatches in one submit", func() (err error) { r.Chain, r.ChainNs, err = k.chain(ctx, b, opts.Chain); return err }},
		{"saxpy over resident buffers", func() (err error) { r.RedispatchNs, r.RedispatchMoved, err = k.redispatch(ctx, b); return err }},
	}
	for _, s := range steps {
		step(s.what)
		if err := s.run(); err != nil {
			return nil, err
		}
	}

	v1, b1, err := acquire(ctx, dir, opts, pluginapi.ProtocolV1)
	if err != nil {
		return nil, err
	}
	defer v1.Close()
	step("round trips, protocol 1")
	if r.RoundTripV1, err = k.roundTrips(ctx, b1, opts.RoundTrips); err != nil {
		return nil, err
	}
	step("bulk in + out, protocol 1")
	if r.BulkV1, err = k.bulk(ctx, b1, opts.Repeats); err != nil {
		return nil, err
	}
	k.relate(r)
	return r, nil
}

// privateDir links the backend's plugin alone into a temporary directory.
func privateDir(h *host.Host, backend string) (string, error) {
	var path string
	for _, p := range h.Report().Plugins {
		if p.Description != nil && p.Description.ID == backend {
			path = p.Path
		}
	}
	if path == "" {
		_, err := h.Description(backend)
		return "", err
	}
	dir, err := os.MkdirTemp("", "kiln-bench-")
	if err != nil {
		return "", fmt.Errorf("bench: temporary plugins directory: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		err = os.Symlink(abs, filepath.Join(dir, filepath.Base(path)))
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("bench: linking the plugin: %w", err)
	}
	return dir, nil
}

// acquire opens a host on dir (capped at maxProtocol) and acquires the backend.
func acquire(ctx context.Context, dir string, opts Options, maxProtocol int) (*host.Host, *host.Backend, error) {
	o := host.Options{PluginDir: dir, Logger: opts.Logger, MaxProtocol: maxProtocol, NoCache: true, NoAutotune: true, NoPGO: true}
	if maxProtocol == 0 {
		o.TraceFile = opts.TraceFile
	} else {
		o.TraceFile = "off" // the protocol-2 host's trace alone, also under KILN_TRACE
	}
	h, err := host.Open(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	b, err := h.Acquire(ctx, opts.Backend)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, b, nil
}

// measureStarts opens a host on dir opts.Starts times and records the plugin's
// start time.
func measureStarts(ctx context.Context, dir string, opts Options, r *Report) error {
	var starts, bare []time.Duration
	for range opts.Starts {
		if opts.EchoPlugin != "" {
			d, err := echoplugin.Start(ctx, opts.EchoPlugin)
			if err != nil {
				return fmt.Errorf("bench: the bare go-plugin start: %w", err)
			}
			bare = append(bare, d)
		}
		one, err := host.Open(ctx, host.Options{PluginDir: dir, Logger: opts.Logger, NoCache: true, NoAutotune: true, NoPGO: true, TraceFile: "off"})
		if err != nil {
			return err
		}
		plugins := one.Report().Plugins
		one.Close()
		if len(plugins) != 1 || plugins[0].Err != nil {
			return fmt.Errorf("bench: the plugin in %s did not start on its own: %+v", dir, plugins)
		}
		starts = append(starts, plugins[0].StartTime)
	}
	r.Starts = len(starts)
	r.StartMedianNs, r.StartMinNs = median(starts).Nanoseconds(), slices.Min(starts).Nanoseconds()
	if len(bare) > 0 {
		r.BareStartMedianNs, r.BareStartMinNs = median(bare).Nanoseconds(), slices.Min(bare).Nanoseconds()
	}
	return nil
}

// kernels are the measured programs and the bulk input.
type kernels struct {
	increment *ir.Program // buf[i] += 1 on f32, read_write
	saxpy     *ir.Program // y = a*x + y
	bytes     int
	in        []byte
	grid      [3]uint32
	kernel    *interp.Kernel // the increment, in process
	// inProc is the fastest in-process run so far.
	inProc time.Duration
}

func newKernels(ctx context.Context, opts Options) (*kernels, error) {
	k := &kernels{bytes: opts.Bytes / 4 * 4}
	b := ir.NewBuilder("kiln.bench.increment.f32", 256, 1, 1)
	buf := b.Buffer("buf", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	var err error
	if k.increment, err = b.Build(); err != nil {
		return nil, err
	}
	k.saxpy = irprog.Saxpy("kiln.bench.saxpy.f32", 256)
	k.in = make([]byte, k.bytes)
	k.grid = ir.GridFor([3]uint32{uint32(k.bytes / 4), 1, 1}, k.increment.WorkgroupSize)
	kernel, err := interp.Compile(k.increment, interp.Options{})
	if err != nil {
		return nil, err
	}
	k.kernel = kernel
	for range opts.Repeats {
		if _, err := k.reference(ctx); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// reference runs the large in + out in-process once, returns its time and keeps
// the fastest. It runs before the bulk figures and again before every repeat of
// each, so that other load on the machine weighs on the reference as on the
// figure next to it.
func (k *kernels) reference(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	if _, err := k.kernel.Run(ctx, interp.Launch{Grid: k.grid, Inputs: [][]byte{k.in}}); err != nil {
		return 0, err
	}
	took := time.Since(began)
	if k.inProc == 0 || took < k.inProc {
		k.inProc = took
	}
	return took, nil
}

// pair is the fastest of a bulk figure's repeats and of the in-process runs
// made next to them.
type pair struct{ took, ref time.Duration }

// add records one repeat and its reference run.
func (p *pair) add(took, ref time.Duration) {
	if p.took == 0 || took < p.took {
		p.took = took
	}
	if p.ref == 0 || ref < p.ref {
		p.ref = ref
	}
}

// fastestNext runs f n times, each after one in-process reference run (not
// timed), and returns the fastest of each.
func (k *kernels) fastestNext(ctx context.Context, n int, f func() error) (pair, error) {
	var p pair
	for range n {
		ref, err := k.reference(ctx)
		if err != nil {
			return pair{}, err
		}
		began := time.Now()
		if err := f(); err != nil {
			return pair{}, err
		}
		p.add(time.Since(began), ref)
	}
	return p, nil
}

func (k *kernels) compile(ctx context.Context, b *host.Backend, p *ir.Program) (*host.Pipeline, func(), error) {
	pl, err := b.Compile(ctx, p, host.CompileOptions{})
	if err != nil {
		return nil, nil, err
	}
	return pl, func() { b.Release(ctx, pl) }, nil
}

// incrementOn compiles the increment and allocates a buffer of size bytes
// with usage for it; done frees the buffer and releases the pipeline.
func (k *kernels) incrementOn(ctx context.Context, b *host.Backend, size int64, usage host.BufferUsage) (*host.Pipeline, *host.Buffer, func(), error) {
	pl, release, err := k.compile(ctx, b, k.increment)
	if err != nil {
		return nil, nil, nil, err
	}
	buf, err := b.Alloc(ctx, size, usage)
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	return pl, buf, func() { buf.Free(ctx); release() }, nil
}

// roundTrips times 1-element dispatches through the v1 API.
func (k *kernels) roundTrips(ctx context.Context, b *host.Backend, n int) (Latency, error) {
	pl, release, err := k.compile(ctx, b, k.increment)
	if err != nil {
		return Latency{}, err
	}
	defer release()
	work := host.Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4)}}
	return timeEach(n, func() (time.Duration, error) {
		_, err := b.Dispatch(ctx, pl, work)
		return 0, err
	})
}

// submitRoundTrips times submits of one 1-element dispatch over a resident
// buffer.
func (k *kernels) submitRoundTrips(ctx context.Context, b *host.Backend, n int) (Latency, error) {
	pl, buf, done, err := k.incrementOn(ctx, b, 4, host.UsageMap)
	if err != nil {
		return Latency{}, err
	}
	defer done()
	var batch host.Batch
	batch.Dispatch(pl, host.BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []host.Binding{host.Bind(buf)}})
	return timeEach(n, func() (time.Duration, error) {
		res, err := b.Submit(ctx, &batch)
		if err != nil {
			return 0, err
		}
		return res.PluginTime, nil
	})
}

// bulk times the large in + out dispatch through the v1 API.
func (k *kernels) bulk(ctx context.Context, b *host.Backend, repeats int) (Bulk, error) {
	pl, release, err := k.compile(ctx, b, k.increment)
	if err != nil {
		return Bulk{}, err
	}
	defer release()
	took, err := k.fastestNext(ctx, repeats, func() error {
		_, err := b.Dispatch(ctx, pl, host.Work{Grid: k.grid, Inputs: [][]byte{k.in}})
		return err
	})
	return k.figure(took), err
}

// bulkResident times writing the large input into a resident buffer, one
// submit, and reading it back.
func (k *kernels) bulkResident(ctx context.Context, b *host.Backend, repeats int) (Bulk, error) {
	pl, buf, done, err := k.incrementOn(ctx, b, int64(k.bytes), host.UsageMap)
	if err != nil {
		return Bulk{}, err
	}
	defer done()
	out := make([]byte, k.bytes)
	var batch host.Batch
	batch.Dispatch(pl, host.BoundWork{Grid: k.grid, Bindings: []host.Binding{host.Bind(buf)}})
	took, err := k.fastestNext(ctx, repeats, func() error {
		if err := buf.Write(ctx, 0, k.in); err != nil {
			return err
		}
		if _, err := b.Submit(ctx, &batch); err != nil {
			return err
		}
		return buf.Read(ctx, 0, out)
	})
	return k.figure(took), err
}

// bulkMapped times copying the large input into a mapped resident buffer, one
// submit, and reading the output in place (every element is checked).
func (k *kernels) bulkMapped(ctx context.Context, b *host.Backend, repeats int) (Bulk, error) {
	pl, buf, done, err := k.incrementOn(ctx, b, int64(k.bytes), host.UsageMap)
	if err != nil {
		return Bulk{}, err
	}
	defer done()
	mem, err := buf.Map()
	var notMapped *host.BufferError
	if errors.As(err, &notMapped) {
		return Bulk{Unavailable: "the backend's buffers are not host-visible"}, nil
	}
	if err != nil {
		return Bulk{}, err
	}
	var batch host.Batch
	batch.Dispatch(pl, host.BoundWork{Grid: k.grid, Bindings: []host.Binding{host.Bind(buf)}})
	var best pair
	for range repeats {
		ref, err := k.reference(ctx)
		if err != nil {
			return Bulk{}, err
		}
		began := time.Now()
		copy(mem, k.in)
		if _, err := b.Submit(ctx, &batch); err != nil {
			return Bulk{}, err
		}
		best.add(time.Since(began), ref)
		// The output is read in place; checking it is not part of the figure.
		if err := checkIncremented(mem); err != nil {
			return Bulk{}, err
		}
	}
	return k.figure(best), nil
}

// checkIncremented verifies the increment kernel's output over zeros: every
// element is 1.
func checkIncremented(out []byte) error {
	one := math.Float32bits(1)
	for i := 0; i+4 <= len(out); i += 4 {
		if binary.LittleEndian.Uint32(out[i:]) != one {
			return fmt.Errorf("bench: element %d of the output is not 1", i/4)
		}
	}
	return nil
}

// figure is a bulk figure's fastest time, with its ratio to the fastest of the
// in-process runs made next to it.
func (k *kernels) figure(p pair) Bulk {
	return Bulk{Ns: p.took.Nanoseconds(), GBps: gbps(2*k.bytes, p.took), Ratio: p.took.Seconds() / p.ref.Seconds()}
}

// relate sets the in-process figures: the fastest in-process run of the bench.
func (k *kernels) relate(r *Report) {
	r.Bytes, r.InProcNs, r.InProcGB = k.bytes, k.inProc.Nanoseconds(), gbps(2*k.bytes, k.inProc)
}

// chain times n dependent 1-element dispatches in one submit and checks that
// each saw the one before.
func (k *kernels) chain(ctx context.Context, b *host.Backend, n int) (int, int64, error) {
	pl, buf, done, err := k.incrementOn(ctx, b, 4, 0)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	var batch host.Batch
	for range n {
		batch.Dispatch(pl, host.BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []host.Binding{host.Bind(buf)}})
	}
	began := time.Now()
	if _, err := b.Submit(ctx, &batch); err != nil {
		return 0, 0, err
	}
	took := time.Since(began)
	got := make([]byte, 4)
	if err := buf.Read(ctx, 0, got); err != nil {
		return 0, 0, err
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != float32(n) {
		return 0, 0, fmt.Errorf("bench: %d dependent increments gave %v", n, v)
	}
	return n, took.Nanoseconds(), nil
}

// redispatch fills two resident buffers of the bulk size in the plugin, then
// times a saxpy over them and counts the bytes that crossed for it.
func (k *kernels) redispatch(ctx context.Context, b *host.Backend) (int64, int64, error) {
	pl, release, err := k.compile(ctx, b, k.saxpy)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	x, err := b.Alloc(ctx, int64(k.bytes), 0)
	if err != nil {
		return 0, 0, err
	}
	defer x.Free(ctx)
	y, err := b.Alloc(ctx, int64(k.bytes), 0)
	if err != nil {
		return 0, 0, err
	}
	defer y.Free(ctx)
	var fill host.Batch
	fill.Fill(host.Bind(x), math.Float32bits(1)).Fill(host.Bind(y), math.Float32bits(1))
	if _, err := b.Submit(ctx, &fill); err != nil {
		return 0, 0, err
	}
	var batch host.Batch
	batch.Dispatch(pl, host.BoundWork{Grid: k.grid, Bindings: []host.Binding{host.Bind(x), host.Bind(y)}})
	before := b.Traffic()
	began := time.Now()
	if _, err := b.Submit(ctx, &batch); err != nil {
		return 0, 0, err
	}
	took := time.Since(began)
	after := b.Traffic()
	return took.Nanoseconds(), after.ToPlugin - before.ToPlugin + after.FromPlugin - before.FromPlugin, nil
}

// warmUp is how long timeEach runs its call back to back, untimed, first: an
// idle GPU runs at a fraction of its clock (345 MHz on an H200) until work
// keeps it busy, and a loop of small dispatches would be timed at that clock.
const warmUp = 300 * time.Millisecond

// timeEach runs f back to back for warmUp, then n times timed, and returns the
// median and mean of those n, and the median of the plugin times f returns
// when it returns any.
func timeEach(n int, f func() (plugin time.Duration, err error)) (Latency, error) {
	for began := time.Now(); time.Since(began) < warmUp; {
		if _, err := f(); err != nil {
			return Latency{}, err
		}
	}
	times := make([]time.Duration, 0, n)
	plugin := make([]time.Duration, 0, n)
	var total time.Duration
	for range n {
		began := time.Now()
		p, err := f()
		if err != nil {
			return Latency{}, err
		}
		took := time.Since(began)
		times = append(times, took)
		plugin = append(plugin, p)
		total += took
	}
	l := Latency{MedianNs: median(times).Nanoseconds(), MeanNs: (total / time.Duration(n)).Nanoseconds(), N: n}
	if slices.Max(plugin) > 0 {
		l.PluginMedianNs = median(plugin).Nanoseconds()
	}
	return l, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func gbps(bytes int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}
