package backend

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// overResident is the backend with Dispatch running through protocol 2: every
// binding is a resident buffer written, bound by one submit, read back and freed.
type overResident struct{ *Backend }

func (o overResident) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	p, ok := o.pipelines.Get(req.Pipeline)
	if !ok {
		return nil, pluginapi.Rejected("no pipeline %d", req.Pipeline)
	}
	binds, err := p.bindings(req)
	if err != nil {
		return nil, err
	}
	cmd := pluginapi.DispatchCommand{Pipeline: req.Pipeline, Grid: req.Grid, Uniforms: req.Uniforms}
	var handles []uint64
	defer func() {
		for _, h := range handles {
			_ = o.FreeBuffer(ctx, h)
		}
	}()
	for _, bd := range binds {
		size := bd.Bytes()
		a, err := o.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size})
		if err != nil {
			return nil, err
		}
		handles = append(handles, a.Buffer)
		if bd.ReadsInput() {
			if err := o.WriteBuffer(ctx, a.Buffer, 0, bd.Input); err != nil {
				return nil, err
			}
		}
		cmd.Bindings = append(cmd.Bindings, pluginapi.BufferRange{Buffer: a.Buffer, Size: size})
	}
	sub, err := o.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{cmd}})
	if err != nil {
		return nil, err
	}
	res := &pluginapi.DispatchResult{HostNanos: sub.HostNanos, DeviceNanos: sub.DeviceNanos}
	for i, bd := range binds {
		if !bd.Decl.Access.IsOutput() {
			continue
		}
		out := make([]byte, bd.Bytes())
		if err := o.ReadBuffer(ctx, handles[i], 0, out); err != nil {
			return nil, err
		}
		res.Outputs = append(res.Outputs, out)
	}
	return res, nil
}

// TestConformanceOverResidentBuffers runs the whole conformance kit (semantics and
// corpus) through AllocBuffer, WriteBuffer, Submit and ReadBuffer, mapped and
// staged, under the validation layer with synchronization validation.
func TestConformanceOverResidentBuffers(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		conformance.Run(t, overResident{b}, conformance.Options{})
	})
}

// compileT compiles p on adapter 0 and releases it at cleanup.
func compileT(t testing.TB, b *Backend, p *ir.Program) uint64 {
	t.Helper()
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	return c.Pipeline
}

// incr adds one to every element of a read_write buffer.
func incr() *ir.Program {
	b := ir.NewBuilder("test.incr", 64, 1, 1)
	x := b.Buffer("x", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Add(ir.Load(x, i), ir.LitU32(1)))
	})
	return b.MustBuild()
}

// allocT allocates a buffer holding ws.
func allocT(t testing.TB, b *Backend, ws []uint32) uint64 {
	t.Helper()
	ctx := context.Background()
	a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * uint64(len(ws))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteBuffer(ctx, a.Buffer, 0, words(ws)); err != nil {
		t.Fatal(err)
	}
	return a.Buffer
}

// readT reads n words of a buffer from offset.
func readT(t testing.TB, b *Backend, buf, offset uint64, n int) []uint32 {
	t.Helper()
	out := make([]byte, 4*n)
	if err := b.ReadBuffer(context.Background(), buf, offset, out); err != nil {
		t.Fatal(err)
	}
	return wordsOf(out)
}

func incrCommand(pipeline, buf, offset, n uint64) pluginapi.DispatchCommand {
	return pluginapi.DispatchCommand{Pipeline: pipeline, Grid: [3]uint32{uint32((n + 63) / 64), 1, 1},
		Bindings: []pluginapi.BufferRange{{Buffer: buf, Offset: offset, Size: 4 * n}}}
}

