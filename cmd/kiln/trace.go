package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/host/trace"
)

// traceFlag adds --trace FILE to cmd: the host writes its timeline there.
func (a *app) traceFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.trace, "trace", "", "write a timeline of the host's, the plugins' and the devices' work to FILE as Chrome trace-event JSON (open it in ui.perfetto.dev or chrome://tracing; `kiln trace summary FILE` reads it); default $"+host.TraceEnv)
}

func (a *app) traceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Read a trace that --trace (or KILN_TRACE) wrote",
		Long: `Read a trace that kiln run|bench|tune|certify --trace FILE, KILN_TRACE=FILE or
host.Options.Trace wrote: Chrome trace-event JSON, which ui.perfetto.dev and
chrome://tracing open (both work offline once the page is loaded).

  kiln trace summary FILE   per-track totals and the longest slices
  kiln trace svg FILE       the timeline as an SVG picture, one row per process
                            and adapter (-o OUT.svg; default FILE.svg)
  kiln trace check FILE     check the file against the trace-event format`,
	}
	summary := command(&traceSummaryOptions{app: a}, runTraceSummary, &cobra.Command{
		Use:   "summary FILE",
		Short: "Print per-track totals and the longest slices of a trace",
		Args:  cobra.ExactArgs(1),
	}, func(o *traceSummaryOptions, f *pflag.FlagSet) {
		f.IntVar(&o.Top, "top", 10, "how many of the longest slices to list")
	})
	svg := command(&traceSVGOptions{app: a}, runTraceSVG, &cobra.Command{
		Use:   "svg FILE",
		Short: "Draw a trace's timeline as SVG",
		Args:  cobra.ExactArgs(1),
	}, func(o *traceSVGOptions, f *pflag.FlagSet) {
		f.StringVarP(&o.Out, "out", "o", "", "the SVG file to write (default FILE.svg)")
	})
	check := command(&traceCheckOptions{app: a}, runTraceCheck, &cobra.Command{
		Use:   "check FILE",
		Short: "Check a trace against the trace-event format",
		Args:  cobra.ExactArgs(1),
	}, nil)
	cmd.AddCommand(summary, svg, check)
	return cmd
}

// traceSummaryOptions are kiln trace summary's flags and FILE.
type traceSummaryOptions struct {
	*app
	traceFile
	Top int
}

// runTraceSummary is kiln trace summary.
func runTraceSummary(_ context.Context, o *traceSummaryOptions) error {
	f, err := readTrace(o.Path)
	if err != nil {
		return err
	}
	s := trace.Summarize(f, o.Top)
	return o.render(s, func() error { return s.Print(o.out, f.ProcessNames()) })
}

// traceSVGOptions are kiln trace svg's flags and FILE.
type traceSVGOptions struct {
	*app
	traceFile
	Out string // -o; default FILE.svg
}

// runTraceSVG is kiln trace svg.
func runTraceSVG(_ context.Context, o *traceSVGOptions) error {
	f, err := readTrace(o.Path)
	if err != nil {
		return err
	}
	out := o.Out
	if out == "" {
		out = o.Path + ".svg"
	}
	w, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("%w. Fix: name a file you can write with -o", err)
	}
	if err := trace.WriteSVG(w, f); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Fprintln(o.out, "wrote", out)
	return nil
}

// traceCheckOptions are kiln trace check's FILE.
type traceCheckOptions struct {
	*app
	traceFile
}

// runTraceCheck is kiln trace check.
func runTraceCheck(_ context.Context, o *traceCheckOptions) error {
	f, err := readTrace(o.Path)
	if err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return fmt.Errorf("%s breaks the trace-event format:\n%w\nFix: report it with the file", o.Path, err)
	}
	fmt.Fprintf(o.out, "%s: %d events, %d flows, valid\n", o.Path, len(f.TraceEvents), len(f.Flows()))
	return nil
}

// traceFile is the FILE argument of the kiln trace subcommands (cobra
// requires exactly one).
type traceFile struct{ Path string }

func (t *traceFile) takeArgs(args []string) { t.Path = args[0] }

// readTrace parses the trace file at path.
func readTrace(path string) (*trace.File, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w. Fix: name the file --trace wrote", err)
	}
	defer r.Close()
	f, err := trace.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w. Fix: pass a file that --trace or KILN_TRACE wrote", path, err)
	}
	return f, nil
}
