package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

func TestArtifactWithoutADevice(t *testing.T) {
	ctx := context.Background()
	b := New(Config{Library: missingDriver})
	defer b.Close(ctx)
	k, _ := kernels.Lookup("saxpy")
	art, err := b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: k.Program(), Kind: "ptx"})
	if err != nil || !strings.Contains(string(art.Data), ".entry kiln_main") || art.Info["target"] != "sm_80" || art.Info["entry_point"] != "kiln_main" {
		t.Errorf("ptx without a device: %v, %+v", err, art)
	}
	var unavailable *pluginapi.UnavailableError
	if _, err := b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: k.Program(), Kind: "cubin"}); !errors.As(err, &unavailable) {
		t.Errorf("cubin without a device = %v, want an UnavailableError", err)
	}
	var rejected *pluginapi.RejectedError
	if _, err := b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: k.Program(), Kind: "spirv"}); !errors.As(err, &rejected) {
		t.Errorf("spirv from cuda = %v, want a RejectedError", err)
	}
	if err := b.Health(ctx); err != nil {
		t.Errorf("Health with no opened adapter = %v", err)
	}
	if _, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 16}); !errors.As(err, &unavailable) {
		t.Errorf("AllocBuffer without a device = %v, want an UnavailableError", err)
	}
	if caps := pluginapi.CapabilitiesOf(b); !caps.Buffers || !caps.Submit || !caps.Artifacts || !caps.Health {
		t.Errorf("capabilities %+v", caps)
	}
}

func TestResidentSizes(t *testing.T) {
	for in, want := range map[uint64]uint64{0: 4, 1: 4, 4: 4, 5: 8, 4096: 4096, 4097: 4100} {
		if got := residentBytes(in); got != want {
			t.Errorf("residentBytes(%d) = %d, want %d", in, got, want)
		}
	}
}

// The tests below need a CUDA device.

// TestResidentBuffersAndSubmit allocates buffers (zero-filled), writes them, runs
// a batch of a fill, a dispatch, a copy and a second dispatch that reads the
// first's output, and reads the results back.
func TestResidentBuffersAndSubmit(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	alloc := func(size uint64) uint64 {
		res, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size})
		if err != nil {
			t.Fatal(err)
		}
		return res.Buffer
	}
	read := func(h, size uint64) []uint32 {
		out := make([]byte, size)
		if err := b.ReadBuffer(ctx, h, 0, out); err != nil {
			t.Fatal(err)
		}
		return wordsOf(out)
	}
	const n = 1000
	in, mid, out, scratch := alloc(4*n), alloc(4*n+6), alloc(4*n), alloc(64)
	if got := read(mid, 4*n); got[0] != 0 || got[n-1] != 0 {
		t.Errorf("a new buffer is not zero-filled: %d, %d", got[0], got[n-1])
	}
	if err := b.WriteBuffer(ctx, in, 0, words(u32s(n, func(i int) uint32 { return uint32(i) }))); err != nil {
		t.Fatal(err)
	}
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	grid := [3]uint32{(n + 63) / 64, 1, 1}
	res, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
		pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: scratch, Size: 64}, Value: 0xABCD},
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: grid, Bindings: []pluginapi.BufferRange{{Buffer: in, Size: 4 * n}, {Buffer: mid, Size: 4 * n}}},
		pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: mid, Size: 4 * n}, Dst: pluginapi.BufferRange{Buffer: in, Size: 4 * n}},
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: grid, Bindings: []pluginapi.BufferRange{{Buffer: in, Size: 4 * n}, {Buffer: out, Size: 4 * n}}},
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{0, 1, 1}, Bindings: []pluginapi.BufferRange{{Buffer: in, Size: 4 * n}, {Buffer: out, Size: 4 * n}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeviceNanos <= 0 || res.HostNanos < res.DeviceNanos {
		t.Errorf("host %d ns, device %d ns", res.HostNanos, res.DeviceNanos)
	}
	for i, v := range read(out, 4*n) {
		if v != uint32(i)+2 {
			t.Fatalf("out[%d] = %d, want %d", i, v, i+2)
		}
	}
	if got := read(scratch, 64); got[0] != 0xABCD || got[15] != 0xABCD {
		t.Errorf("fill gave %x", got)
	}
	part := make([]byte, 8)
	if err := b.ReadBuffer(ctx, out, 40, part); err != nil || !bytes.Equal(part, words([]uint32{12, 13})) {
		t.Errorf("read at an offset: %v, %v", wordsOf(part), err)
	}
	for _, h := range []uint64{in, mid, out, scratch} {
		if err := b.FreeBuffer(ctx, h); err != nil {
			t.Error(err)
		}
	}
	var rejected *pluginapi.RejectedError
	if err := b.FreeBuffer(ctx, in); !errors.As(err, &rejected) {
		t.Errorf("a second free = %v, want a RejectedError", err)
	}
}

