package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Failover (docs/design.md, "Failover"): when the backend a launch ran on
// crashes, hangs, loses its device, becomes unavailable or cannot be started,
// Host.Dispatch runs the launch again on the next backend in selection order.

// Attempt is one backend a launch tried before the one that ran it.
type Attempt struct {
	// Backend is the backend's name ("cuda:0"), or what the launch named when
	// it could not be acquired.
	Backend string
	// Err is why it did not run the launch.
	Err error
}

// FailoverError says a launch failed on every backend it tried. errors.As finds
// each attempt's error in it (a *CrashedError, a *TimeoutError, ...).
type FailoverError struct {
	// Program is the program's name.
	Program string
	// Attempts are the backends tried, in order.
	Attempts []Attempt
	// Next is why no further backend could be tried (nil when the failure of the
	// last attempt was not one a launch fails over on).
	Next error
}

func (e *FailoverError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = fmt.Sprintf("%s: %v", a.Backend, a.Err)
	}
	msg := fmt.Sprintf("launch of %s failed on every backend it tried (%s)", e.Program, strings.Join(parts, "; "))
	if e.Next != nil {
		msg += fmt.Sprintf("; no further backend: %v", e.Next)
	}
	return msg + ". Fix: repair the failing backends (`kiln doctor` explains them) or install another backend plugin"
}

// Unwrap returns every attempt's error and the reason no further backend ran.
func (e *FailoverError) Unwrap() []error {
	errs := make([]error, 0, len(e.Attempts)+1)
	for _, a := range e.Attempts {
		errs = append(errs, a.Err)
	}
	if e.Next != nil {
		errs = append(errs, e.Next)
	}
	return errs
}

// failsOver reports whether a launch that failed with err may run on another
// backend: the backend crashed, hung, lost its device, is unavailable or did
// not start, and the caller's context still runs. A program the backend
// rejects, a malformed launch, a caller's own deadline or a closed host fail
// the launch wherever it runs.
func failsOver(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch ErrorKind(err) {
	case KindCrashed, KindHung, KindDevice, KindUnavailable, KindStart, KindLostBuffer:
		return true
	}
	return false
}

// failover runs the launch on the backends after the tried ones, in selection
// order (reference oracles never), until one runs it or none is left.
func (h *Host) failover(ctx context.Context, prog *ir.Program, l Launch, tried []Attempt) (*Result, error) {
	for {
		b, err := h.nextPreferred(ctx, tried)
		if err != nil {
			return nil, &FailoverError{Program: prog.Name, Attempts: tried, Next: err}
		}
		res, err := h.launchOn(ctx, b, prog, l)
		if err == nil {
			last := tried[len(tried)-1]
			res.Selection = fmt.Sprintf("fallback: %s failed (%s); next in selection order", last.Backend, ErrorKind(last.Err))
			res.Failover = tried
			h.failovers.Add(1)
			return res, nil
		}
		tried = append(tried, Attempt{Backend: b.Name(), Err: err})
		if !failsOver(ctx, err) {
			return nil, &FailoverError{Program: prog.Name, Attempts: tried}
		}
	}
}

// nextPreferred is AcquirePreferred without the adapters already tried.
func (h *Host) nextPreferred(ctx context.Context, tried []Attempt) (*Backend, error) {
	skip := make(map[string]bool, len(tried))
	for _, a := range tried {
		skip[a.Backend] = true
	}
	return h.acquirePreferred(ctx, func(c candidate) bool { return !skip[c.name()] })
}
