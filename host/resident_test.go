package host

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

func acquire(t *testing.T, h *Host, name string) *Backend {
	t.Helper()
	b, err := h.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func alloc(t *testing.T, b *Backend, size int64, usage BufferUsage) *Buffer {
	t.Helper()
	buf, err := b.Alloc(context.Background(), size, usage)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

func readF32(t *testing.T, buf *Buffer) []float32 {
	t.Helper()
	out := make([]byte, buf.Size())
	if err := buf.Read(context.Background(), 0, out); err != nil {
		t.Fatal(err)
	}
	return bytesF32(out)
}

func TestCPURefIsResidentWithSharedMemory(t *testing.T) {
	h := openHost(t, "cpuref")
	for _, p := range h.Report().Plugins {
		c := p.Capabilities
		if p.Protocol != 2 || !c.Resident() || !c.SharedMemory {
			t.Errorf("cpu-ref: protocol %d, capabilities %+v", p.Protocol, c)
		}
	}
}

// TestBuffersSurviveManyDispatches runs 100 dependent saxpy dispatches over two
// resident buffers in one batch, then 50 more batches of one: the data stays in
// the plugin between them and only the final read moves bytes back.
func TestBuffersSurviveManyDispatches(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	const n = 300
	x, y := alloc(t, b, 4*n, UsageMap), alloc(t, b, 4*n, 0)
	if !x.Resident() || !y.Resident() {
		t.Fatal("cpu-ref buffers are not resident")
	}
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i%7), 1
	}
	mem, err := x.Map()
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, f32Bytes(xs...))
	if err := y.Write(ctx, 0, f32Bytes(ys...)); err != nil {
		t.Fatal(err)
	}
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := b.Traffic()
	work := BoundWork{Invocations: [3]uint32{n, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}}
	var batch Batch
	for range 100 {
		batch.Dispatch(pl, work)
	}
	res, err := b.Submit(ctx, &batch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commands != 100 || res.Backend != "cpu-ref:0" || res.PluginTime <= 0 {
		t.Errorf("submit result %+v", res)
	}
	var one Batch
	one.Dispatch(pl, work)
	for range 50 {
		if _, err := b.Submit(ctx, &one); err != nil {
			t.Fatal(err)
		}
	}
	if moved := b.Traffic(); moved != before {
		t.Errorf("dispatches over resident buffers moved bytes: %+v before, %+v after", before, moved)
	}
	for i, v := range readF32(t, y) {
		if want := 1 + 150*2*xs[i]; v != want {
			t.Fatalf("y[%d] = %v after 150 dispatches, want %v", i, v, want)
		}
	}
	if got := b.Traffic().FromPlugin - before.FromPlugin; got != 4*n {
		t.Errorf("reading y moved %d bytes, want %d", got, 4*n)
	}
}

// TestResidentRedispatchOf256MiBMovesNoBytes binds two 256 MiB buffers, fills
// them in the plugin and re-dispatches saxpy over them: the host's traffic
// counter stays at zero. (The grid covers the first workgroup only, so that the
// race-enabled suite stays fast; the bytes bound are the full 256 MiB.)
func TestResidentRedispatchOf256MiBMovesNoBytes(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	const size = 256 << 20
	x, y := alloc(t, b, size, 0), alloc(t, b, size, 0)
	defer x.Free(ctx)
	defer y.Free(ctx)
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := b.Traffic()
	var fill Batch
	fill.Fill(Bind(x), math.Float32bits(3)).Fill(Bind(y), math.Float32bits(1))
	if _, err := b.Submit(ctx, &fill); err != nil {
		t.Fatal(err)
	}
	var batch Batch
	batch.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
	for range 3 {
		if _, err := b.Submit(ctx, &batch); err != nil {
			t.Fatal(err)
		}
	}
	if after := b.Traffic(); after != before {
		t.Fatalf("fills and re-dispatches over 2 x 256 MiB resident buffers moved %+v bytes (before %+v), want 0", after, before)
	}
	got := make([]byte, 8)
	if err := y.Read(ctx, 0, got); err != nil {
		t.Fatal(err)
	}
	if v := bytesF32(got); v[0] != 19 || v[1] != 19 {
		t.Errorf("y[0:2] = %v after three saxpy with a=2, x=3, y=1, want 19", v)
	}
}