// TestSubmitOfDependentDispatches runs 100 dispatches that each increment the
// result of the one before, then a copy and a fill that depend on them, in one
// submit: every step must see the writes before it (the barriers).
func TestSubmitOfDependentDispatches(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		p := compileT(t, b, incr())
		const n = 1000
		x := allocT(t, b, u32s(n, func(i int) uint32 { return uint32(i) }))
		y := allocT(t, b, make([]uint32, n))
		var cmds []pluginapi.SubmitCommand
		for range 100 {
			cmds = append(cmds, incrCommand(p, x, 0, n))
		}
		cmds = append(cmds,
			pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: x, Size: 4 * n}, Dst: pluginapi.BufferRange{Buffer: y, Size: 4 * n}},
			pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: x, Offset: 8, Size: 8}, Value: 7},
			incrCommand(p, y, 0, n))
		res, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		if res.HostNanos <= 0 || (b.adapters.List()[0].timestamps && res.DeviceNanos <= 0) {
			t.Errorf("submit result %+v: want host and device time", res)
		}
		gotX, gotY := readT(t, b, x, 0, n), readT(t, b, y, 0, n)
		for i := range n {
			wantX := uint32(i + 100)
			if i == 2 || i == 3 {
				wantX = 7
			}
			if gotX[i] != wantX || gotY[i] != uint32(i+101) {
				t.Fatalf("element %d: x %d y %d, want %d and %d", i, gotX[i], gotY[i], wantX, i+101)
			}
		}
	})
}

// TestBuffersSurviveManyDispatches keeps buffers across hundreds of submits and
// protocol-1 dispatches (whose scratch memory comes from the same heaps): their
// contents change only where a submit writes them.
func TestBuffersSurviveManyDispatches(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	p := compileT(t, b, incr())
	one := compileT(t, b, addOne())
	const n = 300
	x := allocT(t, b, u32s(n, func(i int) uint32 { return uint32(3 * i) }))
	keep := allocT(t, b, u32s(n, func(i int) uint32 { return ^uint32(i) }))
	for k := range 400 {
		if k%2 == 0 {
			if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, n)}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: one, Grid: [3]uint32{(n + 63) / 64, 1, 1},
			Inputs: [][]byte{words(make([]uint32, n))}, OutputCounts: []uint32{0, n}})
		if err != nil || !bytes.Equal(res.Outputs[0], words(u32s(n, func(int) uint32 { return 1 }))) {
			t.Fatalf("dispatch %d: %v", k, err)
		}
	}
	gotX, gotKeep := readT(t, b, x, 0, n), readT(t, b, keep, 0, n)
	for i := range n {
		if gotX[i] != uint32(3*i+200) || gotKeep[i] != ^uint32(i) {
			t.Fatalf("element %d: x %d keep %#x, want %d and %#x", i, gotX[i], gotKeep[i], 3*i+200, ^uint32(i))
		}
	}
}

// TestNoAllocationPerDispatch pins that steady work allocates no device memory:
// after a warm-up, 1000 protocol-1 dispatches and 1000 submits make no
// vkAllocateMemory call.
func TestNoAllocationPerDispatch(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		d := b.adapters.List()[0].current()
		one := compileT(t, b, addOne())
		p := compileT(t, b, incr())
		x := allocT(t, b, make([]uint32, 256))
		step := func() {
			if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: one, Grid: [3]uint32{4, 1, 1},
				Inputs: [][]byte{words(make([]uint32, 256))}, OutputCounts: []uint32{0, 256}}); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 256)}}); err != nil {
				t.Fatal(err)
			}
		}
		step()
		before := d.vk.Allocations()
		for range 1000 {
			step()
		}
		if n := d.vk.Allocations() - before; n != 0 {
			t.Errorf("1000 dispatches and 1000 submits made %d vkAllocateMemory calls, want 0", n)
		}
		if got := readT(t, b, x, 0, 1)[0]; got != 1001 {
			t.Errorf("x[0] = %d after 1001 increments", got)
		}
	})
}

