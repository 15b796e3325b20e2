//go:build linux

package client

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// pluginCommand is this test binary started as a "plugin" helper the way a host
// starts a plugin, with hostPID in wire.HostPIDEnv.
func pluginCommand(hostPID int) *exec.Cmd {
	h := pluginapi.Handshake()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=plugin", h.MagicCookieKey+"="+h.MagicCookieValue,
		wire.HostPIDEnv+"="+strconv.Itoa(hostPID), "PLUGIN_PROTOCOL_VERSIONS=1")
	return cmd
}

// exitsSoon waits (generously) for cmd to exit and returns its error.
func exitsSoon(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the plugin kept running")
		return nil
	}
}

// TestProcessPluginWhoseHostIsAlreadyGoneExits pins the watch from the very
// start: a plugin whose host pid is not its parent (the host died while the
// plugin started and it was re-parented) exits before serving.
func TestProcessPluginWhoseHostIsAlreadyGoneExits(t *testing.T) {
	cmd := pluginCommand(1) // pid 1 is never this test's pid: the "host" is gone
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	err = exitsSoon(t, cmd)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("plugin ended with %v, want exit status 1", err)
	}
	if n > 0 {
		t.Errorf("the plugin wrote a handshake line %q although its host was gone", buf[:n])
	}
}

// TestProcessPluginExitsWhenTheHandshakeCannotBeWritten pins the handshake
// guard: with its host alive but the handshake pipe closed (the host stopped
// listening), the plugin exits instead of serving nobody.
func TestProcessPluginExitsWhenTheHandshakeCannotBeWritten(t *testing.T) {
	cmd := pluginCommand(os.Getpid())
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	r.Close() // nobody reads the handshake
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var exit *exec.ExitError
	if err := exitsSoon(t, cmd); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("plugin ended with %v, want exit status 1", err)
	}
}

// TestProcessHealthAnswersWhileABackendMethodWorks pins what the host's hang
// detection relies on: go-plugin's health service answers while a Dispatch is
// in progress.
func TestProcessHealthAnswersWhileABackendMethodWorks(t *testing.T) {
	c, b, logs := startHelper(t, "block")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: 1})
		done <- err
	}()
	rpc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	conn := rpc.(*plugin.GRPCClient).Conn
	for i := 0; i < 3; i++ {
		hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := grpc_health_v1.NewHealthClient(conn).Check(hctx, &grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
		hcancel()
		if err != nil || res.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Fatalf("health check %d while dispatching: %v %v\nlog:\n%s", i, res, err, logs)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the blocking dispatch ended early: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled dispatch: %v", err)
	}
}