func TestBatchIsCheckedBeforeSending(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x, y := alloc(t, b, 64, 0), alloc(t, b, 64, 0)
	freed := alloc(t, b, 64, 0)
	if err := freed.Free(ctx); err != nil {
		t.Fatal(err)
	}
	var launch *LaunchError
	var buf *BufferError
	cases := []struct {
		name  string
		batch func(*Batch)
		want  any
	}{
		{"one binding short", func(bt *Batch) { bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(x)}}) }, &launch},
		{"range past the end", func(bt *Batch) {
			bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(x), {Buffer: y, Offset: 32, Size: 64}}})
		}, &buf},
		{"unaligned binding", func(bt *Batch) {
			bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(x), {Buffer: y, Offset: 2, Size: 8}}})
		}, &buf},
		{"freed buffer", func(bt *Batch) { bt.Fill(Bind(freed), 0) }, &buf},
		{"copy of unequal sizes", func(bt *Batch) { bt.Copy(Binding{Buffer: x, Size: 8}, Binding{Buffer: y, Size: 4}) }, &buf},
		{"overlapping copy", func(bt *Batch) { bt.Copy(Binding{Buffer: x, Size: 8}, Binding{Buffer: x, Offset: 4, Size: 8}) }, &buf},
		{"grid and invocations", func(bt *Batch) {
			bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Invocations: [3]uint32{4, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
		}, &launch},
		{"nil pipeline", func(bt *Batch) { bt.Dispatch(nil, BoundWork{}) }, &launch},
	}
	for _, c := range cases {
		var bt Batch
		c.batch(&bt)
		_, err := b.Submit(ctx, &bt)
		if err == nil || !errors.As(err, c.want) {
			t.Errorf("%s: %v, want %T", c.name, err, c.want)
			continue
		}
		assertEndsWithFix(t, err.Error())
	}
	if err := x.Write(ctx, 60, make([]byte, 8)); !errors.As(err, &buf) {
		t.Errorf("write past the end: %v, want a BufferError", err)
	}
	other, err := h.Acquire(ctx, "cpu-ref:0")
	if err != nil {
		t.Fatal(err)
	}
	var bt Batch
	bt.Fill(Bind(x), 1)
	if _, err := other.Submit(ctx, &bt); err != nil {
		t.Errorf("a buffer used through a second handle of the same backend: %v", err)
	}
}

// memfdMappings counts the host's mappings of data-plane segments.
func memfdMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "/memfd:"+wire.SegmentName)
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestKilledPluginLosesItsBuffers(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	baseMaps, baseFDs := memfdMappings(t), openFDs(t)
	x, y := alloc(t, b, 4096, UsageMap), alloc(t, b, 4096, UsageMap)
	view, err := x.Map()
	if err != nil {
		t.Fatal(err)
	}
	copy(view, "resident bytes")
	if memfdMappings(t) != baseMaps+2 {
		t.Fatalf("%d memfd mappings after two mapped buffers, baseline %d", memfdMappings(t), baseMaps)
	}
	pid := pidOf(t, h, "cpu-ref")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	eventually(t, "the memfd mappings returning to their baseline", func() bool { return memfdMappings(t) == baseMaps })
	if view[0] != 0 {
		t.Error("a view of a lost buffer still shows its bytes")
	}

	var lost *LostBufferError
	if err := x.Write(ctx, 0, []byte{1, 2, 3, 4}); !errors.As(err, &lost) || !strings.Contains(err.Error(), x.Name()) {
		t.Fatalf("write to a buffer of a killed plugin: %v, want a LostBufferError naming %s", err, x.Name())
	}
	var bt Batch
	bt.Copy(Bind(y), Bind(x))
	_, err = b.Submit(ctx, &bt)
	if !errors.As(err, &lost) || len(lost.Buffers) != 2 {
		t.Fatalf("submit over two lost buffers: %v, want a LostBufferError naming both", err)
	}
	assertEndsWithFix(t, err.Error())
	if _, err := x.Map(); !errors.As(err, &lost) {
		t.Errorf("Map of a lost buffer: %v", err)
	}
	for _, bf := range []*Buffer{x, y} {
		if err := bf.Free(ctx); err != nil {
			t.Errorf("free of a lost buffer: %v", err)
		}
	}

	z := alloc(t, b, 16, UsageMap)
	if pidOf(t, h, "cpu-ref") == pid {
		t.Fatal("the plugin was not relaunched")
	}
	if err := z.Write(ctx, 0, f32Bytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if got := readF32(t, z); got[3] != 4 {
		t.Errorf("new buffer on the relaunched plugin reads %v", got)
	}
	if err := z.Free(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fds and memfd mappings returning to their baseline", func() bool {
		return memfdMappings(t) == baseMaps && openFDs(t) == baseFDs
	})
}

