package pluginapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kiln-dev/kiln/internal/wire"
)

// RejectedError means the backend refused a program, a specialization map or a
// launch as invalid: retrying the same request cannot succeed. It crosses the wire
// as gRPC InvalidArgument.
type RejectedError struct{ Err error }

// Error returns the reason.
func (e *RejectedError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped reason.
func (e *RejectedError) Unwrap() error { return e.Err }

// Rejected returns a RejectedError with a fmt.Errorf-formatted reason (%w wraps).
func Rejected(format string, args ...any) error {
	return &RejectedError{Err: fmt.Errorf(format, args...)}
}

// UnavailableError means the adapter cannot be used now (missing driver, device
// absent or busy). It crosses the wire as gRPC FailedPrecondition.
type UnavailableError struct{ Err error }

// Error returns the reason.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped reason.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable returns an UnavailableError with a fmt.Errorf-formatted reason.
func Unavailable(format string, args ...any) error {
	return &UnavailableError{Err: fmt.Errorf(format, args...)}
}

// DeviceError means the device failed while working (device lost, out of device
// memory, a driver error). It crosses the wire as gRPC Internal with a kiln marker.
type DeviceError struct{ Err error }

// Error returns the reason.
func (e *DeviceError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped reason.
func (e *DeviceError) Unwrap() error { return e.Err }

// DeviceFailed returns a DeviceError with a fmt.Errorf-formatted reason.
func DeviceFailed(format string, args ...any) error {
	return &DeviceError{Err: fmt.Errorf(format, args...)}
}

// PluginError is an error a backend returned without a kind (a plain error):
// the plugin is alive and answered, but said nothing more about the failure.
// It crosses the wire as gRPC Unknown and comes back with the same message.
type PluginError struct{ Err error }

// Error returns the plugin's message.
func (e *PluginError) Error() string { return e.Err.Error() }

// Unwrap returns the plugin's message as an error.
func (e *PluginError) Unwrap() error { return e.Err }

// kilnDetail is the status detail that marks an error kind.
func kilnDetail(reason string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: wire.ErrorDomain}
}

// toStatus turns a backend's error into the gRPC status error that carries it. The
// message is err.Error() in every case.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var (
		rej   *RejectedError
		unav  *UnavailableError
		dev   *DeviceError
		code  codes.Code
		cause string
	)
	switch {
	case errors.As(err, &rej):
		code, cause = codes.InvalidArgument, wire.ReasonRejected
	case errors.As(err, &unav):
		code, cause = codes.FailedPrecondition, wire.ReasonUnavailable
	case errors.As(err, &dev):
		code, cause = codes.Internal, wire.ReasonDevice
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Unknown, err.Error())
	}
	st, detailErr := status.New(code, err.Error()).WithDetails(kilnDetail(cause))
	if detailErr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}
