package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.plugins, "plugins", "", "plugins directory (default: $KILN_PLUGIN_DIR, then the host's default places)")
	flag.StringVar(&cfg.backends, "backend", "cuda", "backend ids whose adapters run, comma-separated")
	flag.IntVar(&cfg.mib, "mib", 1024, "size of each of the three buffers per adapter, MiB")
	flag.IntVar(&cfg.reps, "reps", 20, "vector adds per adapter in one submit")
	flag.StringVar(&cfg.kill, "kill", "", "SIGKILL this backend's plugin while every adapter runs, and check that only its adapters lose work")
	flag.DurationVar(&cfg.window, "window", 3*time.Second, "how long every adapter runs in the -kill experiment")
	flag.IntVar(&cfg.rounds, "rounds", 5, "rounds of timing (each: every adapter alone, then all at once); medians are compared")
	flag.DurationVar(&cfg.warm, "warmup", 2*time.Second, "how long every adapter runs its batch, all at once, before the timed rounds (clocks up)")
	flag.IntVar(&cfg.adapters, "adapters", 0, "use only the first N available adapters of each backend (0: all), e.g. 2 on a 4-GPU machine")
	flag.StringVar(&cfg.copy, "copy", "", "instead, copy -mib MiB between two backends (\"cuda:0,cuda:1\") with host.CopyBuffer, -reps times each way, and print GB/s")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "multigpu:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	plugins, backends, kill string
	copy                    string
	mib, reps, adapters     int
	rounds                  int
	window, warm            time.Duration
}

// worker is one adapter with its pipeline and resident buffers x, y and out.
type worker struct {
	name, device string
	b            *host.Backend
	pl           *host.Pipeline
	x, y, out    *host.Buffer
	n            int
}

// run opens the host, sets up a worker per adapter and runs the experiments.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.rounds == 0 {
		cfg.rounds = 5
	}
	if cfg.mib <= 0 || cfg.reps <= 0 || cfg.rounds < 0 || cfg.adapters < 0 {
		return errors.New("-mib, -reps and -rounds must be positive and -adapters not negative. Fix: pass -mib 1024 -reps 20 -rounds 5")
	}
	h, err := host.Open(ctx, host.Options{PluginDir: cfg.plugins})
	if err != nil {
		return err
	}
	defer h.Close()
	if cfg.copy != "" {
		return copyBench(ctx, h, cfg.copy, cfg.mib, cfg.reps, out)
	}
	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.free(ctx)
		}
	}()
	n := cfg.mib << 20 / 4
	for _, id := range strings.Split(cfg.backends, ",") {
		ws, err := setUp(ctx, h, id, n, cfg.adapters)
		workers = append(workers, ws...)
		if err != nil {
			return err
		}
	}
	if cfg.kill != "" {
		return isolate(ctx, h, workers, cfg, out)
	}
	return throughput(ctx, workers, cfg.reps, cfg.rounds, cfg.warm, out)
}

// setUp acquires every available adapter of backend id (the first limit of
// them when limit > 0) and prepares a worker on each: the corpus vector add
// compiled, x[i] = i mod 1024 and y[i] = 1 written once.
func setUp(ctx context.Context, h *host.Host, id string, n, limit int) ([]*worker, error) {
	d, err := h.Description(id)
	if err != nil {
		return nil, err
	}
	k, _ := kernels.Lookup("vector_add")
	x, y := make([]byte, 4*n), make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(float32(i%1024)))
		binary.LittleEndian.PutUint32(y[4*i:], math.Float32bits(1))
	}
	var out []*worker
	for _, a := range d.Adapters {
		if !a.Available || (limit > 0 && len(out) == limit) {
			continue
		}
		w := &worker{name: fmt.Sprintf("%s:%d", id, a.Index), device: a.Name, n: n}
		if a.Identity.Instance != "" {
			w.device += ", " + a.Identity.Instance
		}
		out = append(out, w)
		if w.b, err = h.Acquire(ctx, w.name); err != nil {
			return out, err
		}
		if w.pl, err = w.b.Compile(ctx, k.Program(), host.CompileOptions{}); err != nil {
			return out, err
		}
		for _, buf := range []**host.Buffer{&w.x, &w.y, &w.out} {
			if *buf, err = w.b.Alloc(ctx, int64(4*n), 0); err != nil {
				return out, err
			}
		}
		if err := w.x.Write(ctx, 0, x); err != nil {
			return out, err
		}
		if err := w.y.Write(ctx, 0, y); err != nil {
			return out, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("backend %s has no available adapter. Fix: run `kiln backends` to see why", id)
	}
	return out, nil
}

// batch is reps vector adds out = x + y, back to back.
func (w *worker) batch(reps int) *host.Batch {
	bt := &host.Batch{}
	for range reps {
		bt.Dispatch(w.pl, host.BoundWork{
			Invocations: [3]uint32{uint32(w.n), 1, 1},
			Bindings:    []host.Binding{host.Bind(w.x), host.Bind(w.y), host.Bind(w.out)},
		})
	}
	return bt
}

// submit runs the batch and returns its wall time and the bytes it moved on
// the device (each add reads x and y and writes out).
func (w *worker) submit(ctx context.Context, bt *host.Batch) (time.Duration, *host.SubmitResult, error) {
	began := time.Now()
	res, err := w.b.Submit(ctx, bt)
	return time.Since(began), res, err
}

func (w *worker) bytes(reps int) float64 { return float64(reps) * 12 * float64(w.n) }

