package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
)

func isRejected(err error) bool { var e *RejectedError; return errors.As(err, &e) }

func TestTypedErrorsUnwrap(t *testing.T) {
	cause := errors.New("cause")
	for _, err := range []error{Rejected("a: %w", cause), Unavailable("b: %w", cause), DeviceFailed("c: %w", cause)} {
		if !errors.Is(err, cause) {
			t.Errorf("%T %q does not wrap its %%w argument", err, err)
		}
	}
}

// TestStatusOfEachKind pins the plugin's side of the error mapping: each kind
// leaves as its gRPC code with kiln's marker (the host's side reads it back,
// host/client's TestTypedErrorsCrossTheWire), a plain error as Unknown, a
// deadline or cancellation as gRPC's own code, with the message unchanged.
func TestStatusOfEachKind(t *testing.T) {
	for _, c := range []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{Rejected("program %q uses f64. Fix: use f32", "p"), codes.InvalidArgument, wire.ReasonRejected},
		{Unavailable("no Vulkan driver"), codes.FailedPrecondition, wire.ReasonUnavailable},
		{DeviceFailed("device lost"), codes.Internal, wire.ReasonDevice},
		{fmt.Errorf("compile: %w", Rejected("bad spec")), codes.InvalidArgument, wire.ReasonRejected},
		{errors.New("out of host memory"), codes.Unknown, ""},
		{fmt.Errorf("run: %w", context.DeadlineExceeded), codes.DeadlineExceeded, ""},
		{fmt.Errorf("run: %w", context.Canceled), codes.Canceled, ""},
	} {
		st := status.Convert(toStatus(c.err))
		if st.Code() != c.code || st.Message() != c.err.Error() {
			t.Errorf("%v → %s %q, want %s with the same message", c.err, st.Code(), st.Message(), c.code)
		}
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == wire.ErrorDomain {
				reason = info.Reason
			}
		}
		if reason != c.reason {
			t.Errorf("%v carries marker %q, want %q", c.err, reason, c.reason)
		}
	}
}

func TestNilErrorsStayNil(t *testing.T) {
	if toStatus(nil) != nil {
		t.Fatal("nil error did not stay nil")
	}
}
