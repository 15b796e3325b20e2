package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/host"
)

// app holds the global flags and the output streams of one kiln invocation.
type app struct {
	out, errOut  io.Writer
	pluginDir    string
	logLevel     string
	startTimeout time.Duration
	timeout      time.Duration
	json         bool
	trace        string             // --trace: the file the host writes its timeline to
	cancel       context.CancelFunc // ends the --timeout context
	deadline     context.Context    // the --timeout context, nil without --timeout
	started      time.Time          // when the --timeout clock started
}

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// execute runs kiln with args and returns the process exit status.
func execute(ctx context.Context, args []string, out, errOut io.Writer) int {
	a := &app{out: out, errOut: errOut}
	root := a.rootCommand()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if a.cancel != nil {
		a.cancel()
	}
	if err == nil {
		return 0
	}
	err = a.timedOut(err)
	fmt.Fprintln(errOut, "kiln:", err)
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	return 1
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kiln",
		Short: "Run portable compute programs on backend plugins",
		Long: `kiln runs portable compute programs (kiln IR) on backend plugins: separate
executables named kiln-backend-<name> that the host starts as child processes.

The plugins directory is, in order: --plugins, $KILN_PLUGIN_DIR, a "plugins"
directory beside the kiln executable (make build puts them in bin/plugins), or
$XDG_DATA_HOME/kiln/plugins. Start with "kiln doctor" to see what was found.

Without --backend, commands use the preferred backend: the highest capability
score, then timing quality, memory bandwidth, precedence and acquisition time.
The CPU reference (cpu-ref) is an oracle and is only used when named:
--backend cpu-ref. Without --backend, a program whose op has a fresh route
from "kiln certify" runs on the route's backend when that backend is healthy.

The host keeps the persistent stores: the pipeline cache
($XDG_CACHE_HOME/kiln/pipelines, see "kiln cache"; KILN_CACHE=off disables it),
autotune records ($XDG_CONFIG_HOME/kiln/autotune.toml) and PGO routes
($XDG_CONFIG_HOME/kiln/pgo.toml, see "kiln routes"). "kiln doctor" reports
their health.

Long commands (run --all, stats, bench, doctor, certify, tune) draw a progress
bar on stderr when stderr is a terminal and --json is off; never in a pipe.
Shell completion: "kiln completion bash|zsh|fish|powershell --help".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = buildVersion().line()
	root.SetVersionTemplate("{{.Version}}\n")
	f := root.PersistentFlags()
	f.StringVar(&a.pluginDir, "plugins", "", "plugins directory (default: $KILN_PLUGIN_DIR, ./plugins beside kiln, $XDG_DATA_HOME/kiln/plugins)")
	f.StringVar(&a.logLevel, "log-level", "off", "host and plugin log level on stderr: trace, debug, info, warn, error, off")
	f.DurationVar(&a.startTimeout, "start-timeout", 10*time.Second, "how long one plugin may take to start and describe itself")
	f.DurationVar(&a.timeout, "timeout", 0, "give up (and stop a hung plugin) after this long, e.g. 30s or 2m; 0 (the default) means no limit: wait as long as it takes")
	f.BoolVar(&a.json, "json", false, "print machine-readable JSON instead of tables")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		for _, d := range []struct {
			flag  string
			value time.Duration
		}{{"--timeout", a.timeout}, {"--start-timeout", a.startTimeout}} {
			if d.value < 0 {
				return fmt.Errorf("%s %v is negative. Fix: pass a positive duration such as 30s, or 0 for no limit", d.flag, d.value)
			}
		}
		if a.timeout > 0 {
			a.started = time.Now()
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
			cmd.SetContext(ctx)
			a.cancel, a.deadline = cancel, ctx
		}
		return nil
	}
	root.AddCommand(a.backendsCommand(), a.runCommand(), a.doctorCommand(), a.benchCommand(),
		a.cacheCommand(), a.certifyCommand(), a.compileCommand())
	root.AddCommand(a.pluginsCommand(), a.statsCommand())
	root.AddCommand(a.tuneCommand(), a.autotuneCommand())
	root.AddCommand(a.routesCommand(), a.versionCommand())
	root.AddCommand(a.conformanceCommand(), a.devicesCommand(), a.traceCommand())
	// The completion command now, not at Execute, so that the walk below covers
	// it; it writes to the output set before it is made.
	root.SetOut(a.out)
	root.SetErr(a.errOut)
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes root and every command that only groups
// subcommands ("kiln cache") fail on an argument that names none of them
// ("kiln cache bogus"), where cobra would print the help and exit 0. Without
// an argument they print their help.
func refuseUnknownSubcommands(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = unknownSubcommand
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand refuses any argument of a command that only groups
// subcommands.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, ", "))
	}
	return fmt.Errorf("%s. Fix: run '%s --help' to see its commands", msg, cmd.CommandPath())
}

// timedOut rewrites err for the command line when the --timeout deadline
// passed: it says how long the command really ran, names --timeout and keeps
// err's own account of what was cut short.
func (a *app) timedOut(err error) error {
	if a.deadline == nil || !errors.Is(a.deadline.Err(), context.DeadlineExceeded) {
		return err
	}
	var hung *host.TimeoutError
	if errors.As(err, &hung) && hung.Hung {
		return err
	}
	return &timeoutError{elapsed: time.Since(a.started), limit: a.timeout, err: err}
}

// timeoutError is a command cut short by --timeout.
type timeoutError struct {
	elapsed, limit time.Duration
	err            error
}

// Error says how long the command ran and what was cut short; err's own Fix,
// written for API callers ("give the context a longer deadline"), gives way to
// the command line's.
func (e *timeoutError) Error() string {
	cause := e.err.Error()
	if i := strings.Index(cause, " Fix: "); i >= 0 {
		cause = strings.TrimSuffix(strings.TrimSpace(cause[:i]), ".")
	}
	return fmt.Sprintf("timed out after %.1fs (--timeout %v): %s. Fix: raise --timeout (0 means no limit), or shrink the work",
		e.elapsed.Seconds(), e.limit, cause)
}

func (e *timeoutError) Unwrap() error { return e.err }

// open starts the host with the global flags.
func (a *app) open(ctx context.Context) (*host.Host, error) {
	return a.openWith(ctx, host.Options{})
}

// openWith starts the host with the global flags over opts.
func (a *app) openWith(ctx context.Context, opts host.Options) (*host.Host, error) {
	level := hclog.LevelFromString(a.logLevel)
	if level == hclog.NoLevel {
		return nil, fmt.Errorf("unknown --log-level %q. Fix: use trace, debug, info, warn, error or off", a.logLevel)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "kiln", Level: level, Output: a.errOut})
	opts.PluginDir, opts.Logger, opts.StartTimeout = a.pluginDir, logger, a.startTimeout
	if a.trace != "" {
		opts.TraceFile = a.trace
	}
	return host.Open(ctx, opts)
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// render is every command's output: v as JSON with --json, else the table
// (or lines) text writes.
func (a *app) render(v any, text func() error) error {
	if a.json {
		return a.printJSON(v)
	}
	return text()
}

// show is render for a text form that cannot fail.
func (a *app) show(v any, text func()) error {
	return a.render(v, func() error { text(); return nil })
}
