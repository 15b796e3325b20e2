package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/certify"
	"github.com/kiln-dev/kiln/pgo"
)

// certifyJSON is `kiln certify --json`.
type certifyJSON struct {
	Table       string            `json:"table"`
	Regenerated bool              `json:"regenerated"`
	Backends    []string          `json:"backends"`
	Ops         []certifyOpJSON   `json:"ops"`
	Saved       bool              `json:"saved"`
	Published   int               `json:"published"`
	Failures    []string          `json:"failures"`
	Excluded    []certifyExclJSON `json:"excluded"`
}

type certifyOpJSON struct {
	Kernel       string            `json:"kernel"`
	Op           string            `json:"op"`
	Size         int               `json:"size"`
	Backend      string            `json:"backend,omitempty"`
	MedianNs     int64             `json:"median_ns,omitempty"`
	Observations []observationJSON `json:"observations"`
	Classes      []classJSON       `json:"classes,omitempty"`
	Error        string            `json:"error,omitempty"`
}

// classJSON is one size class of a certified op.
type classJSON struct {
	Size         int               `json:"size"`
	Bytes        int64             `json:"bytes"`
	Backend      string            `json:"backend"`
	MedianNs     int64             `json:"median_ns"`
	Observations []observationJSON `json:"observations"`
}

type observationJSON struct {
	Backend  string `json:"backend"`
	MedianNs int64  `json:"median_ns"`
}