// TestUnalignedBindingOffset binds a range at an offset the device cannot bind
// directly (4 bytes): it runs on an aligned copy, and only the range changes.
func TestUnalignedBindingOffset(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		p := compileT(t, b, incr())
		x := allocT(t, b, u32s(100, func(i int) uint32 { return uint32(i) }))
		if _, err := b.Submit(context.Background(), &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
			incrCommand(p, x, 4, 10), incrCommand(p, x, 8, 10)}}); err != nil {
			t.Fatal(err)
		}
		got := readT(t, b, x, 0, 100)
		for i, v := range got {
			want := uint32(i)
			if i >= 1 && i < 11 {
				want++
			}
			if i >= 2 && i < 12 {
				want++
			}
			if v != want {
				t.Fatalf("element %d = %d, want %d", i, v, want)
			}
		}
	})
}

// spinUniform is spin with its loop count a uniform, so that no compiler knows
// the trip count.
func spinUniform() *ir.Program { return gputest.SpinUniform() }

// blocker returns a submit that keeps the device busy for about target on any
// device: spinUniform dispatches of a grid grown eightfold until one takes a
// tenth of target (or the grid limits stop it), repeated to fill target.
func blocker(t *testing.T, b *Backend, target time.Duration) *pluginapi.SubmitRequest {
	t.Helper()
	ctx := context.Background()
	p := compileT(t, b, spinUniform())
	out := allocT(t, b, []uint32{0})
	lim := b.adapters.List()[0].props.Limits.MaxComputeWorkGroupCount
	most := min(uint64(lim[0]), 1<<26) * uint64(min(lim[1], 1<<10))
	cmd := func(groups uint64) pluginapi.DispatchCommand {
		x := min(groups, uint64(lim[0]), 1<<26)
		return pluginapi.DispatchCommand{Pipeline: p, Grid: [3]uint32{uint32(x), uint32((groups + x - 1) / x), 1},
			Bindings: []pluginapi.BufferRange{{Buffer: out, Size: 4}}, Uniforms: kernels.U32Bytes([]uint32{60000})}
	}
	groups := uint64(64)
	for {
		c := cmd(groups)
		res, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{c}})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Duration(res.DeviceNanos)
		if took <= 0 {
			took = time.Duration(res.HostNanos)
		}
		if took >= target/10 || groups >= most {
			req := &pluginapi.SubmitRequest{}
			for range min(int(target/max(took, 1))+1, 200) {
				req.Commands = append(req.Commands, c)
			}
			t.Logf("blocker: %d dispatches of grid %v, %v each", len(req.Commands), c.Grid, took)
			return req
		}
		groups = min(groups*8, most)
	}
}

// TestDeadlineInTheQueue abandons a long submit, then gives a second one a short
// deadline: it returns context.DeadlineExceeded while the first is still running,
// not after it. A context that ends while waiting for the device lock also ends
// the wait, and a submit whose context has already ended submits nothing.
func TestDeadlineInTheQueue(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	// Everything the queued submit needs exists before the blocker runs: on a
	// discrete GPU allocating and writing a buffer are jobs that would queue
	// behind it.
	p := compileT(t, b, incr())
	x := allocT(t, b, []uint32{1})
	long := blocker(t, b, 3*time.Second)
	d := b.adapters.List()[0].current()
	seqOf := func() uint64 {
		d.lock <- struct{}{}
		defer d.release()
		return d.seq
	}
	before := seqOf()
	abandoned, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := b.Submit(abandoned, long); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("long submit past its deadline = %v", err)
	}
	longSeq := seqOf()
	if longSeq != before+1 {
		t.Fatalf("the long submit was not submitted (sequence %d, before %d)", longSeq, before)
	}
	if d.completed() >= longSeq {
		t.Fatal("the blocker finished before its deadline; it must run for seconds")
	}
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	_, err := b.Submit(short, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 1)}})
	running := d.completed() < longSeq
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued submit past its deadline = %v, want context.DeadlineExceeded (blocker still running: %v)", err, running)
	}
	if !running {
		t.Errorf("the queued submit returned only after the abandoned one finished")
	}
	d.lock <- struct{}{}
	locked, cancel3 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel3()
	_, err = b.Submit(locked, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 1)}})
	<-d.lock
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("submit waiting for the device lock past its deadline = %v", err)
	}
	if got := readT(t, b, x, 0, 1)[0]; got != 2 {
		t.Errorf("x = %d after the queued increment ran", got)
	}
	cancelled, cancel4 := context.WithCancel(ctx)
	cancel4()
	seq := seqOf()
	if _, err := b.Submit(cancelled, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 1)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("submit with a cancelled context = %v", err)
	}
	if seqOf() != seq {
		t.Errorf("a submit whose context had ended was submitted")
	}
}

