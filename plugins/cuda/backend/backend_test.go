package backend

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

const missingDriver = "libkiln-no-such-cuda.so.1"

func TestDriverMissingIsReportedNotFatal(t *testing.T) {
	ctx := context.Background()
	b := New(Config{Library: missingDriver})
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe without a driver: %v", err)
	}
	if d.ID != "cuda" || !d.Dispatches || d.ReferenceOracle || d.Precedence == nil || *d.Precedence != Precedence {
		t.Errorf("description %+v", d)
	}
	if len(d.Adapters) != 1 || d.Adapters[0].Available {
		t.Fatalf("adapters %+v: want one unavailable adapter", d.Adapters)
	}
	want := "CUDA driver library " + missingDriver + " not found. Fix: install the NVIDIA driver (it provides libcuda.so.1) on a machine with an NVIDIA GPU, or set KILN_CUDA_DRIVER to the library's path"
	if got := d.Adapters[0].Reason; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
	var unavailable *pluginapi.UnavailableError
	if err := b.Open(ctx, 0); !errors.As(err, &unavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open = %v, want an UnavailableError carrying the reason", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()}); !errors.As(err, &unavailable) {
		t.Errorf("Compile = %v, want an UnavailableError", err)
	}
	var rejected *pluginapi.RejectedError
	if err := b.Open(ctx, 1); !errors.As(err, &rejected) {
		t.Errorf("Open(1) = %v, want a RejectedError for a missing adapter", err)
	}
	art, err := b.Artifacts(ctx, 0, addOne(), ir.SpecMap{}, [3]uint32{32, 2, 1}, false)
	if err != nil || !strings.Contains(art.PTX, ".target sm_80") || !strings.Contains(art.PTX, ".reqntid 32, 2, 1") || art.Cubin != nil {
		t.Errorf("PTX without a device: %v, %+v", err, art)
	}
	// kiln compile --emit ptx shows the path of a program's matrices
	art, err = b.Artifacts(ctx, 0, gputest.CorpusTC(t, ir.BF16, 64, 128, 32), ir.SpecMap{}, [3]uint32{}, false)
	if err != nil || !strings.HasPrefix(art.PTX, "// kiln tensor-core matmul (path: mma.sync bf16, tile 64x128x32") {
		t.Errorf("matmul_tc's PTX without a device: %v, %.100q", err, art.PTX)
	}
	if _, err := b.Artifacts(ctx, 0, addOne(), ir.SpecMap{}, [3]uint32{}, true); !errors.As(err, &unavailable) {
		t.Errorf("a cubin without a device = %v, want an UnavailableError", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := b.Describe(ctx); err == nil {
		t.Error("Describe after Close succeeded")
	}
}

func TestProfileFromLimits(t *testing.T) {
	got := profile(h200())
	want := pluginapi.DeviceProfile{MaxStorageBufferBindingSize: 4 * (1<<32 - 1), MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32,
		SupportsSubgroupOps: true, HasSubgroupShuffle: true, HasSharedMemory: true, SupportsF16: true, SupportsBF16: true,
		SupportsTensorCores: true, SupportsDeviceTimestamps: true, TimingQuality: pluginapi.DeviceTimestamps}
	if got != want {
		t.Errorf("profile =\n%+v, want\n%+v", got, want)
	}
	volta := h200()
	volta.ccMajor, volta.ccMinor, volta.totalMem = 7, 0, 12<<30
	got = profile(volta)
	// kiln's tensor-core matmul needs sm_80 (mma.sync with bf16 and tf32, cp.async)
	if !got.SupportsBF16 || !got.SupportsF16 || got.SupportsTensorCores || got.MaxStorageBufferBindingSize != 12<<30 {
		t.Errorf("sm_70 profile = %+v", got)
	}
	if got.SupportsIndirectDispatch || got.SupportsHardwareCounters {
		t.Errorf("profile claims indirect dispatch or hardware counters: %+v", got)
	}
}

func TestIdentity(t *testing.T) {
	const uuid = "GPU-af1bf078-09cb-1a64-4be6-83beaa3e6954"
	id := identity("NVIDIA H200", uuid, h200(), "580.159.03 (CUDA 13.0)")
	want := pluginapi.DeviceIdentity{Vendor: "NVIDIA", Device: "NVIDIA H200 (sm_90)", DriverVersion: "580.159.03 (CUDA 13.0)", DeviceType: "discrete-gpu", Instance: uuid}
	if id != want {
		t.Errorf("identity = %+v, want %+v", id, want)
	}
	orin := h200()
	orin.integrated, orin.ccMajor, orin.ccMinor = true, 8, 7
	if id := identity("Orin", "", orin, "CUDA 12.2"); id.DeviceType != "integrated-gpu" || id.Device != "Orin (sm_87)" {
		t.Errorf("integrated identity without a UUID = %+v", id)
	}
}

// TestFingerprintFollowsTheGPU: identical GPUs get distinct device fingerprints,
// from what identifies the GPU (its UUID), not its ordinal, and share the model
// fingerprint the cubin cache keys on.
func TestFingerprintFollowsTheGPU(t *testing.T) {
	a := identity("NVIDIA H200", "GPU-00000000-0000-0000-0000-00000000000a", h200(), "580 (CUDA 13.0)")
	b := identity("NVIDIA H200", "GPU-00000000-0000-0000-0000-00000000000b", h200(), "580 (CUDA 13.0)")
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("two H200s share a device fingerprint")
	}
	if a.ModelFingerprint() != b.ModelFingerprint() {
		t.Error("two H200s have different model fingerprints")
	}
}