func TestKillDuringSubmitIsACrashThatLosesTheBuffers(t *testing.T) {
	ctx := context.Background()
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	x := alloc(t, b, 4<<20, 0)
	pl, err := b.Compile(ctx, spin(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bt Batch
	bt.Dispatch(pl, BoundWork{Grid: [3]uint32{64, 1, 1}, Bindings: []Binding{Bind(x)}})
	pd, err := b.SubmitAsync(ctx, &bt)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pidOf(t, h, "cpu-ref"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, err = pd.Wait(ctx)
	var lost *LostBufferError
	var crashed *CrashedError
	if !errors.As(err, &lost) || !errors.As(err, &crashed) {
		t.Fatalf("kill during a submit: %v, want a LostBufferError wrapping a CrashedError", err)
	}
}

// spin loops long enough per invocation that a submit of it is still running
// when the test kills the plugin.
func spin(t *testing.T) *ir.Program {
	t.Helper()
	bld := ir.NewBuilder("test.spin.u32", 64, 1, 1)
	out := bld.Buffer("out", ir.U32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.For("k", ir.U32, ir.LitU32(0), ir.LitU32(1<<20), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.Store(out, i, ir.Add(ir.Load(out, i), k))
	})
	p, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProtocolOnePluginStillWorks(t *testing.T) {
	t.Setenv(pluginapi.ProtocolsEnv, "1")
	ctx := context.Background()
	h := openHost(t, "cpuref")
	p := h.Report().Plugins[0]
	if p.Protocol != 1 || p.Capabilities.Resident() || len(p.Capabilities.Missing()) != 1 {
		t.Fatalf("cpu-ref offering protocol 1 only: protocol %d, capabilities %+v", p.Protocol, p.Capabilities)
	}
	res, err := h.Dispatch(ctx, saxpy(t), saxpyLaunch("cpu-ref", 100))
	if err != nil {
		t.Fatal(err)
	}
	checkSaxpy(t, res, 2, 100)

	// Buffers and batches work too: the host keeps the buffers.
	b := acquire(t, h, "cpu-ref")
	x, y := alloc(t, b, 16, 0), alloc(t, b, 16, 0)
	if x.Resident() {
		t.Error("a buffer of a protocol-1 plugin claims to be resident")
	}
	if err := x.Write(ctx, 0, f32Bytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	pl, err := b.Compile(ctx, saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bt Batch
	bt.Fill(Bind(y), math.Float32bits(1)).
		Dispatch(pl, BoundWork{Invocations: [3]uint32{4, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}}).
		Dispatch(pl, BoundWork{Invocations: [3]uint32{4, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
	if _, err := b.Submit(ctx, &bt); err != nil {
		t.Fatal(err)
	}
	if got, want := readF32(t, y), []float32{5, 9, 13, 17}; !equalF32(got, want) {
		t.Errorf("y = %v, want %v", got, want)
	}
	mem, err := y.Map()
	if err != nil || !bytes.Equal(mem, f32Bytes(5, 9, 13, 17)) {
		t.Errorf("Map of a host-kept buffer: %v, %v", mem, err)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestV1DispatchOnResidentPluginCountsItsBytes(t *testing.T) {
	h := openHost(t, "cpuref")
	b := acquire(t, h, "cpu-ref")
	pl, err := b.Compile(context.Background(), saxpy(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := b.Traffic()
	for range 3 {
		res, err := b.Dispatch(context.Background(), pl, saxpyLaunch("", 1000).Work)
		if err != nil {
			t.Fatal(err)
		}
		checkSaxpy(t, res, 2, 1000)
	}
	after := b.Traffic()
	if in, out := after.ToPlugin-before.ToPlugin, after.FromPlugin-before.FromPlugin; in != 3*8000 || out != 3*4000 {
		t.Errorf("three v1 dispatches of 2 x 4000 bytes in and 4000 out moved %d in, %d out", in, out)
	}
}

func TestCoreOnlyPluginRunsBatchesOnHostBuffers(t *testing.T) {
	h := openHost(t, "fx-zeros")
	p := h.Report().Plugins[0]
	if p.Protocol != 2 || p.Capabilities.Buffers || !strings.Contains(strings.Join(p.Capabilities.Missing(), "; "), "no pluginapi.Buffers") {
		t.Fatalf("core-only fixture: protocol %d, capabilities %+v", p.Protocol, p.Capabilities)
	}
	ctx := context.Background()
	b := acquire(t, h, "fx-zeros")
	pl, err := b.Compile(ctx, fourBuffers(t), CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in, out, fixed := alloc(t, b, 16, 0), alloc(t, b, 16, 0), alloc(t, b, 12, 0)
	if err := out.Write(ctx, 0, bytes.Repeat([]byte{9}, 16)); err != nil {
		t.Fatal(err)
	}
	var bt Batch
	bt.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(in), Bind(in), Bind(out), Bind(fixed)}})
	if _, err := b.Submit(ctx, &bt); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := out.Read(ctx, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, 16)) {
		t.Errorf("the fixture's zero output was not copied back: %v", got)
	}
	var unsupported *UnsupportedError
	if _, err := b.Artifact(ctx, pl, "spirv"); !errors.As(err, &unsupported) {
		t.Errorf("artifact of a core-only plugin: %v, want an UnsupportedError", err)
	}
	if err := b.Health(ctx); !errors.As(err, &unsupported) {
		t.Errorf("health of a core-only plugin: %v, want an UnsupportedError", err)
	}
}
