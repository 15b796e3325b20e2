package trace

import "time"

// Clock maps Go's monotonic time onto the machine's monotonic clock, which
// every process reads alike: Mono is the clock's reading at Base.
type Clock struct {
	Base time.Time
	Mono int64
}

// Now is the monotonic clock's reading, in nanoseconds.
func (c Clock) Now() int64 { return c.At(time.Now()) }

// At is t's reading on the monotonic clock (t must carry Go's monotonic
// reading, as time.Now's does).
func (c Clock) At(t time.Time) int64 { return c.Mono + int64(t.Sub(c.Base)) }
