package driver

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLoadMissingLibrary(t *testing.T) {
	_, err := Load("libkiln-no-such-cuda.so.1")
	var missing *LibraryMissingError
	if !errors.As(err, &missing) || missing.Library != "libkiln-no-such-cuda.so.1" || !strings.Contains(err.Error(), "libkiln-no-such-cuda.so.1") {
		t.Fatalf("Load of a missing library = %v, want a *LibraryMissingError naming it", err)
	}
}

func TestErrorMessagesAndKinds(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Result: ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Text: "out of memory"}
	if got := e.Error(); got != "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Call: "cuInit", Result: 12345, Name: "CUresult(12345)"}).Error(); got != "cuInit: CUresult(12345)" {
		t.Errorf("Error() without a text = %q", got)
	}
	wrapped := errors.Join(errors.New("context"), e)
	if !IsOutOfMemory(wrapped) || IsSticky(wrapped) {
		t.Errorf("out of memory: IsOutOfMemory %v, IsSticky %v", IsOutOfMemory(wrapped), IsSticky(wrapped))
	}
	for _, r := range []Result{ErrIllegalAddress, ErrLaunchFailed, ErrLaunchTimeout, ErrMisalignedAddress, ErrIllegalInstruction} {
		if !IsSticky(&Error{Result: r}) {
			t.Errorf("result %d is not sticky", r)
		}
	}
	for _, r := range []Result{ErrInvalidValue, ErrInvalidPTX, ErrNotReady, ErrOutOfMemory, ErrNoDevice} {
		if IsSticky(&Error{Result: r}) {
			t.Errorf("result %d is sticky", r)
		}
	}
	if !IsNoDevice(&Error{Result: ErrNoDevice}) || IsNoDevice(e) {
		t.Error("IsNoDevice")
	}
	le := &LinkError{Err: e, Log: "ptxas fatal: bad"}
	if !errors.Is(le, e) || !strings.Contains(le.Error(), "ptxas fatal: bad") {
		t.Errorf("LinkError %v", le)
	}
	sm := &SymbolMissingError{Library: "libcuda.so.1", Symbol: "cuLinkCreate_v2"}
	if !strings.Contains(sm.Error(), "cuLinkCreate_v2") || !strings.Contains(sm.Error(), "Fix:") {
		t.Errorf("SymbolMissingError %q", sm)
	}
}

func TestFormatUUID(t *testing.T) {
	u := [16]byte{0x6a, 0x1c, 0x2b, 0x3d, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9}
	if got, want := FormatUUID(u), "GPU-6a1c2b3d-4e5f-6071-8293-a4b5c6d7e8f9"; got != want {
		t.Errorf("FormatUUID = %q, want %q", got, want)
	}
}

func TestParams(t *testing.T) {
	p := NewParams(3)
	defer p.Free()
	p.Set(0, 0x1122334455667788)
	p.Set(2, 7)
	if p.Len() != 3 || p.vals[0] != 0x1122334455667788 || p.vals[2] != 7 {
		t.Errorf("params %v", p.vals)
	}
	for i := range p.ptrs {
		if p.ptrs[i] == 0 || (i > 0 && p.ptrs[i]-p.ptrs[i-1] != 8) {
			t.Errorf("slot pointers %v are not consecutive 8-byte slots", p.ptrs)
		}
	}
	if NewParams(0).Len() != 0 {
		t.Error("NewParams(0) has slots")
	}
}

