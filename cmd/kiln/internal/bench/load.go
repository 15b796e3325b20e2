package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/host"
)

// LoadOptions say how to run the load test: callers sharing one host, each
// dispatching 1-element work back to back.
type LoadOptions struct {
	// Backend is measured ("cpu-ref" by default).
	Backend string
	// Goroutines are the numbers of concurrent callers, one row each (default
	// 1, 4, 16, 64).
	Goroutines []int
	// Duration is how long each row is measured (default 2 s), after a warm-up
	// of a tenth of it with the same callers.
	Duration time.Duration
	// Logger receives the host's logs; nil discards them.
	Logger hclog.Logger
	// Progress, when not nil, is told before each row.
	Progress func(done, total int, what string)
}

// LoadRow is one row of the load test.
type LoadRow struct {
	// Goroutines is the number of concurrent callers.
	Goroutines int `json:"goroutines"`
	// Dispatches is how many completed in the measured window, and PerSecond
	// the rate.
	Dispatches int     `json:"dispatches"`
	PerSecond  float64 `json:"dispatches_per_second"`
	// VsFirst is PerSecond over the first row's.
	VsFirst float64 `json:"vs_first"`
	// P50Ns and P99Ns are the dispatches' latencies, over every caller.
	P50Ns int64 `json:"p50_ns"`
	P99Ns int64 `json:"p99_ns"`
}

// LoadReport is the load test's result.
type LoadReport struct {
	Backend      string    `json:"backend"`
	Machine      string    `json:"machine"`
	Capabilities string    `json:"capabilities"`
	DurationNs   int64     `json:"duration_ns"`
	Rows         []LoadRow `json:"rows"`
}

// Load runs the load test on a private host of opts.Backend's plugin alone (as
// Run does): for each number of callers, that many goroutines share the host
// and one pipeline and each dispatches a 1-element increment through the v1
// API (Backend.Dispatch: its input in, its output back) in a loop, checking
// every result.
func Load(ctx context.Context, h *host.Host, opts LoadOptions) (*LoadReport, error) {
	if opts.Backend == "" {
		opts.Backend = "cpu-ref"
	}
	if len(opts.Goroutines) == 0 {
		opts.Goroutines = []int{1, 4, 16, 64}
	}
	if opts.Duration <= 0 {
		opts.Duration = 2 * time.Second
	}
	for _, n := range opts.Goroutines {
		if n <= 0 {
			return nil, fmt.Errorf("bench: %d goroutines. Fix: give positive counts, as in --load=1,4,16,64", n)
		}
	}
	dir, err := privateDir(h, opts.Backend)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	lh, b, err := acquire(ctx, dir, Options{Backend: opts.Backend, Logger: opts.Logger}, 0)
	if err != nil {
		return nil, err
	}
	defer lh.Close()
	r := &LoadReport{Backend: b.Name(), Machine: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU()), DurationNs: opts.Duration.Nanoseconds()}
	for _, p := range lh.Report().Plugins {
		r.Capabilities = p.Capabilities.String()
	}
	k, err := newKernels(ctx, Options{Bytes: 4, Repeats: 1})
	if err != nil {
		return nil, err
	}
	pl, release, err := k.compile(ctx, b, k.increment)
	if err != nil {
		return nil, err
	}
	defer release()
	for i, n := range opts.Goroutines {
		if opts.Progress != nil {
			opts.Progress(i, len(opts.Goroutines), fmt.Sprintf("%d goroutines", n))
		}
		if _, _, err := loadRound(ctx, b, pl, n, opts.Duration/10); err != nil {
			return nil, err
		}
		count, lat, err := loadRound(ctx, b, pl, n, opts.Duration)
		if err != nil {
			return nil, err
		}
		slices.Sort(lat)
		row := LoadRow{Goroutines: n, Dispatches: count, PerSecond: float64(count) / opts.Duration.Seconds()}
		if len(lat) > 0 {
			row.P50Ns = lat[len(lat)/2].Nanoseconds()
			row.P99Ns = lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()
		}
		if len(r.Rows) > 0 && r.Rows[0].PerSecond > 0 {
			row.VsFirst = row.PerSecond / r.Rows[0].PerSecond
		} else {
			row.VsFirst = 1
		}
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

// loadRound runs n callers for d and returns how many dispatches finished
// within d and each one's latency. Caller g increments float32(g) and checks
// that g+1 comes back.
func loadRound(ctx context.Context, b *host.Backend, pl *host.Pipeline, n int, d time.Duration) (int, []time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []time.Duration
		first error
	)
	start := time.Now()
	end := start.Add(d)
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]byte, 4)
			want := math.Float32bits(float32(g) + 1)
			var lat []time.Duration
			var err error
			for {
				binary.LittleEndian.PutUint32(in, math.Float32bits(float32(g)))
				began := time.Now()
				if began.After(end) {
					break
				}
				var res *host.Result
				res, err = b.Dispatch(ctx, pl, host.Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}})
				if err != nil {
					break
				}
				finished := time.Now()
				if len(res.Outputs) != 1 || len(res.Outputs[0]) != 4 || binary.LittleEndian.Uint32(res.Outputs[0]) != want {
					err = fmt.Errorf("bench: caller %d got %v, want float32 %v", g, res.Outputs, float32(g)+1)
					break
				}
				if finished.After(end) {
					break
				}
				lat = append(lat, finished.Sub(began))
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	return len(all), all, first
}
