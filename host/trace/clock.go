package trace

import (
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// Clock maps Go's monotonic time onto the machine's monotonic clock, which
// every process reads alike: Mono is the clock's reading at Base.
type Clock struct {
	Base time.Time
	Mono int64
}

// NewClock pairs Go's monotonic time with the machine's monotonic clock: on
// Linux with a CLOCK_MONOTONIC reading, off by a microsecond or so; elsewhere
// it starts the clock at 1 ns now (without the Linux data plane no plugin
// reports times, so only the host's own need to agree).
func NewClock() Clock {
	base, mono := wire.MonoClock()
	return Clock{Base: base, Mono: mono}
}

// Now is the monotonic clock's reading, in nanoseconds.
func (c Clock) Now() int64 { return c.At(time.Now()) }

// At is t's reading on the monotonic clock (t must carry Go's monotonic
// reading, as time.Now's does).
func (c Clock) At(t time.Time) int64 { return c.Mono + int64(t.Sub(c.Base)) }