func TestModuleVersion(t *testing.T) {
	for text, want := range map[string]string{
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  Tue Oct 14 10:25:31 UTC 2025\nGCC version:  gcc\n": "580.159.03",
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n":                           "550.54.15",
		"garbage": "",
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module\n": "",
	} {
		if got := moduleVersion(text); got != want {
			t.Errorf("moduleVersion(%q) = %q, want %q", text, got, want)
		}
	}
	if got := cudaVersion(13000); got != "13.0" {
		t.Errorf("cudaVersion(13000) = %q", got)
	}
	if got := cudaVersion(12040); got != "12.4" {
		t.Errorf("cudaVersion(12040) = %q", got)
	}
}

func TestQuantizeBandwidth(t *testing.T) {
	for in, want := range map[float64]float64{3874: 3900, 3849.9: 3800, 4228: 4200, 41.3: 41, 9.87: 9.9, 0.456: 0.46, 0: 0, -5: 0, 99.5: 100} {
		if got := quantizeBandwidth(in); got != want {
			t.Errorf("quantizeBandwidth(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestEstimateBandwidth pins the placeholder Describe reports before a
// measurement: two transfers per memory clock over the bus, quantized.
func TestEstimateBandwidth(t *testing.T) {
	lim := h200()
	if got := estimateBandwidth(lim); got != 4900 {
		t.Errorf("H200 (3201 MHz, 6144 bits): %v GB/s, want 4900", got)
	}
	lim.memClockKHz = 0
	if got := estimateBandwidth(lim); got != 0 {
		t.Errorf("without a memory clock: %v GB/s, want 0 (unknown)", got)
	}
}

func TestBlobHeader(t *testing.T) {
	lim := h200()
	cubin := []byte("\x7fELF pretend cubin image")
	const text = ".version 7.0\n.target sm_80\n"
	blob := encodeBlob(13000, lim, text, cubin)
	if len(blob) != blobHeader+len(cubin) || string(blob[:8]) != blobMagic {
		t.Fatalf("blob of %d bytes, header %q", len(blob), blob[:8])
	}
	if got := usableBlob(blob, 13000, lim, text); !bytes.Equal(got, cubin) {
		t.Fatalf("the blob's own driver, device and PTX do not get the cubin back: %q", got)
	}
	other := lim
	other.ccMajor = 8
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), blob...)) }
	for name, c := range map[string]struct {
		blob    []byte
		version int
		lim     limits
		text    string
	}{
		"nil":                  {nil, 13000, lim, text},
		"short":                {blob[:blobHeader-1], 13000, lim, text},
		"header only":          {blob[:blobHeader], 13000, lim, text},
		"other driver":         {blob, 12040, lim, text},
		"other device":         {blob, 13000, other, text},
		"other PTX":            {blob, 13000, lim, text + "//"},
		"bad magic":            {mutate(func(b []byte) []byte { b[0] ^= 1; return b }), 13000, lim, text},
		"bad format":           {mutate(func(b []byte) []byte { b[8] = 9; return b }), 13000, lim, text},
		"flipped cubin bit":    {mutate(func(b []byte) []byte { b[len(b)-1] ^= 0x10; return b }), 13000, lim, text},
		"truncated cubin":      {blob[:len(blob)-1], 13000, lim, text},
		"appended byte":        {append(append([]byte(nil), blob...), 0), 13000, lim, text},
		"Vulkan pipeline data": {append([]byte{32, 0, 0, 0, 1, 0, 0, 0}, make([]byte, 200)...), 13000, lim, text},
	} {
		if usableBlob(c.blob, c.version, c.lim, c.text) != nil {
			t.Errorf("%s: the blob was accepted", name)
		}
	}
}

func TestCheckProgramRejectsWhatTheDeviceCannotRun(t *testing.T) {
	lim := h200()
	lim.maxThreadsPerBlock, lim.maxBlock, lim.sharedPerBlock = 256, [3]uint32{256, 256, 64}, 1024
	gputest.CheckProgramLimits(t, func(p *ir.Program, override [3]uint32) ([3]uint32, error) {
		return checkLimits(p, override, lim)
	}, gputest.Limits{Axis: "block dimensions", Invocations: "threads per block", Shared: "shared memory"})
}

