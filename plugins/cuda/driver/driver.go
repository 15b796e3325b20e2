package driver

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultLibrary is the driver library Load opens when given none.
const DefaultLibrary = "libcuda.so.1"

// fn indexes the driver functions the binding resolves.
type fn int

const (
	fnInit fn = iota
	fnDriverGetVersion
	fnGetErrorName
	fnGetErrorString
	fnDeviceGetCount
	fnDeviceGet
	fnDeviceGetName
	fnDeviceGetUUID
	fnDeviceGetAttribute
	fnDeviceTotalMem
	fnPrimaryCtxRetain
	fnPrimaryCtxRelease
	fnCtxSetCurrent
	fnMemAlloc
	fnMemFree
	fnMemGetInfo
	fnMemcpyHtoDAsync
	fnMemcpyDtoHAsync
	fnMemcpyDtoDAsync
	fnMemsetD32Async
	fnMemHostRegister
	fnMemHostUnregister
	fnStreamCreate
	fnStreamDestroy
	fnStreamSynchronize
	fnStreamQuery
	fnEventCreate
	fnEventDestroy
	fnEventRecord
	fnEventQuery
	fnEventSynchronize
	fnEventElapsedTime
	fnLinkCreate
	fnLinkAddData
	fnLinkComplete
	fnLinkDestroy
	fnModuleLoadData
	fnModuleUnload
	fnModuleGetFunction
	fnFuncGetAttribute
	fnLaunchKernel
	// The optional functions (see optional): a driver without them still
	// loads, and their methods return a *SymbolMissingError.
	fnDeviceCanAccessPeer
	fnCtxEnablePeerAccess
	fnMemcpyPeerAsync
	fnMemHostAlloc
	fnMemFreeHost
	fnFuncSetAttribute
	fnTensorMapEncodeTiled
	fnCount
)

// symbols are the exported names of the functions, by fn. The _v2 names are
// what cuda.h maps the API names to since CUDA 4.0 (and 11.4 for the UUID).
var symbols = [fnCount]string{
	fnInit:               "cuInit",
	fnDriverGetVersion:   "cuDriverGetVersion",
	fnGetErrorName:       "cuGetErrorName",
	fnGetErrorString:     "cuGetErrorString",
	fnDeviceGetCount:     "cuDeviceGetCount",
	fnDeviceGet:          "cuDeviceGet",
	fnDeviceGetName:      "cuDeviceGetName",
	fnDeviceGetUUID:      "cuDeviceGetUuid_v2",
	fnDeviceGetAttribute: "cuDeviceGetAttribute",
	fnDeviceTotalMem:     "cuDeviceTotalMem_v2",
	fnPrimaryCtxRetain:   "cuDevicePrimaryCtxRetain",
	fnPrimaryCtxRelease:  "cuDevicePrimaryCtxRelease_v2",
	fnCtxSetCurrent:      "cuCtxSetCurrent",
	fnMemAlloc:           "cuMemAlloc_v2",
	fnMemFree:            "cuMemFree_v2",
	fnMemGetInfo:         "cuMemGetInfo_v2",
	fnMemcpyHtoDAsync:    "cuMemcpyHtoDAsync_v2",
	fnMemcpyDtoHAsync:    "cuMemcpyDtoHAsync_v2",
	fnMemcpyDtoDAsync:    "cuMemcpyDtoDAsync_v2",
	fnMemsetD32Async:     "cuMemsetD32Async",
	fnMemHostRegister:    "cuMemHostRegister_v2",
	fnMemHostUnregister:  "cuMemHostUnregister",
	fnStreamCreate:       "cuStreamCreate",
	fnStreamDestroy:      "cuStreamDestroy_v2",
	fnStreamSynchronize:  "cuStreamSynchronize",
	fnStreamQuery:        "cuStreamQuery",
	fnEventCreate:        "cuEventCreate",
	fnEventDestroy:       "cuEventDestroy_v2",
	fnEventRecord:        "cuEventRecord",
	fnEventQuery:         "cuEventQuery",
	fnEventSynchronize:   "cuEventSynchronize",
	fnEventElapsedTime:   "cuEventElapsedTime",
	fnLinkCreate:         "cuLinkCreate_v2",
	fnLinkAddData:        "cuLinkAddData_v2",
	fnLinkComplete:       "cuLinkComplete",
	fnLinkDestroy:        "cuLinkDestroy",
	fnModuleLoadData:     "cuModuleLoadData",
	fnModuleUnload:       "cuModuleUnload",
	fnModuleGetFunction:  "cuModuleGetFunction",
	fnFuncGetAttribute:   "cuFuncGetAttribute",
	fnLaunchKernel:       "cuLaunchKernel",
	// optional
	fnDeviceCanAccessPeer:  "cuDeviceCanAccessPeer",
	fnCtxEnablePeerAccess:  "cuCtxEnablePeerAccess",
	fnMemcpyPeerAsync:      "cuMemcpyPeerAsync",
	fnMemHostAlloc:         "cuMemHostAlloc",
	fnMemFreeHost:          "cuMemFreeHost",
	fnFuncSetAttribute:     "cuFuncSetAttribute",
	fnTensorMapEncodeTiled: "cuTensorMapEncodeTiled",
}

