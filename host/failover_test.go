package host

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A launch that names no backend fails over from a crashing backend to the next
// one in selection order, and says so.
func TestFailoverFromACrashingBackend(t *testing.T) {
	h := openHost(t, "fx-flaky", "fx-zeros")
	ctx := context.Background()
	res, err := h.Dispatch(ctx, fourBuffers(t), Launch{Work: fixtureWork()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "fx-zeros:0" {
		t.Fatalf("ran on %s, want fx-zeros:0 after fx-flaky crashed", res.Backend)
	}
	if want := "fallback: fx-flaky:0 failed (crashed); next in selection order"; res.Selection != want {
		t.Fatalf("Selection = %q, want %q", res.Selection, want)
	}
	var crashed *CrashedError
	if len(res.Failover) != 1 || res.Failover[0].Backend != "fx-flaky:0" || !errors.As(res.Failover[0].Err, &crashed) {
		t.Fatalf("Failover = %+v, want fx-flaky:0's crash", res.Failover)
	}
	if got := h.Stats().Failovers; got != 1 {
		t.Fatalf("Stats().Failovers = %d, want 1", got)
	}
}

// A launch that names its backend fails there unless it sets Fallback.
func TestFailoverOfANamedBackendOnlyWithFallback(t *testing.T) {
	h := openHost(t, "fx-device", "fx-zeros")
	ctx := context.Background()
	_, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-device", Work: fixtureWork()})
	if ErrorKind(err) != KindDevice {
		t.Fatalf("named backend without Fallback: err = %v, want its device error", err)
	}
	res, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-device", Fallback: true, Work: fixtureWork()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "fx-zeros:0" || !strings.HasPrefix(res.Selection, "fallback: fx-device:0 failed (device)") {
		t.Fatalf("with Fallback: ran on %s because %q", res.Backend, res.Selection)
	}
}

// A program the backend rejects fails the launch: it is not a broken backend.
func TestNoFailoverOnRejection(t *testing.T) {
	h := openHost(t, "fx-reject", "fx-zeros")
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-reject", Fallback: true, Work: fixtureWork()})
	if ErrorKind(err) != KindRejected {
		t.Fatalf("err = %v, want the rejection itself", err)
	}
	var fe *FailoverError
	if errors.As(err, &fe) {
		t.Fatalf("a rejection failed over: %v", err)
	}
}

// Failover never picks the reference oracle: with only the oracle left, the
// launch fails with every attempt and why nothing else could run.
func TestFailoverNeverPicksTheOracle(t *testing.T) {
	h := openHost(t, "fx-flaky", "cpuref")
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Work: fixtureWork()})
	var fe *FailoverError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v (%T), want a *FailoverError", err, err)
	}
	var crashed *CrashedError
	var none *NoBackendError
	if !errors.As(err, &crashed) || !errors.As(err, &none) {
		t.Fatalf("err = %v: want the crash and why no other backend could run", err)
	}
	if len(fe.Attempts) != 1 || fe.Attempts[0].Backend != "fx-flaky:0" || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v", err)
	}
}