// gpuContext loads the driver and retains device 0's primary context, or skips
// when there is no usable CUDA device (fails under KILN_REQUIRE_CUDA=1).
func gpuContext(t *testing.T) *Context {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("KILN_REQUIRE_CUDA") == "1" {
			t.Fatalf("KILN_REQUIRE_CUDA=1 but: "+format, args...)
		}
		t.Skipf("no usable CUDA device (set KILN_REQUIRE_CUDA=1 to fail instead): "+format, args...)
	}
	d, err := Load("")
	if err != nil {
		skip("%v", err)
	}
	if err := d.Init(); err != nil {
		skip("%v", err)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		skip("%d devices, %v", n, err)
	}
	dev, err := d.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Release(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestDeviceQueries(t *testing.T) {
	c := gpuContext(t)
	v, err := c.d.Version()
	if err != nil || v < 11000 {
		t.Errorf("driver version %d, %v", v, err)
	}
	dev := c.Device()
	name, err := dev.Name()
	if err != nil || name == "" {
		t.Errorf("name %q, %v", name, err)
	}
	u, err := dev.UUID()
	if err != nil || u == ([16]byte{}) {
		t.Errorf("uuid %x, %v", u, err)
	}
	mem, err := dev.TotalMem()
	if err != nil || mem < 1<<30 {
		t.Errorf("total memory %d, %v", mem, err)
	}
	for _, a := range []Attribute{AttrWarpSize, AttrMaxThreadsPerBlock, AttrMultiprocessorCount, AttrComputeCapabilityMajor} {
		n, err := dev.Attribute(a)
		if err != nil || n <= 0 {
			t.Errorf("attribute %d = %d, %v", a, n, err)
		}
	}
	if w, _ := dev.Attribute(AttrWarpSize); w != 32 {
		t.Errorf("warp size %d", w)
	}
	_, err = dev.Attribute(Attribute(100000))
	var e *Error
	if !errors.As(err, &e) || !strings.HasPrefix(e.Name, "CUDA_ERROR_") || e.Call != "cuDeviceGetAttribute" {
		t.Errorf("an unknown attribute gives %v, want a named CUDA error from cuDeviceGetAttribute", err)
	}
	t.Logf("%s (%s), driver API %d, %d MiB", name, FormatUUID(u), v, mem>>20)
}

// addOnePTX is out[i] = out[i] + 1 for i < n, 64 threads per block.
const addOnePTX = `.version 7.0
.target sm_70
.address_size 64
.visible .entry add_one(.param .u64 buf, .param .u32 n)
.reqntid 64, 1, 1
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [buf];
	cvta.to.global.u64 %rd2, %rd1;
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %tid.x;
	mad.lo.u32 %r4, %r2, 64, %r3;
	setp.ge.u32 %p1, %r4, %r1;
	@%p1 ret;
	mul.wide.u32 %rd3, %r4, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.u32 %r5, [%rd4];
	add.u32 %r5, %r5, 1;
	st.global.u32 [%rd4], %r5;
	ret;
}
`

func TestLinkLaunchAndTime(t *testing.T) {
	c := gpuContext(t)
	err := c.Do(func() error {
		cubin, err := c.Link(addOnePTX)
		if err != nil {
			return err
		}
		if len(cubin) < 64 || string(cubin[1:4]) != "ELF" {
			t.Errorf("the cubin (%d bytes) is not an ELF image", len(cubin))
		}
		m, err := c.ModuleLoadData(cubin)
		if err != nil {
			return err
		}
		defer c.ModuleUnload(m)
		f, err := c.ModuleFunction(m, "add_one")
		if err != nil {
			return err
		}
		if n, err := c.FunctionAttribute(f, FuncMaxThreadsPerBlock); err != nil || n < 64 {
			t.Errorf("max threads per block %d, %v", n, err)
		}
		s, err := c.StreamCreate()
		if err != nil {
			return err
		}
		defer c.StreamDestroy(s)
		const n = 1000
		buf, err := c.MemAlloc(4 * n)
		if err != nil {
			return err
		}
		defer c.MemFree(buf)
		in := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(in[4*i:], uint32(i))
		}
		start, _ := c.EventCreate()
		end, _ := c.EventCreate()
		defer c.EventDestroy(start)
		defer c.EventDestroy(end)
		p := NewParams(2)
		defer p.Free()
		p.Set(0, uint64(buf))
		p.Set(1, n)
		if err := c.MemcpyHtoDAsync(buf, in, s); err != nil {
			return err
		}
		if err := c.EventRecord(start, s); err != nil {
			return err
		}
		if err := c.Launch(f, [3]uint32{(n + 63) / 64, 1, 1}, [3]uint32{64, 1, 1}, 0, s, p); err != nil {
			return err
		}
		if err := c.EventRecord(end, s); err != nil {
			return err
		}
		if err := c.EventSynchronize(end); err != nil {
			return err
		}
		if done, err := c.EventQuery(end); !done || err != nil {
			t.Errorf("EventQuery after EventSynchronize = %v, %v", done, err)
		}
		out := make([]byte, 4*n)
		if err := c.MemcpyDtoHAsync(out, buf, s); err != nil {
			return err
		}
		if err := c.StreamSynchronize(s); err != nil {
			return err
		}
		for i := range n {
			if got := binary.LittleEndian.Uint32(out[4*i:]); got != uint32(i)+1 {
				t.Fatalf("out[%d] = %d, want %d", i, got, i+1)
			}
		}
		ms, err := c.EventElapsed(start, end)
		if err != nil || ms <= 0 {
			t.Errorf("elapsed %v ms, %v", ms, err)
		}
		if err := c.MemsetD32Async(buf, 0xABCD, n, s); err != nil {
			return err
		}
		if err := c.MemcpyDtoHAsync(out, buf, s); err != nil {
			return err
		}
		if done, err := c.StreamQuery(s); err != nil || (done && binary.LittleEndian.Uint32(out[4*(n-1):]) != 0xABCD) {
			t.Errorf("StreamQuery = %v, %v", done, err)
		}
		return c.StreamSynchronize(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLinkRejectsBadPTX(t *testing.T) {
	c := gpuContext(t)
	err := c.Do(func() error {
		_, err := c.Link(".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n")
		return err
	})
	var le *LinkError
	var e *Error
	if !errors.As(err, &le) || !errors.As(err, &e) || le.Log == "" {
		t.Fatalf("linking bad PTX = %v, want a *LinkError with the linker's log", err)
	}
	t.Logf("%v", err)
}

func TestHostRegisteredCopies(t *testing.T) {
	c := gpuContext(t)
	mem, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	err = c.Do(func() error {
		if err := c.HostRegister(mem); err != nil {
			return err
		}
		defer c.HostUnregister(mem)
		s, err := c.StreamCreate()
		if err != nil {
			return err
		}
		defer c.StreamDestroy(s)
		a, err := c.MemAlloc(uint64(len(mem)))
		if err != nil {
			return err
		}
		defer c.MemFree(a)
		b, err := c.MemAlloc(uint64(len(mem)))
		if err != nil {
			return err
		}
		defer c.MemFree(b)
		for i := range mem {
			mem[i] = byte(i * 7)
		}
		if err := c.MemcpyHtoDAsync(a, mem, s); err != nil {
			return err
		}
		if err := c.MemcpyDtoDAsync(b, a, uint64(len(mem)), s); err != nil {
			return err
		}
		if err := c.StreamSynchronize(s); err != nil {
			return err
		}
		clear(mem)
		if err := c.MemcpyDtoHAsync(mem, b, s); err != nil {
			return err
		}
		if err := c.StreamSynchronize(s); err != nil {
			return err
		}
		for i := range mem {
			if mem[i] != byte(i*7) {
				t.Fatalf("byte %d = %d after the round trip", i, mem[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The functions of peer copies are optional: a library without them loads,
// and their methods say which symbol is missing instead of calling address 0.
func TestPeerFunctionsAreOptional(t *testing.T) {
	for f := fn(0); f < fnCount; f++ {
		want := f == fnDeviceCanAccessPeer || f == fnCtxEnablePeerAccess || f == fnMemcpyPeerAsync || f == fnMemHostAlloc || f == fnMemFreeHost || f == fnFuncSetAttribute ||
			f == fnTensorMapEncodeTiled
		if optional(f) != want {
			t.Errorf("%s: optional %v, want %v", symbols[f], optional(f), want)
		}
	}
	d := &Driver{library: "libcuda-without-peers.so"}
	c := &Context{d: d, dev: Device{d: d}}
	var sm *SymbolMissingError
	if _, err := (Device{d: d}).CanAccessPeer(Device{d: d}); !errors.As(err, &sm) || sm.Symbol != "cuDeviceCanAccessPeer" {
		t.Errorf("CanAccessPeer without the symbol: %v", err)
	}
	if err := c.EnablePeerAccess(c); !errors.As(err, &sm) || sm.Symbol != "cuCtxEnablePeerAccess" {
		t.Errorf("EnablePeerAccess without the symbol: %v", err)
	}
	if err := c.MemcpyPeerAsync(0, c, 0, 4, 0); !errors.As(err, &sm) || sm.Symbol != "cuMemcpyPeerAsync" {
		t.Errorf("MemcpyPeerAsync without the symbol: %v", err)
	}
	if _, err := c.MemHostAlloc(4); !errors.As(err, &sm) || sm.Symbol != "cuMemHostAlloc" {
		t.Errorf("MemHostAlloc without the symbol: %v", err)
	}
}
