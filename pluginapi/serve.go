package pluginapi

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// parentPollInterval is how often a serving plugin checks that its host is alive.
const parentPollInterval = 200 * time.Millisecond

// LogLevelEnv names the environment variable that sets a plugin's log level
// ("trace", "debug", "info", "warn", "error"); unset or unknown means info.
const LogLevelEnv = "KILN_LOG_LEVEL"

// Serve runs b as a kiln plugin and returns when the host stops the plugin. A
// plugin's main is usually just
//
//	func main() { pluginapi.Serve(mybackend.New()) }
//
// Serve speaks go-plugin's gRPC protocol only, with kiln's Handshake and versioned
// plugin sets, and raises gRPC's message limits to MaxMessageBytes. Started by hand
// (without the host's magic cookie) the binary prints a notice and exits.
//
// Output: the process's stdout carries nothing but go-plugin's handshake line. On
// Unix, file descriptor 1 is pointed at stderr before serving, so bytes written to
// fd 1 by C libraries land in the host's log instead of corrupting the handshake;
// after the handshake os.Stdout and os.Stderr write to go-plugin's stdio stream,
// which the host logs. Logs go to stderr as hclog JSON lines at the level named by
// KILN_LOG_LEVEL; the host shows them under the plugin's name. Anything printed to
// stdout before Serve is called still breaks the handshake.
//
// Host death: the plugin polls its parent process id every 200ms and exits when it
// changes (the host died and the plugin was re-parented), so a SIGKILLed host
// leaves no orphan for longer than that. This works on Unix; elsewhere the parent
// id never changes and the plugin exits when the host closes the connection.
//
// Panics: a panic in a Backend method is not recovered; it crashes the plugin
// process, which the host reports as a crashed plugin and relaunches.
//
// Options: Protocols limits the protocol versions offered (all by default; the
// host's KILN_PLUGIN_PROTOCOLS environment variable limits them too).
func Serve(b Backend, opts ...ServeOption) {
	logger := hclog.New(&hclog.LoggerOptions{
		Level:      logLevel(os.Getenv(LogLevelEnv)),
		Output:     os.Stderr,
		JSONFormat: true,
	})
	if b == nil {
		logger.Error("pluginapi.Serve was given a nil Backend. Fix: pass the plugin's Backend implementation")
		os.Exit(1)
	}
	handshake, err := redirectStdout()
	switch {
	case err != nil:
		logger.Warn("could not point stdout at stderr; stray writes to fd 1 may corrupt the handshake", "error", err)
	case handshake != nil:
		os.Stdout = handshake
	}
	go watchParent(os.Getppid(), parentPollInterval, os.Getppid, func() {
		logger.Warn("host process exited; stopping the plugin")
		os.Exit(1)
	})
	plugin.Serve(serveConfig(b, logger, servedProtocols(opts)...))
}

// serveConfig is the go-plugin configuration Serve uses, offering the given
// protocol versions (all when none are given).
func serveConfig(b Backend, logger hclog.Logger, versions ...int) *plugin.ServeConfig {
	return &plugin.ServeConfig{
		HandshakeConfig:  Handshake(),
		VersionedPlugins: pluginSets(b, versions),
		GRPCServer:       newGRPCServer,
		Logger:           logger,
	}
}

// logLevel parses a level name; an empty or unknown one means info.
func logLevel(name string) hclog.Level {
	if l := hclog.LevelFromString(name); l != hclog.NoLevel {
		return l
	}
	return hclog.Info
}

// watchParent calls gone once getppid no longer returns parent, checking every
// interval. It returns after calling gone.
func watchParent(parent int, interval time.Duration, getppid func() int, gone func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for range t.C {
		if getppid() != parent {
			gone()
			return
		}
	}
}
