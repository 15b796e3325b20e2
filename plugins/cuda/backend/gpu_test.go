package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// The tests in this file need a CUDA device; they skip without one unless
// KILN_REQUIRE_CUDA=1.

func TestDescribeReportsTheDevice(t *testing.T) {
	ctx := context.Background()
	fresh := New(ConfigFromEnv())
	defer fresh.Close(ctx)
	if _, err := fresh.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	for i, a := range fresh.adapters {
		if a.d != nil || a.stopMeasure != nil {
			t.Errorf("adapter %d: Describe opened the device", i)
		}
	}
	b := newTestBackend(t)
	b.adapters[0].waitMeasured()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != ID || d.Version == "" || !d.Dispatches || d.ReferenceOracle {
		t.Errorf("description %+v", d)
	}
	for i, a := range d.Adapters {
		ad := b.adapters[i]
		if a.Index != i || !a.Available || a.Name == "" || ad.uuid == "" || a.Identity.Vendor != "NVIDIA" ||
			!strings.Contains(a.Identity.Device, a.Name) || !strings.Contains(a.Identity.DriverVersion, "CUDA ") {
			t.Errorf("adapter %d: %+v (uuid %q)", i, a, ad.uuid)
		}
		if a.Profile != func() pluginapi.DeviceProfile { p := profile(ad.lim); p.MemBWGBps = a.Profile.MemBWGBps; return p }() {
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
	if bw := math.Float64frombits(b.adapters[0].measuredBW.Load()); bw <= 0 || d.Adapters[0].Profile.MemBWGBps != bw {
		t.Errorf("after the measurement Describe reports %v GB/s, the measurement %v", d.Adapters[0].Profile.MemBWGBps, bw)
	}
	again, err := b.Describe(ctx)
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
	b := newTestBackend(t)
	ctx := context.Background()
	for _, k := range kernels.All() {
		for _, size := range k.Sizes {
			t.Run(fmt.Sprintf("%s/%d", k.Name, size), func(t *testing.T) {
				c := k.NewCase(rand.New(rand.NewPCG(uint64(size), 0x6b696c6e)), size)
				p := k.Program()
				want, err := interp.Run(ctx, p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
					interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
				if err != nil {
					t.Fatalf("interp: %v", err)
				}
				got, err := runWith(t, b, p, c.Spec, c.WorkgroupSize, c.Grid, c.Inputs, c.OutputCounts, c.Uniforms)
				if err != nil {
					t.Fatalf("cuda: %v", err)
				}
				if err := k.Check(got.Outputs, want); err != nil {
					t.Errorf("cuda differs from cpu-ref: %v", err)
				}
			})
		}
	}
}

// TestEdgeTableOnDevice runs the semantic edge table on the device and compares
// every output with the CPU reference under the table's rules: bit for bit but
// for exp, log, sin and cos.
func TestEdgeTableOnDevice(t *testing.T) {
	b := newTestBackend(t)
	for _, c := range edgetest.Table() {
		t.Run(c.Name, func(t *testing.T) {
			want, err := c.Reference(context.Background())
			if err != nil {
				t.Fatalf("oracle: %v", err)
			}
			got, err := runWith(t, b, c.Prog, c.Launch.Spec, c.Launch.WorkgroupSize, c.Launch.Grid, c.Launch.Inputs, c.Launch.OutputCounts, c.Uniforms)
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
	a := b.adapters[0]
	kc := k.NewCase(rand.New(rand.NewPCG(1, 2)), 40)
	first, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program(), Spec: kc.Spec})
	if err != nil {
		t.Fatal(err)
	}
	m := b.pipelines[first.Pipeline].mod
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
	if art.Target != b.adapters[0].target || !strings.Contains(art.PTX, ".entry kiln_main") || len(art.Cubin) < 64 || string(art.Cubin[1:4]) != "ELF" {
		t.Errorf("artifact: target %v, %d bytes of PTX, cubin %d bytes", art.Target, len(art.PTX), len(art.Cubin))
	}
}

func TestDispatchRejectsBadLaunches(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	lim := b.adapters[0].lim
	four := make([]byte, 16)
	for _, tc := range []struct {
		name string
		req  pluginapi.DispatchRequest
		want string
	}{
		{"unknown pipeline", pluginapi.DispatchRequest{Pipeline: c.Pipeline + 100, Grid: [3]uint32{1, 1, 1}}, "no pipeline"},
		{"too many inputs", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four, nil, nil}}, "inputs"},
		{"input for a write buffer", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four, four}}, "write-only"},
		{"partial element", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four[:5]}}, "multiple of 4"},
		{"grid beyond the device's", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, lim.maxGrid[1] + 1, 1}, Inputs: [][]byte{four}}, "maximum grid"},
		{"more than 2^32 invocations", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1 << 27, 1, 1}, Inputs: [][]byte{four}}, "2^32"},
		{"uniforms the program lacks", pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{four}, Uniforms: four}, "uniforms"},
	} {
		_, err := b.Dispatch(ctx, &tc.req)
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Dispatch = %v, want a RejectedError mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestGridWithAZeroAxisRunsNothing(t *testing.T) {
	b := newTestBackend(t)
	in := words([]uint32{1, 2, 3})
	for _, grid := range [][3]uint32{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, math.MaxUint32, 0}} {
		res, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, grid, [][]byte{in}, []uint32{0, 3})
		if err != nil {
			t.Fatalf("grid %v: %v", grid, err)
		}
		if len(res.Outputs) != 1 || !bytes.Equal(res.Outputs[0], make([]byte, 12)) || res.DeviceNanos != 0 {
			t.Errorf("grid %v: outputs %v, device time %d; want one zeroed output and no device time", grid, res.Outputs, res.DeviceNanos)
		}
	}
}

