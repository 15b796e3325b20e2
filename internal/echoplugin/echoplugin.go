package echoplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// handshake is the echo plugin's own go-plugin handshake: its magic cookie in
// the environment is what makes ServeIfAsked serve.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "KILN_ECHO_PLUGIN",
	MagicCookieValue: "echo-3f1c2a",
}

// echo is a plugin with nothing to dispense but go-plugin's own services.
type echo struct{ plugin.NetRPCUnsupportedPlugin }

func (echo) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (echo) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func plugins() plugin.PluginSet { return plugin.PluginSet{"echo": echo{}} }

// ServeIfAsked serves the echo plugin and exits when this process was started
// by Start; otherwise it returns at once.
func ServeIfAsked() {
	if os.Getenv(handshake.MagicCookieKey) != handshake.MagicCookieValue {
		return
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: handshake,
		Plugins:         plugins(),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          hclog.NewNullLogger(),
	})
	os.Exit(0)
}

// Start starts exe (a binary that calls ServeIfAsked) as a bare go-plugin
// plugin, completes the handshake and one RPC (go-plugin's health check, the
// counterpart of kiln's Describe), stops it, and returns the time from start
// to the RPC's answer.
func Start(ctx context.Context, exe string) (time.Duration, error) {
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  handshake,
		Plugins:          plugins(),
		Cmd:              exec.Command(exe),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	defer client.Kill()
	began := time.Now()
	rpc, err := client.Client()
	if err != nil {
		return 0, fmt.Errorf("start the echo plugin %s: %w", exe, err)
	}
	g, ok := rpc.(*plugin.GRPCClient)
	if !ok {
		return 0, errors.New("the echo plugin did not speak gRPC")
	}
	if _, err := grpc_health_v1.NewHealthClient(g.Conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName}); err != nil {
		return 0, fmt.Errorf("health check of the echo plugin: %w", err)
	}
	return time.Since(began), nil
}
