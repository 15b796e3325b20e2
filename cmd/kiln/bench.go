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
			fmt.Fprintf(a.out, "plugin start + handshake + describe   median %v, min %v (%d starts)\n", d(r.StartMedianNs), d(r.StartMinNs), r.Starts)
			fmt.Fprintf(a.out, "1-element dispatch round trip         median %v, mean %v (%d dispatches)\n", d(r.RoundTripMedianNs), d(r.RoundTripMeanNs), r.RoundTrips)
			fmt.Fprintf(a.out, "%d MiB in + out, through the plugin     %v = %.2f GB/s\n", r.Bytes>>20, d(r.PluginNs), r.PluginGBps)
			fmt.Fprintf(a.out, "%d MiB in + out, in-process interpreter %v = %.2f GB/s\n", r.Bytes>>20, d(r.InProcNs), r.InProcGBps)
			fmt.Fprintf(a.out, "process boundary cost                 %v (%.1fx the in-process time)\n", d(r.BoundaryNs), r.SlowerRatio)
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
