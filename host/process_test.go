package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/internal/irprog"
	"github.com/kiln-dev/kiln/internal/syncbuf"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// saxpy is y = a*x + y.
func saxpy(t *testing.T) *ir.Program {
	t.Helper()
	return irprog.Saxpy("test.saxpy.f32", 64)
}

func f32Bytes(v ...float32) []byte { return kernels.F32Bytes(v) }

func bytesF32(b []byte) []float32 { return kernels.BytesF32(b) }

// saxpyLaunch dispatches saxpy of n elements, x[i] = i and y[i] = 1.
func saxpyLaunch(backend string, n int) Launch {
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), 1
	}
	return Launch{Backend: backend, Work: Work{Invocations: [3]uint32{uint32(n), 1, 1}, Inputs: [][]byte{f32Bytes(x...), f32Bytes(y...)}}}
}

func checkSaxpy(t *testing.T, res *Result, a float32, n int) {
	t.Helper()
	if len(res.Outputs) != 1 {
		t.Fatalf("%d outputs, want 1", len(res.Outputs))
	}
	got := bytesF32(res.Outputs[0])
	if len(got) != n {
		t.Fatalf("%d elements, want %d", len(got), n)
	}
	for i, v := range got {
		if want := a*float32(i) + 1; v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
}

// healthyDispatch proves the host still works: saxpy on cpu-ref, verified.
func healthyDispatch(t *testing.T, h *Host) {
	t.Helper()
	res, err := h.Dispatch(context.Background(), saxpy(t), saxpyLaunch("cpu-ref", 100))
	if err != nil {
		t.Fatalf("dispatch on the healthy backend: %v", err)
	}
	checkSaxpy(t, res, 2, 100)
}

// fixtureWork is a launch of fourBuffers that the zero-returning fixture answers.
func fixtureWork() Work {
	return Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 16), make([]byte, 16)}, OutputCounts: []uint32{0, 0, 4}}
}

// gone reports whether pid has exited (a zombie counts as exited).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

// waitGone waits until pid has exited; the limit is generous, not a timing claim.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidOf(t *testing.T, h *Host, id string) int {
	t.Helper()
	for _, p := range h.Report().Plugins {
		if p.Description != nil && p.Description.ID == id {
			return p.Pid
		}
	}
	t.Fatalf("no plugin %s", id)
	return 0
}

func TestCPURefSaxpyEndToEnd(t *testing.T) {
	h := openHost(t, "cpuref")
	d, err := h.Description("cpu-ref")
	if err != nil {
		t.Fatal(err)
	}
	if !d.ReferenceOracle || !IsReferenceOracle(d) {
		t.Fatalf("cpu-ref must describe itself as a reference oracle: %+v", d)
	}
	l := saxpyLaunch("cpu-ref", 1000)
	l.Spec.Set("a", ir.SpecF32(3))
	res, err := h.Dispatch(context.Background(), saxpy(t), l)
	if err != nil {
		t.Fatal(err)
	}
	checkSaxpy(t, res, 3, 1000)
	if res.Backend != "cpu-ref:0" || res.Dispatch <= 0 {
		t.Fatalf("result backend %q, dispatch time %v", res.Backend, res.Dispatch)
	}
}

func TestConcurrentDispatches(t *testing.T) {
	h := openHost(t, "cpuref")
	b, pl := compileOn(t, h, "cpu-ref:0", saxpy(t))
	inParallel(t, 8, func(int) error {
		res, err := b.Dispatch(context.Background(), pl, saxpyLaunch("", 257).Work)
		if err == nil && bytesF32(res.Outputs[0])[256] != 2*256+1 {
			err = errors.New("wrong result")
		}
		return err
	})
}

