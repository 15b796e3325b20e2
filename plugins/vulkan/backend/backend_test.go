package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

func TestLoaderMissingIsReportedNotFatal(t *testing.T) {
	ctx := context.Background()
	b := New(Config{Loader: "libkiln-no-such-vulkan.so.1"})
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe without a loader: %v", err)
	}
	if d.ID != "vulkan" || len(d.Adapters) != 1 || d.Adapters[0].Available {
		t.Fatalf("description %+v: want id vulkan and one unavailable adapter", d)
	}
	want := "Vulkan loader libkiln-no-such-vulkan.so.1 not found. Fix: install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers provides a CPU one)"
	if got := d.Adapters[0].Reason; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
	var unavailable *pluginapi.UnavailableError
	if err := b.Open(ctx, 0); !errors.As(err, &unavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open = %v, want an UnavailableError carrying the reason", err)
	}
	_, err = b.Compile(ctx, &pluginapi.CompileRequest{Program: kernels.All()[0].Program()})
	if !errors.As(err, &unavailable) {
		t.Errorf("Compile = %v, want an UnavailableError", err)
	}
	var rejected *pluginapi.RejectedError
	if err := b.Open(ctx, 1); !errors.As(err, &rejected) {
		t.Errorf("Open(1) = %v, want a RejectedError for a missing adapter", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestDescribeReportsTheDevice(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != ID || d.Version == "" || !d.Dispatches || d.ReferenceOracle {
		t.Errorf("description %+v", d)
	}
	a := d.Adapters[0]
	p := b.adapters.List()[0].props
	if !strings.HasPrefix(a.Name, p.Name) || a.Identity.DeviceType != p.Type.String() || a.Identity.Vendor == "" || a.Identity.DriverVersion == "" || !strings.Contains(a.Identity.Device, p.Name) {
		t.Errorf("adapter %+v does not describe %q", a, p.Name)
	}
	prof := a.Profile
	if prof.MaxStorageBufferBindingSize != b.adapters.List()[0].bindingLimit() || prof.MaxInvocationsPerWorkgroup != p.Limits.MaxComputeWorkGroupInvocations || prof.SubgroupSize != p.Subgroup.Size {
		t.Errorf("profile %+v does not follow the limits %+v", prof, p.Limits)
	}
	if !prof.HasSharedMemory {
		t.Errorf("profile %+v: every Vulkan device has shared memory", prof)
	}
	if prof.SupportsDeviceTimestamps != (prof.TimingQuality == pluginapi.DeviceTimestamps) {
		t.Errorf("timestamps %v but timing quality %v", prof.SupportsDeviceTimestamps, prof.TimingQuality)
	}
	if prof.MemBWGBps != 0 && !strings.HasPrefix(a.Identity.Instance, "GPU-") {
		t.Errorf("the first Describe reports a bandwidth (%v) it cannot have measured yet (NoBandwidth) nor estimated (no NVIDIA GPU)", prof.MemBWGBps)
	}
	if prof.SupportsTensorCores || prof.SupportsIndirectDispatch || prof.SupportsHardwareCounters {
		t.Errorf("profile %+v claims features the backend cannot run", prof)
	}
	if f := b.adapters.List()[0].features; prof.SupportsF16 != (f.ShaderFloat16 && f.StorageBuffer16BitAccess) || prof.SupportsBF16 != f.StorageBuffer16BitAccess {
		t.Errorf("profile f16 %v bf16 %v with features %+v", prof.SupportsF16, prof.SupportsBF16, f)
	}
	if want := pluginapi.BandwidthUnmeasured; prof.MemBWStatus != want && prof.MemBWStatus != pluginapi.BandwidthEstimated {
		t.Errorf("bandwidth status %v without a measurement (NoBandwidth), want %v, or estimated on NVIDIA", prof.MemBWStatus, want)
	}
	if prof.MemoryBytes != deviceLocalBytes(b.adapters.List()[0].mem) || prof.MemoryBytes == 0 || prof.MemoryFreeBytes > prof.MemoryBytes {
		t.Errorf("memory %d free of %d, want the device-local heaps (%+v)", prof.MemoryFreeBytes, prof.MemoryBytes, b.adapters.List()[0].mem.Heaps)
	}
	// Free memory is a reading; everything else stays.
	again, err := b.Describe(ctx)
	if err == nil {
		again.Adapters[0].Profile.MemoryFreeBytes = prof.MemoryFreeBytes
	}
	if err != nil || again.Adapters[0].Profile != prof {
		t.Errorf("a second Describe changed the profile: %+v, %v", again.Adapters[0].Profile, err)
	}
	// The name is the device's; what the float controls lack is the note.
	fc := p.FloatControls
	complete := fc != nil && fc.SignedZeroInfNanPreserveFloat32 && fc.DenormPreserveFloat32
	if a.Name != p.Name || complete != (a.Note == "") || !complete && !strings.HasPrefix(a.Note, "float controls: no ") {
		t.Errorf("adapter name %q, note %q, float controls %+v", a.Name, a.Note, fc)
	}
	t.Logf("%s (%s): %d score, %.1f GB/s copy, %v", a.Name, a.Identity.DeviceType, prof.CapabilityScore(), prof.MemBWGBps, prof.TimingQuality)
}

func TestProfileFromProperties(t *testing.T) {
	p := vk.Properties{Limits: vk.Limits{MaxStorageBufferRange: 1 << 27, MaxComputeWorkGroupInvocations: 1024, MaxComputeSharedMemorySize: 32768},
		Subgroup: vk.Subgroup{Size: 32, Stages: vk.StageCompute, Operations: vk.SubgroupBasic | vk.SubgroupArithmetic | vk.SubgroupShuffle}}
	got := profile(p, vk.Features{ShaderFloat16: true}, []string{"VK_KHR_cooperative_matrix", "VK_KHR_performance_query"}, true)
	// f16, cooperative matrices, indirect dispatch and counters are offered by the
	// device but not usable through kiln (IR v1 has no f16, the backend records
	// no indirect dispatch nor counter queries): they are not claimed.
	want := pluginapi.DeviceProfile{MaxStorageBufferBindingSize: 1 << 27, MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32,
		SupportsSubgroupOps: true, HasSubgroupShuffle: true, HasSharedMemory: true,
		SupportsDeviceTimestamps: true, TimingQuality: pluginapi.DeviceTimestamps, MemBWStatus: pluginapi.BandwidthUnmeasured}
	if got != want {
		t.Errorf("profile =\n%+v, want\n%+v", got, want)
	}
	p.Subgroup.Stages = 0
	got = profile(p, vk.Features{}, nil, false)
	if got.SupportsSubgroupOps || got.HasSubgroupShuffle || got.SupportsF16 || got.SupportsTensorCores || got.TimingQuality != pluginapi.HostEnqueueWait {
		t.Errorf("profile without compute subgroups, features or timestamps = %+v", got)
	}
}

func TestIdentity(t *testing.T) {
	id := identity(vk.Properties{VendorID: 0x10de, DeviceID: 0x2330, Name: "NVIDIA H100 80GB HBM3", Type: vk.DeviceTypeDiscreteGPU,
		DriverVersion: 550<<22 | 54<<14 | 15<<6, Driver: &vk.Driver{Name: "NVIDIA", Info: "550.54.15"},
		DeviceUUID: [16]byte{0xa6, 0xb5, 0x6e, 0x12, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c}})
	want := pluginapi.DeviceIdentity{Vendor: "NVIDIA (0x10de)", Device: "NVIDIA H100 80GB HBM3 (0x2330)",
		DriverVersion: "550.54.15.0 (NVIDIA: 550.54.15)", DeviceType: "discrete-gpu", Instance: "GPU-a6b56e12-0102-0304-0506-0708090a0b0c"}
	if id != want {
		t.Errorf("identity = %+v, want %+v", id, want)
	}
	other := identity(vk.Properties{VendorID: 0x1234, Name: "x", DriverVersion: uint32(vk.MakeVersion(1, 2, 3))})
	if other.Vendor != "0x1234" || other.DriverVersion != "1.2.3" || other.DeviceType != "other" || other.Instance != "" {
		t.Errorf("unknown vendor identity = %+v", other)
	}
}

func TestDirectMemory(t *testing.T) {
	local := vk.MemoryProperties{Types: []vk.MemoryType{{Flags: vk.MemoryDeviceLocal}, {Flags: vk.MemoryHostVisible | vk.MemoryHostCoherent}}}
	shared := vk.MemoryProperties{Types: []vk.MemoryType{{Flags: vk.MemoryDeviceLocal | vk.MemoryHostVisible | vk.MemoryHostCoherent}}}
	bar := vk.MemoryProperties{Types: []vk.MemoryType{{Flags: vk.MemoryDeviceLocal}, {Flags: vk.MemoryDeviceLocal | vk.MemoryHostVisible}, {Flags: vk.MemoryHostVisible}}}
	hostOnly := vk.MemoryProperties{Types: []vk.MemoryType{{Flags: vk.MemoryHostVisible | vk.MemoryHostCoherent}}}
	for _, c := range []struct {
		name string
		t    vk.DeviceType
		mem  vk.MemoryProperties
		want bool
	}{
		{"discrete", vk.DeviceTypeDiscreteGPU, local, false},
		{"discrete with a BAR", vk.DeviceTypeDiscreteGPU, bar, false},
		{"integrated", vk.DeviceTypeIntegratedGPU, shared, true},
		{"cpu", vk.DeviceTypeCPU, shared, true},
		{"integrated without visible local memory", vk.DeviceTypeIntegratedGPU, local, false},
		{"no device-local memory", vk.DeviceTypeOther, hostOnly, true},
	} {
		if got := directMemory(c.t, c.mem); got != c.want {
			t.Errorf("%s: directMemory = %v, want %v", c.name, got, c.want)
		}
	}
}

// cacheHeader builds a VkPipelineCacheHeaderVersionOne for p followed by body.
func cacheHeader(p vk.Properties, body string) []byte {
	h := make([]byte, 32)
	binary.LittleEndian.PutUint32(h[0:], 32)
	binary.LittleEndian.PutUint32(h[4:], 1)
	binary.LittleEndian.PutUint32(h[8:], p.VendorID)
	binary.LittleEndian.PutUint32(h[12:], p.DeviceID)
	copy(h[16:], p.PipelineCacheUUID[:])
	return append(h, body...)
}

func TestUsableBlobChecksTheHeader(t *testing.T) {
	p := vk.Properties{VendorID: 0x10005, DeviceID: 7, PipelineCacheUUID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	good := cacheHeader(p, "pipelines")
	if got := usableBlob(good, p); !bytes.Equal(got, good) {
		t.Fatalf("a blob of this device was not used")
	}
	corrupt := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, blob := range map[string][]byte{
		"nil":             nil,
		"short":           good[:31],
		"header size 16":  corrupt(func(b []byte) []byte { b[0] = 16; return b }),
		"header too long": corrupt(func(b []byte) []byte { b[0] = 200; return b }),
		"version 2":       corrupt(func(b []byte) []byte { b[4] = 2; return b }),
		"other vendor":    corrupt(func(b []byte) []byte { b[8]++; return b }),
		"other device":    corrupt(func(b []byte) []byte { b[12]++; return b }),
		"other uuid":      corrupt(func(b []byte) []byte { b[31]++; return b }),
	} {
		if usableBlob(blob, p) != nil {
			t.Errorf("%s: blob accepted", name)
		}
	}
}

func TestCompileReturnsAndReusesPipelineCacheData(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	k, _ := kernels.Lookup("vector_add")
	p := b.adapters.List()[0].props
	first, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		t.Fatal(err)
	}
	if usableBlob(first.Blob, p) == nil {
		t.Fatalf("blob % x does not carry this device's pipeline-cache header", first.Blob[:min(len(first.Blob), 32)])
	}
	if first.CompileNanos <= 0 {
		t.Errorf("CompileNanos = %d", first.CompileNanos)
	}
	foreign := p
	foreign.PipelineCacheUUID[0]++
	for name, blob := range map[string][]byte{
		"own":     first.Blob,
		"foreign": cacheHeader(foreign, "not for this device"),
		"garbage": []byte("definitely not a pipeline cache, but long enough to have a header"),
		"forged":  cacheHeader(p, "a correct header over a body no driver wrote"),
	} {
		c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program(), CachedBlob: blob})
		if err != nil {
			t.Errorf("compile with the %s blob: %v", name, err)
			continue
		}
		case1 := k.NewCase(nil, 0)
		if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: case1.Grid, Inputs: case1.Inputs, OutputCounts: case1.OutputCounts}); err != nil {
			t.Errorf("dispatch after compiling with the %s blob: %v", name, err)
		}
		if usableBlob(c.Blob, p) == nil {
			t.Errorf("compile with the %s blob returned an unusable blob", name)
		}
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Error(err)
		}
	}
	if err := b.Release(ctx, first.Pipeline); err != nil {
		t.Error(err)
	}
}

