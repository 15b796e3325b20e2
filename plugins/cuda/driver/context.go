package driver

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"unsafe"
)

// Handles of driver objects. DevicePtr is a device address (CUdeviceptr).
type (
	DevicePtr uint64
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
)

// Context is a retained primary context of a device.
type Context struct {
	d   *Driver
	dev Device
	h   uintptr
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Release gives the primary context back; its memory, streams and modules go with
// it when no one else retains it.
func (c *Context) Release() error {
	return c.d.check(fnPrimaryCtxRelease, c.d.call(fnPrimaryCtxRelease, uintptr(c.dev.h)))
}

// Do runs f with c current on the calling goroutine's OS thread, which it keeps
// for f's duration. Every other method of Context must run inside Do.
func (c *Context) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.d.check(fnCtxSetCurrent, c.d.call(fnCtxSetCurrent, c.h)); err != nil {
		return err
	}
	return f()
}

// MemAlloc allocates size bytes of device memory.
func (c *Context) MemAlloc(size uint64) (DevicePtr, error) {
	var p DevicePtr
	err := c.d.check(fnMemAlloc, c.d.call(fnMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size)))
	return p, err
}

// MemGetInfo returns the device's free and total memory in bytes, as the
// driver counts them for every process (cuMemGetInfo).
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	err = c.d.check(fnMemGetInfo, c.d.call(fnMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	return free, total, err
}

// MemFree frees device memory from MemAlloc.
func (c *Context) MemFree(p DevicePtr) error {
	return c.d.check(fnMemFree, c.d.call(fnMemFree, uintptr(p)))
}

// MemcpyHtoDAsync copies src to dst on s. From pageable memory the driver has
// copied src away when the call returns; from registered memory (HostRegister)
// src must stay unchanged until s reaches the copy.
func (c *Context) MemcpyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return c.d.check(fnMemcpyHtoDAsync, c.d.call(fnMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s)))
}

// MemcpyDtoHAsync copies len(dst) bytes from src to dst on s. Into pageable
// memory the call returns when the copy is done; into registered memory dst is
// complete when s reaches the end of the copy.
func (c *Context) MemcpyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return c.d.check(fnMemcpyDtoHAsync, c.d.call(fnMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s)))
}

// MemcpyDtoDAsync copies n bytes between device buffers on s.
func (c *Context) MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	if n == 0 {
		return nil
	}
	return c.d.check(fnMemcpyDtoDAsync, c.d.call(fnMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)))
}

// MemsetD32Async sets n 32-bit words at dst to v on s.
func (c *Context) MemsetD32Async(dst DevicePtr, v uint32, n uint64, s Stream) error {
	if n == 0 {
		return nil
	}
	return c.d.check(fnMemsetD32Async, c.d.call(fnMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), uintptr(s)))
}

// hostRegisterPortable is CU_MEMHOSTREGISTER_PORTABLE: the registration holds
// for every context, not only the current one.
const hostRegisterPortable = 1

// HostRegister page-locks b (memory that is not Go's heap, such as a mapped
// file or shared memory) for every context (portable), so copies to and from it
// are DMA without staging.
func (c *Context) HostRegister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.d.check(fnMemHostRegister, c.d.call(fnMemHostRegister, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), hostRegisterPortable))
}

// HostUnregister undoes HostRegister.
func (c *Context) HostUnregister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.d.check(fnMemHostUnregister, c.d.call(fnMemHostUnregister, uintptr(unsafe.Pointer(&b[0]))))
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not synchronize
// with the legacy default stream.
const streamNonBlocking = 1

// StreamCreate creates a non-blocking stream.
func (c *Context) StreamCreate() (Stream, error) {
	var s Stream
	err := c.d.check(fnStreamCreate, c.d.call(fnStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking))
	return s, err
}

// StreamDestroy destroys a stream once its work is done.
func (c *Context) StreamDestroy(s Stream) error {
	return c.d.check(fnStreamDestroy, c.d.call(fnStreamDestroy, uintptr(s)))
}

// StreamSynchronize waits for all work on s.
func (c *Context) StreamSynchronize(s Stream) error {
	return c.d.check(fnStreamSynchronize, c.d.call(fnStreamSynchronize, uintptr(s)))
}

// StreamQuery reports whether all work on s is done.
func (c *Context) StreamQuery(s Stream) (bool, error) {
	r := c.d.call(fnStreamQuery, uintptr(s))
	if r == ErrNotReady {
		return false, nil
	}
	return r == Success, c.d.check(fnStreamQuery, r)
}