// inParallel runs f(0) to f(n-1) at once and fails the test on an error.
func inParallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRecordsBrokenPluginsAndStartsTheRest(t *testing.T) {
	broken := map[string]string{
		"fx-badcookie":  "not meant to be executed directly",
		"fx-badversion": "version",
		"fx-stdout":     "hello from a plugin",
		"fx-exit-early": "giving up before the handshake",
		"fx-zz-twin":    "is shadowed",
	}
	names := []string{"cpuref", "fx-zeros"}
	for n := range broken {
		names = append(names, n)
	}
	h := openHost(t, names...)
	if got := strings.Join(h.IDs(), ","); got != "cpu-ref,fx-zeros" {
		t.Fatalf("running backends %s, want cpu-ref,fx-zeros", got)
	}
	seen := map[string]bool{}
	for _, p := range h.Report().Plugins {
		name := strings.TrimPrefix(p.Path[strings.LastIndexByte(p.Path, '/')+1:], PluginPrefix)
		want, isBroken := broken[name]
		if !isBroken {
			if p.Err != nil || p.Pid == 0 || p.Description == nil || p.Protocol != pluginapi.ProtocolVersion {
				t.Errorf("%s should run: %+v", name, p)
			}
			continue
		}
		seen[name] = true
		if p.Err == nil || !strings.Contains(p.Err.Error(), want) || !strings.Contains(p.Err.Error(), "Fix:") {
			t.Errorf("%s: error %v, want one saying %q with a Fix", name, p.Err, want)
		}
	}
	if len(seen) != len(broken) {
		t.Errorf("report lists %d broken plugins, want %d", len(seen), len(broken))
	}
	healthyDispatch(t, h)
}

func TestStartTimeoutDoesNotHoldUpTheOthers(t *testing.T) {
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "cpuref", "fx-slow-start"), StartTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, p := range h.Report().Plugins {
		if strings.HasSuffix(p.Path, "fx-slow-start") {
			var se *StartError
			if !errors.As(p.Err, &se) || se.Stage != StartHung || !strings.Contains(p.Err.Error(), "no handshake within the start timeout") {
				t.Fatalf("slow plugin: %v, want a StartError for a hang before the handshake", p.Err)
			}
		} else if p.Err != nil {
			t.Fatalf("%s: %v", p.Path, p.Err)
		}
	}
	healthyDispatch(t, h)
}

func TestCrashMidDispatch(t *testing.T) {
	for mode, exit := range map[string]string{
		"fx-exit":    "exit status 3",
		"fx-sigkill": "signal: killed",
		"fx-panic":   "exit status 2",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := openHost(t, "cpuref", mode)
			b, err := h.Acquire(context.Background(), mode)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := b.Compile(context.Background(), fourBuffers(t), CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := pidOf(t, h, mode)
			_, err = b.Dispatch(context.Background(), pl, fixtureWork())
			var crashed *CrashedError
			if !errors.As(err, &crashed) {
				t.Fatalf("got %v, want *CrashedError", err)
			}
			if crashed.Backend != mode+":0" || crashed.Op != "dispatch" || !strings.Contains(crashed.Exit, exit) {
				t.Fatalf("crash report %+v, want backend %s:0, op dispatch, exit %q", crashed, mode, exit)
			}
			if mode == "fx-panic" && !strings.Contains(crashed.Stderr, "panic: fixture panics") {
				t.Errorf("crash report does not carry the panic: %q", crashed.Stderr)
			}
			if !strings.Contains(err.Error(), "Fix:") {
				t.Errorf("error %q has no Fix", err)
			}
			waitGone(t, first)
			healthyDispatch(t, h)

			// The next use relaunches the plugin, recompiles the pipeline on the
			// new process, and crashes it again.
			_, err = b.Dispatch(context.Background(), pl, fixtureWork())
			if !errors.As(err, &crashed) {
				t.Fatalf("second dispatch: got %v, want *CrashedError after a relaunch", err)
			}
			for _, p := range h.Report().Plugins {
				if p.Description != nil && p.Description.ID == mode && p.Restarts != 1 {
					t.Errorf("restarts = %d, want 1", p.Restarts)
				}
			}
			healthyDispatch(t, h)
		})
	}
}

func TestDeadlineCancelsTheCallAndKeepsThePlugin(t *testing.T) {
	h := openHost(t, "cpuref", "fx-hang")
	b, pl := compileOn(t, h, "fx-hang", fourBuffers(t))
	pid := pidOf(t, h, "fx-hang")
	for round := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := b.Dispatch(ctx, pl, fixtureWork())
		cancel()
		var timeout *TimeoutError
		if !errors.As(err, &timeout) || timeout.Backend != "fx-hang:0" || timeout.Op != "dispatch" || timeout.Hung {
			t.Fatalf("round %d: got %v, want a caller's *TimeoutError for fx-hang:0 dispatch", round, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("error %q must wrap context.DeadlineExceeded and end with a Fix", err)
		}
		if gone(pid) || pidOf(t, h, "fx-hang") != pid {
			t.Fatalf("round %d: a caller's deadline stopped the plugin", round)
		}
		healthyDispatch(t, h)
	}
}

