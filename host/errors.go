package host

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// The error kinds a plugin itself reports; they cross the wire unchanged, so
// errors.As with these types works on any error the host returns.
type (
	// RejectedError: the plugin rejected the program, specialization or launch.
	RejectedError = pluginapi.RejectedError
	// DeviceError: the device failed or was lost.
	DeviceError = pluginapi.DeviceError
	// UnavailableError: the adapter cannot be used on this machine.
	UnavailableError = pluginapi.UnavailableError
	// PluginError: the plugin returned an error without a kind; it is alive.
	PluginError = pluginapi.PluginError
)

// NotFoundError is returned by Acquire for an id (or adapter) no running plugin has.
type NotFoundError struct {
	// Name is what was asked for ("vulkan", "cuda:3").
	Name string
	// Known lists what exists: backend ids, or for a missing adapter "id:index".
	Known []string
	// Failed counts plugins that did not start and so could not be matched.
	Failed int
}

func (e *NotFoundError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	failed := ""
	if e.Failed > 0 {
		failed = fmt.Sprintf("; %d plugin(s) failed to start", e.Failed)
	}
	return fmt.Sprintf("backend %q not found (known: %s%s). Fix: use one of the known names, or install kiln-backend-<name> in the plugins directory; `kiln doctor` shows what was found and why plugins failed", e.Name, known, failed)
}

// NoBackendError is returned by AcquirePreferred when no backend can be chosen
// implicitly. It lists every failure and every skipped reference oracle.
type NoBackendError struct {
	// Failures are plugins that did not start and adapters that could not be opened.
	Failures []string
	// SkippedOracles are reference oracles, which are only used by explicit id.
	SkippedOracles []string
	// NonDispatching are backends that cannot dispatch.
	NonDispatching []string
	// Dir is the plugins directory searched.
	Dir string
}

func (e *NoBackendError) Error() string {
	var parts []string
	if len(e.Failures) > 0 {
		parts = append(parts, "failures: "+strings.Join(e.Failures, "; "))
	}
	if len(e.SkippedOracles) > 0 {
		parts = append(parts, "only reference oracle backend(s) were available, which are never chosen implicitly: "+strings.Join(e.SkippedOracles, ", "))
	}
	if len(e.NonDispatching) > 0 {
		parts = append(parts, "backends that do not dispatch: "+strings.Join(e.NonDispatching, ", "))
	}
	if len(parts) == 0 {
		parts = append(parts, "no backend plugin is running")
	}
	where := ""
	if e.Dir != "" {
		where = " in " + e.Dir
	}
	oracle := ""
	if len(e.SkippedOracles) > 0 {
		oracle = fmt.Sprintf(", or name the reference oracle explicitly: backend %q (kiln run --backend %s)", e.SkippedOracles[0], e.SkippedOracles[0])
	}
	return fmt.Sprintf("no usable dispatch backend (%s). Fix: install a GPU backend plugin (kiln-backend-vulkan, kiln-backend-cuda)%s and repair the failures above (`kiln doctor` explains them)%s", strings.Join(parts, "; "), where, oracle)
}

// CrashedError says a plugin process died (or its connection broke) during an
// operation. The host has dropped the process; the next use relaunches it.
type CrashedError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Op is the operation that was running ("dispatch").
	Op string
	// Exit describes how the process ended ("exit status 2", "signal: killed").
	Exit string
	// Stderr is the tail of what the process wrote to stderr (a panic message).
	Stderr string
}

func (e *CrashedError) Error() string {
	msg := fmt.Sprintf("backend %s crashed during %s (%s)", e.Backend, e.Op, e.Exit)
	if e.Stderr != "" {
		msg += "; last stderr: " + e.Stderr
	}
	return msg + ". Fix: retry (the host relaunches the plugin on next use) and report the crash to the plugin's author if it repeats"
}

// TimeoutError says an operation did not finish in time. Either the caller's
// deadline passed: the call was cancelled and the plugin keeps running, because
// other callers may share it (errors.Is(err, context.DeadlineExceeded) holds);
// or the plugin was hung (Hung): it stopped answering the host's health checks,
// or reading requests from its full data plane ring, for Options.HangTimeout
// while the call ran, so the host killed it and the next use relaunches it.
type TimeoutError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Op is the operation that timed out.
	Op string
	// After is how long the call ran.
	After time.Duration
	// Hung is set when the plugin stopped answering and was killed.
	Hung bool
}

func (e *TimeoutError) Error() string {
	if e.Hung {
		return fmt.Sprintf("backend %s hung during %s (no answer to health checks, or no request read from a full ring, for the hang timeout; killed after %v); the plugin is relaunched on next use. Fix: report the hang to the plugin's author; retry, or use another backend", e.Backend, e.Op, e.After.Round(time.Millisecond))
	}
	return fmt.Sprintf("backend %s: %s did not finish before the caller's deadline (after %v); the call was cancelled, the plugin keeps running. Fix: give the context a longer deadline, or shrink the work", e.Backend, e.Op, e.After.Round(time.Millisecond))
}

// Unwrap makes a caller's deadline match context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error {
	if e.Hung {
		return nil
	}
	return context.DeadlineExceeded
}

// BadResultError says a plugin answered with a result that does not match the
// program and launch (a wrong number of outputs or an output of the wrong size).
// The plugin is buggy; the host discards the result.
type BadResultError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Detail says what was wrong.
	Detail string
}

func (e *BadResultError) Error() string {
	return fmt.Sprintf("backend %s returned a bad result: %s. Fix: report this to the plugin's author; use another backend meanwhile", e.Backend, e.Detail)
}

// LaunchError says a launch does not fit the program (inputs, sizes, grid); it is
// detected by the host before anything reaches a plugin.
type LaunchError struct {
	// Program is the program's name.
	Program string
	// Detail says what is wrong and how to fix it.
	Detail string
}

func (e *LaunchError) Error() string {
	return fmt.Sprintf("launch of %s: %s", e.Program, e.Detail)
}

// ClosedError is returned when the host (or the plugin) was closed.
type ClosedError struct {
	// Backend is the backend's name, empty when the whole host is closed.
	Backend string
}

func (e *ClosedError) Error() string {
	if e.Backend == "" {
		return "kiln host is closed. Fix: open a new host with host.Open"
	}
	return fmt.Sprintf("backend %s is closed. Fix: open a new host with host.Open", e.Backend)
}

// UnsupportedError says a backend does not implement an optional interface the
// call needs (pluginapi.Artifacts, pluginapi.HealthChecker). kiln doctor lists
// what each plugin lacks.
type UnsupportedError struct {
	// Backend is the backend's name ("cpu-ref:0").
	Backend string
	// Interface names the missing interface ("pluginapi.Artifacts").
	Interface string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("backend %s does not implement %s. Fix: use a backend that does (kiln doctor lists what each plugin implements)", e.Backend, e.Interface)
}
