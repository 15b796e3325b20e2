package host

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/host/client"
)

// StartStage says where starting a plugin failed; each has its own message and
// Fix (see [StartError]).
type StartStage string

// The ways a plugin start fails, in the order a start goes through them.
const (
	// StartRefused: the host refused to run the executable (pinning, trust).
	StartRefused StartStage = "refused"
	// StartExited: the process exited before writing its handshake line.
	StartExited StartStage = "exited before handshake"
	// StartHung: the process wrote no handshake line within the start timeout.
	StartHung StartStage = "hung before handshake"
	// StartBadHandshake: the first line on stdout is not a go-plugin handshake,
	// or connecting to the address it names failed.
	StartBadHandshake StartStage = "bad handshake"
	// StartProtocol: the plugin speaks a protocol version this host does not.
	StartProtocol StartStage = "wrong protocol version"
	// StartDescribeExited: the process died while answering Describe.
	StartDescribeExited StartStage = "exited in describe"
	// StartDescribeHung: Describe did not answer within the start timeout.
	StartDescribeHung StartStage = "hung in describe"
	// StartDescribeFailed: Describe returned an error or an unusable description.
	StartDescribeFailed StartStage = "describe failed"
	// StartDuplicate: another plugin reports the same id and outranks this
	// one (a higher version, or the same version and an earlier path): this
	// one is shadowed ([StartError.ShadowedBy] names the winner).
	StartDuplicate StartStage = "duplicate id"
)

// StartError says why a plugin did not start (or relaunch), at which stage,
// with how the process ended and the tail of its stderr where they tell.
type StartError struct {
	// Path is the plugin executable.
	Path string
	// Stage is where the start failed.
	Stage StartStage
	// Detail is what went wrong at that stage.
	Detail string
	// Exit is how the process ended ("exit status 4"), empty while it ran.
	Exit string
	// Stderr is the tail of what the process wrote to stderr.
	Stderr string
	// Timeout is the start timeout, for the hung stages.
	Timeout time.Duration
	// ShadowedBy is, for StartDuplicate, the plugin that provides the id.
	ShadowedBy string
	// Fix is, for StartRefused, what to run to resolve the refusal (empty:
	// the stage's general advice).
	Fix string
}

func (e *StartError) Error() string {
	var msg, fix string
	switch e.Stage {
	case StartRefused:
		msg = fmt.Sprintf("plugin %s refused: %s", e.Path, e.Detail)
		fix = "see the reason; `kiln plugins pin` records the checksum of the plugins you trust"
		if e.Fix != "" {
			fix = e.Fix
		}
	case StartExited:
		msg = fmt.Sprintf("plugin %s exited before its handshake", e.Path)
		fix = "run it by hand to see why it fails to start; make sure it is built for this OS and architecture with its libraries installed, or remove it from the plugins directory"
		if strings.Contains(e.Stderr, "not meant to be executed directly") {
			fix = "the plugin did not recognise this host's magic cookie: rebuild it against this kiln's pluginapi"
		}
	case StartHung:
		msg = fmt.Sprintf("plugin %s wrote no handshake within the start timeout of %v; the host stopped it", e.Path, e.Timeout)
		fix = "a plugin must call pluginapi.Serve promptly (set devices up in Open, not before Serve); raise --start-timeout (Options.StartTimeout) if it is just slow"
	case StartBadHandshake:
		msg = fmt.Sprintf("plugin %s: bad handshake: %s", e.Path, e.Detail)
		fix = "nothing may print to stdout before pluginapi.Serve (log to stderr); make sure it is a kiln plugin built against this kiln's pluginapi, or remove it"
	case StartProtocol:
		msg = fmt.Sprintf("plugin %s speaks the wrong protocol: %s", e.Path, e.Detail)
		fix = "rebuild the plugin against this kiln's pluginapi (or upgrade kiln to a version that speaks its protocol)"
	case StartDescribeExited:
		msg = fmt.Sprintf("plugin %s exited while describing itself", e.Path)
		fix = "the plugin crashes in Describe: report it to its author with the stderr above, or remove it"
	case StartDescribeHung:
		msg = fmt.Sprintf("plugin %s completed its handshake but did not answer Describe within the start timeout of %v; the host stopped it", e.Path, e.Timeout)
		fix = "Describe must not block (probe devices lazily, in Open); raise --start-timeout (Options.StartTimeout) if it is just slow"
	case StartDescribeFailed:
		msg = fmt.Sprintf("plugin %s: describe failed: %s", e.Path, e.Detail)
		fix = "report it to the plugin's author, or remove the plugin"
	case StartDuplicate:
		msg = fmt.Sprintf("plugin %s is shadowed: %s", e.Path, e.Detail)
		fix = fmt.Sprintf("remove the plugin you do not want from the plugins directory (rm %s, or rm %s)", e.Path, e.ShadowedBy)
	default:
		msg = fmt.Sprintf("plugin %s did not start: %s", e.Path, e.Detail)
		fix = "run `kiln doctor`"
	}
	if e.Detail != "" && (e.Stage == StartExited || e.Stage == StartHung || e.Stage == StartDescribeExited || e.Stage == StartDescribeHung) {
		msg += ": " + e.Detail
	}
	if e.Exit != "" {
		msg += " (" + e.Exit + ")"
	}
	if e.Stderr != "" {
		msg += "; stderr: " + e.Stderr
	}
	return msg + ". Fix: " + fix
}

