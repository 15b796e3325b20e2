package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
)

// ProtocolVersion is the newest wire protocol this SDK speaks: 2 (kiln.plugin.v1's
// Backend service plus kiln.plugin.v2's Device service). Each protocol is a
// go-plugin plugin set of its own, so a host keeps serving plugins built for
// protocol 1, and a plugin serves a host that only knows protocol 1.
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

// Handshake is the go-plugin handshake every kiln plugin and host share: the
// protocol version and a magic cookie that tells a plugin binary it was started by
// a kiln host (run by hand, it prints a notice and exits). The versions actually
// offered are the keys of the plugin sets; go-plugin picks the newest both
// sides have.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolV1,
		MagicCookieKey:   "KILN_PLUGIN_MAGIC_COOKIE",
		MagicCookieValue: "kiln-backend-5b0f3c1e9a7d4e62",
	}
}

// pluginSets returns the plugin side's sets of the given versions (all when
// none are given).
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

// grpcPlugin is the plugin side's go-plugin glue of one protocol version: it
// registers the server shims over impl.
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

// GRPCClient refuses: the host's side of the connection is package
// host/client's.
func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, errors.New("pluginapi serves backends; the host's client is package host/client")
}

// newGRPCServer is the plugin side's gRPC server factory: go-plugin's default keeps
// gRPC's 4 MiB receive limit, so it is raised here.
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts,
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(wire.WindowBytes),
		grpc.InitialConnWindowSize(wire.WindowBytes),
		grpc.ReadBufferSize(wire.IOBufferBytes),
		grpc.WriteBufferSize(wire.IOBufferBytes),
	)...)
}