// verify reads the first and last MiB of out (at most) and checks out = x + y.
func (w *worker) verify(ctx context.Context) error {
	chunk := min(w.n, 1<<18)
	for _, first := range []int{0, w.n - chunk} {
		got := make([]byte, 4*chunk)
		if err := w.out.Read(ctx, int64(4*first), got); err != nil {
			return err
		}
		for i := range chunk {
			want := float32((first+i)%1024) + 1
			if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != want {
				return fmt.Errorf("%s: out[%d] = %v, want %v", w.name, first+i, v, want)
			}
		}
	}
	return nil
}

func (w *worker) free(ctx context.Context) {
	for _, b := range []*host.Buffer{w.x, w.y, w.out} {
		if b != nil {
			_ = b.Free(ctx)
		}
	}
	if w.pl != nil {
		_ = w.b.Release(ctx, w.pl)
	}
}

// throughput times each adapter alone, then all of them at once, rounds times
// each, compares the medians and verifies every adapter's output. Each round
// times every adapter alone and then all together back to back, so clocks and
// caches are alike for both.
func throughput(ctx context.Context, workers []*worker, reps, rounds int, warm time.Duration, out io.Writer) error {
	bts := make([]*host.Batch, len(workers))
	for i, w := range workers {
		bts[i] = w.batch(reps)
	}
	if err := warmUp(ctx, workers, bts, warm); err != nil {
		return err
	}
	alone := make([][]float64, len(workers))
	device := make([][]float64, len(workers))
	var together []float64
	total := 0.0
	for _, w := range workers {
		total += w.bytes(reps)
	}
	for range rounds {
		for i, w := range workers {
			wall, res, err := w.submit(ctx, bts[i])
			if err != nil {
				return err
			}
			alone[i] = append(alone[i], w.bytes(reps)/wall.Seconds()/1e9)
			if res.DeviceTime > 0 {
				device[i] = append(device[i], w.bytes(reps)/res.DeviceTime.Seconds()/1e9)
			}
		}
		errs := make([]error, len(workers))
		var wg sync.WaitGroup
		began := time.Now()
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = w.submit(ctx, bts[i])
			}()
		}
		wg.Wait()
		wall := time.Since(began)
		if err := errors.Join(errs...); err != nil {
			return err
		}
		together = append(together, total/wall.Seconds()/1e9)
	}
	sum := 0.0
	for i, w := range workers {
		gbps := median(alone[i])
		sum += gbps
		dev := ""
		if len(device[i]) > 0 {
			dev = fmt.Sprintf(" (device time %.0f GB/s)", median(device[i]))
		}
		fmt.Fprintf(out, "%s (%s): alone %.0f GB/s%s, %d adds of %d MiB x 3\n", w.name, w.device, gbps, dev, reps, 4*w.n>>20)
	}
	rs := make([]string, len(together))
	for i, g := range together {
		rs[i] = fmt.Sprintf("%.0f", g)
	}
	at := median(together)
	fmt.Fprintf(out, "all %d adapters at once: %.0f GB/s = %.1f%% of the sum alone (%.0f GB/s); medians of %d rounds (at once: %s GB/s)\n",
		len(workers), at, 100*at/sum, sum, rounds, strings.Join(rs, ", "))
	for _, w := range workers {
		if err := w.verify(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "verified: every adapter's out = x + y\n")
	return nil
}

// warmUp runs every worker's batch in a loop, all at once, for at least d (and
// at least once each): an idle GPU sits at a low clock and takes a second or
// more to reach its full one, and the timed rounds must not measure that.
func warmUp(ctx context.Context, workers []*worker, bts []*host.Batch, d time.Duration) error {
	errs := make([]error, len(workers))
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; first || time.Now().Before(until); first = false {
				if _, _, errs[i] = w.submit(ctx, bts[i]); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// median is the middle of xs (the upper middle of an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// isolate runs every worker in a loop for cfg.window and SIGKILLs backend
// cfg.kill's plugin a third of the way in. The killed backend's workers must
// report lost buffers; every other worker must finish, verified.
func isolate(ctx context.Context, h *host.Host, workers []*worker, cfg config, out io.Writer) error {
	pid := 0
	for _, p := range h.Report().Plugins {
		if p.Description != nil && p.Description.ID == cfg.kill {
			pid = p.Pid
		}
	}
	if pid == 0 {
		return fmt.Errorf("no running plugin provides backend %q. Fix: name one of -backend in -kill", cfg.kill)
	}
	type outcome struct {
		submits int
		err     error
	}
	results := make([]outcome, len(workers))
	stop := time.Now().Add(cfg.window)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bt := w.batch(1)
			for time.Now().Before(stop) {
				if _, _, err := w.submit(ctx, bt); err != nil {
					results[i].err = err
					return
				}
				results[i].submits++
			}
			results[i].err = w.verify(ctx)
		}()
	}
	time.Sleep(cfg.window / 3)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing backend %s's plugin (pid %d): %w", cfg.kill, pid, err)
	}
	fmt.Fprintf(out, "SIGKILLed backend %s's plugin (pid %d) after %v\n", cfg.kill, pid, cfg.window/3)
	wg.Wait()
	var bad []string
	for i, w := range workers {
		r := results[i]
		killed := strings.HasPrefix(w.name, cfg.kill+":")
		switch {
		case killed && (host.ErrorKind(r.err) == host.KindLostBuffer || host.ErrorKind(r.err) == host.KindCrashed):
			fmt.Fprintf(out, "%s: lost its work after %d submits, as it must: %v\n", w.name, r.submits, r.err)
		case killed:
			bad = append(bad, fmt.Sprintf("%s: its plugin was killed but it reported %v", w.name, r.err))
		case r.err != nil:
			bad = append(bad, fmt.Sprintf("%s: lost work to another backend's crash: %v", w.name, r.err))
		default:
			fmt.Fprintf(out, "%s: %d submits, unaffected, verified\n", w.name, r.submits)
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}
