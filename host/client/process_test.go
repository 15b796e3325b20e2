//go:build linux

package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/syncbuf"
	"github.com/kiln-dev/kiln/pluginapi"
)

// helperEnv turns the test binary into a helper process instead of running tests:
// "plugin" serves a fakeBackend that writes to stdout on Describe, "panic" serves
// one whose Dispatch panics, "block" one whose Dispatch blocks until cancelled, "segments" a
// segmentBackend (linux), "host" starts a "plugin" helper, prints its pid and
// waits to be killed.
const helperEnv = "KILN_PLUGINAPI_TEST_HELPER"

// Markers the "plugin" helper writes from Describe, after the handshake.
const (
	strayStdout = "stray-os-stdout-marker"
	strayFD1    = "stray-fd1-marker"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "plugin":
		pluginapi.Serve(&strayOutputBackend{})
	case "panic":
		pluginapi.Serve(&fakeBackend{panicOnDispatch: true})
	case "block":
		pluginapi.Serve(&blockingBackend{})
	case "segments":
		pluginapi.Serve(newSegmentBackend())
	case "host":
		helperHost()
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// strayOutputBackend writes to os.Stdout and to file descriptor 1 in Describe, as
// careless plugin code or a C library would.
type strayOutputBackend struct{ fakeBackend }

func (b *strayOutputBackend) Describe(ctx context.Context) (*pluginapi.Description, error) {
	fmt.Fprintln(os.Stdout, strayStdout)
	if _, err := syscall.Write(1, []byte(strayFD1+"\n")); err != nil {
		return nil, err
	}
	return b.fakeBackend.Describe(ctx)
}

// helperHost starts a plugin helper as a host would, prints "pid N" and blocks
// until it is killed.
func helperHost() {
	os.Setenv(helperEnv, "plugin") // go-plugin passes this process's environment on
	c := plugin.NewClient(Config(exec.Command(os.Args[0]), nil))
	if _, err := Dispense(c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("pid %d\n", c.ReattachConfig().Pid)
	select {}
}

// startHelper starts this test binary as a plugin in the given helper mode, with
// the host-side helpers, logging into the returned buffer.
func startHelper(t *testing.T, mode string) (*plugin.Client, *Conn, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Trace})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	c := plugin.NewClient(Config(cmd, logger))
	t.Cleanup(c.Kill)
	b, err := Dispense(c)
	if err != nil {
		t.Fatalf("start %s helper: %v\nlog:\n%s", mode, err, logs)
	}
	return c, b, logs
}

// eventually polls cond every 20ms until it holds or a generous deadline passes.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

func TestProcessServeRoundTrip(t *testing.T) {
	c, b, logs := startHelper(t, "plugin")
	ctx := context.Background()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v\nlog:\n%s", err, logs)
	}
	if d.ID != testDescription().ID {
		t.Errorf("Describe id %q", d.ID)
	}
	res, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: saxpyProgram()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Inputs: [][]byte{{1, 2, 3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Outputs) != 1 || !bytes.Equal(out.Outputs[0], []byte{1, 2, 3, 4}) {
		t.Errorf("outputs %v", out.Outputs)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.Kill()
	if !c.Exited() {
		t.Error("plugin still running after Kill")
	}
}

// TestProcessStrayOutputReachesTheLog pins Serve's stdout guard: writes to
// os.Stdout and to fd 1 after the handshake neither break the connection nor get
// lost; both show up in the host's log.
func TestProcessStrayOutputReachesTheLog(t *testing.T) {
	_, b, logs := startHelper(t, "plugin")
	for i := 0; i < 3; i++ {
		if _, err := b.Describe(context.Background()); err != nil {
			t.Fatalf("Describe %d after stray output: %v\nlog:\n%s", i, err, logs)
		}
	}
	for _, marker := range []string{strayStdout, strayFD1} {
		if !eventually(func() bool { return strings.Contains(logs.String(), marker) }) {
			t.Errorf("%q never reached the host log:\n%s", marker, logs)
		}
	}
}

// TestProcessPanicCrashesPlugin pins that a panic in a Backend method is not turned
// into an error: the process dies and the host sees a broken connection.
func TestProcessPanicCrashesPlugin(t *testing.T) {
	c, b, logs := startHelper(t, "panic")
	_, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1})
	if err == nil {
		t.Fatal("Dispatch on a panicking backend succeeded")
	}
	if isRejected(err) || isUnavailable(err) || isDevice(err) {
		t.Errorf("a crash surfaced as a typed backend error: %T %v", err, err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("status %s (%v), want pluginapi.Unavailable (connection lost)", status.Code(err), err)
	}
	if !eventually(c.Exited) {
		t.Fatal("plugin process still running after its panic")
	}
	if !eventually(func() bool { return strings.Contains(logs.String(), "dispatch panics on purpose") }) {
		t.Errorf("the panic message is not in the host log:\n%s", logs)
	}
}

// TestProcessPluginExitsWhenHostIsKilled pins the parent watch: SIGKILL a host and
// its plugin goes away instead of lingering as an orphan.
func TestProcessPluginExitsWhenHostIsKilled(t *testing.T) {
	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), helperEnv+"=host")
	host.Stderr = os.Stderr
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		host.Process.Kill()
		host.Wait()
		t.Fatalf("host helper printed no plugin pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil {
		t.Fatalf("host helper printed %q", line)
	}
	if !alive(pid) {
		t.Fatalf("plugin %d is not running before the host dies", pid)
	}
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	host.Wait()
	if !eventually(func() bool { return !alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("plugin %d outlived its SIGKILLed host", pid)
	}
}

// alive reports whether process pid exists and is not a zombie waiting for a reaper.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}
