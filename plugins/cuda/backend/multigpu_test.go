package backend

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// TestConformanceOnEveryAdapter runs the conformance kit on cuda:1..N-1 (cuda:0
// is TestConformance's), each adapter with its own context and stream; on a
// machine with one GPU there is nothing more to run.
func TestConformanceOnEveryAdapter(t *testing.T) {
	cuda.ConformanceOnEveryAdapter(t, newTestBackend(t))
}

// The tests in this file need CUDA devices; with one they check what one can.

// residentAdd sets up a vector add of n elements on adapter: three resident
// buffers (a = 1.0, b = 2.0), its pipeline and the submit request.
func residentAdd(tb testing.TB, be *Backend, adapter int, n uint32) (*pluginapi.SubmitRequest, uint64) {
	tb.Helper()
	ctx := context.Background()
	k, _ := kernels.Lookup("vector_add")
	p := k.Program()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p})
	if err != nil {
		tb.Fatal(err)
	}
	var bufs []pluginapi.BufferRange
	for _, data := range [][]byte{kernels.F32Bytes(fill(int(n), 1)), kernels.F32Bytes(fill(int(n), 2)), nil} {
		bufs = append(bufs, pluginapi.BufferRange{Buffer: gputest.ResidentBuffer(tb, be, adapter, int(n), data), Size: 4 * uint64(n)})
	}
	wg := p.WorkgroupSize[0]
	req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{(n + wg - 1) / wg, 1, 1}, Bindings: bufs}}}
	return req, bufs[2].Buffer
}

