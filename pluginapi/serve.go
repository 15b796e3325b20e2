package pluginapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/internal/wire"
)

// parentPollInterval is how often a plugin checks that its host is alive.
const parentPollInterval = 100 * time.Millisecond

// LogLevelEnv names the environment variable that sets a plugin's log level
// ("trace", "debug", "info", "warn", "error"); unset or unknown means info.
const LogLevelEnv = "KILN_LOG_LEVEL"

// unixSocketDirEnv is where go-plugin tells a plugin the private directory its
// host made for the plugin's socket.
const unixSocketDirEnv = "PLUGIN_UNIX_SOCKET_DIR"

// hostWatched is set by init when the host passed its pid and the watch runs.
var hostWatched bool

func init() {
	hostWatched = watchHostFromStart(os.Getenv, os.Getppid, func() { hostGone(nil) })
	if hostWatched {
		// A process this plugin starts is not a child of the host: it must not
		// watch the host's pid.
		_ = os.Unsetenv(wire.HostPIDEnv)
	}
}

// watchHostFromStart starts the host watch when this process is a plugin started
// by a kiln host (the magic cookie and wire.HostPIDEnv are set): it calls gone at once
// when the parent is already another process (the host died while this process
// was starting), else as soon as the parent changes. It reports whether the
// watch runs.
func watchHostFromStart(getenv func(string) string, getppid func() int, gone func()) bool {
	h := Handshake()
	if getenv(h.MagicCookieKey) != h.MagicCookieValue {
		return false
	}
	pid, err := strconv.Atoi(getenv(wire.HostPIDEnv))
	if err != nil || pid <= 0 {
		return false
	}
	if getppid() != pid {
		gone()
		return true
	}
	go watchParent(pid, parentPollInterval, getppid, gone)
	return true
}

// hostGone ends a plugin whose host died: it removes the private socket
// directory the host made for it (nobody else will) and exits.
func hostGone(logger hclog.Logger) {
	if logger != nil {
		logger.Warn("host process exited; stopping the plugin")
	}
	if dir := os.Getenv(unixSocketDirEnv); dir != "" {
		_ = os.RemoveAll(dir) // best effort: the process exits either way
	}
	os.Exit(1)
}

// Serve runs b as a kiln plugin and returns when the host stops the plugin. A
// plugin's main is usually just
//
//	func main() { pluginapi.Serve(mybackend.New()) }
//
// Serve speaks go-plugin's gRPC protocol only, with kiln's [Handshake] and
// versioned plugin sets, and raises gRPC's message limits to [MaxMessageBytes].
// Started by hand (without the host's magic cookie) the binary prints a notice
// and exits. go-plugin's gRPC health service runs beside the backend on the
// server's own goroutines, so it answers while the backend works; the host
// tells a busy plugin from a hung one by it.
//
// Output: the process's stdout carries nothing but go-plugin's handshake line. On
// Unix, file descriptor 1 is pointed at stderr before serving, so bytes written to
// fd 1 by C libraries land in the host's log instead of corrupting the handshake;
// after the handshake os.Stdout and os.Stderr write to go-plugin's stdio stream,
// which the host logs. Logs go to stderr as hclog JSON lines at the level named by
// KILN_LOG_LEVEL; the host shows them under the plugin's name. Anything printed to
// stdout before Serve is called still breaks the handshake. When the handshake
// line cannot be written (the host is gone), the plugin exits.
//
// Host death (see docs/design.md, "Supervision and reliability"): a host started
// the plugin with a parent-death signal (Linux) and passed its pid in
// $KILN_HOST_PID; from package initialisation on, the plugin exits when its parent
// is no longer that pid, checking every 100ms, so a host SIGKILLed even while its
// plugins start leaves no orphan. Without it, Serve watches the parent it
// has when called.
//
// Panics: a panic in a Backend method is not recovered; it crashes the plugin
// process, which the host reports as a crashed plugin and relaunches.
//
// Options: Protocols limits the protocol versions offered (all by default; the
// host's KILN_PLUGIN_PROTOCOLS environment variable limits them too).
//
// Version: run with a --version argument (kiln-backend-cuda --version), the
// binary prints the id and version its Describe reports and the protocols it
// offers, and exits without serving: 0, or 1 when Describe fails (its error
// on stderr).
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
	if slices.Contains(os.Args[1:], versionFlag) {
		os.Exit(printVersion(os.Stdout, os.Stderr, b, servedProtocols(opts)))
	}
	handshake, err := redirectStdout()
	switch {
	case err != nil:
		logger.Warn("could not point stdout at stderr; stray writes to fd 1 may corrupt the handshake", "error", err)
	case handshake != nil:
		os.Stdout = handshake
	}
	guarded, err := guardHandshake(os.Stdout, func(err error) {
		logger.Error("cannot write the handshake line; the host is gone", "error", err)
		hostGone(nil)
	})
	if err != nil {
		logger.Warn("could not guard the handshake write", "error", err)
	} else {
		os.Stdout = guarded
	}
	if !hostWatched {
		go watchParent(os.Getppid(), parentPollInterval, os.Getppid, func() { hostGone(logger) })
	}
	cfg := serveConfig(b, logger, servedProtocols(opts)...)
	if err := authenticate(cfg, os.Getenv, os.Unsetenv, os.Getppid()); err != nil {
		logger.Error("cannot set up the transport authentication", "error", err)
		os.Exit(1)
	}
	plugin.Serve(cfg)
}

// versionFlag makes Serve print the plugin's version instead of serving.
const versionFlag = "--version"

// versionTimeout bounds the Describe call of --version.
const versionTimeout = 30 * time.Second

// printVersion writes "<id> <version> (kiln plugin, protocols 1, 2, <go>)" to
// out from b's Describe and returns the exit status: 0, or 1 with Describe's
// error on errOut. No protocols means all.
func printVersion(out, errOut io.Writer, b Backend, protocols []int) int {
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	name := filepath.Base(os.Args[0])
	d, err := b.Describe(ctx)
	if err != nil {
		fmt.Fprintf(errOut, "%s: cannot report its version: describing the backend failed: %v\n", name, err)
		return 1
	}
	if len(protocols) == 0 {
		protocols = []int{ProtocolV1, ProtocolV2}
	}
	names := make([]string, len(protocols))
	for i, p := range protocols {
		names[i] = strconv.Itoa(p)
	}
	fmt.Fprintf(out, "%s %s (kiln plugin %s, protocols %s, %s)\n", d.ID, d.Version, name, strings.Join(names, ", "), runtime.Version())
	return 0
}

// guardHandshake returns a pipe to use as os.Stdout while go-plugin writes its
// handshake line: the first line written to it is copied to out, and failed
// calls failed when that write fails (go-plugin ignores the error of its own
// write). Later writes are passed on to out too.
func guardHandshake(out *os.File, failed func(error)) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		br := bufio.NewReader(r)
		line, err := br.ReadBytes('\n')
		if err == nil {
			_, err = out.Write(line)
		}
		if err != nil {
			failed(err)
			return
		}
		_, _ = br.WriteTo(out) // nothing but the handshake is expected here
	}()
	return w, nil
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
