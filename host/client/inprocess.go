package client

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/pluginapi"
)

// ServeInProcess serves b inside this process over the real wire
// (pluginapi.ServeTest: go-plugin's test mode, a gRPC connection on a local
// socket, protocol 2 with its Device service and, on Linux, the shared-memory
// data plane) and returns the host's side, already described (Describe opened
// the data plane). It lets tests drive the whole path a host takes without
// building an executable. stop ends the connection and the server; call it
// once.
func ServeInProcess(ctx context.Context, b pluginapi.Backend) (conn *Conn, stop func(), err error) {
	rc, stopServer, err := pluginapi.ServeTest(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	cfg := Config(nil, hclog.NewNullLogger())
	cfg.Reattach = rc
	// A reattached client skips the version negotiation; name the set.
	cfg.Plugins = cfg.VersionedPlugins[rc.ProtocolVersion]
	c := plugin.NewClient(cfg)
	stop = func() {
		if conn != nil && conn.v2 != nil {
			conn.v2.closePlane()
		}
		c.Kill()
		stopServer()
	}
	conn, err = Dispense(c)
	if err != nil {
		stop()
		return nil, nil, err
	}
	if _, err := conn.Describe(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return conn, stop, nil
}