func fill(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestEveryGPUAtOnce opens every adapter (cuda:0..N in the driver's order), checks
// that each has its own UUID and fingerprint, and runs a vector add on all of
// them at once, one goroutine per adapter, each with its own buffers.
func TestEveryGPUAtOnce(t *testing.T) {
	be := newTestBackend(t)
	ctx := context.Background()
	d, err := be.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var usable []int
	for i, a := range d.Adapters {
		if !a.Available {
			continue
		}
		if a.Index != i || be.adapters.List()[i].dev.Ordinal() != i {
			t.Errorf("adapter %d has index %d and device ordinal %d", i, a.Index, be.adapters.List()[i].dev.Ordinal())
		}
		fp := a.Identity.Fingerprint()
		if j, ok := seen[fp]; ok {
			t.Errorf("adapters %d and %d share the fingerprint %s", j, i, fp)
		}
		seen[fp] = i
		usable = append(usable, i)
		t.Logf("cuda:%d %s, fingerprint %s", i, a.Identity.Device, fp)
	}
	const n = 1 << 20
	var wg sync.WaitGroup
	errs := make([]error, len(usable))
	for k, idx := range usable {
		req, out := residentAdd(t, be, idx, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := be.Submit(ctx, req); err != nil {
					errs[k] = err
					return
				}
			}
			got := make([]byte, 4*n)
			if err := be.ReadBuffer(ctx, out, 0, got); err != nil {
				errs[k] = err
				return
			}
			for i, v := range kernels.BytesF32(got) {
				if v != 3 {
					errs[k] = fmt.Errorf("cuda:%d: out[%d] = %v, want 3", idx, i, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkVectorAddAllGPUs runs a 256 Mi-element vector add on every adapter at
// once, one goroutine per adapter with resident buffers, and reports the sum of
// the adapters' device bandwidths (12 bytes per element, each adapter's best
// run) next to the number of GPUs, for the multi-GPU check against N times the
// single-GPU figure.
func BenchmarkVectorAddAllGPUs(b *testing.B) {
	be, _ := benchBackend(b)
	ctx := context.Background()
	d, err := be.Describe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1 << 28
	var reqs []*pluginapi.SubmitRequest
	for _, a := range d.Adapters {
		if a.Available {
			req, _ := residentAdd(b, be, a.Index, n)
			reqs = append(reqs, req)
		}
	}
	best := make([]int64, len(reqs))
	errs := make([]error, len(reqs))
	b.ResetTimer()
	var wg sync.WaitGroup
	for k, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				res, err := be.Submit(ctx, req)
				if err != nil {
					errs[k] = err
					return
				}
				if best[k] == 0 || res.DeviceNanos < best[k] {
					best[k] = res.DeviceNanos
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	var total float64
	for k := range reqs {
		if errs[k] != nil {
			b.Fatal(errs[k])
		}
		total += 12 * n / float64(best[k])
	}
	b.ReportMetric(float64(len(reqs)), "gpus")
	b.ReportMetric(total, "sum-best-device-GB/s")
}

// TestAliasedSubmit (needs a device): vector_add in place, out bound to a's
// buffer, runs the kernel without non-coherent reads (linked then) and adds
// right; with separate buffers the pipeline never links it.
func TestAliasedSubmit(t *testing.T) {
	be := newTestBackend(t)
	ctx := context.Background()
	const n = 1 << 16
	req, _ := residentAdd(t, be, 0, n)
	if _, err := be.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	cmd := req.Commands[0].(pluginapi.DispatchCommand)
	p, _ := be.pipelines.Get(cmd.Pipeline)
	if !p.nc || p.safe != 0 {
		t.Fatalf("separate buffers: nc %v, safe kernel linked %v", p.nc, p.safe != 0)
	}
	inPlace := cmd
	inPlace.Bindings = []pluginapi.BufferRange{cmd.Bindings[0], cmd.Bindings[1], cmd.Bindings[0]}
	for range 3 {
		if _, err := be.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{inPlace}}); err != nil {
			t.Fatal(err)
		}
	}
	if p.safe == 0 {
		t.Error("the in-place dispatch did not use the safe kernel")
	}
	got := make([]byte, 4*n)
	if err := be.ReadBuffer(ctx, cmd.Bindings[0].Buffer, 0, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range kernels.BytesF32(got) {
		if v != 7 { // 1 + 2 + 2 + 2
			t.Fatalf("a[%d] = %v after three in-place adds of 2 to 1, want 7", i, v)
		}
	}
}

// TestPeerCopy copies between buffers of one device and, with two or more,
// between cuda:0 and cuda:1 both ways, directly (peer access where the driver
// allows it) and forced through the pinned staging buffers, over more than two
// staging chunks at unaligned offsets: every byte arrives.
func TestPeerCopy(t *testing.T) {
	be := newTestBackend(t)
	ctx := context.Background()
	d, err := be.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pairs := [][2]int{{0, 0}}
	if len(d.Adapters) > 1 && d.Adapters[1].Available {
		pairs = append(pairs, [2]int{1, 0}, [2]int{0, 1})
	}
	const words = (2*stagingChunk + 3<<20) / 4
	src := gputest.PatternF32(words, 5)
	for _, pair := range pairs {
		for _, staged := range []bool{false, true} {
			if staged && pair[0] == pair[1] {
				continue
			}
			from := gputest.ResidentBuffer(t, be, pair[1], words, src)
			to := gputest.ResidentBuffer(t, be, pair[0], words, nil)
			if staged {
				be.peer.mu.Lock()
				if be.peer.linked == nil {
					be.peer.linked = map[[2]int]bool{}
				}
				be.peer.linked[pair] = false
				be.peer.mu.Unlock()
			}
			const off, skip = 7, 13
			n := uint64(len(src)) - off - skip
			if err := be.PeerCopy(ctx, pluginapi.BufferRange{Buffer: to, Offset: skip, Size: n}, pluginapi.BufferRange{Buffer: from, Offset: off, Size: n}); err != nil {
				t.Fatalf("cuda:%d -> cuda:%d (staged %v): %v", pair[1], pair[0], staged, err)
			}
			got := make([]byte, len(src))
			if err := be.ReadBuffer(ctx, to, 0, got); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, len(src))
			copy(want[skip:], src[off:off+n])
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("cuda:%d -> cuda:%d (staged %v): byte %d is %#x, want %#x", pair[1], pair[0], staged, i, got[i], want[i])
				}
			}
			if staged {
				be.peer.mu.Lock()
				delete(be.peer.linked, pair)
				be.peer.mu.Unlock()
			}
		}
	}
}
