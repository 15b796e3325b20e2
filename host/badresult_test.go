package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// forgeEnv is the fixture's switch between a forged plugin time (-1 ns, the
// default) and a forged device time ("device": math.MaxInt64 ns).
const forgeEnv = "KILN_FIXTURE_FORGE"

// Times a plugin reports outside [0, the host-measured time of the call] are a
// bad result, on the inline dispatch path and on a resident submit's
// completion: a caller (tune, certify, bench) never ranks by them.
func TestForgedPluginTimesAreBadResults(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ forge, want string }{
		{"", "plugin time of -1 ns"},
		{"device", "device time of 9223372036854775807 ns"},
	} {
		t.Setenv(forgeEnv, c.forge)
		h := openHost(t, "fx-forged-times", "fx-forged-times-v2")
		res, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-forged-times", Work: fixtureWork()})
		var bad *BadResultError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("dispatch with forge %q: result %+v, error %v; want a *BadResultError about the %s", c.forge, res, err, c.want)
		}

		b := acquire(t, h, "fx-forged-times-v2")
		if !b.p.capabilities().Resident() {
			t.Fatal("fx-forged-times-v2 does not keep buffers")
		}
		pl, err := b.Compile(ctx, fourBuffers(t), CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var bindings []Binding
		for _, size := range []int64{16, 16, 16, 12} {
			bindings = append(bindings, Bind(alloc(t, b, size, UsageStorage)))
		}
		var bt Batch
		sub, err := b.Submit(ctx, bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: bindings}))
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("submit with forge %q: result %+v, error %v; want a *BadResultError about the %s", c.forge, sub, err, c.want)
		}
	}
}

// A plugin whose every answer is a bad result is sidelined like one that
// crashes: after FailureThreshold bad results it is failing and no longer
// preferred.
func TestBadResultsSidelineAPlugin(t *testing.T) {
	ctx := context.Background()
	h := openWith(t, Options{RestartBackoff: time.Minute, MaxRestartBackoff: time.Minute}, "fx-bad-every", "fx-zeros")
	if got := preferred(t, h); got != "fx-bad-every:0" {
		t.Fatalf("preferred %s, want fx-bad-every:0 (its adapter scores higher)", got)
	}
	for range 3 {
		_, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-bad-every", Work: fixtureWork()})
		if ErrorKind(err) != KindBadResult {
			t.Fatalf("got %v, want a bad result", err)
		}
	}
	if got := preferred(t, h); got != "fx-zeros:0" {
		t.Fatalf("after 3 bad results, preferred %s; want fx-zeros:0", got)
	}
	s := statsOf(t, h, "fx-bad-every")
	if s.State != StateFailing {
		t.Fatalf("fx-bad-every is %s, want %s", s.State, StateFailing)
	}
	for _, p := range h.Report().Plugins {
		if strings.HasSuffix(p.Path, "fx-bad-every") && (!strings.Contains(p.Failing, "returned 3 bad results") || !strings.Contains(p.Failing, "last bad result: 4 outputs")) {
			t.Fatalf("failing reason %q, want the bad results counted and the last one described", p.Failing)
		}
	}
}

// The half-open probe replays the real launch that failed: a plugin that
// answers the host's probe program but breaks on real work stays failing
// instead of being preferred again for the next caller to break on.
func TestHalfOpenProbeReplaysTheFailedLaunch(t *testing.T) {
	ctx := context.Background()
	h := openWith(t, Options{FailureThreshold: 1, RestartBackoff: 20 * time.Millisecond, MaxRestartBackoff: 20 * time.Millisecond}, "fx-bad-next", "fx-zeros")
	_, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-bad-next", Work: fixtureWork()})
	if ErrorKind(err) != KindBadResult {
		t.Fatalf("got %v, want a bad result", err)
	}
	if s := statsOf(t, h, "fx-bad-next"); s.State != StateFailing {
		t.Fatalf("fx-bad-next is %s after a bad result with threshold 1, want %s", s.State, StateFailing)
	}
	compiles := statsOf(t, h, "fx-bad-next").Compiles
	// Past the backoff, selection starts the half-open probe in the background.
	time.Sleep(50 * time.Millisecond)
	if b, err := h.AcquirePreferred(ctx); err != nil || b.Name() != "fx-zeros:0" {
		t.Fatalf("preferred %v (%v) while fx-bad-next is failing", b, err)
	}
	p := h.lookup("fx-bad-next")
	eventually(t, "the half-open probe", func() bool {
		p.mu.Lock()
		probing := p.probing
		p.mu.Unlock()
		return !probing && statsOf(t, h, "fx-bad-next").Compiles > compiles
	})
	if s := statsOf(t, h, "fx-bad-next"); s.State != StateFailing || s.Errors[KindBadResult] < 2 {
		t.Fatalf("after its probe fx-bad-next is %s with %d bad results; want still failing, the probe's answer a bad result too", s.State, s.Errors[KindBadResult])
	}
	if b, err := h.AcquirePreferred(ctx); err != nil || b.Name() != "fx-zeros:0" {
		t.Fatalf("preferred %v (%v) after fx-bad-next failed its probe", b, err)
	}
}

// A crash report quotes the plugin's last error-level log line, not the
// go-plugin INFO lines that came after it.
func TestCrashReportQuotesTheLastErrorLine(t *testing.T) {
	h := openHost(t, "fx-log-crash")
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-log-crash", Work: fixtureWork()})
	var crashed *CrashedError
	if !errors.As(err, &crashed) {
		t.Fatalf("got %v, want *CrashedError", err)
	}
	if crashed.Stderr != "fixture: the device table is corrupt" {
		t.Fatalf("crash stderr %q, want the error-level line", crashed.Stderr)
	}
}
