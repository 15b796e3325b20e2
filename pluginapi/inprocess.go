package pluginapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// ServeTest serves b inside this process over the real wire — go-plugin's test
// mode: a gRPC server on a local socket, by default protocol 2 with its Device
// service and, on Linux, the shared-memory data plane — and returns the
// configuration a host reattaches to it with, instead of starting an
// executable. Package host/client's ServeInProcess connects to it, for tests
// that drive the whole path a host takes. Options limit the protocols as
// Serve's do (test mode takes the lowest one offered). stop ends the server;
// call it once.
func ServeTest(ctx context.Context, b Backend, opts ...ServeOption) (reattach *plugin.ReattachConfig, stop func(), err error) {
	if b == nil {
		return nil, nil, errors.New("pluginapi.ServeTest was given a nil Backend. Fix: pass the backend to serve")
	}
	sctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	versions := servedProtocols(opts)
	if len(versions) == 0 {
		versions = []int{ProtocolV2}
	}
	cfg := serveConfig(b, hclog.NewNullLogger(), versions...)
	cfg.Test = &plugin.ServeTestConfig{Context: sctx, ReattachConfigCh: ready, CloseCh: closed}
	go plugin.Serve(cfg)
	stop = func() {
		cancel()
		<-closed
	}
	select {
	case reattach = <-ready:
		return reattach, stop, nil
	case <-ctx.Done():
		stop()
		return nil, nil, fmt.Errorf("serving in process: %w", ctx.Err())
	}
}