// TestPoolReusesAllocations checks that a dispatch after another of the same sizes
// takes its buffers from the pool, and that the pool holds what it says.
func TestPoolReusesAllocations(t *testing.T) {
	b := newTestBackend(t)
	d := b.adapters[0].d
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
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, c.Pipeline); err != nil {
		t.Fatal(err)
	}
	var rejected *pluginapi.RejectedError
	if err := b.Release(ctx, c.Pipeline); !errors.As(err, &rejected) {
		t.Errorf("second Release = %v, want a RejectedError", err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}}); !errors.As(err, &rejected) {
		t.Errorf("Dispatch of a released pipeline = %v, want a RejectedError", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()}); err == nil {
		t.Error("Compile after Close succeeded")
	}
}

// spin is a kernel whose running time grows with its parameter n, the number of
// loop iterations of each invocation; every invocation xors its result into out[0].
func spin() *ir.Program {
	b := ir.NewBuilder("test.spin", 64, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	n := b.Param("n", ir.U32, ir.LitU32(1))
	x := b.Var("x", ir.U32, ir.Add(ir.GlobalID(0), ir.Mul(ir.GlobalID(1), ir.LitU32(1<<20))))
	b.For("k", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.Assign("x", ir.Xor(x, ir.Shl(x, ir.LitU32(13))))
		body.Assign("x", ir.Xor(x, ir.Shr(x, ir.LitU32(17))))
		body.Assign("x", ir.Add(ir.Xor(x, ir.Shl(x, ir.LitU32(5))), k))
	})
	b.Atomic(ir.AtomicXor, out, ir.LitU32(0), x)
	return b.MustBuild()
}

func TestDispatchStopsWaitingWhenTheContextEnds(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(1<<20))
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: spin(), Spec: spec})
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
	req := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, OutputCounts: []uint32{1}}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Dispatch(cancelled, req); !errors.Is(err, context.Canceled) {
		t.Errorf("Dispatch with a cancelled context = %v, want context.Canceled", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if _, err := b.Dispatch(short, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dispatch of about 800ms past a 50ms deadline = %v, want context.DeadlineExceeded", err)
	}
	t.Logf("the abandoned dispatch returned after %v", time.Since(begin))
	// A dispatch whose own deadline ends while the abandoned one still runs fails
	// with its deadline instead of hanging.
	busy, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := b.Dispatch(busy, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dispatch behind the abandoned one = %v, want context.DeadlineExceeded", err)
	}
	// The abandoned work finishes in the background; the device is usable after it.
	res, err := run(t, b, addOne(), ir.SpecMap{}, [3]uint32{}, [3]uint32{1, 1, 1}, [][]byte{words([]uint32{41})}, []uint32{0, 1})
	if err != nil || !bytes.Equal(res.Outputs[0], words([]uint32{42})) {
		t.Errorf("dispatch after an abandoned one: %v, %v", res, err)
	}
}

// TestLongLoops runs loops of hundreds of thousands of iterations against the
// reference.
func TestLongLoops(t *testing.T) {
	b := newTestBackend(t)
	var spec ir.SpecMap
	spec.Set("n", ir.SpecU32(200000))
	grid := [3]uint32{2, 1, 1}
	want, err := interp.Run(context.Background(), spin(), interp.Options{Spec: spec}, interp.Launch{Grid: grid, OutputCounts: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, b, spin(), spec, [3]uint32{}, grid, nil, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Outputs[0], want[0]) {
		t.Errorf("a loop of 200000 iterations differs from the reference")
	}
}

func TestConcurrentDispatches(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
			if err != nil {
				errs <- err
				return
			}
			defer b.Release(ctx, c.Pipeline)
			for r := range 5 {
				n := 100*g + r + 1
				in := u32s(n, func(i int) uint32 { return uint32(i * g) })
				res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{uint32(n+63) / 64, 1, 1}, Inputs: [][]byte{words(in)}, OutputCounts: []uint32{0, uint32(n)}})
				if err != nil {
					errs <- err
					return
				}
				for i, v := range wordsOf(res.Outputs[0]) {
					if v != in[i]+1 {
						errs <- errors.New("wrong result under concurrency")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