// optional reports whether the binding loads without function f: the
// functions of peer copies, cuFuncSetAttribute (dynamic shared memory over
// 48 KiB) and cuTensorMapEncodeTiled (CUDA 12), which a stub, a reduced or an
// older driver library may lack.
func optional(f fn) bool { return f >= fnDeviceCanAccessPeer }

// LibraryMissingError means the driver library could not be opened.
type LibraryMissingError struct {
	Library string
	Err     error
}

// Error says which library is missing and why dlopen failed.
func (e *LibraryMissingError) Error() string {
	return fmt.Sprintf("cannot open the CUDA driver library %s: %v", e.Library, e.Err)
}

// Unwrap returns dlopen's error.
func (e *LibraryMissingError) Unwrap() error { return e.Err }

// SymbolMissingError means the library lacks a function kiln needs: the driver
// is older than the binding.
type SymbolMissingError struct {
	Library, Symbol string
}

// Error names the library and the missing function.
func (e *SymbolMissingError) Error() string {
	return fmt.Sprintf("the CUDA driver library %s has no %s, so the driver is too old for kiln. Fix: update the NVIDIA driver to R450 (CUDA 11.0) or newer", e.Library, e.Symbol)
}

// Driver is an opened driver library. It is safe for concurrent use.
type Driver struct {
	library string
	fns     [fnCount]uintptr
}

// Load opens library (DefaultLibrary when empty) and resolves every function the
// binding uses. It does not call cuInit.
func Load(library string) (*Driver, error) {
	if library == "" {
		library = DefaultLibrary
	}
	h, err := purego.Dlopen(library, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, &LibraryMissingError{Library: library, Err: err}
	}
	d := &Driver{library: library}
	for f, name := range symbols {
		addr, err := purego.Dlsym(h, name)
		if err != nil && fn(f) == fnDeviceGetUUID {
			// Drivers before CUDA 11.4 only have the first version.
			addr, err = purego.Dlsym(h, "cuDeviceGetUuid")
		}
		if (err != nil || addr == 0) && optional(fn(f)) {
			continue
		}
		if err != nil || addr == 0 {
			return nil, &SymbolMissingError{Library: library, Symbol: name}
		}
		d.fns[f] = addr
	}
	return d, nil
}

// HasSetFunctionAttribute reports whether the driver has cuFuncSetAttribute,
// without which no launch may pass more than 48 KiB of dynamic shared memory.
func (d *Driver) HasSetFunctionAttribute() bool { return d.has(fnFuncSetAttribute) }

// Library returns the name the library was opened by.
func (d *Driver) Library() string { return d.library }

// call invokes driver function f. Pointer arguments converted to uintptr in the
// call expression stay valid (and on the heap) for the call's duration.
//
//go:uintptrescapes
func (d *Driver) call(f fn, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(d.fns[f], args...)
	return Result(int32(uint32(r)))
}

// has reports whether the library has function f (always true but for the
// optional ones).
func (d *Driver) has(f fn) bool { return d.fns[f] != 0 }

// missing is the error of a call of an optional function the library lacks.
func (d *Driver) missing(f fn) error {
	return &SymbolMissingError{Library: d.library, Symbol: symbols[f]}
}

// check turns a result of function f into an *Error, or nil for success.
func (d *Driver) check(f fn, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: symbols[f], Result: r, Name: d.errorName(r), Text: d.errorString(r)}
}

// errorName returns cuGetErrorName's name for r, or "CUresult(N)" when the driver
// does not know it.
func (d *Driver) errorName(r Result) string {
	var s unsafe.Pointer
	if d.call(fnGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&s))) != Success || s == nil {
		return fmt.Sprintf("CUresult(%d)", r)
	}
	return goString(s)
}

// errorString returns cuGetErrorString's description of r, or "".
func (d *Driver) errorString(r Result) string {
	var s unsafe.Pointer
	if d.call(fnGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&s))) != Success || s == nil {
		return ""
	}
	return goString(s)
}

// maxCString bounds the C strings the binding reads (error names and texts).
const maxCString = 4096

// goString copies a NUL-terminated C string the driver owns.
func goString(p unsafe.Pointer) string {
	var b []byte
	for i := 0; i < maxCString; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cString returns s as NUL-terminated bytes.
func cString(s string) []byte { return append([]byte(s), 0) }

// Init calls cuInit(0).
func (d *Driver) Init() error { return d.check(fnInit, d.call(fnInit, 0)) }

// Version returns cuDriverGetVersion: 1000·major + 10·minor of the CUDA version
// the driver supports (13000 for CUDA 13.0).
func (d *Driver) Version() (int, error) {
	var v int32
	if err := d.check(fnDriverGetVersion, d.call(fnDriverGetVersion, uintptr(unsafe.Pointer(&v)))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount returns the number of CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	if err := d.check(fnDeviceGetCount, d.call(fnDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device returns the device with the given ordinal.
func (d *Driver) Device(ordinal int) (Device, error) {
	var h int32
	if err := d.check(fnDeviceGet, d.call(fnDeviceGet, uintptr(unsafe.Pointer(&h)), uintptr(ordinal))); err != nil {
		return Device{}, err
	}
	return Device{d: d, h: h}, nil
}

// IsNoDevice reports whether err is CUDA_ERROR_NO_DEVICE.
func IsNoDevice(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Result == ErrNoDevice
}
