package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/conform"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// conformanceJSON is `kiln conformance --json`.
type conformanceJSON struct {
	Passed   bool                     `json:"passed"`
	Backends []conformanceBackendJSON `json:"backends"`
}

// conformanceBackendJSON is one adapter's run.
type conformanceBackendJSON struct {
	Name        string `json:"name"`
	AdapterName string `json:"adapter_name,omitempty"`
	Version     string `json:"version,omitempty"`
	Passed      bool   `json:"passed"`
	// Error says why the kit did not run (the backend could not be acquired);
	// Messages why it stopped early (a failed Describe).
	Error    string                  `json:"error,omitempty"`
	Messages []string                `json:"messages,omitempty"`
	Tables   []conformanceTableJSON  `json:"tables"`
	Cases    []conformanceResultJSON `json:"cases"`
	// Failures are the failed cases, and the parts or tables that failed
	// before their cases ran, with why.
	Failures []conformanceResultJSON `json:"failures"`
	Seconds  float64                 `json:"seconds"`
}

type conformanceTableJSON struct {
	Name    string  `json:"name"`
	Pass    int     `json:"pass"`
	Fail    int     `json:"fail"`
	Skip    int     `json:"skip"`
	Seconds float64 `json:"seconds"`
}

type conformanceResultJSON struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Messages []string `json:"messages,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// conformanceOptions are kiln conformance's flags.
type conformanceOptions struct {
	*app
	Backends []string // --backend
	Run      string
	Short    bool
	Seed     uint64
}

func (a *app) conformanceCommand() *cobra.Command {
	return command(&conformanceOptions{app: a}, runConformanceCommand, &cobra.Command{
		Use:   "conformance",
		Short: "Check installed backend plugins with the conformance kit, over the wire",
		Long: `Run the conformance kit (pluginapi/conformance, the check a plugin author runs
from Go tests) against installed plugin executables: the host starts each
plugin, and every compile and dispatch goes over the wire as an application's
would. Each backend's results are compared with the CPU reference interpreter,
in this process: the description, the handle contract, the semantics tables
(operators, casts, memory, control flow, atomics, uniforms, subgroups) and the
standard kernel corpus at its sizes.

--backend names what to check: a backend id (every available adapter of it) or
one adapter ("vulkan:1"); repeat it or separate names with commas. Without it,
every available adapter of every backend that dispatches is checked, except
reference oracles (cpu-ref), which are checked only when named.

--run selects tables and cases as go test -run does: one regular expression
per level, separated by '/': "semantics/cast", "semantics/operator/add\.",
"vector_add/size=257", "contract|describe". --short skips corpus sizes above
4096.

The table lists, per part of the kit (describe, contract, each semantics
table, each corpus kernel), the cases that passed, failed and were skipped
(a subgroup program the adapter rejects and does not claim to run), and
then every failure with its detail. --json prints {"passed", "backends": [{
"name", "adapter_name", "version", "passed", "error", "messages", "tables":
[{"name", "pass", "fail", "skip", "seconds"}], "cases": [{"name", "status",
"messages", "seconds"}], "failures" (the failed cases, and parts that failed
before their cases ran, as cases are), "seconds"}]}. The exit status is 1 when any case
failed, a backend could not be acquired or nothing was checked.

