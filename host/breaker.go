package host

import (
	"fmt"
	"time"
)

// failureLog is a plugin's recent crash history, its circuit breaker (see
// docs/design.md, "Supervision and reliability"): a plugin that crashed (or
// hung, or died while idle) failThreshold times within failWindow is failing.
// A failing plugin is never chosen implicitly; the host probes it in the
// background once its backoff has passed (half-open), and the first dispatch
// on it that succeeds (a probe or a caller's explicit one) closes the breaker.
type failureLog struct {
	times      []time.Time // crash times, oldest first
	lastExit   string
	lastStderr string
	lastAt     time.Time
	failing    bool
}

// maxFailureTimes bounds the crash times kept.
const maxFailureTimes = 64

// add records a crash at now.
func (f *failureLog) add(now time.Time, exit, stderr string) {
	f.times = append(f.times, now)
	if len(f.times) > maxFailureTimes {
		f.times = f.times[len(f.times)-maxFailureTimes:]
	}
	f.lastAt = now
	if exit != "" {
		f.lastExit = exit
	}
	if stderr != "" {
		f.lastStderr = stderr
	}
}

// recent counts the crashes within window before now.
func (f *failureLog) recent(now time.Time, window time.Duration) int {
	n := 0
	for _, t := range f.times {
		if now.Sub(t) <= window {
			n++
		}
	}
	return n
}

// reset forgets the crashes after a success.
func (f *failureLog) reset() { *f = failureLog{} }

// reason says why a failing plugin is failing.
func (f *failureLog) reason(now time.Time, window time.Duration) string {
	msg := fmt.Sprintf("crashed %d times in the last %v", f.recent(now, window), window)
	if f.lastExit != "" {
		msg += "; last exit: " + f.lastExit
	}
	if f.lastStderr != "" {
		msg += "; last stderr: " + f.lastStderr
	}
	return msg + "; not chosen implicitly until a dispatch on it succeeds (the host probes it). Fix: report the crash to the plugin's author; name another backend meanwhile"
}