// EventCreate creates an event that records time.
func (c *Context) EventCreate() (Event, error) {
	var e Event
	err := c.d.check(fnEventCreate, c.d.call(fnEventCreate, uintptr(unsafe.Pointer(&e)), 0))
	return e, err
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING: the event records no time,
// which makes recording and querying it cheaper.
const eventDisableTiming = 2

// EventCreateUntimed creates an event that records no time: it only tells
// when the work before its record is done (EventElapsed fails on it).
func (c *Context) EventCreateUntimed() (Event, error) {
	var e Event
	err := c.d.check(fnEventCreate, c.d.call(fnEventCreate, uintptr(unsafe.Pointer(&e)), eventDisableTiming))
	return e, err
}

// EventDestroy destroys an event.
func (c *Context) EventDestroy(e Event) error {
	return c.d.check(fnEventDestroy, c.d.call(fnEventDestroy, uintptr(e)))
}

// EventRecord records e at the current end of s.
func (c *Context) EventRecord(e Event, s Stream) error {
	return c.d.check(fnEventRecord, c.d.call(fnEventRecord, uintptr(e), uintptr(s)))
}

// EventQuery reports whether the work before e's record is done.
func (c *Context) EventQuery(e Event) (bool, error) {
	r := c.d.call(fnEventQuery, uintptr(e))
	if r == ErrNotReady {
		return false, nil
	}
	return r == Success, c.d.check(fnEventQuery, r)
}

// EventSynchronize waits for the work before e's record.
func (c *Context) EventSynchronize(e Event) error {
	return c.d.check(fnEventSynchronize, c.d.call(fnEventSynchronize, uintptr(e)))
}

// EventElapsed returns the device time between two completed events, in
// milliseconds (about half a microsecond of resolution).
func (c *Context) EventElapsed(start, end Event) (float32, error) {
	var ms float32
	err := c.d.check(fnEventElapsedTime, c.d.call(fnEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)))
	return ms, err
}

// The JIT options and input type Link uses (CUjit_option, CUjitInputType).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
	jitInputPTX           = 1
)

// linkLogBytes is the size of the linker's error log buffer.
const linkLogBytes = 32 << 10

// LinkError is a PTX module the driver's linker rejected, with its log.
type LinkError struct {
	Err error
	Log string
}

// Error gives the driver's error and the linker's log.
func (e *LinkError) Error() string {
	if e.Log == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Log
}

// Unwrap returns the driver's error.
func (e *LinkError) Unwrap() error { return e.Err }

// Link compiles PTX source to a cubin for the context's device with the driver's
// JIT linker (cuLinkCreate, cuLinkAddData, cuLinkComplete). A module the linker
// rejects gives a *LinkError carrying its log.
func (c *Context) Link(ptx string) ([]byte, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	logBuf := make([]byte, linkLogBytes)
	opts := []uint32{jitErrorLogBuffer, jitErrorLogBufferSize}
	// The linker writes into logBuf and the used size back into vals[1] until
	// cuLinkDestroy, so all three stay pinned until then.
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	pin.Pin(&logBuf[0])
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	var state uintptr
	if err := c.d.check(fnLinkCreate, c.d.call(fnLinkCreate, uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])),
		uintptr(unsafe.Pointer(&vals[0])), uintptr(unsafe.Pointer(&state)))); err != nil {
		return nil, err
	}
	linkLog := func() string {
		if i := bytes.IndexByte(logBuf, 0); i >= 0 {
			return string(bytes.TrimSpace(logBuf[:i]))
		}
		return string(bytes.TrimSpace(logBuf))
	}
	src, name := cString(ptx), cString("kiln.ptx")
	r := c.d.call(fnLinkAddData, state, jitInputPTX, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)),
		uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	var cubin []byte
	err := c.d.check(fnLinkAddData, r)
	if err == nil {
		var image unsafe.Pointer
		var size uintptr
		err = c.d.check(fnLinkComplete, c.d.call(fnLinkComplete, state, uintptr(unsafe.Pointer(&image)), uintptr(unsafe.Pointer(&size))))
		if err == nil {
			if image == nil || size == 0 {
				err = errors.New("cuLinkComplete returned an empty image")
			} else {
				cubin = bytes.Clone(unsafe.Slice((*byte)(image), size))
			}
		}
	}
	if err != nil {
		err = &LinkError{Err: err, Log: linkLog()}
	}
	if derr := c.d.check(fnLinkDestroy, c.d.call(fnLinkDestroy, state)); err == nil && derr != nil {
		return nil, derr
	}
	return cubin, err
}

// ModuleLoadData loads a cubin (or PTX) image.
func (c *Context) ModuleLoadData(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, errors.New("cuModuleLoadData: empty image")
	}
	var m Module
	err := c.d.check(fnModuleLoadData, c.d.call(fnModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0]))))
	return m, err
}

// ModuleUnload unloads a module.
func (c *Context) ModuleUnload(m Module) error {
	return c.d.check(fnModuleUnload, c.d.call(fnModuleUnload, uintptr(m)))
}

