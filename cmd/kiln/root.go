package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	cancel       context.CancelFunc // ends the --timeout context
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
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if a.cancel != nil {
		a.cancel()
	}
	if err == nil {
		return 0
	}
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
($XDG_CONFIG_HOME/kiln/pgo.toml). "kiln doctor" reports their health.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	f := root.PersistentFlags()
	f.StringVar(&a.pluginDir, "plugins", "", "plugins directory (default: $KILN_PLUGIN_DIR, ./plugins beside kiln, $XDG_DATA_HOME/kiln/plugins)")
	f.StringVar(&a.logLevel, "log-level", "off", "host and plugin log level on stderr: trace, debug, info, warn, error, off")
	f.DurationVar(&a.startTimeout, "start-timeout", 10*time.Second, "how long one plugin may take to start and describe itself")
	f.DurationVar(&a.timeout, "timeout", 0, "give up (and stop a hung plugin) after this long; 0 waits as long as it takes")
	f.BoolVar(&a.json, "json", false, "print machine-readable JSON instead of tables")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if a.timeout > 0 {
			ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
			cmd.SetContext(ctx)
			a.cancel = cancel
		}
	}
	root.AddCommand(a.backendsCommand(), a.runCommand(), a.doctorCommand(), a.benchCommand(),
		a.cacheCommand(), a.certifyCommand(), a.compileCommand())
	root.AddCommand(a.pluginsCommand(), a.statsCommand())
	root.AddCommand(a.tuneCommand(), a.autotuneCommand())
	root.AddCommand(a.conformanceCommand(), a.devicesCommand())
	return root
}

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
	return host.Open(ctx, opts)
}

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
