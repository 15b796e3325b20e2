//go:build !linux

package wire

import "time"

// MonoClock starts the clock at 1 ns now: without the Linux data plane no plugin
// reports times, so only the host's own need to agree.
func MonoClock() (time.Time, int64) { return time.Now(), 1 }
