package pluginapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// errorDomain marks the gRPC status details that carry a kiln error kind, so a
// transport failure with the same code is never mistaken for one.
const errorDomain = "kiln.dev/pluginapi"

// The reasons in the ErrorInfo detail.
const (
	reasonRejected    = "REJECTED"
	reasonUnavailable = "UNAVAILABLE"
	reasonDevice      = "DEVICE"
)

// kilnDetail is the status detail that marks an error kind.
func kilnDetail(reason string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}
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
		code, cause = codes.InvalidArgument, reasonRejected
	case errors.As(err, &unav):
		code, cause = codes.FailedPrecondition, reasonUnavailable
	case errors.As(err, &dev):
		code, cause = codes.Internal, reasonDevice
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

// fromStatus turns an error from a gRPC call back into the backend's error kind.
// Typed errors come back as the same type with the same message; a deadline or a
// cancellation wraps the context error; an error the plugin returned without a
// kind comes back as a PluginError with its message; anything else (the connection broke, the
// plugin died) is returned wrapped, so status.Code still reads it.
func fromStatus(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("kiln plugin %s: %w", method, err)
	}
	msg := errors.New(st.Message())
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		switch info.Reason {
		case reasonRejected:
			return &RejectedError{Err: msg}
		case reasonUnavailable:
			return &UnavailableError{Err: msg}
		case reasonDevice:
			return &DeviceError{Err: msg}
		}
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return &RejectedError{Err: msg}
	case codes.FailedPrecondition:
		return &UnavailableError{Err: msg}
	case codes.DeadlineExceeded, codes.Canceled:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), ctxErr)
		}
		if st.Code() == codes.Canceled {
			return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), context.Canceled)
		}
		return fmt.Errorf("kiln plugin %s: %s: %w", method, st.Message(), context.DeadlineExceeded)
	case codes.Unknown:
		return &PluginError{Err: msg}
	}
	return fmt.Errorf("kiln plugin %s: %w", method, err)
}
