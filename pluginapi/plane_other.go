//go:build !linux

package pluginapi

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// Without Linux's memfd there is no shared-memory data plane: every connection
// stays on gRPC, and these stand-ins are never reached with a plane.

var errNoPlane = errors.New("the shared-memory data plane needs Linux (memfd); this is " + runtime.GOOS)

type planeServer struct{ token []byte }

func listenPlane(*device) (*planeServer, error) { return nil, errNoPlane }

func (*planeServer) socketPath() string { return "" }
func (*planeServer) cancel(uint64)      {}
func (*planeServer) close()             {}
