package host

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/internal/syncbuf"
)

// statsOf returns the stats of backend id.
func statsOf(t *testing.T, h *Host, id string) BackendStats {
	t.Helper()
	for _, b := range h.Stats().Backends {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no stats for %s in %+v", id, h.Stats())
	return BackendStats{}
}

// eventually polls cond until it holds; the limit is generous, not a timing claim.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
	}
}

// TestOneCallersDeadlineDoesNotKillAnothersWork: a deadline cancels only its
// own call; a concurrent caller on the same (busy, responsive) plugin gets its
// result.
func TestOneCallersDeadlineDoesNotKillAnothersWork(t *testing.T) {
	h := openHost(t, "fx-busy")
	b, pl := compileOn(t, h, "fx-busy", fourBuffers(t))
	pid := pidOf(t, h, "fx-busy")
	var wg sync.WaitGroup
	var patient error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, patient = b.Dispatch(context.Background(), pl, fixtureWork())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, hasty := b.Dispatch(ctx, pl, fixtureWork())
	cancel()
	wg.Wait()
	var timeout *TimeoutError
	if !errors.As(hasty, &timeout) || timeout.Hung || !errors.Is(hasty, context.DeadlineExceeded) {
		t.Fatalf("the caller with a deadline got %v, want its own *TimeoutError", hasty)
	}
	if patient != nil {
		t.Fatalf("the caller without a deadline got %v, want its result", patient)
	}
	if pidOf(t, h, "fx-busy") != pid {
		t.Fatal("the plugin was restarted")
	}
}

// TestBusyPluginRunsToCompletion: a plugin that answers health checks is busy,
// not hung, however long its kernel runs past the hang timeout.
func TestBusyPluginRunsToCompletion(t *testing.T) {
	h := openWith(t, Options{HangTimeout: time.Second}, "fx-busy")
	res, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-busy", Work: fixtureWork()})
	if err != nil {
		t.Fatalf("a long dispatch in a responsive plugin: %v", err)
	}
	if len(res.Outputs) != 3 {
		t.Fatalf("%d outputs", len(res.Outputs))
	}
	if s := statsOf(t, h, "fx-busy"); s.Restarts != 0 || s.Dispatches != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestWedgedPluginIsKilledAfterTheHangTimeout: a plugin that stops answering
// (SIGSTOP mid-dispatch) is killed after the hang timeout, and the call fails
// with a hung TimeoutError even without a deadline.
func TestWedgedPluginIsKilledAfterTheHangTimeout(t *testing.T) {
	h := openWith(t, Options{HangTimeout: 500 * time.Millisecond}, "cpuref", "fx-wedge")
	b, err := h.Acquire(context.Background(), "fx-wedge")
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "fx-wedge")
	began := time.Now()
	_, err = h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: b.Name(), Work: fixtureWork()})
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || !timeout.Hung || timeout.Op != "dispatch" || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a hung *TimeoutError", err)
	}
	t.Logf("hung plugin reported after %v (hang timeout 500ms)", time.Since(began).Round(time.Millisecond))
	if !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("error %q has no Fix", err)
	}
	waitGone(t, pid)
	if s := statsOf(t, h, "fx-wedge"); s.Errors[KindHung] != 1 {
		t.Errorf("stats errors %v, want one hung", s.Errors)
	}
	healthyDispatch(t, h)
}

// TestRelaunchRunsUnderTheHostsStartTimeout: callers with deadlines shorter
// than a relaunch still get the plugin back: the relaunch is the host's, not
// theirs.
func TestRelaunchRunsUnderTheHostsStartTimeout(t *testing.T) {
	h := openWith(t, Options{RestartBackoff: 10 * time.Millisecond}, "fx-slow-describe")
	b, err := h.Acquire(context.Background(), "fx-slow-describe")
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "fx-slow-describe")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	var last error
	for try := 0; try < 100; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, last = h.Dispatch(ctx, fourBuffers(t), Launch{Backend: b.Name(), Work: fixtureWork()})
		cancel()
		if last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("with 200ms deadlines the plugin (500ms to describe itself) never came back: %v", last)
	}
	if s := statsOf(t, h, "fx-slow-describe"); s.Restarts != 1 {
		t.Errorf("%d restarts, want 1", s.Restarts)
	}
}

// TestPlainPluginErrorIsTypedAndImmediate: a plain error from a live plugin is
// a PluginError, and the plugin keeps running.
func TestPlainPluginErrorIsTypedAndImmediate(t *testing.T) {
	h := openHost(t, "fx-error")
	pid := pidOf(t, h, "fx-error")
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-error", Work: fixtureWork()})
	var plain *PluginError
	if !errors.As(err, &plain) || !strings.Contains(err.Error(), "a plain failure") || !strings.Contains(err.Error(), "fx-error:0") {
		t.Fatalf("got %T %v, want a *PluginError naming fx-error:0", err, err)
	}
	if pidOf(t, h, "fx-error") != pid {
		t.Error("a plain error must not restart the plugin")
	}
	if ErrorKind(err) != KindPlugin {
		t.Errorf("ErrorKind = %q", ErrorKind(err))
	}
}