func TestBadResultsAreTypedAndKeepThePlugin(t *testing.T) {
	for _, mode := range []string{"fx-extra-output", "fx-short-output"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := openHost(t, "cpuref", mode)
			pid := pidOf(t, h, mode)
			_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: mode, Work: fixtureWork()})
			var bad *BadResultError
			if !errors.As(err, &bad) || bad.Backend != mode+":0" {
				t.Fatalf("got %v, want *BadResultError for %s:0", err, mode)
			}
			if pidOf(t, h, mode) != pid {
				t.Error("a bad result must not restart the plugin")
			}
			healthyDispatch(t, h)
		})
	}
}

func TestPluginReportedErrorsPassThrough(t *testing.T) {
	h := openHost(t, "fx-device", "fx-reject")
	_, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-device", Work: fixtureWork()})
	var device *DeviceError
	if !errors.As(err, &device) || !strings.Contains(err.Error(), "fx-device:0") {
		t.Fatalf("got %v, want a DeviceError naming fx-device:0", err)
	}
	_, err = h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-reject", Work: fixtureWork()})
	var rejected *RejectedError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "fixture rejects") {
		t.Fatalf("got %v, want a RejectedError from fx-reject", err)
	}
	_, err = h.Acquire(context.Background(), "fx-device:1")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("adapter 1: got %v, want *NotFoundError", err)
	}
}

func TestRejectedSpecialization(t *testing.T) {
	h := openHost(t, "cpuref")
	l := saxpyLaunch("cpu-ref", 4)
	l.Spec.Set("a", ir.SpecU32(3))
	_, err := h.Dispatch(context.Background(), saxpy(t), l)
	var rejected *RejectedError
	if !errors.As(err, &rejected) {
		t.Fatalf("spec of the wrong type: got %v, want *RejectedError", err)
	}
	healthyDispatch(t, h)
}

