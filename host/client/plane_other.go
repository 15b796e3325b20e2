//go:build !linux

package client

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Without Linux's memfd there is no shared-memory data plane: every connection
// stays on gRPC, and these stand-ins are never reached with a plane.

var errNoPlane = errors.New("the shared-memory data plane needs Linux (memfd); this is " + runtime.GOOS)

type plane struct{}

type call struct{ seq uint64 }

func (*call) ready() bool { return true }

func dialPlane(context.Context, string, []byte, func(uint64)) (*plane, error) { return nil, errNoPlane }

func (*plane) closed() error             { return errNoPlane }
func (*plane) stalled() time.Duration    { return 0 }
func (*plane) alive() error              { return errNoPlane }
func (*plane) close()                    {}
func (*plane) cancel(uint64)             {}
func (*plane) dropSegment(*wire.Segment) {}
func (*plane) roundTrip(context.Context, *wire.Request, int, int) (*wire.Done, error) {
	return nil, errNoPlane
}
func (*plane) send(context.Context, *wire.Request, int, int, func()) (*call, error) {
	return nil, errNoPlane
}
func (*plane) await(context.Context, *call) error { return errNoPlane }
func (*plane) wait(context.Context, *call) (*wire.Done, bool, error) {
	return nil, true, errNoPlane
}

func allocOnPlane(context.Context, *plane, uint32, *pluginapi.AllocRequest) (*pluginapi.AllocResult, *wire.Segment, error) {
	return nil, nil, errNoPlane
}

func transferOnPlane(context.Context, *plane, wire.FrameKind, uint64, uint64, []byte) error {
	return errNoPlane
}

func dispatchOnPlane(context.Context, *plane, *pluginapi.DispatchRequest, []int) (*DispatchResult, error) {
	return nil, errNoPlane
}

// SmallDispatch is false without a data plane: no dispatch is staged.
func SmallDispatch(*pluginapi.DispatchRequest, []int) bool { return false }
