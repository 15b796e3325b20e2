package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/bench"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/host"
)

// benchOptions are kiln bench's flags.
type benchOptions struct {
	*app
	Options bench.Options
	MiB     int           // --mib: the bulk buffer
	Load    []int         // --load: goroutines per row of the load test
	LoadSet bool          // --load was given: run the load test instead
	LoadFor time.Duration // --load-duration
	Kernel  kernelBench   // --kernel and its flags: time a corpus kernel instead
}

func (a *app) benchCommand() *cobra.Command {
	o := &benchOptions{app: a}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the plugin boundary: start, round trips, bulk transfer, resident buffers",
		Long: `Measure what crossing the process boundary costs, on one backend (cpu-ref
unless --backend says otherwise), on protocol 2 (buffers kept in the plugin,
shared memory and the fast path where the plugin has them) next to protocol 1
(the same plugin through a host that offers only protocol 1: every byte inline
over gRPC):

  - plugin start + handshake + description, median of --starts starts, next
    to a bare go-plugin plugin's start + handshake + one RPC (this binary in
    a hidden mode, so no go tool is needed; it is larger than a plugin, which
    slows its start: go test -bench Start ./host compares with a tiny one),
    each timed right after the other
  - round trip of a 1-element dispatch through the v1 API (inputs in, outputs
    out), median and mean of --round-trips, on both protocols; and of a submit
    of one 1-element dispatch over a resident buffer, with the median time the
    plugin's backend took for its part (each timed after 300 ms of the same
    calls back to back, so that a GPU has left its idle clock)
  - a dispatch whose read_write buffer of --mib MiB goes in and comes back
    out, through the plugin on both protocols and as Write + submit + Read of
    a resident buffer, and copied into a mapped buffer and read in place,
    against the same CPU interpreter run in-process once before each repeat
    (fastest of --repeats each, the ratio to the fastest in-process run next
    to it); GB/s counts the bytes in plus the bytes out
  - --chain dependent 1-element dispatches in one submit
  - a saxpy over two resident --mib MiB buffers, with the bytes the host's
    traffic counter saw cross for it (0: the data stays in the plugin)

With --load it runs the load test instead: for each count in the list
(--load alone: 1,4,16,64), that many goroutines share one host and one
pipeline and dispatch 1-element work through the v1 API back to back, each
checking its results, for --load-duration after a tenth of it as warm-up; it
prints dispatches per second (and the ratio to the first row) and the p50 and
p99 latency per count. Pass the list with '=': --load=1,8.

Figures depend on the machine; nothing is asserted.

With --kernel NAME it times a corpus kernel instead, on every ready backend
(--on picks them; cpu-ref only when named) side by side: each verified
against the reference first, then timed as kiln run --repeat times it
(buffers on the backend, a warm-up, --repeat timed submits), with the median
and minimum device and submit times and the throughput:
  kiln bench --kernel matmul_reg --size 1024 --repeat 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.LoadSet = cmd.Flags().Changed("load")
			return runBench(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Options.Backend, "backend", "cpu-ref", "backend to measure")
	f.IntVar(&o.Options.Starts, "starts", 5, "plugin starts to time")
	f.IntVar(&o.Options.RoundTrips, "round-trips", 1000, "1-element dispatches to time")
	f.IntVar(&o.MiB, "mib", 256, "size of the bulk buffer in MiB")
	f.IntVar(&o.Options.Repeats, "repeats", 5, "bulk dispatches per side; the fastest counts")
	f.IntVar(&o.Options.Chain, "chain", 100, "dependent 1-element dispatches in one submit")
	f.IntSliceVar(&o.Load, "load", nil, "instead, the load test with these numbers of goroutines (--load alone: 1,4,16,64)")
	f.Lookup("load").NoOptDefVal = "1,4,16,64"
	f.DurationVar(&o.LoadFor, "load-duration", 2*time.Second, "how long each row of the load test is measured")
	o.Kernel.flags(cmd)
	a.traceFlag(cmd)
	return cmd
}

// runBench is kiln bench: a corpus kernel side by side (--kernel), the load
// test (--load), or the plugin boundary's costs.
func runBench(ctx context.Context, o *benchOptions) error {
	if o.Kernel.kernel != "" {
		return o.Kernel.run(ctx, o.app)
	}
	// The measuring hosts are bench's own: the trace is the protocol-2 one's.
	trace := o.trace
	o.trace = ""
	h, err := o.openWith(ctx, host.Options{TraceFile: "off"})
	if err != nil {
		return err
	}
	defer h.Close()
	if o.LoadSet {
		return o.benchLoad(ctx, h, bench.LoadOptions{Backend: o.Options.Backend, Goroutines: o.Load, Duration: o.LoadFor})
	}
	opts := o.Options
	opts.Bytes, opts.TraceFile = o.MiB<<20, trace
	if exe, err := os.Executable(); err == nil {
		opts.EchoPlugin = exe
	}
	bar := o.progressBar()
	opts.Progress = bar.update
	r, err := bench.Run(ctx, h, opts)
	bar.finish()
	if err != nil {
		return err
	}
	return o.show(r, func() { o.printBench(r) })
}

// benchLoad runs and prints the load test.
func (a *app) benchLoad(ctx context.Context, h *host.Host, opts bench.LoadOptions) error {
	bar := a.progressBar()
	opts.Progress = bar.update
	r, err := bench.Load(ctx, h, opts)
	bar.finish()
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(r)
	}
	fmt.Fprintf(a.out, "kiln bench --load on %s (%s)\n%s\n1-element dispatches (v1 API) by goroutines sharing one host, %v per row\n\n", r.Backend, r.Machine, r.Capabilities, time.Duration(r.DurationNs))
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "goroutines\tdispatches/s\tvs first\tp50\tp99\t\n")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2fx\t%v\t%v\t\n", row.Goroutines, row.PerSecond, row.VsFirst,
			time.Duration(row.P50Ns).Round(time.Microsecond), time.Duration(row.P99Ns).Round(time.Microsecond))
	}
	return tw.Flush()
}

func (a *app) printBench(r *bench.Report) {
	d := func(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
	lat := func(l bench.Latency) string {
		s := fmt.Sprintf("median %v, mean %v", d(l.MedianNs), d(l.MeanNs))
		if l.PluginMedianNs > 0 {
			s += fmt.Sprintf(" (in the plugin %v)", d(l.PluginMedianNs))
		}
		return s
	}
	bulk := func(b bench.Bulk) string {
		if b.Unavailable != "" {
			return "- (" + b.Unavailable + ")"
		}
		return fmt.Sprintf("%v = %.2f GB/s (%.2fx in-process)", d(b.Ns), b.GBps, b.Ratio)
	}
	fmt.Fprintf(a.out, "kiln bench on %s (%s)\n%s\n\n", r.Backend, r.Machine, r.Capabilities)
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tprotocol 2\tprotocol 1\n")
	fmt.Fprintf(tw, "plugin start + handshake + describe\tmedian %v, min %v\t\n", d(r.StartMedianNs), d(r.StartMinNs))
	if r.BareStartMedianNs > 0 {
		fmt.Fprintf(tw, "bare go-plugin start + handshake + 1 RPC (this binary)\tmedian %v, min %v (kiln %.2fx)\t\n", d(r.BareStartMedianNs), d(r.BareStartMinNs), float64(r.StartMedianNs)/float64(r.BareStartMedianNs))
	}
	fmt.Fprintf(tw, "1-element dispatch round trip (v1 API, %d)\t%s\t%s\n", r.RoundTrip.N, lat(r.RoundTrip), lat(r.RoundTripV1))
	fmt.Fprintf(tw, "1-element submit over a resident buffer\t%s\t-\n", lat(r.RoundTripSubmit))
	size := units.Bytes(r.Bytes)
	fmt.Fprintf(tw, "%s in + out (v1 API)\t%s\t%s\n", size, bulk(r.Bulk), bulk(r.BulkV1))
	fmt.Fprintf(tw, "%s copied into a mapped buffer, submit, read in place\t%s\t-\n", size, bulk(r.BulkMapped))
	fmt.Fprintf(tw, "%s Write + submit + Read (resident)\t%s\t-\n", size, bulk(r.BulkResident))
	fmt.Fprintf(tw, "%s in + out in-process (interpreter)\t%v = %.2f GB/s\t\n", size, d(r.InProcNs), r.InProcGB)
	fmt.Fprintf(tw, "%d dependent 1-element dispatches, one submit\t%v\t-\n", r.Chain, d(r.ChainNs))
	fmt.Fprintf(tw, "saxpy over 2 x %s resident buffers\t%v, %s moved\t-\n", size, d(r.RedispatchNs), units.Bytes(r.RedispatchMoved))
	tw.Flush()
}
