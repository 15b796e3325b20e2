package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/kiln-dev/kiln/pluginapi"
)

// ServeInProcess serves b inside this process over the real wire — go-plugin's
// test mode: a gRPC connection on a local socket, protocol 2 with its Device
// service and, on Linux, the shared-memory data plane — and returns the host's
// side, already described (Describe opened the data plane). It lets a plugin's
// own tests drive the whole path a host takes without building an executable.
// stop ends the connection and the server; call it once.
func ServeInProcess(ctx context.Context, b pluginapi.Backend) (conn Conn, stop func(), err error) {
	if b == nil {
		return nil, nil, errors.New("pluginapi.ServeInProcess was given a nil pluginapi.Backend. Fix: pass the backend to serve")
	}
	sctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	cfg := serveConfig(b, hclog.NewNullLogger(), pluginapi.ProtocolV2)
	cfg.Test = &plugin.ServeTestConfig{Context: sctx, ReattachConfigCh: reattach, CloseCh: closed}
	go plugin.Serve(cfg)
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-ctx.Done():
		cancel()
		<-closed
		return nil, nil, fmt.Errorf("serving in process: %w", ctx.Err())
	}
	ccfg := clientConfig(hclog.NewNullLogger())
	ccfg.Reattach = rc
	// A reattached client skips the version negotiation; name the set.
	ccfg.Plugins = ccfg.VersionedPlugins[rc.ProtocolVersion]
	c := plugin.NewClient(ccfg)
	stop = func() {
		if cl, ok := conn.(*client); ok && cl.v2 != nil {
			cl.v2.closePlane()
		}
		c.Kill()
		cancel()
		<-closed
	}
	be, err := Dispense(c)
	if err != nil {
		conn = nil
		stop()
		return nil, nil, err
	}
	conn = be.(Conn)
	if _, err := conn.Describe(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return conn, stop, nil
}
