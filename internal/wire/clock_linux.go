//go:build linux

package wire

import (
	"time"

	"golang.org/x/sys/unix"
)

// MonoClock pairs Go's monotonic time with the machine's monotonic clock,
// which every process reads alike (the span times both ends of the data plane
// exchange): it returns a time and CLOCK_MONOTONIC's reading at it, in
// nanoseconds, of three tries the one whose time.Now readings lie closest
// around the system call (off by at most half that gap, a microsecond or so).
// When no try reads the clock, it starts the clock at 1 ns now.
func MonoClock() (time.Time, int64) {
	const never = time.Duration(1<<63 - 1)
	var base time.Time
	var mono int64
	gap := never
	for range 3 {
		var ts unix.Timespec
		before := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			continue
		}
		if d := time.Since(before); d < gap {
			gap = d
			base, mono = before.Add(d/2), ts.Nano()
		}
	}
	if gap == never {
		return time.Now(), 1
	}
	return base, mono
}
