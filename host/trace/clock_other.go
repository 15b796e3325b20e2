//go:build !linux

package trace

import "time"

// NewClock starts a clock at 1 ns now: without the Linux data plane no plugin
// reports times, so only the host's own need to agree.
func NewClock() Clock { return Clock{Base: time.Now(), Mono: 1} }