func TestCheckProgramRejectsWhatTheDeviceCannotRun(t *testing.T) {
	lim := vk.Limits{MaxComputeWorkGroupSize: [3]uint32{256, 256, 64}, MaxComputeWorkGroupInvocations: 256, MaxComputeSharedMemorySize: 1024}
	gputest.CheckProgramLimits(t, func(p *ir.Program, override [3]uint32) ([3]uint32, error) {
		return checkLimits(p, override, lim)
	}, gputest.Limits{Axis: "maxComputeWorkGroupSize", Invocations: "maxComputeWorkGroupInvocations", Shared: "maxComputeSharedMemorySize"})
}

// TestDispatchRejectsBadLaunches dispatches through the SDK's checks, as every
// caller does (docs/design.md, "Checks in one place"): the device's own limits
// are the backend's to reject, the rest the SDK's.
func TestDispatchRejectsBadLaunches(t *testing.T) {
	b := pluginapi.Checked(newTestBackend(t))
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	four := make([]byte, 16)
	gputest.DispatchRejects(t, b, append(gputest.BadLaunches(c.Pipeline),
		gputest.BadLaunch{Name: "grid of too many launches", Req: pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1 << 31, 1 << 31}, Inputs: [][]byte{four}}, Want: "launches"}))
	fixed := ir.NewBuilder("test.fixed", 1, 1, 1)
	fixed.FixedBuffer("a", ir.U32, ir.Read, 2)
	fc, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: fixed.MustBuild()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: fc.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four}})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "exactly 2 elements") {
		t.Errorf("fixed-count mismatch: %v", err)
	}
}

