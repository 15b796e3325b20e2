package backend

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// The tests in this file need a CUDA device; they skip without one unless
// KILN_REQUIRE_CUDA=1.

func TestDescribeReportsTheDevice(t *testing.T) {
	ctx := context.Background()
	fresh := New(ConfigFromEnv())
	defer fresh.Close(ctx)
	first, err := fresh.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range fresh.adapters.List() {
		if a.d != nil || a.stopMeasure != nil {
			t.Errorf("adapter %d: Describe opened the device", i)
		}
		// Before an open: the estimate, and free memory unknown.
		if p := first.Adapters[i].Profile; a.info.Available && p.MemBWStatus != pluginapi.BandwidthEstimated || p.MemoryFreeBytes != 0 || p.MemoryBytes != a.lim.totalMem {
			t.Errorf("adapter %d before an open: bandwidth %v (%v), memory %d free of %d", i, p.MemBWGBps, p.MemBWStatus, p.MemoryFreeBytes, p.MemoryBytes)
		}
	}
	b := newTestBackend(t)
	b.adapters.List()[0].waitMeasured()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != ID || d.Version == "" || !d.Dispatches || d.ReferenceOracle {
		t.Errorf("description %+v", d)
	}
	for i, a := range d.Adapters {
		ad := b.adapters.List()[i]
		if a.Index != i || !a.Available || a.Name == "" || ad.uuid == "" || a.Identity.Vendor != "NVIDIA" ||
			!strings.Contains(a.Identity.Device, a.Name) || !strings.Contains(a.Identity.DriverVersion, "CUDA ") {
			t.Errorf("adapter %d: %+v (uuid %q)", i, a, ad.uuid)
		}
		if a.Profile != func() pluginapi.DeviceProfile {
			p := profile(ad.lim)
			p.MemBWGBps, p.MemBWStatus, p.MemoryBytes, p.MemoryFreeBytes = a.Profile.MemBWGBps, a.Profile.MemBWStatus, ad.lim.totalMem, a.Profile.MemoryFreeBytes
			return p
		}() {
			t.Errorf("adapter %d: profile %+v does not follow the attributes %+v", i, a.Profile, ad.lim)
		}
		if a.Profile.MemBWGBps <= 0 || quantizeBandwidth(a.Profile.MemBWGBps) != a.Profile.MemBWGBps {
			t.Errorf("adapter %d: bandwidth %v is not a quantized value", i, a.Profile.MemBWGBps)
		}
		if est := estimateBandwidth(ad.lim); est <= 0 {
			t.Errorf("adapter %d: no bandwidth estimate from the attributes %+v", i, ad.lim)
		}
		t.Logf("cuda:%d %s %s sm_%d%d %d SMs, %s, %v GB/s (estimate %v GB/s), score %d; driver load + cuInit %v, open %v, bandwidth %v",
			i, a.Name, ad.uuid, ad.lim.ccMajor, ad.lim.ccMinor, ad.lim.sms, a.Identity.DriverVersion, a.Profile.MemBWGBps,
			estimateBandwidth(ad.lim), a.Profile.CapabilityScore(), b.initTook, ad.opening, ad.measureTook)
	}
	if bw := math.Float64frombits(b.adapters.List()[0].measuredBW.Load()); bw <= 0 || d.Adapters[0].Profile.MemBWGBps != bw {
		t.Errorf("after the measurement Describe reports %v GB/s, the measurement %v", d.Adapters[0].Profile.MemBWGBps, bw)
	}
	if p := d.Adapters[0].Profile; p.MemBWStatus != pluginapi.BandwidthMeasured || p.MemoryFreeBytes == 0 || p.MemoryFreeBytes > p.MemoryBytes {
		t.Errorf("after the measurement: bandwidth %v, memory %d free of %d; want measured and a free figure", p.MemBWStatus, p.MemoryFreeBytes, p.MemoryBytes)
	}
	// Free memory is a reading; everything else stays.
	again, err := b.Describe(ctx)
	if err == nil {
		again.Adapters[0].Profile.MemoryFreeBytes = d.Adapters[0].Profile.MemoryFreeBytes
	}
	if err != nil || again.Adapters[0].Profile != d.Adapters[0].Profile {
		t.Errorf("a second Describe changed the profile: %+v, %v", again.Adapters[0].Profile, err)
	}
}

