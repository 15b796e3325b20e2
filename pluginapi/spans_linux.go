//go:build linux

package pluginapi

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// shipsSpans: the data plane times requests when asked (Capabilities.Spans).
const shipsSpans = true

// spanTimer times a request's phases on the plugin's side; nil when the host
// asked for none. split: the host decodes SpanLaunch and SpanWait.
type spanTimer struct {
	clock monoClock
	split bool
}

// withLaunchMark returns ctx carrying a fresh mark when the host decodes the
// split, else ctx and nil.
func (t *spanTimer) withLaunchMark(ctx context.Context) (context.Context, *launchMark) {
	if !t.split {
		return ctx, nil
	}
	m := &launchMark{now: t.clock.now}
	return context.WithValue(ctx, launchKey{}, m), m
}

// jobSpans are the times a request's phases started and ended.
type jobSpans struct {
	read, decoded int64 // SDK: the frame was read; it was decoded and queued
}

// spans builds the completion's spans of a request that was read and decoded
// in js, began running at began and ended at ended, with the device time the
// backend measured; a launch mark inside the run splits it into SpanLaunch
// and SpanWait (both inside SpanRun).
func (t *spanTimer) spans(js jobSpans, began, ended, deviceNanos int64, mark *launchMark) []Span {
	s := []Span{
		{Kind: SpanDecode, Start: js.read, End: js.decoded},
		{Kind: SpanQueue, Start: js.decoded, End: began},
		{Kind: SpanRun, Start: began, End: ended},
	}
	if mark != nil {
		if at := mark.at.Load(); at >= began && at <= ended {
			s = append(s, Span{Kind: SpanLaunch, Start: began, End: at}, Span{Kind: SpanWait, Start: at, End: ended})
		}
	}
	if deviceNanos > 0 {
		s = append(s, Span{Kind: SpanDevice, Start: max(began, ended-deviceNanos), End: ended})
	}
	return s
}

// monoClock reads the machine's monotonic clock (CLOCK_MONOTONIC on Linux)
// through Go's own monotonic time: mono is the clock's reading at base.
type monoClock struct {
	base time.Time
	mono int64
}

// now is the monotonic clock's reading, in nanoseconds.
func (c monoClock) now() int64 { return c.mono + int64(time.Since(c.base)) }

// newMonoClock pairs Go's monotonic time with a CLOCK_MONOTONIC reading (the
// host clamps what it cannot place).
func newMonoClock() monoClock {
	base, mono := wire.MonoClock()
	return monoClock{base: base, mono: mono}
}

// newSpanTimer returns a timer when the host asked for spans (SpansEnv), else
// nil.
func newSpanTimer() *spanTimer {
	if os.Getenv(SpansEnv) != "1" {
		return nil
	}
	kinds, _ := strconv.Atoi(os.Getenv(SpanKindsEnv))
	return &spanTimer{clock: newMonoClock(), split: kinds >= int(SpanWait)}
}
