package pluginapi

import (
	"errors"
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

// flagSpans marks a completion that carries a spans trailer after its message.
const flagSpans = 2

// maxSpans bounds the spans of one completion; spanBytes is one span's size
// on the wire (u32 kind, u32 zero, u64 start, u64 end) and spansBytes the
// largest trailer (u32 count, u32 zero, the spans).
const (
	maxSpans   = 8
	spanBytes  = 24
	spansBytes = 8 + maxSpans*spanBytes
)

// encodeSpans appends the trailer of spans (at most maxSpans are taken).
func encodeSpans(e *enc, spans []Span) {
	spans = spans[:min(len(spans), maxSpans)]
	e.u32(uint32(len(spans)))
	e.u32(0)
	for _, s := range spans {
		e.u32(uint32(s.Kind))
		e.u32(0)
		e.u64(uint64(s.Start))
		e.u64(uint64(s.End))
	}
}

// decodeSpans reads a trailer: at most maxSpans spans of known kinds, each
// starting at a positive time and ending no earlier.
func decodeSpans(d *dec) ([]Span, error) {
	n := d.u32()
	d.pad()
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 || n > maxSpans {
		return nil, fmt.Errorf("completion carries %d spans, want 1 to %d", n, maxSpans)
	}
	spans := make([]Span, n)
	for i := range spans {
		s := Span{Kind: SpanKind(d.u32())}
		d.pad()
		s.Start, s.End = int64(d.u64()), int64(d.u64())
		if d.err != nil {
			return nil, d.err
		}
		if s.Kind < SpanDecode || s.Kind > SpanDevice || s.Start <= 0 || s.End < s.Start {
			return nil, fmt.Errorf("span %d of kind %d runs from %d to %d", i, s.Kind, s.Start, s.End)
		}
		spans[i] = s
	}
	return spans, nil
}

// errNoSpans refuses a spans trailer on a completion that cannot have one.
var errNoSpans = errors.New("completion carries spans but answers no submit or dispatch")