// TestConformance runs the SDK's conformance kit (the whole corpus against the CPU
// reference under the semantics in docs/design.md, "The program (IR)", the contract checks, cached blobs) on cuda:0.
func TestConformance(t *testing.T) {
	conformance.Run(t, newTestBackend(t), conformance.Options{})
}

// TestCorpusMatchesReference runs every corpus kernel at every corpus size on the
// device and on the CPU reference and compares the outputs with the kernel's Check.
func TestCorpusMatchesReference(t *testing.T) {
	gputest.CorpusMatchesReference(t, newTestBackend(t), "cuda")
}

// TestEdgeTableOnDevice runs the semantic edge table on the device and compares
// every output with the CPU reference (the IR v1.2 rows with the outputs they
// carry) under the table's rules: bit for bit but for exp, log, sin and cos.
func TestEdgeTableOnDevice(t *testing.T) {
	b := newTestBackend(t)
	for _, c := range edgetest.Table() {
		t.Run(c.Name, func(t *testing.T) {
			want, err := c.Reference(context.Background())
			if err != nil {
				t.Fatalf("oracle: %v", err)
			}
			got, err := gputest.Run(t, b, c.Prog, c.Launch)
			if err != nil {
				t.Fatalf("cuda: %v", err)
			}
			for _, msg := range c.Compare(got.Outputs, want) {
				t.Error(msg)
			}
		})
	}
}

func TestCompileReturnsAndReusesTheCubin(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	k, _ := kernels.Lookup("matmul")
	a := b.adapters.List()[0]
	kc := k.NewCase(rand.New(rand.NewPCG(1, 2)), 40)
	first, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program(), Spec: kc.Spec})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := b.pipelines.Get(first.Pipeline)
	m := p.mod
	if usableBlob(first.Blob, a.driverVersion, a.lim, m.Text) == nil {
		t.Fatalf("the blob (%d bytes) is not a cubin for this driver, device and PTX", len(first.Blob))
	}
	if first.CompileNanos <= 0 {
		t.Errorf("CompileNanos = %d", first.CompileNanos)
	}
	other := a.lim
	other.ccMinor++
	forged := append([]byte(nil), first.Blob...)
	forged[len(forged)-1] ^= 0xFF
	for name, blob := range map[string][]byte{
		"own":          first.Blob,
		"other device": encodeBlob(a.driverVersion, other, m.Text, first.Blob[blobHeader:]),
		"garbage":      []byte("definitely not a cubin, but long enough to have a header, or so it seems ......"),
		"forged":       forged,
		"vulkan blob":  append([]byte{32, 0, 0, 0, 1, 0, 0, 0, 0xde, 0x10}, make([]byte, 120)...),
	} {
		c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program(), Spec: kc.Spec, CachedBlob: blob})
		if err != nil {
			t.Errorf("compile with the %s blob: %v", name, err)
			continue
		}
		if reused := bytes.Equal(c.Blob, blob); reused != (name == "own") {
			t.Errorf("compile with the %s blob: reused it = %v", name, reused)
		}
		res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: kc.Grid, Inputs: kc.Inputs, OutputCounts: kc.OutputCounts, Uniforms: kc.Uniforms})
		if err != nil {
			t.Errorf("dispatch after compiling with the %s blob: %v", name, err)
		} else if err := k.Check(res.Outputs, k.Reference(kc)); err != nil {
			t.Errorf("after compiling with the %s blob: %v", name, err)
		}
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Error(err)
		}
	}
	if err := b.Release(ctx, first.Pipeline); err != nil {
		t.Error(err)
	}
}

// TestSubgroupSizesBeyondAWarpAreRejected checks that a program requiring more
// lanes than a warp is refused at compile, with a reason.
func TestSubgroupSizesBeyondAWarpAreRejected(t *testing.T) {
	b := newTestBackend(t)
	p := ir.NewBuilder("test.sg64", 128, 1, 1)
	p.RequireSubgroupSize(64)
	out := p.Buffer("out", ir.U32, ir.Write)
	p.Store(out, ir.GlobalID(0), ir.SubgroupAdd(ir.LitU32(1)))
	_, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: p.MustBuild()})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "at most 32") {
		t.Errorf("Compile of a program requiring 64 lanes = %v, want a RejectedError", err)
	}
}