func TestGridWithAZeroAxisRunsNothing(t *testing.T) {
	gputest.GridWithAZeroAxisRunsNothing(t, newTestBackend(t))
}

func TestDispatchTimesTheDevice(t *testing.T) {
	b := newTestBackend(t)
	if !b.adapters.List()[0].timestamps {
		t.Skip("the device has no timestamps")
	}
	n := 1 << 16
	in := words(u32s(n, func(i int) uint32 { return uint32(i) }))
	res, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, [3]uint32{uint32(n / 64), 1, 1}, [][]byte{in}, []uint32{0, uint32(n)})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeviceNanos <= 0 || res.HostNanos <= 0 {
		t.Errorf("device %d ns, host %d ns: want both measured", res.DeviceNanos, res.HostNanos)
	}
}

func TestReleaseAndClose(t *testing.T) {
	b := newTestBackend(t)
	gputest.ReleaseAndClose(t, b)
	if _, err := b.Describe(context.Background()); err == nil {
		t.Error("Describe after Close succeeded")
	}
}

func TestVulkanFailuresBecomeDeviceErrors(t *testing.T) {
	a := &adapter{index: 2, info: pluginapi.Adapter{Name: "gpu"}}
	d := &device{a: a}
	var devErr *pluginapi.DeviceError
	err := vkFailure(a, d, "running program \"p\"", &vk.Error{Call: "vkQueueSubmit", Result: vk.ErrDeviceLost})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "device was lost") || !strings.Contains(err.Error(), "vkQueueSubmit: VK_ERROR_DEVICE_LOST") {
		t.Errorf("device lost = %v", err)
	}
	if err := d.checkLost(); !errors.As(err, &devErr) || !strings.Contains(err.Error(), "lost earlier") {
		t.Errorf("after a loss checkLost = %v", err)
	}
	err = vkFailure(a, nil, "allocating", &vk.Error{Call: "vkAllocateMemory", Result: vk.ErrOutOfDeviceMemory})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "ran out of memory") || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("out of memory = %v", err)
	}
	err = vkFailure(a, nil, "compiling", &vk.Error{Call: "vkCreateComputePipelines", Result: vk.ErrInitFailed})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "vkCreateComputePipelines: VK_ERROR_INITIALIZATION_FAILED") {
		t.Errorf("driver failure = %v", err)
	}
}