// ModuleFunction returns the kernel named name of m.
func (c *Context) ModuleFunction(m Module, name string) (Function, error) {
	var f Function
	n := cString(name)
	err := c.d.check(fnModuleGetFunction, c.d.call(fnModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&n[0]))))
	return f, err
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// The function attributes the backend reads and sets.
const (
	FuncMaxThreadsPerBlock FuncAttribute = 0
	FuncSharedSizeBytes    FuncAttribute = 1
	FuncNumRegs            FuncAttribute = 4
	// FuncMaxDynamicSharedSizeBytes is the most dynamic shared memory a launch
	// of the function may pass (48 KiB until raised).
	FuncMaxDynamicSharedSizeBytes FuncAttribute = 8
)

// FunctionAttribute returns one attribute of a kernel.
func (c *Context) FunctionAttribute(f Function, a FuncAttribute) (int, error) {
	var n int32
	if err := c.d.check(fnFuncGetAttribute, c.d.call(fnFuncGetAttribute, uintptr(unsafe.Pointer(&n)), uintptr(a), uintptr(f))); err != nil {
		return 0, fmt.Errorf("function attribute %d: %w", a, err)
	}
	return int(n), nil
}

// SetFunctionAttribute sets one attribute of a kernel (cuFuncSetAttribute), such
// as FuncMaxDynamicSharedSizeBytes; a driver without the function gives a
// *SymbolMissingError.
func (c *Context) SetFunctionAttribute(f Function, a FuncAttribute, value int) error {
	if !c.d.has(fnFuncSetAttribute) {
		return c.d.missing(fnFuncSetAttribute)
	}
	if err := c.d.check(fnFuncSetAttribute, c.d.call(fnFuncSetAttribute, uintptr(f), uintptr(a), uintptr(value))); err != nil {
		return fmt.Errorf("setting function attribute %d to %d: %w", a, value, err)
	}
	return nil
}

// Params holds a kernel's argument values in pinned memory, for Launch to pass
// as kernelParams: one 8-byte slot per parameter (a 4-byte parameter uses the
// slot's first, little-endian, half), or 16 slots, 64-byte aligned, for a
// tensor map (NewParamsSized). Free unpins it.
type Params struct {
	pin  runtime.Pinner
	vals []uint64
	ptrs []uintptr
	// off is each parameter's first slot in vals.
	off []int
}

// NewParams returns n zeroed parameter slots.
func NewParams(n int) *Params {
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = 8
	}
	return NewParamsSized(sizes)
}

// NewParamsSized returns zeroed parameters of the given sizes in bytes: 8 or
// less for a value, 128 for a tensor map.
func NewParamsSized(sizes []int) *Params {
	p := &Params{off: make([]int, len(sizes))}
	pad := 0
	if slices.ContainsFunc(sizes, func(s int) bool { return s > 8 }) {
		pad = 8 // room to align the tensor maps to 64 bytes
	}
	slots := pad
	for i, s := range sizes {
		if s > 8 {
			slots = (slots + 7) &^ 7
		}
		p.off[i] = slots
		slots += (s + 7) / 8
	}
	p.vals, p.ptrs = make([]uint64, max(slots, 1)), make([]uintptr, max(len(sizes), 1))
	p.pin.Pin(&p.vals[0])
	p.pin.Pin(&p.ptrs[0])
	// the tensor maps 64-byte aligned in memory: every offset moves by the
	// same number of slots
	shift := 0
	if pad > 0 {
		shift = (64-int(uintptr(unsafe.Pointer(&p.vals[0]))%64))%64/8 - pad
	}
	for i := range p.off {
		p.off[i] += shift
		p.ptrs[i] = uintptr(unsafe.Pointer(&p.vals[p.off[i]]))
	}
	p.ptrs = p.ptrs[:len(sizes)]
	return p
}

// Len returns the number of parameters.
func (p *Params) Len() int { return len(p.ptrs) }

// Set stores parameter i's value: a pointer or a 4-byte value zero-extended.
func (p *Params) Set(i int, v uint64) { p.vals[p.off[i]] = v }

// Get returns the value Set stored for parameter i.
func (p *Params) Get(i int) uint64 { return p.vals[p.off[i]] }

// SetTensorMap stores parameter i's 128 bytes, a tensor map (its parameter
// made 128 bytes by NewParamsSized).
func (p *Params) SetTensorMap(i int, m TensorMap) { copy(p.vals[p.off[i]:p.off[i]+16], m[:]) }

// Free unpins the slots; the Params must not be used after.
func (p *Params) Free() { p.pin.Unpin() }

// Launch enqueues f on s over grid blocks of block threads, each with
// sharedBytes of dynamic shared memory (over 48 KiB only after
// SetFunctionAttribute raised FuncMaxDynamicSharedSizeBytes), with its
// parameters from p (copied by the driver before Launch returns).
func (c *Context) Launch(f Function, grid, block [3]uint32, sharedBytes uint32, s Stream, p *Params) error {
	var params uintptr
	if p.Len() > 0 {
		params = uintptr(unsafe.Pointer(&p.ptrs[0]))
	}
	r := c.d.call(fnLaunchKernel, uintptr(f), uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]), uintptr(sharedBytes), uintptr(s), params, 0)
	return c.d.check(fnLaunchKernel, r)
}
