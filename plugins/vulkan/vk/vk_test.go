package vk

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openDevice loads the loader (KILN_VULKAN_LOADER overrides libvulkan.so.1), creates
// a validating instance (KILN_VK_VALIDATION=0: without the layer) and a device on the
// first physical device, or skips the test (fails under KILN_REQUIRE_VULKAN=1).
func openDevice(t *testing.T) (*Instance, PhysicalDevice, *Device, uint32) {
	t.Helper()
	unusable := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("KILN_REQUIRE_VULKAN") == "1" {
			t.Fatalf("KILN_REQUIRE_VULKAN=1 but Vulkan is unusable: "+format, args...)
		}
		t.Skipf("no usable Vulkan (set KILN_REQUIRE_VULKAN=1 to fail instead): "+format, args...)
	}
	l, err := Load(os.Getenv("KILN_VULKAN_LOADER"))
	if err != nil {
		unusable("%v", err)
	}
	t.Cleanup(l.Close)
	inst, err := l.CreateInstance(InstanceOptions{APIVersion: Version12, Validation: os.Getenv("KILN_VK_VALIDATION") != "0", SyncValidation: true})
	if err != nil {
		unusable("%v", err)
	}
	t.Cleanup(func() {
		inst.Destroy()
	})
	pds, err := inst.PhysicalDevices()
	if err != nil || len(pds) == 0 {
		unusable("no physical device (err %v)", err)
	}
	pd := pds[0]
	family := -1
	for i, q := range pd.QueueFamilies() {
		if q.Flags&QueueCompute != 0 && family < 0 {
			family = i
		}
	}
	if family < 0 {
		unusable("device %q has no compute queue", pd.Properties().Name)
	}
	_, sizeControl, exts := pd.Needs()
	f := pd.Features()
	dev, err := pd.CreateDevice(uint32(family), DeviceOptions{Extensions: exts,
		SubgroupSizeControl: sizeControl && f.SubgroupSizeControl, ComputeFullSubgroups: sizeControl && f.ComputeFullSubgroups})
	if err != nil {
		t.Fatalf("CreateDevice: %v", err)
	}
	t.Cleanup(func() {
		dev.Destroy()
		if n, text := inst.Messages(); n != 0 {
			t.Errorf("%d validation messages:\n%s", n, text)
		}
	})
	return inst, pd, dev, uint32(family)
}

func TestLoadMissingLibrary(t *testing.T) {
	_, err := Load("libkiln-no-such-vulkan.so.1")
	var missing *LoaderMissingError
	if !errors.As(err, &missing) {
		t.Fatalf("Load of a missing library = %v, want *LoaderMissingError", err)
	}
	want := "Vulkan loader libkiln-no-such-vulkan.so.1 not found"
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "Fix: install libvulkan1") {
		t.Errorf("error %q does not start with %q and name the fix", err, want)
	}
}

func TestLoadLibraryWithoutVulkan(t *testing.T) {
	_, err := Load("libc.so.6")
	var missing *MissingFunctionError
	if !errors.As(err, &missing) || missing.Name != "vkGetInstanceProcAddr" {
		t.Fatalf("Load(libc.so.6) = %v, want a missing vkGetInstanceProcAddr", err)
	}
}

func TestErrorNamesCallAndResult(t *testing.T) {
	err := error(&Error{Call: "vkCreateComputePipelines", Result: ErrOutOfDeviceMemory})
	if got, want := err.Error(), "vkCreateComputePipelines: VK_ERROR_OUT_OF_DEVICE_MEMORY"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := Result(-123456).String(); got != "VkResult(-123456)" {
		t.Errorf("unknown result = %q", got)
	}
	if IsDeviceLost(err) {
		t.Error("out of memory reported as device lost")
	}
	lost := &Error{Call: "vkQueueSubmit", Result: ErrDeviceLost}
	if !IsDeviceLost(errors.Join(errors.New("dispatch"), lost)) {
		t.Error("wrapped VK_ERROR_DEVICE_LOST not recognized")
	}
}