func TestSubmitRejectsBadCommands(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	buf, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeBuffer(ctx, buf.Buffer)
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	fixed := ir.NewBuilder("test.fixed", 1, 1, 1)
	fixed.FixedBuffer("a", ir.U32, ir.Read, 2)
	fc, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: fixed.MustBuild()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, fc.Pipeline)
	r := pluginapi.BufferRange{Buffer: buf.Buffer, Size: 64}
	for _, tc := range []struct {
		name string
		cmd  pluginapi.SubmitCommand
		want string
	}{
		{"unknown pipeline", pluginapi.DispatchCommand{Pipeline: 999, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{r, r}}, "no pipeline"},
		{"too few bindings", pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{r}}, "binds 1"},
		{"unknown buffer", pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{r, {Buffer: 777, Size: 4}}}, "no buffer 777"},
		{"uniforms the program lacks", pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{r, r}, Uniforms: make([]byte, 4)}, "uniforms"},
		{"fixed count", pluginapi.DispatchCommand{Pipeline: fc.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{r}}, "exactly 2"},
		{"grid too large", pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1 << 27, 1, 1}, Bindings: []pluginapi.BufferRange{r, r}}, "2^32"},
	} {
		_, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{tc.cmd}})
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Submit = %v, want a RejectedError mentioning %q", tc.name, err, tc.want)
		}
	}
	if err := b.Health(ctx); err != nil {
		t.Errorf("Health = %v", err)
	}
}

// BenchmarkSubmitSmall is one submit of a 1-element vector add over resident
// buffers, in process: enqueue, launch, wait; it reports the median host time and
// the allocations per submit too.
func BenchmarkSubmitSmall(b *testing.B) {
	be, adapter := benchBackend(b)
	ctx := context.Background()
	k, _ := kernels.Lookup("vector_add")
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: k.Program()})
	if err != nil {
		b.Fatal(err)
	}
	var bufs []pluginapi.BufferRange
	for range 3 {
		bufs = append(bufs, pluginapi.BufferRange{Buffer: gputest.ResidentBuffer(b, be, adapter, 1, nil), Size: 4})
	}
	req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: bufs}}}
	b.ReportAllocs()
	gputest.SubmitMedian(b, be, req)
}

// BenchmarkVectorAddResident runs kiln.vector.add.f32 over 256 Mi elements in
// resident buffers and reports the kernel's device bandwidth (12 bytes per
// element), for the comparison with torch.add: once per elements-per-invocation
// value (epi=1, 2, 4, 8) when the program has that parameter, else once.
func BenchmarkVectorAddResident(b *testing.B) {
	be, adapter := benchBackend(b)
	ctx := context.Background()
	const n = 1 << 28
	k, _ := kernels.Lookup("vector_add")
	prog := k.Program()
	bufs := gputest.VectorAddBuffers(b, be, adapter, n)
	epis := []uint32{1}
	if _, ok := prog.Param("epi"); ok {
		epis = []uint32{1, 2, 4, 8}
	}
	for _, epi := range epis {
		b.Run(fmt.Sprintf("epi=%d", epi), func(b *testing.B) {
			var spec ir.SpecMap
			if len(epis) > 1 {
				spec.Set("epi", ir.SpecU32(epi))
			}
			c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: prog, Spec: spec})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Release(ctx, c.Pipeline)
			per := prog.WorkgroupSize[0] * epi
			req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{
				pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{(n + per - 1) / per, 1, 1}, Bindings: bufs}}}
			best := gputest.Submits(b, be, req, 0).BestDevice
			b.ReportMetric(12*n/float64(best), "best-device-GB/s")
		})
	}
}
