package driver

import (
	"errors"
	"fmt"
)

// Result is a CUresult.
type Result int32

// The CUresult values the binding and the backend look at.
const (
	Success                  Result = 0
	ErrInvalidValue          Result = 1
	ErrOutOfMemory           Result = 2
	ErrNotInitialized        Result = 3
	ErrDeinitialized         Result = 4
	ErrStubLibrary           Result = 34
	ErrNoDevice              Result = 100
	ErrInvalidDevice         Result = 101
	ErrInvalidImage          Result = 200
	ErrInvalidContext        Result = 201
	ErrNoBinaryForGPU        Result = 209
	ErrInvalidPTX            Result = 218
	ErrUnsupportedPTXVersion Result = 222
	ErrInvalidHandle         Result = 400
	ErrNotReady              Result = 600
	ErrIllegalAddress        Result = 700
	ErrLaunchOutOfResources  Result = 701
	ErrLaunchTimeout         Result = 702
	ErrHardwareStackError    Result = 714
	ErrIllegalInstruction    Result = 715
	ErrMisalignedAddress     Result = 716
	ErrInvalidAddressSpace   Result = 717
	ErrInvalidPC             Result = 718
	ErrLaunchFailed          Result = 719
	ErrUnknown               Result = 999
)

// Error is a failed driver call.
type Error struct {
	// Call is the driver function, e.g. "cuMemAlloc_v2".
	Call   string
	Result Result
	// Name is the result's name from cuGetErrorName ("CUDA_ERROR_OUT_OF_MEMORY"),
	// or "CUresult(N)".
	Name string
	// Text is cuGetErrorString's description, possibly empty.
	Text string
}

// Error reads "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
func (e *Error) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("%s: %s", e.Call, e.Name)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Text)
}

// Sticky reports whether the result leaves the context unusable: every later call
// in it fails the same way, so the process must get a new context.
func (e *Error) Sticky() bool {
	switch e.Result {
	case ErrIllegalAddress, ErrLaunchTimeout, ErrHardwareStackError, ErrIllegalInstruction, ErrMisalignedAddress,
		ErrInvalidAddressSpace, ErrInvalidPC, ErrLaunchFailed, ErrDeinitialized, ErrUnknown:
		return true
	}
	return false
}

// IsSticky reports whether err is, or wraps, a sticky *Error.
func IsSticky(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Sticky()
}

// IsOutOfMemory reports whether err is, or wraps, CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Result == ErrOutOfMemory
}