func TestCheck(t *testing.T) {
	if err := check("vkFoo", 0); err != nil {
		t.Errorf("check(VK_SUCCESS) = %v", err)
	}
	err := check("vkFoo", -4)
	if err == nil || err.Error() != "vkFoo: VK_ERROR_DEVICE_LOST" {
		t.Errorf("check(-4) = %v", err)
	}
	if err := check("vkFoo", 5); err == nil || err.Error() != "vkFoo: VK_INCOMPLETE" {
		t.Errorf("a positive non-success result must be an error, got %v", err)
	}
}

func TestVersion(t *testing.T) {
	v := MakeVersion(1, 3, 239)
	if v.String() != "1.3.239" || v < Version13 || v >= MakeVersion(1, 4, 0) {
		t.Errorf("MakeVersion(1,3,239) = %v (%d)", v, uint32(v))
	}
}

func TestDeviceProperties(t *testing.T) {
	_, pd, _, _ := openDevice(t)
	p := pd.Properties()
	if p.Name == "" || p.APIVersion < Version11 {
		t.Errorf("properties %+v: want a name and Vulkan 1.1+", p)
	}
	if p.Limits.MaxComputeWorkGroupInvocations == 0 || p.Limits.MaxPushConstantsSize < 128 || p.Limits.MaxComputeWorkGroupCount[0] == 0 {
		t.Errorf("limits %+v below the Vulkan minimums", p.Limits)
	}
	if p.Subgroup.Size == 0 {
		t.Errorf("subgroup size 0: %+v", p.Subgroup)
	}
	mem := pd.MemoryProperties()
	if len(mem.Types) == 0 || len(mem.Heaps) == 0 {
		t.Errorf("memory properties %+v: want types and heaps", mem)
	}
	for _, ty := range mem.Types {
		if int(ty.Heap) >= len(mem.Heaps) {
			t.Errorf("memory type %+v names heap %d of %d", ty, ty.Heap, len(mem.Heaps))
		}
	}
	if _, err := pd.Extensions(); err != nil {
		t.Errorf("Extensions: %v", err)
	}
}

// hostVisibleType finds a host-visible, host-coherent memory type allowed by bits.
func hostVisibleType(t *testing.T, pd PhysicalDevice, bits uint32) uint32 {
	t.Helper()
	want := MemoryHostVisible | MemoryHostCoherent
	for i, ty := range pd.MemoryProperties().Types {
		if bits&(1<<i) != 0 && ty.Flags&want == want {
			return uint32(i)
		}
	}
	t.Fatalf("no host-visible coherent memory type in mask %#x", bits)
	return 0
}