// handshakeStage diagnoses a failed go-plugin start from what the runner saw:
// no stdout line and the process gone is an early exit, no line and the
// process alive a hang, a line that is no handshake a bad handshake, and a
// handshake naming other versions a protocol mismatch.
func handshakeStage(line string, gotLine, exited bool) (StartStage, string) {
	if !gotLine || line == "" {
		if exited {
			return StartExited, ""
		}
		return StartHung, ""
	}
	parts := strings.Split(line, "|")
	if len(parts) < 4 {
		return StartBadHandshake, fmt.Sprintf("the first line on its stdout is %q, not a go-plugin handshake", truncate(line, 120))
	}
	if parts[0] != strconv.Itoa(goplugin.CoreProtocolVersion) {
		return StartProtocol, fmt.Sprintf("go-plugin core protocol %s, this host speaks %d", truncate(parts[0], 20), goplugin.CoreProtocolVersion)
	}
	sets := client.PluginSets()
	if v, err := strconv.Atoi(parts[1]); err != nil || sets[v] == nil {
		var speaks []int
		for v := range sets {
			speaks = append(speaks, v)
		}
		slices.Sort(speaks)
		return StartProtocol, fmt.Sprintf("kiln protocol version %s, this host speaks %v", truncate(parts[1], 20), speaks)
	}
	return StartBadHandshake, ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// shadowedError is the StartError of loser, which reports the backend id that
// winner provides.
func shadowedError(id string, loser, winner *plugin) *StartError {
	rule := "the higher version wins"
	if compareVersions(loser.desc.Version, winner.desc.Version) == 0 {
		rule = "of equal versions, the first path wins"
	}
	return &StartError{
		Path: loser.path, Stage: StartDuplicate, ShadowedBy: winner.path,
		Detail: fmt.Sprintf("it reports backend id %q (version %s), which %s provides too (version %s) and is used: %s", id, loser.desc.Version, winner.path, winner.desc.Version, rule),
	}
}

// reshadow points the plugins that old shadowed at winner, which now provides
// the backend id in its place; h.mu is held.
func (h *Host) reshadow(id string, old, winner *plugin) {
	for _, q := range h.plugins {
		q.mu.Lock()
		if se, ok := q.startErr.(*StartError); ok && se.Stage == StartDuplicate && se.ShadowedBy == old.path {
			q.startErr = shadowedError(id, q, winner)
		}
		q.mu.Unlock()
	}
}