type certifyExclJSON struct {
	Op      string `json:"op"`
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// certifyOptions are kiln certify's flags.
type certifyOptions struct {
	*app
	Options certify.Options
	SizeSet bool // --size was given (0 is a size, not "the largest")
}

func (a *app) certifyCommand() *cobra.Command {
	o := &certifyOptions{app: a}
	cmd := &cobra.Command{
		Use:   "certify",
		Short: "Measure every corpus kernel on every ready backend and record the fastest (PGO routes)",
		Long: `Profile-guided routing: for each corpus kernel (or each --kernel), run it once on
every ready backend and check the outputs against the kernel's Go reference,
then time the backends that passed (one warm-up and --timed dispatches each,
median) and record the fastest as the route for the kernel's op id in
$XDG_CONFIG_HOME/kiln/pgo.toml. Each kernel is measured at --classes size
classes (--size, --size/16, --size/256; a backend wrong at any of them is
excluded) and a route is kept per class: a dispatch follows the class nearest
its own size, counted in buffer bytes, so small launches can go to a backend
with little launch overhead and large ones to a GPU. From then on, kiln run and host.Dispatch without
a named backend run that op on its route's backend while the route is fresh
(same adapter fingerprint and plugin version) and the backend is healthy.

Reference oracles (cpu-ref) are not measured: routing never picks an oracle
implicitly, so certification needs at least one other ready backend.

With a fleet tier ($KILN_REMOTE), the routes measured are also published to
it, for the machines that share it (see kiln cache --help).

The table is saved under its lock, merged with what other processes wrote
meanwhile. A malformed table is regenerated: replaced by the routes measured
now, if it is still malformed when the save holds the lock. A table written by
a newer kiln (a newer schema) is refused before anything is measured, and
never overwritten. A progress bar goes to stderr when it is a terminal. The exit status is 1
when any kernel got no route.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.SizeSet = cmd.Flags().Changed("size")
			return runCertify(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Options.Kernels, "kernel", nil, "corpus kernel to certify (repeatable; default: every kernel; see kiln run --list)")
	f.IntVar(&o.Options.Size, "size", 0, "problem size (default: each kernel's largest standard size)")
	f.Uint64Var(&o.Options.Seed, "seed", 1, "random seed for the inputs")
	f.IntVar(&o.Options.Timed, "timed", pgo.DefaultTimed, "timed dispatches per backend, after one warm-up")
	f.IntVar(&o.Options.Classes, "classes", certify.DefaultClasses, "size classes per kernel: --size, --size/16, --size/256, … (1 records one route per op)")
	a.traceFlag(cmd)
	return cmd
}

// runCertify is kiln certify: it measures, records the routes, publishes
// them to the fleet tier and prints the report.
func runCertify(ctx context.Context, o *certifyOptions) error {
	switch {
	case !o.SizeSet:
		o.Options.Size = certify.LargestSize
	case o.Options.Size < 0:
		return fmt.Errorf("--size %d is negative. Fix: pass a problem size of 0 or more, or leave it out for each kernel's largest standard size", o.Options.Size)
	}
	ks, err := certify.Select(o.Options.Kernels)
	if err != nil {
		return err
	}
	path, err := pgo.DefaultPath()
	if err != nil {
		return err
	}
	table, malformed, err := certify.LoadTable(path)
	if err != nil {
		return err
	}
	if malformed != nil {
		fmt.Fprintf(o.errOut, "kiln: %v\nkiln: %s will be regenerated from this certification unless another process repairs it meanwhile\n", malformed, path)
	}
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	backends, err := certify.Candidates(ctx, h)
	if err != nil {
		return err
	}
	bar := o.progressBar()
	results, runErr := certify.Run(ctx, h, table, backends, ks, o.Options, bar.update)
	bar.finish()
	j := certifyJSON{Table: path, Backends: backends, Ops: []certifyOpJSON{}, Failures: []string{}, Excluded: []certifyExclJSON{}}
	for _, r := range results {
		op := certifyOpJSON{Kernel: r.Kernel, Op: r.Op, Size: r.Size, Backend: r.Route.Backend, Observations: []observationJSON{}}
		for _, ob := range r.Route.Observations {
			op.Observations = append(op.Observations, observationJSON{ob.Backend, ob.MedianNs})
			if ob.Backend == r.Route.Backend {
				op.MedianNs = ob.MedianNs
			}
		}
		for _, c := range r.Route.Classes {
			cj := classJSON{Size: r.SizeOf[c.Bytes], Bytes: c.Bytes, Backend: c.Backend, Observations: []observationJSON{}}
			for _, ob := range c.Observations {
				cj.Observations = append(cj.Observations, observationJSON{ob.Backend, ob.MedianNs})
				if ob.Backend == c.Backend {
					cj.MedianNs = ob.MedianNs
				}
			}
			op.Classes = append(op.Classes, cj)
		}
		if r.Err != nil {
			op.Error = r.Err.Error()
			j.Failures = append(j.Failures, fmt.Sprintf("%s: %v", r.Kernel, r.Err))
		}
		for _, e := range r.Excluded {
			j.Excluded = append(j.Excluded, certifyExclJSON{Op: r.Op, Backend: e.Backend, Reason: e.Reason})
		}
		j.Ops = append(j.Ops, op)
	}
	j.Saved, j.Regenerated, err = table.SaveRegenerating(ctx)
	if err != nil {
		return err
	}
	if h.Remote() != nil {
		measured := map[string]pgo.Route{}
		for _, r := range results {
			if r.Err == nil {
				measured[r.Op] = r.Route
			}
		}
		h.PublishRoutes(measured)
		j.Published = len(measured)
	}
	if err := o.render(j, func() error { return o.printCertify(j) }); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if len(j.Failures) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d kernel(s) got no route: %s", len(j.Failures), strings.Join(j.Failures, "; "))}
	}
	return nil
}

func (a *app) printCertify(j certifyJSON) error {
	fmt.Fprintf(a.out, "PGO table %s", j.Table)
	if j.Regenerated {
		fmt.Fprint(a.out, " (regenerated)")
	}
	fmt.Fprintf(a.out, ", backends: %s\n\n", strings.Join(j.Backends, ", "))
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KERNEL\tOP ID\tSIZE\tROUTE\tMEDIAN\tMEASURED")
	for _, op := range j.Ops {
		if op.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\tno route\n", op.Kernel, op.Op, op.Size)
			continue
		}
		var seen []string
		for _, o := range op.Observations {
			seen = append(seen, fmt.Sprintf("%s %v", o.Backend, time.Duration(o.MedianNs).Round(time.Microsecond)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%v\t%s\n", op.Kernel, op.Op, op.Size, op.Backend, time.Duration(op.MedianNs).Round(time.Microsecond), strings.Join(seen, ", "))
		for _, c := range op.Classes[:max(len(op.Classes)-1, 0)] {
			var seen []string
			for _, o := range c.Observations {
				seen = append(seen, fmt.Sprintf("%s %v", o.Backend, time.Duration(o.MedianNs).Round(time.Microsecond)))
			}
			fmt.Fprintf(tw, "\t  size class\t%d\t%s\t%v\t%s\n", c.Size, c.Backend, time.Duration(c.MedianNs).Round(time.Microsecond), strings.Join(seen, ", "))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if j.Published > 0 {
		fmt.Fprintf(a.out, "\npublished %d route(s) to the fleet tier\n", j.Published)
	}
	for _, e := range j.Excluded {
		fmt.Fprintf(a.out, "\nexcluded %s from %s: %s\n", e.Backend, e.Op, e.Reason)
	}
	return nil
}
