package driver

import (
	"bytes"
	"fmt"
	"unsafe"
)

// Attribute is a CUdevice_attribute.
type Attribute int32

// The device attributes the backend reads.
const (
	AttrMaxThreadsPerBlock         Attribute = 1
	AttrMaxBlockDimX               Attribute = 2
	AttrMaxBlockDimY               Attribute = 3
	AttrMaxBlockDimZ               Attribute = 4
	AttrMaxGridDimX                Attribute = 5
	AttrMaxGridDimY                Attribute = 6
	AttrMaxGridDimZ                Attribute = 7
	AttrMaxSharedMemoryPerBlock    Attribute = 8
	AttrWarpSize                   Attribute = 10
	AttrClockRate                  Attribute = 13
	AttrMultiprocessorCount        Attribute = 16
	AttrKernelExecTimeout          Attribute = 17
	AttrIntegrated                 Attribute = 18
	AttrComputeMode                Attribute = 20
	AttrPCIBusID                   Attribute = 33
	AttrPCIDeviceID                Attribute = 34
	AttrMemoryClockRate            Attribute = 36
	AttrGlobalMemoryBusWidth       Attribute = 37
	AttrL2CacheSize                Attribute = 38
	AttrPCIDomainID                Attribute = 50
	AttrComputeCapabilityMajor     Attribute = 75
	AttrComputeCapabilityMinor     Attribute = 76
	AttrMaxSharedMemoryPerBlockOpt Attribute = 97
)

// ComputeModeProhibited is AttrComputeMode's value for a device that accepts no
// contexts.
const ComputeModeProhibited = 2

// Device is a CUdevice.
type Device struct {
	d *Driver
	h int32
}

// Ordinal returns the device's number.
func (v Device) Ordinal() int { return int(v.h) }

// Name returns the device's name ("NVIDIA H200").
func (v Device) Name() (string, error) {
	buf := make([]byte, 256)
	if err := v.d.check(fnDeviceGetName, v.d.call(fnDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(v.h))); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// UUID returns the device's 16-byte UUID.
func (v Device) UUID() ([16]byte, error) {
	var u [16]byte
	err := v.d.check(fnDeviceGetUUID, v.d.call(fnDeviceGetUUID, uintptr(unsafe.Pointer(&u[0])), uintptr(v.h)))
	return u, err
}

// FormatUUID writes a UUID the way nvidia-smi does: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Attribute returns one device attribute.
func (v Device) Attribute(a Attribute) (int, error) {
	var n int32
	if err := v.d.check(fnDeviceGetAttribute, v.d.call(fnDeviceGetAttribute, uintptr(unsafe.Pointer(&n)), uintptr(a), uintptr(v.h))); err != nil {
		return 0, fmt.Errorf("attribute %d: %w", a, err)
	}
	return int(n), nil
}

// TotalMem returns the device's memory in bytes.
func (v Device) TotalMem() (uint64, error) {
	var n uint64
	err := v.d.check(fnDeviceTotalMem, v.d.call(fnDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(v.h)))
	return n, err
}

// PrimaryContext retains the device's primary context; Release gives it back.
func (v Device) PrimaryContext() (*Context, error) {
	var h uintptr
	if err := v.d.check(fnPrimaryCtxRetain, v.d.call(fnPrimaryCtxRetain, uintptr(unsafe.Pointer(&h)), uintptr(v.h))); err != nil {
		return nil, err
	}
	return &Context{d: v.d, dev: v, h: h}, nil
}