// TestSickPluginIsSidelined: a crashed plugin in its backoff is skipped by
// selection at once; one that crashed FailureThreshold times is failing (with
// its last exit and stderr) and not preferred until a probe succeeds.
func TestSickPluginIsSidelined(t *testing.T) {
	h := openWith(t, Options{RestartBackoff: 300 * time.Millisecond, MaxRestartBackoff: 300 * time.Millisecond}, "fx-flaky", "fx-zeros")
	ctx := context.Background()
	if got := preferred(t, h); got != "fx-flaky:0" {
		t.Fatalf("preferred %s, want fx-flaky:0 (its adapter scores higher)", got)
	}
	crash := func() {
		t.Helper()
		_, err := h.Dispatch(ctx, fourBuffers(t), Launch{Backend: "fx-flaky", Work: fixtureWork()})
		var crashed *CrashedError
		if !errors.As(err, &crashed) {
			t.Fatalf("got %v, want *CrashedError", err)
		}
	}
	crash()
	if got := preferred(t, h); got != "fx-zeros:0" {
		t.Fatalf("right after fx-flaky crashed, preferred %s; want fx-zeros:0 without waiting out the backoff", got)
	}
	crash()
	crash()
	rows, err := h.Survey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.ID != "fx-flaky" {
			continue
		}
		if r.Status != StatusFailing || r.Preferred || !strings.Contains(r.Reason, "crashed 3 times") ||
			!strings.Contains(r.Reason, "exit status 3") || !strings.Contains(r.Reason, "flaky dispatch gives up") {
			t.Fatalf("fx-flaky row %+v, want failing with its crash count, last exit and stderr", r)
		}
	}
	for _, p := range h.Report().Plugins {
		if strings.HasSuffix(p.Path, "fx-flaky") && (p.State != StateFailing || p.LastExit != "exit status 3" || p.Failing == "") {
			t.Fatalf("report %+v, want failing", p)
		}
	}
	// Failing stays failing past its backoff: the background probe crashes too.
	time.Sleep(400 * time.Millisecond)
	if got := preferred(t, h); got != "fx-zeros:0" {
		t.Fatalf("a failing plugin was preferred: %s", got)
	}
	// Healed, the next probe succeeds and fx-flaky is preferred again.
	t.Setenv(healedEnv, "1")
	eventually(t, "fx-flaky preferred again after a successful probe", func() bool { return preferred(t, h) == "fx-flaky:0" })
	if s := statsOf(t, h, "fx-flaky"); s.State != StateReady || s.Errors[KindCrashed] < 3 {
		t.Fatalf("stats %+v", s)
	}
}

// healedEnv is the fixture's switch that makes fx-flaky dispatch normally.
const healedEnv = "KILN_FIXTURE_HEALED"

// TestNamedBackendWaitsOnlyForItsPlugin: a plugin hanging in Describe does not
// hold up a backend named explicitly: it is not even started.
func TestNamedBackendWaitsOnlyForItsPlugin(t *testing.T) {
	h := openWith(t, Options{StartTimeout: time.Minute}, "cpuref", "fx-describe-hang", "fx-zz-twin")
	healthyDispatch(t, h)
	// fx-zz-twin provides fx-zeros under another file name: asking for it
	// starts the others, and returns once the twin has described itself,
	// while fx-describe-hang is still starting.
	if _, err := h.Acquire(context.Background(), "fx-zeros"); err != nil {
		t.Fatal(err)
	}
	for _, s := range h.Stats().Backends {
		if s.ID == "fx-describe-hang" && s.State != StateStarting {
			t.Fatalf("fx-describe-hang is %s, want still starting", s.State)
		}
	}
	began := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close with a plugin hanging in Describe took %v", time.Since(began).Round(time.Millisecond))
}