The host compiles through a pipeline cache of this run only (kept in memory)
and without autotune records or PGO routes, so the user's stores neither
change nor change the results.`,
		Args: cobra.NoArgs,
	}, func(o *conformanceOptions, f *pflag.FlagSet) {
		f.StringSliceVar(&o.Backends, "backend", nil, "backend id or adapter (vulkan:1) to check; repeatable (default: every available adapter of every backend but reference oracles)")
		f.StringVar(&o.Run, "run", "", "run only the tables and cases matching this go test -run style pattern")
		f.BoolVar(&o.Short, "short", false, "skip corpus sizes above 4096")
		f.Uint64Var(&o.Seed, "seed", 0, "seed of the random inputs")
	})
}

// runConformanceCommand is kiln conformance: the kit on every target, with
// stores of this run only.
func runConformanceCommand(ctx context.Context, o *conformanceOptions) error {
	filter, err := conform.ParseFilter(o.Run)
	if err != nil {
		return err
	}
	blobs := conform.NewBlobs()
	h, err := o.openWith(ctx, host.Options{Cache: blobs, NoAutotune: true, NoPGO: true, Remote: "off"})
	if err != nil {
		return err
	}
	defer h.Close()
	targets, err := conform.Targets(h, o.Backends)
	if err != nil {
		return err
	}
	opts := kit.Options{Seed: o.Seed}
	if o.Short {
		opts.MaxSize = 4096
	}
	return o.runConformance(ctx, h, blobs, targets, opts, filter)
}

// runConformance runs the kit on each target, printing as it goes (or JSON at
// the end), and fails when anything did.
func (a *app) runConformance(ctx context.Context, h *host.Host, blobs *conform.Blobs, targets []string, opts kit.Options, filter conform.Filter) error {
	report := conformanceJSON{Passed: true}
	var failed []string
	for i, name := range targets {
		if i > 0 && !a.json {
			fmt.Fprintln(a.out)
		}
		run := a.conformanceOn(ctx, h, blobs, name, opts, filter)
		report.Backends = append(report.Backends, run)
		if !run.Passed {
			report.Passed = false
			failed = append(failed, name)
		}
	}
	if a.json {
		if err := a.printJSON(report); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil && a.timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("conformance stopped by --timeout %v: %w. Fix: give it more time with --timeout, or fewer cases with --run or --short", a.timeout, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("conformance interrupted: %w", err)
	}
	if len(failed) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("conformance failed on %s", strings.Join(failed, ", "))}
	}
	return nil
}

// conformanceOn runs the kit on one adapter.
func (a *app) conformanceOn(ctx context.Context, h *host.Host, blobs *conform.Blobs, name string, opts kit.Options, filter conform.Filter) conformanceBackendJSON {
	out := conformanceBackendJSON{Name: name, Tables: []conformanceTableJSON{}, Cases: []conformanceResultJSON{}, Failures: []conformanceResultJSON{}}
	began := time.Now()
	b, err := h.Acquire(ctx, name)
	if err != nil {
		out.Error = err.Error()
		if !a.json {
			fmt.Fprintf(a.out, "%s: not checked: %v\n", name, err)
		}
		return out
	}
	out.Name, out.AdapterName, out.Version = b.Name(), b.Adapter().Name, b.Description().Version
	opts.Adapter = b.Adapter().Index
	var tw io.Writer = io.Discard
	if !a.json {
		tw = a.out
		fmt.Fprintf(tw, "%s (%s, plugin %s %s)\n", out.Name, out.AdapterName, b.ID(), out.Version)
		fmt.Fprintf(tw, "%-32s %5s %5s %5s  %s\n", "TABLE", "PASS", "FAIL", "SKIP", "TIME")
	}
	root := conform.Run(conform.NewBackend(ctx, b, blobs), opts, filter, func(r *conform.Result) {
		if !conform.IsTable(r.Name) {
			return
		}
		t := tableOf(r)
		out.Tables = append(out.Tables, t)
		fmt.Fprintf(tw, "%-32s %5d %5d %5d  %s\n", t.Name, t.Pass, t.Fail, t.Skip, r.Elapsed.Round(time.Millisecond))
	})
	out.Seconds = time.Since(began).Seconds()
	out.Messages = root.Messages
	cases, failures, skips := 0, 0, 0
	for _, c := range root.Children {
		for _, l := range c.Leaves() {
			if !conform.IsCase(l.Name) {
				continue
			}
			out.Cases = append(out.Cases, conformanceResultJSON{Name: l.Name, Status: l.Status, Messages: l.Messages, Seconds: l.Elapsed.Seconds()})
			cases++
			switch l.Status {
			case conform.Fail:
				failures++
			case conform.Skip:
				skips++
			}
		}
	}
	out.Passed = root.Status == conform.Pass && cases > 0
	for _, r := range root.Failures() {
		name := r.Name
		if name == "" {
			name = out.Name
		}
		out.Failures = append(out.Failures, conformanceResultJSON{Name: name, Status: r.Status, Messages: r.Messages, Seconds: r.Elapsed.Seconds()})
	}
	if a.json {
		return out
	}
	for _, r := range out.Failures {
		fmt.Fprintf(a.out, "\nFAIL %s\n", r.Name)
		for _, m := range r.Messages {
			fmt.Fprintf(a.out, "    %s\n", strings.ReplaceAll(m, "\n", "\n    "))
		}
	}
	if root.Status != conform.Fail {
		for _, m := range root.Messages {
			fmt.Fprintf(a.out, "\n%s: %s\n", out.Name, m)
		}
	}
	verdict := "PASS"
	switch {
	case cases == 0 && root.Status != conform.Fail:
		verdict = "NOTHING CHECKED (--run matched no case, or the adapter was skipped)"
	case !out.Passed:
		verdict = "FAIL"
	}
	fmt.Fprintf(a.out, "\n%s: %s: %d cases, %d failed, %d skipped, in %s\n", out.Name, verdict, cases, failures, skips, time.Since(began).Round(time.Millisecond))
	return out
}

// tableOf counts the cases of one table.
func tableOf(r *conform.Result) conformanceTableJSON {
	t := conformanceTableJSON{Name: r.Name, Seconds: r.Elapsed.Seconds()}
	for _, l := range r.Leaves() {
		if !conform.IsCase(l.Name) {
			continue
		}
		switch l.Status {
		case conform.Pass:
			t.Pass++
		case conform.Fail:
			t.Fail++
		case conform.Skip:
			t.Skip++
		}
	}
	return t
}
