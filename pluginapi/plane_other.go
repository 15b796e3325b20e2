//go:build !linux

package pluginapi

import (
	"errors"
	"runtime"
)

// Without Linux's memfd there is no shared-memory data plane: every connection
// stays on gRPC, and the plugin never listens for one.

// shipsSpans: without a data plane nothing is timed (Capabilities.Spans).
const shipsSpans = false

var errNoPlane = errors.New("the shared-memory data plane needs Linux (memfd); this is " + runtime.GOOS)

type planeServer struct{ token []byte }

func listenPlane(*device) (*planeServer, error) { return nil, errNoPlane }

func (*planeServer) socketPath() string { return "" }
func (*planeServer) cancel(uint64)      {}
func (*planeServer) close()             {}