// TestDeviceLost injects a lost device: the failing call and every later one on
// that device is a DeviceError, Health reports it, Config.OnDeviceLost hears of it,
// and opening the adapter again gives a working device.
func TestDeviceLost(t *testing.T) {
	b := newTestBackend(t)
	heard := make(chan error, 1)
	b.adapters.List()[0].onLost = func(err error) { heard <- err }
	ctx := context.Background()
	p := compileT(t, b, incr())
	x := allocT(t, b, []uint32{5})
	d := b.adapters.List()[0].current()
	d.loseNext.Store(true)
	var devErr *pluginapi.DeviceError
	_, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 1)}})
	if !errors.As(err, &devErr) || !vk.IsDeviceLost(err) {
		t.Fatalf("submit on a lost device = %v, want a DeviceError for VK_ERROR_DEVICE_LOST", err)
	}
	if err := <-heard; err == nil {
		t.Error("OnDeviceLost got no error")
	}
	if err := b.Health(ctx); !errors.As(err, &devErr) {
		t.Errorf("Health after a lost device = %v, want a DeviceError", err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: p, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{words([]uint32{1})}}); !errors.As(err, &devErr) {
		t.Errorf("dispatch after a lost device = %v, want a DeviceError", err)
	}
	if err := b.ReadBuffer(ctx, x, 0, make([]byte, 4)); !errors.As(err, &devErr) {
		t.Errorf("read after a lost device = %v, want a DeviceError", err)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err != nil {
		t.Errorf("Health after opening a new device = %v", err)
	}
	p2 := compileT(t, b, incr())
	y := allocT(t, b, []uint32{5})
	if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p2, y, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := readT(t, b, y, 0, 1)[0]; got != 6 {
		t.Errorf("y = %d on the new device, want 6", got)
	}
}

// TestBandwidthIsMeasuredAfterDescribe pins that the first Describe does not wait
// for the bandwidth measurement but says it is under way, and that a later one
// reports it, quantized to two significant digits, as measured.
func TestBandwidthIsMeasuredAfterDescribe(t *testing.T) {
	b, d := describeNew(t, ConfigFromEnv())
	ctx := context.Background()
	if len(d.Adapters) == 0 || !d.Adapters[0].Available || !d.Adapters[0].Profile.SupportsDeviceTimestamps {
		t.Skip("no usable Vulkan adapter with timestamps")
	}
	if s := d.Adapters[0].Profile.MemBWStatus; s != pluginapi.BandwidthMeasuring {
		t.Errorf("the first Describe says the bandwidth is %v, want measuring", s)
	}
	b.measured.Wait()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bw := d.Adapters[0].Profile.MemBWGBps
	if bw <= 0 || quantize(bw) != bw || d.Adapters[0].Profile.MemBWStatus != pluginapi.BandwidthMeasured {
		t.Errorf("measured bandwidth %v (%v): want > 0, quantized and measured", bw, d.Adapters[0].Profile.MemBWStatus)
	}
	t.Logf("%s: %v GB/s", d.Adapters[0].Name, bw)
}