func TestAcquirePreferredWithProcesses(t *testing.T) {
	h := openHost(t, "cpuref", "fx-zeros", "fx-badcookie")
	b, err := h.AcquirePreferred(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "fx-zeros:0" || b.Acquisition() <= 0 {
		t.Fatalf("preferred %s (acquisition %v), want fx-zeros:0 with a measured acquisition", b.Name(), b.Acquisition())
	}
	rows, err := h.Survey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var preferred []string
	for _, r := range rows {
		if r.Preferred {
			preferred = append(preferred, r.Name())
		}
		if r.ID == "cpu-ref" && (!r.ReferenceOracle || r.Status != StatusReady || r.Acquisition <= 0) {
			t.Errorf("cpu-ref row %+v", r)
		}
		if r.ID == "fx-badcookie" && r.Status != StatusFailed {
			t.Errorf("fx-badcookie row %+v, want failed", r)
		}
	}
	if strings.Join(preferred, ",") != "fx-zeros:0" || len(rows) != 3 {
		t.Fatalf("preferred %v among %d rows, want only fx-zeros:0 among 3", preferred, len(rows))
	}

	only := openHost(t, "cpuref")
	_, err = only.AcquirePreferred(context.Background())
	var nb *NoBackendError
	if !errors.As(err, &nb) || len(nb.SkippedOracles) != 1 || !strings.Contains(err.Error(), "--backend cpu-ref") {
		t.Fatalf("with only cpu-ref: got %v, want a NoBackendError suggesting --backend cpu-ref", err)
	}
	assertEndsWithFix(t, err.Error())
	_, err = only.Dispatch(context.Background(), saxpy(t), saxpyLaunch("", 4))
	if !errors.As(err, &nb) {
		t.Fatalf("Dispatch without a backend and only cpu-ref: got %v, want *NoBackendError", err)
	}
}

// TestPipelineSurvivesAnOutsideKill pins "retry when nothing ran": a plugin
// killed while idle lost no work, so the next dispatch relaunches it,
// recompiles the pipeline and runs, with no error.
func TestPipelineSurvivesAnOutsideKill(t *testing.T) {
	h := openHost(t, "fx-zeros")
	prog := fourBuffers(t)
	b, pl := compileOn(t, h, "fx-zeros", prog)
	prog.Buffers = nil // the pipeline keeps its own copy for the recompile
	for round := range 2 {
		pid := pidOf(t, h, "fx-zeros")
		proc := h.lookup("fx-zeros").running()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The plugin dies while idle, and the host sees it exit.
		if !proc.runner.waitExit(10 * time.Second) {
			t.Fatal("the host never saw the plugin exit")
		}
		res, err := b.Dispatch(context.Background(), pl, fixtureWork())
		if err != nil {
			t.Fatalf("round %d: dispatch after the plugin died idle: %v", round, err)
		}
		if res.Compile <= 0 {
			t.Errorf("round %d: the pipeline must have been compiled again on the new process", round)
		}
		if pidOf(t, h, "fx-zeros") == pid {
			t.Errorf("round %d: the plugin was not relaunched", round)
		}
	}
	if s := statsOf(t, h, "fx-zeros"); s.Restarts != 2 || s.Errors[KindCrashed] != 0 {
		t.Errorf("stats %+v, want 2 restarts and no crash errors", s)
	}
}

func TestCloseStopsEveryPlugin(t *testing.T) {
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "cpuref", "fx-zeros", "fx-hang")})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range h.Report().Plugins {
		pids = append(pids, p.Pid)
	}
	if len(pids) != 3 {
		t.Fatalf("%d plugins running, want 3", len(pids))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("plugin %d still runs after Close", pid)
		}
	}
	var closed *ClosedError
	if _, err := h.Acquire(context.Background(), "cpu-ref"); !errors.As(err, &closed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseKillsAWedgedPlugin(t *testing.T) {
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "fx-zeros")})
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "fx-zeros")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestKilledHostLeavesNoOrphans SIGKILLs a host at a random moment 0–100ms
// after it starts (while its plugins start, hand-shake and describe
// themselves, or run), 100 times, and checks that no plugin process outlives
// it: the parent-death signal and the plugins' own watch of the host pid end
// them.
func TestKilledHostLeavesNoOrphans(t *testing.T) {
	killhost := killHostBinary(t)
	dir := pluginDir(t, "cpuref", "fx-zeros")
	sockets := t.TempDir() // the plugins' socket directories land here
	rng := rand.New(rand.NewPCG(8, uint64(time.Now().UnixNano())))
	const runs = 100
	var slowest time.Duration
	over200ms, withPlugins := 0, 0
	for run := range runs {
		cmd := exec.Command(killhost, dir)
		cmd.Env = append(os.Environ(), "TMPDIR="+sockets)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(101)) * time.Millisecond)
		if len(pluginProcesses(dir)) > 0 {
			withPlugins++
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait() // killed: the error is the expected "signal: killed"
		died := time.Now()
		for {
			left := pluginProcesses(dir)
			if len(left) == 0 {
				break
			}
			if time.Since(died) > 5*time.Second {
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				t.Fatalf("run %d: plugin processes %v outlived their SIGKILLed host by 5s", run, left)
			}
			time.Sleep(time.Millisecond)
		}
		linger := time.Since(died)
		slowest = max(slowest, linger)
		if linger > 200*time.Millisecond {
			over200ms++
		}
	}
	t.Logf("%d SIGKILLed hosts (%d with plugins running at the kill): 0 orphans; the last plugin was gone at most %v after its host (%d runs over 200ms)",
		runs, withPlugins, slowest.Round(time.Millisecond), over200ms)
}

// pluginProcesses lists the live (not zombie) processes started from an
// executable in dir.
func pluginProcesses(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.HasPrefix(string(cmdline), dir+"/") {
			continue
		}
		if !gone(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestBackoffDoublesUpToTheLimit(t *testing.T) {
	p := &plugin{set: settings{backoff: 100 * time.Millisecond, maxBackoff: time.Second}}
	for crashes, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 40: time.Second} {
		p.crashes = crashes
		if got := p.backoff(); got != want {
			t.Errorf("backoff after %d crashes = %v, want %v", crashes, got, want)
		}
	}
}

func TestPluginOutputIsLoggedUnderItsName(t *testing.T) {
	var logs syncbuf.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: &logs})
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, "fx-zeros"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Dispatch(context.Background(), fourBuffers(t), Launch{Backend: "fx-zeros", Work: fixtureWork()}); err != nil {
		t.Fatal(err)
	}
	// Before the handshake the plugin's stderr is read directly; after it, the
	// plugin's os.Stderr arrives over go-plugin's stdio stream, asynchronously.
	want := []string{"app.kiln-backend-fx-zeros: fixture: starting as fx-zeros", "app.kiln-backend-fx-zeros.stderr: fixture: dispatching pipeline"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := ""
		for _, w := range want {
			if !strings.Contains(logs.String(), w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log lacks %q:\n%s", missing, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
