package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
)

// Options say what to measure.
type Options struct {
	// Backend is measured ("cpu-ref" by default); the in-process comparison always
	// runs the CPU interpreter.
	Backend string
	// Starts is how many times the plugin is started (default 5).
	Starts int
	// RoundTrips is how many 1-element dispatches are timed (default 1000).
	RoundTrips int
	// Bytes is the size of the large buffer, sent in and returned (default 256 MiB).
	Bytes int
	// Repeats is how many times the large dispatch runs on each side; the fastest
	// counts (default 3).
	Repeats int
	// Logger receives the hosts' logs; nil discards them.
	Logger hclog.Logger
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
		o.Repeats = 3
	}
}

// Report holds the figures.
type Report struct {
	Backend string `json:"backend"`
	Machine string `json:"machine"`
	// StartMedian and StartMin: plugin start + handshake + description.
	StartMedianNs int64 `json:"start_median_ns"`
	StartMinNs    int64 `json:"start_min_ns"`
	Starts        int   `json:"starts"`
	// RoundTripMedian and RoundTripMean: one 1-element dispatch, host side.
	RoundTripMedianNs int64 `json:"round_trip_median_ns"`
	RoundTripMeanNs   int64 `json:"round_trip_mean_ns"`
	RoundTrips        int   `json:"round_trips"`
	// Bytes went in and the same amount came out.
	Bytes      int     `json:"bytes"`
	PluginNs   int64   `json:"plugin_ns"`
	PluginGBps float64 `json:"plugin_gbps"`
	InProcNs   int64   `json:"in_process_ns"`
	InProcGBps float64 `json:"in_process_gbps"`
	// BoundaryNs is the plugin time minus the in-process time: the cost of moving
	// the bytes across; BoundaryGBps is the bytes moved over that time.
	BoundaryNs   int64   `json:"boundary_ns"`
	BoundaryGBps float64 `json:"boundary_gbps"`
	SlowerRatio  float64 `json:"slower_ratio"`
}

// Run measures the plugin of opts.Backend found by h. It starts private copies
// of that plugin for the start figures and uses h for the dispatches.
func Run(ctx context.Context, h *host.Host, opts Options) (*Report, error) {
	opts.defaults()
	r := &Report{Backend: opts.Backend, Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	if err := measureStarts(ctx, h, opts, r); err != nil {
		return nil, err
	}
	b, err := h.Acquire(ctx, opts.Backend)
	if err != nil {
		return nil, err
	}
	r.Backend = b.Name()
	if err := measureRoundTrips(ctx, b, opts, r); err != nil {
		return nil, err
	}
	if err := measureBulk(ctx, b, opts, r); err != nil {
		return nil, err
	}
	return r, nil
}

// measureStarts opens a host on a directory holding only the backend's plugin,
// opts.Starts times, and records the plugin's start time.
func measureStarts(ctx context.Context, h *host.Host, opts Options, r *Report) error {
	var path string
	for _, p := range h.Report().Plugins {
		if p.Description != nil && p.Description.ID == opts.Backend {
			path = p.Path
		}
	}
	if path == "" {
		_, err := h.Description(opts.Backend)
		return err
	}
	dir, err := os.MkdirTemp("", "kiln-bench-")
	if err != nil {
		return fmt.Errorf("bench: temporary plugins directory: %w", err)
	}
	defer os.RemoveAll(dir)
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if err := os.Symlink(abs, filepath.Join(dir, filepath.Base(path))); err != nil {
		return fmt.Errorf("bench: linking the plugin: %w", err)
	}
	var starts []time.Duration
	for range opts.Starts {
		one, err := host.Open(ctx, host.Options{PluginDir: dir, Logger: opts.Logger})
		if err != nil {
			return err
		}
		plugins := one.Report().Plugins
		one.Close()
		if len(plugins) != 1 || plugins[0].Err != nil {
			return fmt.Errorf("bench: the plugin %s did not start on its own: %+v", path, plugins)
		}
		starts = append(starts, plugins[0].StartTime)
	}
	r.Starts = len(starts)
	r.StartMedianNs, r.StartMinNs = median(starts).Nanoseconds(), slices.Min(starts).Nanoseconds()
	return nil
}

// copyProgram is buf[i] = buf[i] + 1 on f32: a read_write buffer, so the same
// bytes go in and come out.
func copyProgram() (*ir.Program, error) {
	b := ir.NewBuilder("kiln.bench.increment.f32", 256, 1, 1)
	buf := b.Buffer("buf", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	return b.Build()
}

func measureRoundTrips(ctx context.Context, b *host.Backend, opts Options, r *Report) error {
	prog, err := copyProgram()
	if err != nil {
		return err
	}
	pl, err := b.Compile(ctx, prog, host.CompileOptions{})
	if err != nil {
		return err
	}
	defer b.Release(ctx, pl)
	work := host.Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4)}}
	times := make([]time.Duration, 0, opts.RoundTrips)
	var total time.Duration
	for range opts.RoundTrips {
		began := time.Now()
		if _, err := b.Dispatch(ctx, pl, work); err != nil {
			return err
		}
		took := time.Since(began)
		times = append(times, took)
		total += took
	}
	r.RoundTrips = len(times)
	r.RoundTripMedianNs = median(times).Nanoseconds()
	r.RoundTripMeanNs = (total / time.Duration(len(times))).Nanoseconds()
	return nil
}

func measureBulk(ctx context.Context, b *host.Backend, opts Options, r *Report) error {
	prog, err := copyProgram()
	if err != nil {
		return err
	}
	n := opts.Bytes / 4
	in := make([]byte, 4*n)
	grid := ir.GridFor([3]uint32{uint32(n), 1, 1}, prog.WorkgroupSize)
	r.Bytes = len(in)

	pl, err := b.Compile(ctx, prog, host.CompileOptions{})
	if err != nil {
		return err
	}
	defer b.Release(ctx, pl)
	plugin, err := fastest(opts.Repeats, func() error {
		_, err := b.Dispatch(ctx, pl, host.Work{Grid: grid, Inputs: [][]byte{in}})
		return err
	})
	if err != nil {
		return err
	}

	k, err := interp.Compile(prog, interp.Options{})
	if err != nil {
		return err
	}
	inproc, err := fastest(opts.Repeats, func() error {
		_, err := k.Run(ctx, interp.Launch{Grid: grid, Inputs: [][]byte{in}})
		return err
	})
	if err != nil {
		return err
	}
	moved := float64(2 * len(in))
	r.PluginNs, r.PluginGBps = plugin.Nanoseconds(), moved/plugin.Seconds()/1e9
	r.InProcNs, r.InProcGBps = inproc.Nanoseconds(), moved/inproc.Seconds()/1e9
	r.BoundaryNs = (plugin - inproc).Nanoseconds()
	if plugin > inproc {
		r.BoundaryGBps = moved / (plugin - inproc).Seconds() / 1e9
	}
	r.SlowerRatio = plugin.Seconds() / inproc.Seconds()
	return nil
}

// fastest runs f n times and returns the shortest duration.
func fastest(n int, f func() error) (time.Duration, error) {
	best := time.Duration(0)
	for i := range n {
		began := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		if took := time.Since(began); i == 0 || took < best {
			best = took
		}
	}
	return best, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