// TestStartFailuresAreDiagnosed: each way a start fails has its own stage,
// message and Fix.
func TestStartFailuresAreDiagnosed(t *testing.T) {
	want := map[string]struct {
		stage StartStage
		says  []string
	}{
		"fx-exit-early":    {StartExited, []string{"exited before its handshake", "exit status 4", "giving up before the handshake"}},
		"fx-badcookie":     {StartExited, []string{"magic cookie", "not meant to be executed directly"}},
		"fx-slow-start":    {StartHung, []string{"no handshake within the start timeout of 3s"}},
		"fx-stdout":        {StartBadHandshake, []string{"hello from a plugin", "not a go-plugin handshake"}},
		"fx-badversion":    {StartProtocol, []string{"kiln protocol version 99", "this host speaks"}},
		"fx-describe-exit": {StartDescribeExited, []string{"exited while describing itself", "exit status 5", "dying in Describe"}},
		"fx-describe-hang": {StartDescribeHung, []string{"did not answer Describe within the start timeout of 3s"}},
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	h := openWith(t, Options{StartTimeout: 3 * time.Second}, names...)
	seen := map[string]bool{}
	for _, p := range h.Report().Plugins {
		name := fileID(p.Path)
		w := want[name]
		var se *StartError
		if !errors.As(p.Err, &se) || se.Stage != w.stage {
			t.Errorf("%s: %v, want a StartError at stage %q", name, p.Err, w.stage)
			continue
		}
		msg := p.Err.Error()
		for _, s := range w.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: %q lacks %q", name, msg, s)
			}
		}
		assertEndsWithFix(t, msg)
		if seen[msg] {
			t.Errorf("%s: the same message as another failure", name)
		}
		seen[msg] = true
		if p.State != StateFailed {
			t.Errorf("%s: state %s", name, p.State)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d diagnoses for %d plugins", len(seen), len(want))
	}
}

// TestOversizeResponseIsRefusedFromItsLength: a plugin answering with far more
// than the launch makes is refused from the length it announces, unread.
func TestOversizeResponseIsRefusedFromItsLength(t *testing.T) {
	h := openHost(t, "fx-huge", "cpuref")
	pid := pidOf(t, h, "fx-huge")
	began := time.Now()
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-huge", Work: fixtureWork()})
	var bad *BadResultError
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "refused it unread") || !strings.Contains(err.Error(), "268435") {
		t.Fatalf("got %v, want a BadResultError refusing 256 MiB unread", err)
	}
	t.Logf("BadResultError for a 256 MiB answer after %v", time.Since(began).Round(time.Millisecond))
	if pidOf(t, h, "fx-huge") != pid {
		t.Error("a refused response must not restart the plugin")
	}
	healthyDispatch(t, h)
}

// TestPluginLogsAreRateLimited: a plugin flooding stderr (before and after the
// handshake) has its lines dropped over the rate and counted.
func TestPluginLogsAreRateLimited(t *testing.T) {
	var logs syncbuf.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: &logs})
	h := openWith(t, Options{Logger: logger, LogLinesPerSecond: 20}, "fx-chatty")
	if _, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-chatty", Work: fixtureWork()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the drop warning", func() bool { return strings.Contains(logs.String(), "plugin log lines dropped by the rate limit") })
	s := statsOf(t, h, "fx-chatty")
	if s.LogLinesDropped < 3000 {
		t.Fatalf("%d lines dropped of 6000 at 20 lines/s (burst 200)", s.LogLinesDropped)
	}
	if n := strings.Count(logs.String(), "chatter"); n > 1000 {
		t.Fatalf("%d chatter lines reached the log", n)
	}
}

// TestPluginsGetNoStdinAndMutualTLS: a plugin's stdin is /dev/null whatever the
// host's is, and the host offers it an mTLS certificate (AutoMTLS).
func TestPluginsGetNoStdinAndMutualTLS(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	stdin := os.Stdin
	os.Stdin = r // go-plugin hands the host's stdin to the plugins it starts
	defer func() { os.Stdin = stdin }()
	h := openHost(t, "fx-env")
	d, err := h.Description("fx-env")
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != "stdin=/dev/null mtls=yes" {
		t.Fatalf("the plugin reports %q, want stdin=/dev/null mtls=yes", d.Version)
	}
	plain := openWith(t, Options{NoMTLS: true}, "fx-env")
	if d, err := plain.Description("fx-env"); err != nil || d.Version != "stdin=/dev/null mtls=no" {
		t.Fatalf("with NoMTLS: %v, %v", d, err)
	}
}

func TestErrorKind(t *testing.T) {
	for err, want := range map[error]string{
		&CrashedError{}:                      KindCrashed,
		&TimeoutError{Hung: true}:            KindHung,
		&TimeoutError{}:                      KindTimeout,
		&BadResultError{}:                    KindBadResult,
		&RejectedError{Err: errors.New("x")}: KindRejected,
		&StartError{}:                        KindStart,
		errors.New("x"):                      KindOther,
	} {
		if got := ErrorKind(err); got != want {
			t.Errorf("ErrorKind(%T) = %q, want %q", err, got, want)
		}
	}
	if ErrorKind(nil) != "" {
		t.Error("ErrorKind(nil) must be empty")
	}
}