func TestQuantize(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{4228, 4200}, {937.5, 940}, {5.349, 5.3}, {0.0123, 0.012}, {0, 0}, {-1, 0}} {
		if got := quantize(c.in); got != c.want {
			t.Errorf("quantize(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestSharedMemoryBecomesTheBuffer offers host memory for a mapped buffer: where
// the device maps its memory and imports host memory it is the buffer (Mapped;
// the host's writes reach the device and the device's the host, with no call),
// elsewhere the buffer is an ordinary one and the memory is left alone.
func TestSharedMemoryBecomesTheBuffer(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		mem, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		const n = 1000
		shared := mem[:4*n]
		copy(shared, words(u32s(n, func(i int) uint32 { return 0xdead })))
		a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * n, Usage: pluginapi.UsageMap | pluginapi.UsageStorage, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		d := b.adapters.List()[0].current()
		want := d.direct.Load() && b.adapters.List()[0].props.MinImportedHostPointerAlignment > 0
		if a.Mapped != want {
			t.Fatalf("Mapped = %v, want %v (direct %v)", a.Mapped, want, d.direct.Load())
		}
		p := compileT(t, b, incr())
		if a.Mapped {
			if got := wordsOf(shared); got[0] != 0 || got[n-1] != 0 {
				t.Fatalf("a new mapped buffer holds %#x ... %#x, want zeros", got[0], got[n-1])
			}
			copy(shared, words(u32s(n, func(i int) uint32 { return uint32(i) })))
		} else if err := b.WriteBuffer(ctx, a.Buffer, 0, words(u32s(n, func(i int) uint32 { return uint32(i) }))); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, a.Buffer, 0, n)}}); err != nil {
			t.Fatal(err)
		}
		got := readT(t, b, a.Buffer, 0, n)
		if a.Mapped {
			got = wordsOf(shared)
		}
		for i, v := range got {
			if v != uint32(i+1) {
				t.Fatalf("element %d = %d, want %d", i, v, i+1)
			}
		}
		if !a.Mapped && wordsOf(shared)[0] != 0xdead {
			t.Errorf("an unmapped buffer wrote the offered memory")
		}
		if err := b.FreeBuffer(ctx, a.Buffer); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransfersOfSeveralChunks writes and reads a buffer of more than three
// staging chunks at an offset, on both memory paths: every byte arrives, and the
// bytes around the range keep their contents.
func TestTransfersOfSeveralChunks(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		const size = 3*stagingChunk + 4096
		a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size + 8})
		if err != nil {
			t.Fatal(err)
		}
		defer b.FreeBuffer(ctx, a.Buffer)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>16)
		}
		if err := b.WriteBuffer(ctx, a.Buffer, 4, data); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, size+8)
		if err := b.ReadBuffer(ctx, a.Buffer, 0, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[4:size+4], data) || !bytes.Equal(got[:4], make([]byte, 4)) || !bytes.Equal(got[size+4:], make([]byte, 4)) {
			t.Errorf("the buffer does not hold the written bytes between zeros")
		}
	})
}

