package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/units"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pgo"
)

func (a *app) routesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "routes",
		Short: "List or forget the PGO routes kiln certify recorded",
		Long: `The PGO table ($XDG_CONFIG_HOME/kiln/pgo.toml) holds one route per op (a
program's name, e.g. kiln.vector.saxpy.f32): the backend kiln certify measured
fastest for it, per size class. kiln run and host.Dispatch without a named
backend follow a fresh route. "kiln doctor" says which routes are stale.`,
	}
	cmd.AddCommand(a.routesListCommand(), a.routesForgetCommand())
	return cmd
}

// routeJSON is one route of `kiln routes list --json`.
type routeJSON struct {
	Op                 string      `json:"op"`
	Kernel             string      `json:"kernel,omitempty"`
	Backend            string      `json:"backend"`
	MedianNs           int64       `json:"median_ns"`
	AdapterFingerprint string      `json:"adapter_fingerprint"`
	PluginVersion      string      `json:"plugin_version"`
	MeasuredAt         time.Time   `json:"measured_at"`
	Classes            []classJSON `json:"classes,omitempty"`
}

func toRouteJSON(op string, r pgo.Route) routeJSON {
	median := func(backend string, obs []pgo.Observation) int64 {
		for _, o := range obs {
			if o.Backend == backend {
				return o.MedianNs
			}
		}
		return 0
	}
	observations := func(obs []pgo.Observation) []observationJSON {
		out := []observationJSON{}
		for _, o := range obs {
			out = append(out, observationJSON{o.Backend, o.MedianNs})
		}
		return out
	}
	j := routeJSON{Op: op, Backend: r.Backend, MedianNs: median(r.Backend, r.Observations),
		AdapterFingerprint: r.AdapterFingerprint, PluginVersion: r.PluginVersion, MeasuredAt: r.MeasuredAt}
	if k, ok := kernels.Lookup(op); ok {
		j.Kernel = k.Name
	}
	for _, c := range r.Classes {
		j.Classes = append(j.Classes, classJSON{Bytes: c.Bytes, Backend: c.Backend,
			MedianNs: median(c.Backend, c.Observations), Observations: observations(c.Observations)})
	}
	return j
}

func (a *app) routesListCommand() *cobra.Command {
	return command(a, runRoutesList, &cobra.Command{
		Use:   "list",
		Short: "List the PGO routes: op, corpus kernel, backend, median, size classes",
		Long: `List prints every route of the PGO table, sorted by op. It reads the table
only; it starts no plugin, so it does not say whether a route is fresh ("kiln
doctor" does).

--json prints an object with table and routes (op, kernel, backend, median_ns,
adapter_fingerprint, plugin_version, measured_at, classes {bytes, backend,
median_ns, observations}).`,
		Args: cobra.NoArgs,
	}, nil)
}

// runRoutesList is kiln routes list (it has no flags of its own).
func runRoutesList(_ context.Context, a *app) error {
	path, table, err := loadRoutes()
	if err != nil {
		return err
	}
	rows := []routeJSON{}
	for _, op := range table.Ops() {
		r, _ := table.Route(op)
		rows = append(rows, toRouteJSON(op, r))
	}
	v := struct {
		Table  string      `json:"table"`
		Routes []routeJSON `json:"routes"`
	}{path, rows}
	header := fmt.Sprintf("PGO table %s: %d route(s)", path, len(rows))
	return a.showStore(v, header, len(rows), "OP\tKERNEL\tBACKEND\tMEDIAN\tSIZE CLASSES\tPLUGIN VERSION\tMEASURED", func(tw io.Writer) {
		for _, r := range rows {
			kernel := r.Kernel
			if kernel == "" {
				kernel = "-"
			}
			classes := []string{}
			for _, c := range r.Classes {
				classes = append(classes, fmt.Sprintf("%s→%s", units.Bytes(c.Bytes), c.Backend))
			}
			if len(classes) == 0 {
				classes = []string{"-"}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", r.Op, kernel, r.Backend, time.Duration(r.MedianNs).Round(time.Microsecond),
				strings.Join(classes, " "), r.PluginVersion, r.MeasuredAt.Format(time.RFC3339))
		}
	})
}

// routesForgetOptions are kiln routes forget's flags and OP arguments.
type routesForgetOptions struct {
	*app
	Backend string
	All     bool
	argList
}

func (a *app) routesForgetCommand() *cobra.Command {
	return command(&routesForgetOptions{app: a}, runRoutesForget, &cobra.Command{
		Use:   "forget [OP|KERNEL|PROGRAM.json...] [--backend ID] [--all]",
		Short: "Remove PGO routes: by op, corpus kernel or program file, by backend, or all",
		Long: `Forget removes the routes that match: the route of each op (a program's
name, as kiln routes list shows), of each corpus kernel (by name, as kiln run
--list shows) or of each program file (PROGRAM.json: its name); every route
that sends any launch to a --backend (a backend id such as "example-cpu" for
all its adapters, or a routing id such as "vulkan:0"), in any size class; or
--all. --backend also narrows the ops given. Launches of a forgotten op go to
the preferred backend until kiln certify measures it again.

The table is saved under its lock, merged with what other processes wrote
meanwhile. Routes in the fleet tier ($KILN_REMOTE) are not removed.`,
	}, func(o *routesForgetOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Backend, "backend", "", "forget the routes that send any launch to this backend (id, or id:adapter)")
		f.BoolVar(&o.All, "all", false, "forget every route (narrowed by --backend)")
	})
}

// runRoutesForget is kiln routes forget.
func runRoutesForget(ctx context.Context, o *routesForgetOptions) error {
	if len(o.Args) == 0 && o.Backend == "" && !o.All {
		return errors.New("nothing to forget. Fix: pass an OP, a corpus KERNEL, a PROGRAM.json, --backend ID or --all")
	}
	if o.All && len(o.Args) > 0 {
		return errors.New("--all with an OP. Fix: pass one or the other")
	}
	ops := map[string]bool{}
	for _, arg := range o.Args {
		op, err := opOf(arg)
		if err != nil {
			return err
		}
		ops[op] = true
	}
	path, table, err := loadRoutes()
	if err != nil {
		return err
	}
	forgotten := table.Forget(func(op string, r pgo.Route) bool {
		return (len(ops) == 0 || ops[op]) && (o.Backend == "" || r.RoutesTo(o.Backend))
	})
	if _, err := table.Save(ctx); err != nil {
		return err
	}
	return o.printForgotten("table", "route(s)", path, forgotten)
}

// loadRoutes loads the PGO table at its default path.
func loadRoutes() (string, *pgo.Table, error) {
	path, err := pgo.DefaultPath()
	if err != nil {
		return "", nil, err
	}
	table, err := pgo.Load(path)
	return path, table, err
}

// opOf resolves a forget argument to an op: a corpus kernel's name, a program
// file's name, or the argument itself.
func opOf(arg string) (string, error) {
	if k, ok := kernels.Lookup(arg); ok {
		return k.OpID, nil
	}
	if !strings.HasSuffix(arg, ".json") {
		return arg, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return "", fmt.Errorf("reading program %s: %w. Fix: pass the path of a kiln JSON program, or an op name", arg, err)
	}
	prog, err := ir.ParseJSON(data)
	if err != nil {
		return "", fmt.Errorf("program %s: %w", arg, err)
	}
	return prog.Name, nil
}
