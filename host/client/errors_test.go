package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestTypedErrorsCrossTheWire serves a backend whose Open fails with each
// kind of error: the plugin's status carries the kind's gRPC code, and the
// host's side turns it back into the same kind with the same message.
func TestTypedErrorsCrossTheWire(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code codes.Code
		is   func(error) bool
	}{
		{"rejected", pluginapi.Rejected("program %q uses f64. Fix: use f32", "p"), codes.InvalidArgument, isRejected},
		{"unavailable", pluginapi.Unavailable("no Vulkan driver. Fix: install mesa-vulkan-drivers"), codes.FailedPrecondition, isUnavailable},
		{"device", pluginapi.DeviceFailed("device lost (VK_ERROR_DEVICE_LOST)"), codes.Internal, isDevice},
		{"wrapped rejected", fmt.Errorf("compile: %w", pluginapi.Rejected("bad spec")), codes.InvalidArgument, isRejected},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := serveV2(t, &fakeBackend{err: c.err})
			_, wire := conn.rpc.Open(context.Background(), &kilnpb.OpenRequest{})
			if got := status.Code(wire); got != c.code {
				t.Errorf("status code %s, want %s", got, c.code)
			}
			back := fromStatus(context.Background(), "Compile", wire)
			if !c.is(back) {
				t.Errorf("fromStatus(toStatus(%v)) = %T, not the same kind", c.err, back)
			}
			if back.Error() != c.err.Error() {
				t.Errorf("message changed across the wire: %q, want %q", back.Error(), c.err.Error())
			}
		})
	}
}

func isRejected(err error) bool    { var e *pluginapi.RejectedError; return errors.As(err, &e) }
func isUnavailable(err error) bool { var e *pluginapi.UnavailableError; return errors.As(err, &e) }
func isDevice(err error) bool      { var e *pluginapi.DeviceError; return errors.As(err, &e) }

func TestStatusCodesWithoutMarker(t *testing.T) {
	ctx := context.Background()
	if err := fromStatus(ctx, "Open", status.Error(codes.InvalidArgument, "m")); !isRejected(err) {
		t.Errorf("InvalidArgument → %T, want *RejectedError", err)
	}
	if err := fromStatus(ctx, "Open", status.Error(codes.FailedPrecondition, "m")); !isUnavailable(err) {
		t.Errorf("FailedPrecondition → %T, want *UnavailableError", err)
	}
	// A bare Internal is gRPC's own failure, not a device error.
	if err := fromStatus(ctx, "Open", status.Error(codes.Internal, "m")); isDevice(err) {
		t.Errorf("unmarked Internal became a DeviceError")
	}
}

func TestTransportFailureStaysUntyped(t *testing.T) {
	// A plugin that died mid-call surfaces as Unavailable without kiln's marker; it
	// must not look like an unavailable adapter, and the status must stay readable.
	err := fromStatus(context.Background(), "Dispatch", status.Error(codes.Unavailable, "error reading from server: EOF"))
	if isUnavailable(err) || isRejected(err) || isDevice(err) {
		t.Fatalf("transport failure became a typed error: %T %v", err, err)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("status.Code(%v) = %s, want Unavailable", err, status.Code(err))
	}
}

func TestMarkedUnavailableCode(t *testing.T) {
	st, err := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.ErrorInfo{Reason: wire.ReasonUnavailable, Domain: wire.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	if got := fromStatus(context.Background(), "Open", st.Err()); !isUnavailable(got) {
		t.Errorf("Unavailable with kiln's marker → %T, want *UnavailableError", got)
	}
}

func TestPlainErrorKeepsMessage(t *testing.T) {
	conn := serveV2(t, &fakeBackend{err: errors.New("out of host memory")})
	_, wire := conn.rpc.Open(context.Background(), &kilnpb.OpenRequest{})
	if status.Code(wire) != codes.Unknown {
		t.Errorf("plain error → %s, want Unknown", status.Code(wire))
	}
	got := fromStatus(context.Background(), "Dispatch", wire)
	if got.Error() != "out of host memory" {
		t.Errorf("message %q, want %q", got.Error(), "out of host memory")
	}
	if isRejected(got) || isUnavailable(got) || isDevice(got) {
		t.Errorf("plain error became %T", got)
	}
}

func TestDeadlineAndCancelWrapContextErrors(t *testing.T) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := fromStatus(expired, "Dispatch", status.Error(codes.Canceled, "context canceled")); !errors.Is(err, context.Canceled) {
		t.Errorf("Canceled with a canceled context: %v does not wrap context.Canceled", err)
	}
	if err := fromStatus(context.Background(), "Dispatch", status.Error(codes.DeadlineExceeded, "slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeadlineExceeded: %v does not wrap context.DeadlineExceeded", err)
	}
}

func TestNilErrorsStayNil(t *testing.T) {
	if fromStatus(context.Background(), "Close", nil) != nil {
		t.Fatal("nil error did not stay nil")
	}
}
