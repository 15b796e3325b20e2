package driver

import "unsafe"

// Copies between devices (docs/design.md, "Copies between adapters"): peer
// access where the hardware allows it (NVLink or PCIe P2P), else staging
// through page-locked host memory. These functions are optional: a library
// without them loads, and each method then returns a *SymbolMissingError.

// ErrPeerAccessAlreadyEnabled is CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED.
const ErrPeerAccessAlreadyEnabled Result = 704

// CanAccessPeer reports whether v's contexts can map peer's memory
// (cuDeviceCanAccessPeer).
func (v Device) CanAccessPeer(peer Device) (bool, error) {
	if !v.d.has(fnDeviceCanAccessPeer) {
		return false, v.d.missing(fnDeviceCanAccessPeer)
	}
	var can int32
	err := v.d.check(fnDeviceCanAccessPeer, v.d.call(fnDeviceCanAccessPeer, uintptr(unsafe.Pointer(&can)), uintptr(v.h), uintptr(peer.h)))
	return can != 0, err
}

// EnablePeerAccess lets c (which must be current: call inside c.Do) access
// peer's memory directly (cuCtxEnablePeerAccess); access that is already on is
// no error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if !c.d.has(fnCtxEnablePeerAccess) {
		return c.d.missing(fnCtxEnablePeerAccess)
	}
	r := c.d.call(fnCtxEnablePeerAccess, peer.h, 0)
	if r == ErrPeerAccessAlreadyEnabled {
		return nil
	}
	return c.d.check(fnCtxEnablePeerAccess, r)
}

// MemcpyPeerAsync copies n bytes from src in srcCtx to dst in c on s
// (cuMemcpyPeerAsync): a direct device-to-device transfer when peer access is
// enabled, else one the driver stages.
func (c *Context) MemcpyPeerAsync(dst DevicePtr, srcCtx *Context, src DevicePtr, n uint64, s Stream) error {
	if !c.d.has(fnMemcpyPeerAsync) {
		return c.d.missing(fnMemcpyPeerAsync)
	}
	if n == 0 {
		return nil
	}
	return c.d.check(fnMemcpyPeerAsync, c.d.call(fnMemcpyPeerAsync, uintptr(dst), c.h, uintptr(src), srcCtx.h, uintptr(n), uintptr(s)))
}

// memHostAllocPortable is CU_MEMHOSTALLOC_PORTABLE: the memory is pinned for
// every context, not only the allocating one.
const memHostAllocPortable = 1

// MemHostAlloc allocates n bytes of page-locked host memory that every
// context's copies reach by DMA (cuMemHostAlloc, portable). The memory is not
// Go's: free it with MemFreeHost, and keep no slice of it afterwards.
func (c *Context) MemHostAlloc(n uint64) ([]byte, error) {
	if !c.d.has(fnMemHostAlloc) || !c.d.has(fnMemFreeHost) {
		return nil, c.d.missing(fnMemHostAlloc)
	}
	if n == 0 {
		return nil, nil
	}
	var p unsafe.Pointer
	if err := c.d.check(fnMemHostAlloc, c.d.call(fnMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n), memHostAllocPortable)); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// MemFreeHost frees memory from MemHostAlloc.
func (c *Context) MemFreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !c.d.has(fnMemFreeHost) {
		return c.d.missing(fnMemFreeHost)
	}
	return c.d.check(fnMemFreeHost, c.d.call(fnMemFreeHost, uintptr(unsafe.Pointer(&b[0]))))
}