// TestDataPlaneSegments attaches a segment as the SDK's data plane does: staged
// transfers whose host bytes lie in it copy straight from and to it (no staging
// memory), a mapped buffer offered in it is a span of it (no import of its own),
// and detaching releases it.
func TestDataPlaneSegments(t *testing.T) {
	b := newTestBackend(t)
	if b.adapters.List()[0].props.MinImportedHostPointerAlignment == 0 {
		t.Skip("no VK_EXT_external_memory_host")
	}
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		const size = 1 << 20
		mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		if err := b.AttachSegment(ctx, 7, mem); err != nil {
			t.Fatal(err)
		}
		d := b.adapters.List()[0].current()
		if _, ok := b.segmentOn(d, 7); !ok {
			t.Fatal("the segment was not imported")
		}
		const n = 1000
		x := allocT(t, b, make([]uint32, n))
		view := mem[4096 : 4096+4*n]
		copy(view, words(u32s(n, func(i int) uint32 { return uint32(5 * i) })))
		before := d.vk.Allocations()
		if err := b.WriteBuffer(ctx, x, 0, view); err != nil {
			t.Fatal(err)
		}
		p := compileT(t, b, incr())
		if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, n)}}); err != nil {
			t.Fatal(err)
		}
		out := mem[8192 : 8192+4*n]
		if err := b.ReadBuffer(ctx, x, 0, out); err != nil {
			t.Fatal(err)
		}
		for i, v := range wordsOf(out) {
			if v != uint32(5*i+1) {
				t.Fatalf("element %d = %d, want %d", i, v, 5*i+1)
			}
		}
		shared := mem[65536 : 65536+4*n]
		a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * n, Usage: pluginapi.UsageMap, Shared: shared, SharedSegment: 7, SharedOffset: 65536})
		if err != nil {
			t.Fatal(err)
		}
		if a.Mapped != d.direct.Load() {
			t.Errorf("Mapped = %v on a device that maps directly: %v", a.Mapped, d.direct.Load())
		}
		if a.Mapped {
			copy(shared, words(u32s(n, func(i int) uint32 { return uint32(i) })))
			if _, err := b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, a.Buffer, 0, n)}}); err != nil {
				t.Fatal(err)
			}
			if got := wordsOf(shared); got[0] != 1 || got[n-1] != n {
				t.Errorf("the mapped buffer holds %d ... %d, want 1 ... %d", got[0], got[n-1], n)
			}
		}
		if n := d.vk.Allocations() - before; n != 0 {
			t.Errorf("transfers through the segment and a buffer in it made %d vkAllocateMemory calls", n)
		}
		if err := b.FreeBuffer(ctx, a.Buffer); err != nil {
			t.Fatal(err)
		}
		if err := b.DetachSegment(ctx, 7); err != nil {
			t.Fatal(err)
		}
		if _, ok := b.segmentOn(d, 7); ok {
			t.Error("the segment is still attached after DetachSegment")
		}
		if err := b.DetachSegment(ctx, 7); err != nil {
			t.Errorf("detaching an unknown segment = %v", err)
		}
	})
}

// TestProtocol1TimesTheDispatchOnly pins that a protocol-1 dispatch's device time
// brackets its dispatch, not its uploads and read-backs: the staged job times
// the one dispatch op, between the uploads before it and the read-backs after.
func TestProtocol1TimesTheDispatchOnly(t *testing.T) {
	b := newTestBackend(t)
	d := b.adapters.List()[0].current()
	own := d.direct.Swap(false)
	defer d.direct.Store(own)
	one := compileT(t, b, addOne())
	p, _ := b.pipelines.Get(one)
	req := &pluginapi.DispatchRequest{Pipeline: one, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{words([]uint32{1, 2})}, OutputCounts: []uint32{0, 2}}
	binds, err := p.bindings(req)
	if err != nil {
		t.Fatal(err)
	}
	j := &job{d: d, pipelines: []*pipeline{p}}
	if err := j.stage(b, binds, req); err != nil {
		t.Fatal(err)
	}
	defer b.freeSpans(j.scratch)
	if j.timeOp < 1 || j.ops[j.timeOp-1].kind != opDispatch {
		t.Fatalf("timeOp %d of ops %v does not name the dispatch", j.timeOp, j.ops)
	}
	for i, o := range j.ops {
		if i != j.timeOp-1 && o.kind == opDispatch {
			t.Errorf("op %d is a second dispatch", i)
		}
	}
	if j.timeOp == 1 || j.timeOp == len(j.ops) {
		t.Errorf("the staged job has no uploads before or read-backs after its dispatch: %d ops, dispatch at %d", len(j.ops), j.timeOp-1)
	}
}
