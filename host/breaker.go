package host

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// failureLog is a plugin's recent failure history, its circuit breaker (see
// docs/design.md, "Supervision and reliability"): a plugin that crashed, hung,
// died while idle or answered with a bad result failThreshold times within
// failWindow is failing. A failing plugin is never chosen implicitly; the host
// probes it in the background once its backoff has passed (half-open), with
// the last small launch that failed on it when there is one (a real request,
// not only the host's probe program), and the first dispatch on it that
// succeeds (a probe or a caller's explicit one) closes the breaker.
type failureLog struct {
	failures   []failure // oldest first
	lastExit   string
	lastStderr string
	lastBad    string // what the last bad result got wrong
	lastAt     time.Time
	failing    bool
	// replay is the last small launch that failed, for the half-open probe.
	replay *replay
}

// failure is one crash (or hang) or bad result.
type failure struct {
	at  time.Time
	bad bool
}

// maxFailureTimes bounds the failures kept.
const maxFailureTimes = 64

// add records a crash at now.
func (f *failureLog) add(now time.Time, exit, stderr string) {
	f.record(failure{at: now})
	if exit != "" {
		f.lastExit = exit
	}
	if stderr != "" {
		f.lastStderr = stderr
	}
}

// addBad records a bad result at now.
func (f *failureLog) addBad(now time.Time, detail string) {
	f.record(failure{at: now, bad: true})
	f.lastBad = detail
}

func (f *failureLog) record(x failure) {
	f.failures = append(f.failures, x)
	if len(f.failures) > maxFailureTimes {
		f.failures = f.failures[len(f.failures)-maxFailureTimes:]
	}
	f.lastAt = x.at
}

// recent counts the failures within window before now.
func (f *failureLog) recent(now time.Time, window time.Duration) int {
	crashes, bad := f.recentKinds(now, window)
	return crashes + bad
}

// recentKinds counts the crashes and the bad results within window before now.
func (f *failureLog) recentKinds(now time.Time, window time.Duration) (crashes, bad int) {
	for _, x := range f.failures {
		switch {
		case now.Sub(x.at) > window:
		case x.bad:
			bad++
		default:
			crashes++
		}
	}
	return crashes, bad
}

// reset forgets the failures after a success.
func (f *failureLog) reset() { *f = failureLog{} }

// reason says why a failing plugin is failing.
func (f *failureLog) reason(now time.Time, window time.Duration) string {
	crashes, bad := f.recentKinds(now, window)
	var what []string
	if crashes > 0 || bad == 0 {
		what = append(what, fmt.Sprintf("crashed %d times", crashes))
	}
	if bad > 0 {
		what = append(what, fmt.Sprintf("returned %d bad results", bad))
	}
	msg := fmt.Sprintf("%s in the last %v", strings.Join(what, " and "), window)
	if f.lastExit != "" {
		msg += "; last exit: " + f.lastExit
	}
	if f.lastStderr != "" {
		msg += "; last stderr: " + f.lastStderr
	}
	if f.lastBad != "" {
		msg += "; last bad result: " + f.lastBad
	}
	return msg + "; not chosen implicitly until a dispatch on it succeeds (the host probes it). Fix: report the failures to the plugin's author; name another backend meanwhile"
}

// tripLocked makes p failing once its recent failures reach the threshold;
// p.mu is held.
func (p *plugin) tripLocked(now time.Time) {
	n := p.failures.recent(now, p.set.failWindow)
	if p.failures.failing || n < p.set.failThreshold {
		return
	}
	p.failures.failing = true
	p.log.Error("plugin is failing; it is not chosen implicitly until a dispatch on it succeeds", "failures", n, "window", p.set.failWindow)
}

// badResult counts a BadResultError that proc answered like a crash: toward
// failing, and into the backoff of the half-open probe. The process keeps
// running. A result refused because proc broke the protocol was counted when
// the host dropped proc for it, so a proc no longer current is not counted
// again. Any other error is ignored.
func (p *plugin) badResult(proc *process, err error) {
	var bad *BadResultError
	if !errors.As(err, &bad) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != proc {
		return
	}
	now := time.Now()
	p.crashes++
	p.notBefore = now.Add(p.backoff())
	p.failures.addBad(now, bad.Detail)
	p.log.Warn("plugin returned a bad result", "pid", proc.pid, "detail", bad.Detail)
	p.tripLocked(now)
}