// TestFillCopyTimestamps records a fill and a copy between two host-visible buffers
// (to an offset), times them with timestamp queries and checks the bytes, all under
// the validation layer with zero messages; it also pins the allocation counter and
// fence reuse.
func TestFillCopyTimestamps(t *testing.T) {
	_, pd, dev, family := openDevice(t)
	const size = 4096
	var bufs [2]Buffer
	var mems [2]Memory
	for i := range bufs {
		b, err := dev.CreateBuffer(size, UsageStorage|UsageTransferSrc|UsageTransferDst)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.DestroyBuffer(b)
		req := dev.BufferRequirements(b)
		m, err := dev.AllocateMemory(req.Size, hostVisibleType(t, pd, req.TypeBits))
		if err != nil {
			t.Fatal(err)
		}
		defer dev.FreeMemory(m)
		if err := dev.BindBufferMemory(b, m); err != nil {
			t.Fatal(err)
		}
		bufs[i], mems[i] = b, m
	}
	dst, err := dev.MapMemory(mems[1], size)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.UnmapMemory(mems[1])
	for i := range dst {
		dst[i] = 0xee
	}
	pool, err := dev.CreateCommandPool(family)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyCommandPool(pool)
	cb, err := dev.AllocateCommandBuffer(pool)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := dev.CreateTimestampPool(2)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyQueryPool(queries)
	fence, err := dev.CreateFence()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyFence(fence)
	if err := cb.Begin(); err != nil {
		t.Fatal(err)
	}
	cb.ResetQueries(queries, 0, 2)
	cb.WriteTimestamp(StageTopOfPipe, queries, 0)
	cb.FillBuffer(bufs[0], 0, size, 0x01020304)
	cb.MemoryBarrier(StageTransfer, StageTransfer, AccessTransferWrite, AccessTransferRead)
	cb.CopyBuffer(bufs[0], 0, bufs[1], size/2, size/2)
	cb.MemoryBarrier(StageTransfer, StageHost, AccessTransferWrite, AccessHostRead)
	cb.WriteTimestamp(StageBottomOfPipe, queries, 1)
	if err := cb.End(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Submit(cb, fence); err != nil {
		t.Fatal(err)
	}
	done, err := dev.WaitFence(fence, time.Minute)
	if err != nil || !done {
		t.Fatalf("WaitFence = %v, %v", done, err)
	}
	if done, err := dev.FenceSignaled(fence); !done || err != nil {
		t.Fatalf("FenceSignaled after the wait = %v, %v", done, err)
	}
	for i := 0; i < size; i += 4 {
		got := binary.LittleEndian.Uint32(dst[i:])
		want := uint32(0x01020304)
		if i < size/2 {
			want = 0xeeeeeeee
		}
		if got != want {
			t.Fatalf("word at byte %d = %#x, want %#x", i, got, want)
		}
	}
	ts, err := dev.QueryResults(queries, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ts[1] < ts[0] {
		t.Errorf("timestamps go backwards: %v", ts)
	}
	if n := dev.Allocations(); n != 2 {
		t.Errorf("Allocations() = %d after two vkAllocateMemory calls", n)
	}
	if err := dev.ResetFence(fence); err != nil {
		t.Fatal(err)
	}
	if done, err := dev.WaitFence(fence, 0); done || err != nil {
		t.Errorf("WaitFence after ResetFence = %v, %v; want unsignaled", done, err)
	}
	if done, err := dev.FenceSignaled(fence); done || err != nil {
		t.Errorf("FenceSignaled after ResetFence = %v, %v; want unsignaled", done, err)
	}
	dev.FreeCommandBuffer(pool, cb)
}

// TestPipelineCacheData checks that an empty cache serializes to a header naming the
// device.
func TestPipelineCacheData(t *testing.T) {
	_, pd, dev, _ := openDevice(t)
	c, err := dev.CreatePipelineCache(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyPipelineCache(c)
	data, err := dev.PipelineCacheData(c)
	if err != nil {
		t.Fatal(err)
	}
	p := pd.Properties()
	if len(data) < 32 || binary.LittleEndian.Uint32(data[8:]) != p.VendorID || binary.LittleEndian.Uint32(data[12:]) != p.DeviceID || string(data[16:32]) != string(p.PipelineCacheUUID[:]) {
		t.Errorf("cache data header % x does not name vendor %#x device %#x uuid % x", data[:min(len(data), 32)], p.VendorID, p.DeviceID, p.PipelineCacheUUID)
	}
}

func TestValidationMessagesAreRecorded(t *testing.T) {
	if os.Getenv("KILN_VK_VALIDATION") == "0" {
		t.Skip("KILN_VK_VALIDATION=0: no validation layer")
	}
	inst, _, dev, _ := openDevice(t)
	// A zero-size buffer violates VUID-VkBufferCreateInfo-size-00912.
	b, err := dev.CreateBuffer(0, UsageStorage)
	if err == nil {
		dev.DestroyBuffer(b)
	}
	n, text := inst.Messages()
	if n == 0 || !strings.Contains(text, "VUID-VkBufferCreateInfo-size-00912") {
		t.Errorf("a zero-size vkCreateBuffer gave %d messages %q, want VUID-VkBufferCreateInfo-size-00912", n, text)
	}
	if n, _ := inst.Messages(); n != 0 {
		t.Errorf("Messages did not clear: %d left", n)
	}
}

func TestMissingValidationLayer(t *testing.T) {
	// VK_LAYER_PATH replaces the loader's search paths for explicit layers.
	t.Setenv("VK_LAYER_PATH", t.TempDir())
	l, err := Load(os.Getenv("KILN_VULKAN_LOADER"))
	if err != nil {
		t.Skipf("no Vulkan loader: %v", err)
	}
	defer l.Close()
	_, err = l.CreateInstance(InstanceOptions{APIVersion: Version11, Validation: true})
	var missing *LayerMissingError
	if !errors.As(err, &missing) || missing.Layer != ValidationLayer || !strings.Contains(err.Error(), "Fix: install vulkan-validationlayers") {
		t.Errorf("CreateInstance with validation and no layers = %v, want a LayerMissingError", err)
	}
}

// TestOptionalProperties pins that the float-controls and subgroup-size-control
// properties are read exactly when the device has them (Needs), with sane values.
func TestOptionalProperties(t *testing.T) {
	_, pd, _, _ := openDevice(t)
	fc, sc, exts := pd.Needs()
	p := pd.Properties()
	if (p.FloatControls != nil) != fc || (p.SubgroupSizeControl != nil) != sc {
		t.Fatalf("Needs says float controls %v, size control %v (extensions %v); Properties has %+v and %+v", fc, sc, exts, p.FloatControls, p.SubgroupSizeControl)
	}
	if s := p.SubgroupSizeControl; s != nil {
		if s.MinSubgroupSize == 0 || s.MinSubgroupSize > p.Subgroup.Size || s.MaxSubgroupSize < p.Subgroup.Size {
			t.Errorf("subgroup size %d outside the size control's range [%d, %d]", p.Subgroup.Size, s.MinSubgroupSize, s.MaxSubgroupSize)
		}
	}
	t.Logf("float controls %+v, subgroup size %d, size control %+v, features %+v", p.FloatControls, p.Subgroup.Size, p.SubgroupSizeControl, pd.Features())
}

// TestImportHostMemory imports a page-aligned mapping as device memory, fills it
// from the device and reads the words in place, where the device has
// VK_EXT_external_memory_host.
func TestImportHostMemory(t *testing.T) {
	_, pd, dev, family := openDevice(t)
	align := pd.Properties().MinImportedHostPointerAlignment
	if align == 0 {
		t.Skip("no VK_EXT_external_memory_host")
	}
	size := max(align, 4096)
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	bits, err := dev.HostMemoryTypes(unsafe.Pointer(&mem[0]))
	if err != nil || bits == 0 {
		t.Fatalf("HostMemoryTypes = %#x, %v", bits, err)
	}
	buf, err := dev.CreateHostBuffer(size, UsageStorage|UsageTransferDst)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyBuffer(buf)
	req := dev.BufferRequirements(buf)
	before := dev.Allocations()
	m, err := dev.ImportHostMemory(unsafe.Pointer(&mem[0]), size, hostVisibleType(t, pd, bits&req.TypeBits))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.FreeMemory(m)
	if dev.Allocations() != before+1 {
		t.Errorf("an import is not counted as an allocation")
	}
	if err := dev.BindBufferMemory(buf, m); err != nil {
		t.Fatal(err)
	}
	pool, err := dev.CreateCommandPool(family)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyCommandPool(pool)
	cb, err := dev.AllocateCommandBuffer(pool)
	if err != nil {
		t.Fatal(err)
	}
	fence, err := dev.CreateFence()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.DestroyFence(fence)
	if err := cb.Begin(); err != nil {
		t.Fatal(err)
	}
	cb.FillBuffer(buf, 8, 16, 0xcafe)
	cb.MemoryBarrier(StageTransfer, StageHost, AccessTransferWrite, AccessHostRead)
	if err := cb.End(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Submit(cb, fence); err != nil {
		t.Fatal(err)
	}
	if done, err := dev.WaitFence(fence, time.Minute); !done || err != nil {
		t.Fatalf("WaitFence = %v, %v", done, err)
	}
	for i := 0; i < 32; i += 4 {
		want := uint32(0)
		if i >= 8 && i < 24 {
			want = 0xcafe
		}
		if got := binary.LittleEndian.Uint32(mem[i:]); got != want {
			t.Errorf("word at byte %d = %#x, want %#x", i, got, want)
		}
	}
	dev.FreeCommandBuffer(pool, cb)
}
