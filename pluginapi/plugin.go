package pluginapi

import (
	"context"
	"fmt"
	"math"
	"os/exec"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
)

// ProtocolVersion is the newest wire protocol this SDK speaks: 2 (kiln.plugin.v1's
// Backend service plus kiln.plugin.v2's Device service). Each protocol is its own
// entry in PluginSets, so a host keeps serving plugins built for protocol 1, and
// a plugin serves a host that only knows protocol 1.
const ProtocolVersion = 2

// Protocol versions by name.
const (
	// ProtocolV1 is the Backend service alone: every dispatch carries its bytes.
	ProtocolV1 = 1
	// ProtocolV2 adds the Device service: the optional interfaces and the
	// shared-memory data plane.
	ProtocolV2 = 2
)

// PluginName is the name the backend is dispensed under in every plugin set.
const PluginName = "backend"

// MaxMessageBytes is the gRPC message limit both sides set for sending and
// receiving: the largest a protobuf message can be. gRPC's default receive limit
// is 4 MiB, far below a compute buffer.
const MaxMessageBytes = math.MaxInt32

// windowBytes is the HTTP/2 flow-control window of a stream and of the connection
// on both sides. gRPC starts at 64 KiB and grows it slowly, which halves the
// throughput of large buffers; a fixed 16 MiB window doubled it in
// BenchmarkWireRoundTrip.
const windowBytes = 16 << 20

// ioBufferBytes is the socket read and write buffer of both sides (gRPC's default
// is 32 KiB). Each connection allocates them at once, so they weigh on every
// plugin start: 1 MiB cost 2–5 ms of a start (host BenchmarkStart, loaded 2-core
// machine) and bought nothing in BenchmarkWireRoundTrip (817–1010 MB/s against
// 934–1027 MB/s at 64 KiB, interleaved).
const ioBufferBytes = 64 << 10

// Handshake is the go-plugin handshake every kiln plugin and host share: the
// protocol version and a magic cookie that tells a plugin binary it was started by
// a kiln host (run by hand, it prints a notice and exits). The versions actually
// offered are the keys of PluginSets; go-plugin picks the newest both sides have.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolV1,
		MagicCookieKey:   "KILN_PLUGIN_MAGIC_COOKIE",
		MagicCookieValue: "kiln-backend-5b0f3c1e9a7d4e62",
	}
}

// PluginSets returns the host's versioned plugin sets for go-plugin's
// ClientConfig.VersionedPlugins: protocol version → plugin set.
func PluginSets() map[int]plugin.PluginSet {
	return pluginSets(nil, nil)
}

// pluginSets returns the sets of the given versions (all when none are given).
func pluginSets(impl Backend, versions []int) map[int]plugin.PluginSet {
	if len(versions) == 0 {
		versions = []int{ProtocolV1, ProtocolV2}
	}
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		sets[v] = plugin.PluginSet{PluginName: &grpcPlugin{impl: impl, version: v}}
	}
	return sets
}

// grpcPlugin is the go-plugin glue of one protocol version: the plugin side
// registers the server shims over impl, the host side builds the client shim.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl    Backend
	version int
}

// GRPCServer registers the Backend service (and on protocol 2 the Device
// service) on the plugin's gRPC server.
func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return fmt.Errorf("kiln plugin server has no backend. Fix: call pluginapi.Serve with a non-nil Backend")
	}
	srv := newServer(p.impl, p.version)
	if srv.device != nil {
		kilnpb.RegisterDeviceServer(s, srv.device)
	}
	kilnpb.RegisterBackendServer(s, srv)
	return nil
}

// GRPCClient returns the Conn that calls into the plugin over conn.
func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	c := &client{rpc: kilnpb.NewBackendClient(conn)}
	if p.version >= ProtocolV2 {
		c.v2 = newV2Client(kilnpb.NewDeviceClient(conn))
	}
	return c, nil
}

// newGRPCServer is the plugin side's gRPC server factory: go-plugin's default keeps
// gRPC's 4 MiB receive limit, so it is raised here.
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(windowBytes),
		grpc.ReadBufferSize(ioBufferBytes),
		grpc.WriteBufferSize(ioBufferBytes),
	)...)
}

// dialOptions raise the host side's limits to match.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
		),
		grpc.WithInitialWindowSize(windowBytes),
		grpc.WithInitialConnWindowSize(windowBytes),
		grpc.WithReadBufferSize(ioBufferBytes),
		grpc.WithWriteBufferSize(ioBufferBytes),
	}
}

// ClientConfig returns the go-plugin client configuration a host uses to start the
// plugin executable cmd: kiln's handshake and plugin sets, gRPC only, raised message
// limits, and the plugin's output routed to logger. The plugin's hclog lines on
// stderr appear under logger with their own levels; whatever the plugin's code
// writes to os.Stdout or os.Stderr after the handshake arrives over go-plugin's
// stdio stream and is logged under logger.Named("stdout") and "stderr". The caller
// may adjust the result (StartTimeout, for one) before plugin.NewClient.
func ClientConfig(cmd *exec.Cmd, logger hclog.Logger) *plugin.ClientConfig {
	cfg := clientConfig(logger)
	cfg.Cmd = cmd
	return cfg
}

func clientConfig(logger hclog.Logger) *plugin.ClientConfig {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake(),
		VersionedPlugins: PluginSets(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		GRPCDialOptions:  dialOptions(),
		SyncStdout:       logger.Named("stdout").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
		SyncStderr:       logger.Named("stderr").StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Info}),
	}
}

// Dispense connects to a started or startable plugin client and returns its
// Backend, a Conn. It fails when the plugin speaks a protocol version this SDK
// does not know or does not serve a kiln backend.
func Dispense(c *plugin.Client) (Backend, error) {
	rpc, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("start kiln plugin: %w", err)
	}
	if v := c.NegotiatedVersion(); v != ProtocolV1 && v != ProtocolV2 {
		return nil, fmt.Errorf("kiln plugin negotiated protocol version %d, this host speaks %d and %d. Fix: rebuild the plugin against the host's pluginapi", v, ProtocolV1, ProtocolV2)
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense kiln backend: %w", err)
	}
	b, ok := raw.(Backend)
	if !ok {
		return nil, fmt.Errorf("kiln plugin dispensed %T, not a pluginapi.Backend. Fix: rebuild the plugin against the host's pluginapi", raw)
	}
	return b, nil
}
