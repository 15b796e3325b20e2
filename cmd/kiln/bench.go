package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/bench"
)

func (a *app) benchCommand() *cobra.Command {
	var opts bench.Options
	var mib int
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the plugin boundary: start, round trip, bulk transfer",
		Long: `Measure what crossing the process boundary costs, on one backend (cpu-ref
unless --backend says otherwise):

  - plugin start + handshake + description, median of --starts starts
  - round trip of a 1-element dispatch, median and mean of --round-trips
  - a dispatch whose read_write buffer of --mib MiB goes in and comes back
    out, through the plugin, against the same CPU interpreter run in-process
    (fastest of --repeats each); GB/s counts the bytes in plus the bytes out.

Figures depend on the machine; nothing is asserted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			defer h.Close()
			opts.Bytes = mib << 20
			r, err := bench.Run(cmd.Context(), h, opts)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(r)
			}
			d := func(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
			fmt.Fprintf(a.out, "kiln bench on %s (%s)\n", r.Backend, r.Machine)
			mib := r.Bytes >> 20
			line := func(label, format string, args ...any) {
				fmt.Fprintf(a.out, "%-42s %s\n", label, fmt.Sprintf(format, args...))
			}
			line("plugin start + handshake + describe", "median %v, min %v (%d starts)", d(r.StartMedianNs), d(r.StartMinNs), r.Starts)
			line("1-element dispatch round trip", "median %v, mean %v (%d dispatches)", d(r.RoundTripMedianNs), d(r.RoundTripMeanNs), r.RoundTrips)
			line(fmt.Sprintf("%d MiB in + out through the plugin", mib), "%v = %.2f GB/s", d(r.PluginNs), r.PluginGBps)
			line(fmt.Sprintf("%d MiB in + out in-process (interpreter)", mib), "%v = %.2f GB/s", d(r.InProcNs), r.InProcGBps)
			line("process boundary cost", "%v (%.2f GB/s moved; %.1fx the in-process time)", d(r.BoundaryNs), r.BoundaryGBps, r.SlowerRatio)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Backend, "backend", "cpu-ref", "backend to measure")
	f.IntVar(&opts.Starts, "starts", 5, "plugin starts to time")
	f.IntVar(&opts.RoundTrips, "round-trips", 1000, "1-element dispatches to time")
	f.IntVar(&mib, "mib", 256, "size of the bulk buffer in MiB")
	f.IntVar(&opts.Repeats, "repeats", 3, "bulk dispatches per side; the fastest counts")
	return cmd
}