func TestArtifacts(t *testing.T) {
	b := newTestBackend(t)
	k, _ := kernels.Lookup("saxpy")
	art, err := b.Artifacts(context.Background(), 0, k.Program(), ir.SpecMap{}, [3]uint32{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if art.Target != b.adapters.List()[0].target || !strings.Contains(art.PTX, ".entry kiln_main") || len(art.Cubin) < 64 || string(art.Cubin[1:4]) != "ELF" {
		t.Errorf("artifact: target %v, %d bytes of PTX, cubin %d bytes", art.Target, len(art.PTX), len(art.Cubin))
	}
}

// TestDispatchRejectsBadLaunches dispatches through the SDK's checks, as every
// caller does (docs/design.md, "Checks in one place"): the device's own limits
// are the backend's to reject, the rest the SDK's.
func TestDispatchRejectsBadLaunches(t *testing.T) {
	b := newTestBackend(t)
	checked := pluginapi.Checked(b)
	c, err := checked.Compile(context.Background(), &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	lim := b.adapters.List()[0].lim
	four := make([]byte, 16)
	gputest.DispatchRejects(t, checked, append(gputest.BadLaunches(c.Pipeline),
		gputest.BadLaunch{Name: "grid beyond the device's", Req: pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, lim.maxGrid[1] + 1, 1}, Inputs: [][]byte{four}}, Want: "maximum grid"},
		gputest.BadLaunch{Name: "uniforms the program lacks", Req: pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four}, Uniforms: four}, Want: "uniforms"},
	))
}

func TestGridWithAZeroAxisRunsNothing(t *testing.T) {
	gputest.GridWithAZeroAxisRunsNothing(t, newTestBackend(t))
}

// TestPoolReusesAllocations checks that a dispatch after another of the same sizes
// takes its buffers from the pool, and that the pool holds what it says.
func TestPoolReusesAllocations(t *testing.T) {
	b := newTestBackend(t)
	d := b.adapters.List()[0].d
	in := words(u32s(1000, func(i int) uint32 { return uint32(i) }))
	if _, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, [3]uint32{16, 1, 1}, [][]byte{in}, []uint32{0, 1000}); err != nil {
		t.Fatal(err)
	}
	held := d.pool.bytes
	if held < 2*sizeClass(4000) {
		t.Fatalf("after a dispatch the pool holds %d bytes, want at least its two 4000-byte buffers' classes", held)
	}
	res, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, [3]uint32{16, 1, 1}, [][]byte{in}, []uint32{0, 1000})
	if err != nil {
		t.Fatal(err)
	}
	if d.pool.bytes != held {
		t.Errorf("a second dispatch of the same sizes changed the pool from %d to %d bytes", held, d.pool.bytes)
	}
	for i, v := range wordsOf(res.Outputs[0]) {
		if v != uint32(i)+1 {
			t.Fatalf("out[%d] = %d from reused buffers", i, v)
		}
	}
}

func TestDispatchTimesTheDevice(t *testing.T) {
	b := newTestBackend(t)
	n := 1 << 20
	in := words(u32s(n, func(i int) uint32 { return uint32(i) }))
	res, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, [3]uint32{uint32(n / 64), 1, 1}, [][]byte{in}, []uint32{0, uint32(n)})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeviceNanos <= 0 || res.HostNanos <= 0 || res.DeviceNanos > res.HostNanos {
		t.Errorf("device %d ns, host %d ns: want both measured, device within host", res.DeviceNanos, res.HostNanos)
	}
}

func TestReleaseAndClose(t *testing.T) {
	gputest.ReleaseAndClose(t, newTestBackend(t))
}

func TestDispatchStopsWaitingWhenTheContextEnds(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(1<<20))
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: gputest.Spin(), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	// Grow the grid until one dispatch takes at least 200ms.
	grid := [3]uint32{64, 1, 1}
	for {
		res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, OutputCounts: []uint32{1}})
		if err != nil {
			t.Fatal(err)
		}
		if time.Duration(res.DeviceNanos) >= 200*time.Millisecond || grid[0] >= 1<<24 {
			grid[0] *= 4
			break
		}
		grid[0] *= 4
	}
	gputest.AbandonedDispatch(t, b, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, OutputCounts: []uint32{1}}, "800ms", true)
}

// TestLongLoops runs loops of hundreds of thousands of iterations against the
// reference.
func TestLongLoops(t *testing.T) {
	gputest.LongLoops(t, newTestBackend(t))
}

func TestConcurrentDispatches(t *testing.T) {
	gputest.ConcurrentDispatches(t, newTestBackend(t))
}