// spin is [gputest.Spin].
func spin() *ir.Program { return gputest.Spin() }

// spinGrid returns a grid of spin workgroups that keeps the device busy for about
// target: it grows a timed dispatch eightfold until it takes a quarter of target
// (so the device is full and time grows with the grid), then scales it, within the
// device's grid limits.
func spinGrid(t *testing.T, b *Backend, pipeline uint64, target time.Duration) [3]uint32 {
	t.Helper()
	lim := b.adapters.List()[0].props.Limits.MaxComputeWorkGroupCount
	most := uint64(lim[0]) * uint64(lim[1])
	grid := func(groups uint64) [3]uint32 {
		x := min(groups, uint64(lim[0]))
		return [3]uint32{uint32(x), uint32((groups + x - 1) / x), 1}
	}
	groups := uint64(64)
	for {
		res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: pipeline, Grid: grid(groups), OutputCounts: []uint32{1}})
		if err != nil {
			t.Fatal(err)
		}
		took := res.DeviceNanos
		if took <= 0 {
			took = res.HostNanos
		}
		if time.Duration(took) >= target/4 || groups >= most {
			return grid(min(most, uint64(float64(groups)*float64(target)/float64(max(took, 1)))))
		}
		groups = min(groups*8, most)
	}
}

func TestDispatchStopsWaitingWhenTheContextEnds(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(60000))
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: spin(), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: spinGrid(t, b, c.Pipeline, 500*time.Millisecond), OutputCounts: []uint32{1}}
	gputest.AbandonedDispatch(t, b, req, "500ms", false)
}

