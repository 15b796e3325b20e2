package pluginapi

import (
	"context"
	"fmt"
	"sync/atomic"
)

// SpansEnv names the environment variable that, set to "1" in a plugin's
// environment, makes the SDK time each submit and dispatch it serves on the
// data plane and ship the phases back with the completion (a host that
// writes a trace sets it for the plugins it starts). Without it the SDK
// times nothing and completions carry no spans, as before.
const SpansEnv = "KILN_PLUGIN_SPANS"

// SpanKindsEnv names the environment variable in which a host that writes a
// trace says how many span kinds it decodes. A plugin splits a request's run
// into SpanLaunch and SpanWait only when it says 6 or more: a host that knows
// only the first four would refuse the completion.
const SpanKindsEnv = "KILN_PLUGIN_SPAN_KINDS"

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
	// SpanLaunch: the part of the run before the backend called MarkLaunched:
	// recording and submitting the work.
	SpanLaunch SpanKind = 5
	// SpanWait: the part of the run after MarkLaunched: waiting for the
	// device to complete the work and reading its timestamps.
	SpanWait SpanKind = 6
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
	case SpanLaunch:
		return "launch"
	case SpanWait:
		return "completion wait"
	}
	return fmt.Sprintf("span(%d)", uint32(k))
}

// launchMark is where MarkLaunched records its time for the request whose
// context carries it.
type launchMark struct {
	now func() int64 // the plugin's span clock
	at  atomic.Int64
}

type launchKey struct{}

// MarkLaunched tells the SDK that the request ctx belongs to has its work on
// the device and the backend now waits for it to complete: a trace then splits
// the request's run into its launch and its completion wait. A GPU backend
// calls it once per Submit or Dispatch, after it submitted the work (CUDA:
// after the launches and the event record on the stream; Vulkan: after
// vkQueueSubmit) and before it waits. Only the first call counts; without a
// trace being written it does nothing and costs a context lookup.
func MarkLaunched(ctx context.Context) {
	if m, ok := ctx.Value(launchKey{}).(*launchMark); ok {
		m.at.CompareAndSwap(0, m.now())
	}
}

// Span is one timed phase: Start and End are nanoseconds of the machine's
// monotonic clock (Linux CLOCK_MONOTONIC), which host and plugin share.
type Span struct {
	Kind       SpanKind
	Start, End int64
}
