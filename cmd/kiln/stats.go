package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/host"
)

// statsJSON is `kiln stats --json`.
type statsJSON struct {
	// Runs and Failed count the corpus runs the view was taken after.
	Runs     int                `json:"runs"`
	Failed   int                `json:"failed"`
	Backends []backendStatsJSON `json:"backends"`
}

type backendStatsJSON struct {
	ID              string            `json:"id"`
	Path            string            `json:"path"`
	State           string            `json:"state"`
	Dispatches      uint64            `json:"dispatches"`
	Compiles        uint64            `json:"compiles"`
	Errors          map[string]uint64 `json:"errors"`
	Restarts        uint64            `json:"restarts"`
	Latency         latencyJSON       `json:"latency"`
	BytesIn         uint64            `json:"bytes_in"`
	BytesOut        uint64            `json:"bytes_out"`
	CacheHits       uint64            `json:"cache_hits"`
	CacheMisses     uint64            `json:"cache_misses"`
	LogLinesDropped uint64            `json:"log_lines_dropped"`
}

// latencyJSON is a histogram: counts[i] are the dispatches of at most
// bounds_ns[i] (and above bounds_ns[i-1]); the last count is above every bound.
type latencyJSON struct {
	BoundsNs []int64  `json:"bounds_ns"`
	Counts   []uint64 `json:"counts"`
	Count    uint64   `json:"count"`
	SumNs    int64    `json:"sum_ns"`
}

func toStatsJSON(s host.Stats, rows []runs.Row) statsJSON {
	out := statsJSON{Runs: len(rows), Backends: []backendStatsJSON{}}
	for _, r := range rows {
		if r.Err != nil && !r.Unsupported {
			out.Failed++
		}
	}
	for _, b := range s.Backends {
		bounds := make([]int64, len(b.Latency.Bounds))
		for i, d := range b.Latency.Bounds {
			bounds[i] = d.Nanoseconds()
		}
		out.Backends = append(out.Backends, backendStatsJSON{
			ID: b.ID, Path: b.Path, State: b.State, Dispatches: b.Dispatches, Compiles: b.Compiles, Errors: b.Errors,
			Restarts: b.Restarts, Latency: latencyJSON{BoundsNs: bounds, Counts: b.Latency.Counts, Count: b.Latency.Count, SumNs: b.Latency.Sum.Nanoseconds()},
			BytesIn: b.BytesIn, BytesOut: b.BytesOut, CacheHits: b.CacheHits, CacheMisses: b.CacheMisses, LogLinesDropped: b.LogLinesDropped,
		})
	}
	return out
}

// statsOptions are kiln stats's flags.
type statsOptions struct {
	*app
	Backend string
	Size    int
	Seed    uint64
}

func (a *app) statsCommand() *cobra.Command {
	return command(&statsOptions{app: a}, runStats, &cobra.Command{
		Use:   "stats",
		Short: "Run the corpus once and show what the host measured per backend",
		Long: `A one-shot view of the host's metrics (host.Stats, also exported to
Prometheus by the host/hostprom package): every corpus kernel runs once,
verified, at --size on every ready backend (or only --backend), then each
backend's dispatches, compiles, errors by kind, restarts, dispatch latency
histogram, bytes moved, pipeline cache hits and misses and dropped plugin log
lines are printed.

--json prints an object with runs, failed and backends (id, path, state,
dispatches, compiles, errors, restarts, latency {bounds_ns, counts, count,
sum_ns}, bytes_in, bytes_out, cache_hits, cache_misses, log_lines_dropped).`,
		Args: cobra.NoArgs,
	}, func(o *statsOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Backend, "backend", "", "run on this backend only (id or id:adapter)")
		f.IntVar(&o.Size, "size", 64, "problem size of every kernel")
		f.Uint64Var(&o.Seed, "seed", 1, "random seed for corpus inputs")
	})
}

// runStats is kiln stats: the corpus once, then the host's metrics.
func runStats(ctx context.Context, o *statsOptions) error {
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	rows, err := o.runCorpus(ctx, h, o.Size, o.Seed, o.Backend)
	if err != nil {
		return err
	}
	st := toStatsJSON(h.Stats(), rows)
	return o.render(st, func() error { return o.printStats(st) })
}

func (a *app) printStats(st statsJSON) error {
	fmt.Fprintf(a.out, "%d corpus runs, %d failed\n\n", st.Runs, st.Failed)
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tSTATE\tDISPATCHES\tMEAN\tCOMPILES\tCACHE HIT/MISS\tBYTES IN/OUT\tRESTARTS\tERRORS\tLOG DROPS")
	for _, b := range st.Backends {
		mean := "-"
		if b.Latency.Count > 0 {
			mean = (time.Duration(b.Latency.SumNs) / time.Duration(b.Latency.Count)).Round(time.Microsecond).String()
		}
		var errs []string
		for k, v := range b.Errors {
			errs = append(errs, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(errs)
		if len(errs) == 0 {
			errs = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d/%d\t%s/%s\t%d\t%s\t%d\n", b.ID, b.State, b.Dispatches, mean, b.Compiles,
			b.CacheHits, b.CacheMisses, units.Bytes(b.BytesIn), units.Bytes(b.BytesOut), b.Restarts, strings.Join(errs, ","), b.LogLinesDropped)
	}
	return tw.Flush()
}
