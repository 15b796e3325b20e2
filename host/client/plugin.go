package client

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/pluginapi"
)

// PluginSets returns the host's versioned plugin sets for go-plugin's
// ClientConfig.VersionedPlugins: protocol version → plugin set. The host
// offers every protocol it speaks (pluginapi.ProtocolV1, pluginapi.ProtocolV2);
// go-plugin picks the newest the plugin also offers.
func PluginSets() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		pluginapi.ProtocolV1: {pluginapi.PluginName: &grpcPlugin{version: pluginapi.ProtocolV1}},
		pluginapi.ProtocolV2: {pluginapi.PluginName: &grpcPlugin{version: pluginapi.ProtocolV2}},
	}
}

// grpcPlugin is the host side's go-plugin glue of one protocol version: it
// builds the Conn over the gRPC connection.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	version int
}

// GRPCServer refuses: a plugin serves with pluginapi.Serve.
func (p *grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("host/client is the host's side of a plugin connection. Fix: serve a backend with pluginapi.Serve")
}

// GRPCClient returns the Conn that calls into the plugin over conn.
func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	c := &Conn{rpc: kilnpb.NewBackendClient(conn)}
	if p.version >= pluginapi.ProtocolV2 {
		c.v2 = newV2Client(kilnpb.NewDeviceClient(conn))
	}
	return c, nil
}

// dialOptions raise the host side's gRPC limits to the plugin side's
// (pluginapi.MaxMessageBytes, the windows and buffers of internal/wire).
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(pluginapi.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(pluginapi.MaxMessageBytes),
		),
		grpc.WithInitialWindowSize(wire.WindowBytes),
		grpc.WithInitialConnWindowSize(wire.WindowBytes),
		grpc.WithReadBufferSize(wire.IOBufferBytes),
		grpc.WithWriteBufferSize(wire.IOBufferBytes),
	}
}

// Config returns the go-plugin client configuration a host uses to start the
// plugin executable cmd: kiln's handshake and plugin sets, gRPC only, raised
// message limits, and the plugin's output routed to logger. The plugin's hclog
// lines on stderr appear under logger with their own levels; whatever the
// plugin's code writes to os.Stdout or os.Stderr after the handshake arrives
// over go-plugin's stdio stream and is logged under logger.Named("stdout") and
// "stderr". The caller may adjust the result (StartTimeout, for one) before
// plugin.NewClient.
func Config(cmd *exec.Cmd, logger hclog.Logger) *plugin.ClientConfig {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &plugin.ClientConfig{
		Cmd:              cmd,
		HandshakeConfig:  pluginapi.Handshake(),
		VersionedPlugins: PluginSets(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		GRPCDialOptions:  dialOptions(),
		SyncStdout:       logger.Named("stdout").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
		SyncStderr:       logger.Named("stderr").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
	}
}

// Dispense connects to a started or startable plugin client and returns its
// Conn. It fails when the plugin speaks a protocol version this host does not
// know or does not serve a kiln backend.
func Dispense(c *plugin.Client) (*Conn, error) {
	rpc, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("start kiln plugin: %w", err)
	}
	if v := c.NegotiatedVersion(); v != pluginapi.ProtocolV1 && v != pluginapi.ProtocolV2 {
		return nil, fmt.Errorf("kiln plugin negotiated protocol version %d, this host speaks %d and %d. Fix: rebuild the plugin against the host's pluginapi", v, pluginapi.ProtocolV1, pluginapi.ProtocolV2)
	}
	raw, err := rpc.Dispense(pluginapi.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense kiln backend: %w", err)
	}
	conn, ok := raw.(*Conn)
	if !ok {
		return nil, fmt.Errorf("kiln plugin dispensed %T, not a *client.Conn. Fix: start the plugin with client.Config", raw)
	}
	return conn, nil
}
