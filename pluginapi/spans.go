package pluginapi

import (
	"fmt"
)

// SpansEnv names the environment variable that, set to "1" in a plugin's
// environment, makes the SDK time each submit and dispatch it serves on the
// data plane and ship the phases back with the completion (a host that
// writes a trace sets it for the plugins it starts). Without it the SDK
// times nothing and completions carry no spans, as before.
const SpansEnv = "KILN_PLUGIN_SPANS"

// SpanKind names a phase of a request that the plugin's SDK timed.
type SpanKind uint32

// The phases, in the order they happen.
const (
	// SpanDecode: the SDK read and decoded the request frame.
	SpanDecode SpanKind = 1
	// SpanQueue: the request waited in its adapter's queue.
	SpanQueue SpanKind = 2
	// SpanRun: the backend's Submit (or Dispatch) ran: its launch and its wait
	// for the device.
	SpanRun SpanKind = 3
	// SpanDevice: the device ran the work, as long as the backend's
	// DeviceNanos says, ending when the backend returned (GPU timestamps carry
	// durations, not a clock both processes share).
	SpanDevice SpanKind = 4
)

// String names the phase as a trace shows it.
func (k SpanKind) String() string {
	switch k {
	case SpanDecode:
		return "decode"
	case SpanQueue:
		return "queue"
	case SpanRun:
		return "run"
	case SpanDevice:
		return "device"
	}
	return fmt.Sprintf("span(%d)", uint32(k))
}

// Span is one timed phase: Start and End are nanoseconds of the machine's
// monotonic clock (Linux CLOCK_MONOTONIC), which host and plugin share.
type Span struct {
	Kind       SpanKind
	Start, End int64
}

// Spans returns the phases the plugin timed for this submit: empty unless the
// plugin was started with SpansEnv and the submit went over the data plane.
func (r *SubmitResult) Spans() []Span { return deref(r.spans) }

// Spans returns the phases the plugin timed for this dispatch, as
// SubmitResult.Spans.
func (r *DispatchResult) Spans() []Span { return deref(r.spans) }

func deref(s *[]Span) []Span {
	if s == nil {
		return nil
	}
	return *s
}