// TestLongLoops runs loops of more than 65535 iterations: every driver must
// match the reference, except Mesa's llvmpipe (lavapipe), which ends a shader's
// loops after 65535 iterations in all (its loop limiter): there the loop guard
// must refuse the dispatch and the submit, naming the limit, instead of
// returning the wrong values, and a loop within the limit still runs.
func TestLongLoops(t *testing.T) {
	b := newTestBackend(t)
	if !endsLongLoops(b.adapters.List()[0].props) {
		gputest.LongLoops(t, b)
		return
	}
	refused := func(what string, err error) {
		t.Helper()
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "LP_MAX_TGSI_LOOP_ITERATIONS") || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s of 200000 iterations on llvmpipe = %v; want a RejectedError naming the loop limit, with a Fix", what, err)
		}
	}
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(200000))
	res, err := gputest.Run(t, b, gputest.Spin(), kernels.Case{Spec: spec, Grid: [3]uint32{2, 1, 1}, OutputCounts: []uint32{1}})
	if err == nil {
		t.Logf("outputs %x", res.Outputs)
	}
	refused("a dispatch", err)

	ctx := context.Background()
	p := compileT(t, b, spinUniform())
	out := allocT(t, b, []uint32{0})
	_, err = b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.DispatchCommand{Pipeline: p, Grid: [3]uint32{1, 1, 1},
		Bindings: []pluginapi.BufferRange{{Buffer: out, Size: 4}}, Uniforms: kernels.U32Bytes([]uint32{200000})}}})
	refused("a submit", err)

	spec.Set("n", ir.SpecU32(60000))
	grid := [3]uint32{2, 1, 1}
	want, err := interp.Run(ctx, gputest.Spin(), interp.Options{Spec: spec}, interp.Launch{Grid: grid, OutputCounts: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = gputest.Run(t, b, gputest.Spin(), kernels.Case{Spec: spec, Grid: grid, OutputCounts: []uint32{1}})
	if err != nil || !bytes.Equal(res.Outputs[0], want[0]) {
		t.Errorf("a loop of 60000 iterations on llvmpipe: %v, %v; want %x", res, err, want[0])
	}
}

func TestConcurrentDispatches(t *testing.T) {
	gputest.ConcurrentDispatches(t, newTestBackend(t))
}

func TestValidationMessagesAreCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	b := New(Config{Validation: true, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	ctx := context.Background()
	defer b.Close(ctx)
	d, err := b.Describe(ctx)
	if err != nil || !d.Adapters[0].Available {
		t.Skipf("no usable Vulkan device: %v %+v", err, d)
	}
	if !strings.Contains(logs.String(), "validation=true") {
		t.Errorf("the start is not logged with validation on:\n%s", logs.String())
	}
	dev, err := b.adapters.List()[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	// A zero-size buffer is invalid usage the layer reports.
	if buf, err := dev.vk.CreateBuffer(0, vk.UsageStorage); err == nil {
		dev.vk.DestroyBuffer(buf)
	}
	b.noteValidation()
	if !strings.Contains(logs.String(), "VUID-VkBufferCreateInfo-size-00912") {
		t.Errorf("the validation message was not logged:\n%s", logs.String())
	}
	n, text := b.ValidationMessages()
	if n == 0 || !strings.Contains(text, "VUID-VkBufferCreateInfo-size-00912") {
		t.Errorf("ValidationMessages = %d, %q", n, text)
	}
	if n, _ := b.ValidationMessages(); n != 0 {
		t.Errorf("ValidationMessages did not clear: %d", n)
	}
}

func TestMissingValidationLayerMakesVulkanUnavailable(t *testing.T) {
	t.Setenv("VK_LAYER_PATH", t.TempDir())
	cfg := ConfigFromEnv()
	cfg.Validation = true
	_, d := describeNew(t, cfg)
	a := d.Adapters[0]
	if strings.Contains(a.Reason, "loader") && strings.Contains(a.Reason, "not found") {
		t.Skipf("no Vulkan loader: %s", a.Reason)
	}
	if a.Available || !strings.Contains(a.Reason, vk.ValidationLayer) || !strings.Contains(a.Reason, "Fix: install vulkan-validationlayers") {
		t.Errorf("adapter %+v: want unavailable, naming the missing validation layer", a)
	}
}

// TestEstimatesFillOnlyUnmeasuredAdapters pins how NVML's estimates reach the
// profile: by GPU UUID, quantized, never over a measured bandwidth.
func TestEstimatesFillOnlyUnmeasuredAdapters(t *testing.T) {
	gpu := &adapter{info: pluginapi.Adapter{Identity: pluginapi.DeviceIdentity{Instance: "GPU-a"}}}
	measured := &adapter{info: pluginapi.Adapter{Identity: pluginapi.DeviceIdentity{Instance: "GPU-b"}, Profile: pluginapi.DeviceProfile{MemBWGBps: 3300}}}
	other := &adapter{info: pluginapi.Adapter{Identity: pluginapi.DeviceIdentity{Instance: "1234"}}}
	none := &adapter{}
	applyEstimates([]*adapter{gpu, measured, other, none}, map[string]float64{"GPU-a": 4022.5, "GPU-b": 4800, "": 7})
	if gpu.info.Profile.MemBWGBps != 4000 || measured.info.Profile.MemBWGBps != 3300 || other.info.Profile.MemBWGBps != 0 || none.info.Profile.MemBWGBps != 0 {
		t.Errorf("bandwidths %v %v %v %v, want 4000 3300 0 0", gpu.info.Profile.MemBWGBps, measured.info.Profile.MemBWGBps, other.info.Profile.MemBWGBps, none.info.Profile.MemBWGBps)
	}
	if gpu.info.Profile.MemBWStatus != pluginapi.BandwidthEstimated {
		t.Errorf("an estimated bandwidth says %v", gpu.info.Profile.MemBWStatus)
	}
	measuring := &adapter{info: pluginapi.Adapter{Identity: pluginapi.DeviceIdentity{Instance: "GPU-a"}, Profile: pluginapi.DeviceProfile{MemBWStatus: pluginapi.BandwidthMeasuring}}}
	applyEstimates([]*adapter{measuring}, map[string]float64{"GPU-a": 4022.5})
	if p := measuring.info.Profile; p.MemBWGBps != 4000 || p.MemBWStatus != pluginapi.BandwidthMeasuring {
		t.Errorf("an estimate during the measurement: %v GB/s, %v; want 4000, still measuring", p.MemBWGBps, p.MemBWStatus)
	}
}