func TestDriverFailuresBecomeDeviceErrors(t *testing.T) {
	a := &adapter{index: 2, info: pluginapi.Adapter{Name: "gpu"}}
	d := &device{a: a}
	var devErr *pluginapi.DeviceError
	err := cudaFailure(a, d, `running program "p"`, &driver.Error{Call: "cuEventSynchronize", Result: driver.ErrIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "context failed") || !strings.Contains(err.Error(), "cuEventSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("sticky failure = %v", err)
	}
	if err := d.checkLost(); !errors.As(err, &devErr) || !strings.Contains(err.Error(), "failed earlier") || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("after a sticky failure checkLost = %v", err)
	}
	err = cudaFailure(a, nil, "allocating", &driver.Error{Call: "cuMemAlloc_v2", Result: driver.ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "ran out of device memory") || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("out of memory = %v", err)
	}
	err = cudaFailure(a, nil, "compiling", &driver.Error{Call: "cuLinkAddData_v2", Result: driver.ErrInvalidPTX, Name: "CUDA_ERROR_INVALID_PTX"})
	if !errors.As(err, &devErr) || !strings.Contains(err.Error(), "cuLinkAddData_v2: CUDA_ERROR_INVALID_PTX") {
		t.Errorf("driver failure = %v", err)
	}
	var unavailable *pluginapi.UnavailableError
	err = linkFailure(d, addOne(), &driver.LinkError{Err: &driver.Error{Call: "cuLinkAddData_v2", Result: driver.ErrUnsupportedPTXVersion, Name: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}})
	if !errors.As(err, &unavailable) || !strings.Contains(err.Error(), "Fix: update the NVIDIA driver") {
		t.Errorf("a JIT too old for the PTX = %v, want an UnavailableError", err)
	}
	k, _ := kernels.Lookup("vector_add")
	if err := linkFailure(d, k.Program(), &driver.LinkError{Err: &driver.Error{Call: "cuLinkAddData_v2", Result: driver.ErrInvalidPTX}, Log: "line 7: syntax error"}); !errors.As(err, &devErr) || !strings.Contains(err.Error(), "syntax error") {
		t.Errorf("a rejected module = %v, want a DeviceError with the log", err)
	}
}

func TestSizeClasses(t *testing.T) {
	for in, want := range map[uint64]uint64{0: 256, 4: 256, 256: 256, 257: 512, 1 << 20: 1 << 20, 1<<20 + 1: 2 << 20,
		64 << 20: 64 << 20, 64<<20 + 1: 66 << 20, 1 << 30: 1 << 30, 1<<30 + 4: 1<<30 + 2<<20} {
		if got := sizeClass(in); got != want {
			t.Errorf("sizeClass(%d) = %d, want %d", in, got, want)
		}
	}
	if got := poolLimit(141 << 30); got != 4<<30 {
		t.Errorf("poolLimit(141 GiB) = %d", got)
	}
	if got := poolLimit(8 << 30); got != 1<<30 {
		t.Errorf("poolLimit(8 GiB) = %d", got)
	}
}

// fakeSetter records SetFunctionAttribute calls: the driver's, in a test.
type fakeSetter struct {
	calls [][3]int
	err   error
}

func (f *fakeSetter) SetFunctionAttribute(fn driver.Function, a driver.FuncAttribute, value int) error {
	f.calls = append(f.calls, [3]int{int(fn), int(a), value})
	return f.err
}

// TestRaiseDynamicShared pins that a module with dynamic shared memory raises
// its kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it before any
// launch (the matmul_tc module of a 256x128x64 tile on an H200 needs 192 KiB
// and the TMA path's four 8-byte mbarriers),
// that the module Emit gives carries the size the launches pass, and that one
// without sets nothing.
func TestRaiseDynamicShared(t *testing.T) {
	m, err := ptx.Emit(gputest.CorpusTC(t, ir.BF16, 256, 128, 64), ptx.Options{Target: ptx.Target{SM: 90}, WorkgroupSize: [3]uint32{512, 1, 1},
		MaxDynamicSharedBytes: 227 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if m.DynamicSharedBytes != 4*(256*64+64*128)*2+4*8 || m.SharedBytes != 0 {
		t.Fatalf("matmul_tc 256x128x64 bf16: %d bytes dynamic, %d static shared memory; want 196640 dynamic", m.DynamicSharedBytes, m.SharedBytes)
	}
	var f fakeSetter
	if err := raiseDynamicShared(&f, 7, m); err != nil || len(f.calls) != 1 || f.calls[0] != [3]int{7, int(driver.FuncMaxDynamicSharedSizeBytes), 196640} {
		t.Errorf("raiseDynamicShared: %v, calls %v", err, f.calls)
	}
	f = fakeSetter{err: errors.New("CUDA_ERROR_INVALID_VALUE")}
	if err := raiseDynamicShared(&f, 7, m); err == nil {
		t.Error("a failing cuFuncSetAttribute was not reported")
	}
	small, err := ptx.Emit(addOne(), ptx.Options{Target: ptx.Target{SM: 90}, MaxDynamicSharedBytes: 227 << 10})
	if err != nil {
		t.Fatal(err)
	}
	f = fakeSetter{}
	if err := raiseDynamicShared(&f, 7, small); err != nil || len(f.calls) != 0 || small.DynamicSharedBytes != 0 {
		t.Errorf("a module without dynamic shared memory: %v, calls %v", err, f.calls)
	}
}
