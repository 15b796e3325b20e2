package backend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gpukit"
)

// TestStartedWorkHoldsTheStream pins the stream accounting of started work
// (no GPU needed): the first start takes the device's stream, later starts
// join it without waiting, and the stream is free for a blocking call only
// once the last completion gave its share back.
func TestStartedWorkHoldsTheStream(t *testing.T) {
	_, d, _ := fakeSubmitState(t)
	ctx := context.Background()
	if err := d.beginWork(ctx); err != nil {
		t.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() { joined <- d.beginWork(ctx) }()
	select {
	case err := <-joined:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a second start waited for the first one's completion")
	}
	d.endWork()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := d.acquire(short); err == nil {
		t.Fatal("a blocking call took the stream while started work was in flight")
	}
	d.endWork()
	if err := d.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	d.release()
}

// TestPipelinedWriteSubmitRead starts writes, submits and reads back to back
// on adapter 0 and calls the completions in order afterwards, as the SDK's
// completer does: every result is right, and each submit reports its own
// device time. It needs a CUDA device.
func TestPipelinedWriteSubmitRead(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	const rounds, n = 32, 256
	// Buffers first: the SDK sends an alloc only once every started
	// completion returned (a blocking call waits for the stream).
	var bufs [rounds][2]uint64
	for r := range bufs {
		for i := range bufs[r] {
			res, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * n})
			if err != nil {
				t.Fatal(err)
			}
			bufs[r][i] = res.Buffer
			defer b.FreeBuffer(ctx, res.Buffer)
		}
	}
	var waits []pluginapi.Completion
	var outs [][]byte
	for r := range rounds {
		bufs := bufs[r]
		w, err := b.StartWrite(ctx, bufs[0], 0, words(u32s(n, func(i int) uint32 { return uint32(r*n + i) })))
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
		w, err = b.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
			pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: [3]uint32{(n + 63) / 64, 1, 1}, Bindings: []pluginapi.BufferRange{{Buffer: bufs[0], Size: 4 * n}, {Buffer: bufs[1], Size: 4 * n}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
		out := make([]byte, 4*n)
		outs = append(outs, out)
		if w, err = b.StartRead(ctx, bufs[1], 0, out); err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	for i, w := range waits {
		res, err := w()
		if err != nil {
			t.Fatalf("completion %d: %v", i, err)
		}
		if i%3 == 1 && (res == nil || res.DeviceNanos <= 0) {
			t.Fatalf("submit %d reports %+v", i/3, res)
		}
	}
	for r, out := range outs {
		for i, v := range wordsOf(out) {
			if v != uint32(r*n+i)+1 {
				t.Fatalf("round %d: out[%d] = %d, want %d", r, i, v, r*n+i+1)
			}
		}
	}
	// Nothing is in flight any more: a blocking call takes the stream.
	d := b.adapters.List()[0].d
	if err := d.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	d.release()
}

// TestStartedWorkLetsAWaitingCallIn pins fairness (no GPU needed): while a
// blocking call waits for the stream, a new start does not join the work in
// flight (which would keep the stream busy for as long as starts come), so the
// waiting call gets the stream once that work is done, and the start after it.
func TestStartedWorkLetsAWaitingCallIn(t *testing.T) {
	_, d, _ := fakeSubmitState(t)
	ctx := context.Background()
	if err := d.beginWork(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 2)
	blocked := make(chan struct{})
	go func() {
		if err := d.acquire(ctx); err != nil {
			t.Error(err)
			return
		}
		order <- "blocking call"
		<-blocked
		d.release()
	}()
	for d.waiting.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	go func() {
		if err := d.beginWork(ctx); err != nil {
			t.Error(err)
			return
		}
		order <- "start"
		d.endWork()
	}()
	select {
	case got := <-order:
		t.Fatalf("%s ran while the first start's work was in flight", got)
	case <-time.After(50 * time.Millisecond):
	}
	d.endWork()
	if got := <-order; got != "blocking call" {
		t.Fatalf("%s took the stream first; the blocking call waited longer", got)
	}
	close(blocked)
	if got := <-order; got != "start" {
		t.Fatalf("got %s, want the start", got)
	}
}

// TestStartedDispatchesBackToBack starts 64 dispatches of add_one back to back on
// adapter 0 (spread over the device's lanes), each reading its own input and
// writing into its own output memory, and calls the completions in order
// afterwards, as the SDK's completer does: every output is right and was
// written in place, and a dispatch whose output memory is too short gets the
// whole output elsewhere (for the SDK to report its size). Then the stream is
// free again for a blocking call. It needs a CUDA device.
func TestStartedDispatchesBackToBack(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	one := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{words([]uint32{1}), nil}, OutputCounts: []uint32{0, 1}}
	// A blocking call first: it waits for the first open's bandwidth probe,
	// which would otherwise queue behind (and so wait for) the starts below.
	if _, err := b.Dispatch(ctx, one); err != nil {
		t.Fatal(err)
	}
	const rounds, n = 64, 100
	var waits []pluginapi.DispatchCompletion
	outs := make([][]byte, rounds)
	for r := range rounds {
		in := make([]uint32, n)
		for i := range in {
			in[i] = uint32(r*1000 + i)
		}
		outs[r] = make([]byte, 4*n)
		if r == rounds-1 {
			outs[r] = outs[r][:4] // too short
		}
		w, err := b.StartDispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{words(in), nil}, OutputCounts: []uint32{0, n}}, [][]byte{outs[r]})
		if err != nil {
			t.Errorf("start %d: %v", r, err)
			break
		}
		waits = append(waits, w)
	}
	// Every completion is called (a failure must not leave started work
	// holding the stream and the pipeline).
	for r, w := range waits {
		res, err := w()
		if err != nil {
			t.Errorf("dispatch %d: %v", r, err)
			continue
		}
		got := wordsOf(res.Outputs[0])
		if len(got) != n {
			t.Errorf("dispatch %d: %d words, want %d", r, len(got), n)
			continue
		}
		for i, v := range got {
			if v != uint32(r*1000+i+1) {
				t.Errorf("dispatch %d: word %d is %d, want %d", r, i, v, r*1000+i+1)
				break
			}
		}
		if r < rounds-1 && &res.Outputs[0][0] != &outs[r][0] {
			t.Errorf("dispatch %d: the output was not written in place", r)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := b.Dispatch(short, one); err != nil {
		t.Fatalf("a blocking dispatch after the started ones: %v", err)
	}
}

// TestStartedDispatchesBatch starts dispatches of add_one while the lanes are
// held at their first launch (pipe.launch), so that the rest wait for a lane:
// the lanes take them as a few batches (a few slabs, not one a dispatch), each
// dispatch's output is right, written in place, and zero past what the kernel
// wrote, although the slabs were used before (by a first round that wrote every
// element); a dispatch too large for a slab goes alone between them. It needs
// a CUDA device.
func TestStartedDispatchesBatch(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addOne()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	one := &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{words([]uint32{1}), nil}, OutputCounts: []uint32{0, 1}}
	if _, err := b.Dispatch(ctx, one); err != nil {
		t.Fatal(err)
	}
	b.life.RLock()
	_, d, err := b.deviceAt(0)
	b.life.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	const rounds, big = 64, 20000
	for round, groups := range []uint32{5, 1} {
		d.pipe.launch.Lock()
		var waits []pluginapi.DispatchCompletion
		ns := make([]int, rounds)
		outs := make([][]byte, rounds)
		for r := range rounds {
			ns[r] = 1 + (r*37)%300
			if r%16 == 15 {
				ns[r] = big // 160 KB of bindings: more than a slab
			}
			in := make([]uint32, ns[r])
			for i := range in {
				in[i] = uint32(r*1000 + i)
			}
			outs[r] = make([]byte, 4*ns[r])
			g := groups
			if ns[r] == big {
				g = (big + 63) / 64
			}
			w, err := b.StartDispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: [3]uint32{g, 1, 1}, Inputs: [][]byte{words(in), nil}, OutputCounts: []uint32{0, uint32(ns[r])}}, [][]byte{outs[r]})
			if err != nil {
				d.pipe.launch.Unlock()
				t.Fatalf("round %d, start %d: %v", round, r, err)
			}
			waits = append(waits, w)
		}
		d.pipe.launch.Unlock()
		for r, w := range waits {
			res, err := w()
			if err != nil {
				t.Errorf("round %d, dispatch %d: %v", round, r, err)
				continue
			}
			if &res.Outputs[0][0] != &outs[r][0] {
				t.Errorf("round %d, dispatch %d: the output was not written in place", round, r)
			}
			for i, v := range wordsOf(res.Outputs[0]) {
				want := uint32(r*1000 + i + 1)
				if ns[r] != big && i >= int(64*groups) {
					want = 0
				}
				if v != want {
					t.Errorf("round %d, dispatch %d (%d words): word %d is %d, want %d", round, r, ns[r], i, v, want)
					break
				}
			}
		}
	}
	d.pipe.mu.Lock()
	slabs := len(d.pipe.slabs)
	d.pipe.mu.Unlock()
	if slabs == 0 || slabs > 16 {
		t.Errorf("%d slabs for rounds of %d dispatches (60 small) held at their first launch, want 1 to 16 (the waiting ones in batches)", slabs, rounds)
	}
}

// BenchmarkStartDispatch is the CUDA side of the data plane's pipelined v1
// dispatch alone: one goroutine starts 1-element increments back to back (the
// adapter's queue) and another calls their completions in order (the
// completer), at most 64 in flight, their bytes in an attached segment; it
// reports dispatches per second, with the device's dispatches over
// dispatchLanes lanes (the default), 2 and 4.
func BenchmarkStartDispatch(b *testing.B) {
	be, adapter := benchBackend(b)
	ctx := context.Background()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: addOne()})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Release(ctx, c.Pipeline)
	be.life.RLock()
	_, d, err := be.deviceAt(adapter)
	be.life.RUnlock()
	if err != nil {
		b.Fatal(err)
	}
	for _, lanes := range []int{dispatchLanes, 2, 4} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			_ = d.ctx.Do(func() error { d.stopLanes(); return nil })
			d.pipe.nlanes = lanes
			startDispatches(b, be, c.Pipeline)
		})
	}
}

// startDispatches is BenchmarkStartDispatch's body on pipeline pl.
func startDispatches(b *testing.B, be *Backend, pl uint64) {
	ctx := context.Background()
	const depth = 64
	// The inputs and outputs lie in an attached segment, as the data plane's
	// staging does: the backend registers it and copies by DMA.
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := be.AttachSegment(ctx, 1, mem); err != nil {
		b.Fatal(err)
	}
	defer be.DetachSegment(ctx, 1)
	type slot struct{ in, out []byte }
	slots := make([]slot, depth)
	for i := range slots {
		slots[i] = slot{in: mem[256*i : 256*i+4], out: mem[256*i+128 : 256*i+132]}
		copy(slots[i].in, words([]uint32{uint32(i)}))
	}
	waits := make(chan pluginapi.DispatchCompletion, depth)
	done := make(chan error, 1)
	b.ResetTimer()
	began := time.Now()
	go func() {
		for w := range waits {
			if _, err := w(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range b.N {
		s := slots[i%depth]
		w, err := be.StartDispatch(ctx, &pluginapi.DispatchRequest{Pipeline: pl, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{s.in, nil}, OutputCounts: []uint32{0, 1}}, [][]byte{s.out})
		if err != nil {
			b.Fatal(err)
		}
		waits <- w
	}
	close(waits)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "dispatches/s")
}

// TestStartedDispatchSlabNeed pins which started dispatches go in a batch (no
// GPU needed): each binding takes a multiple of slabAlign (an empty one too),
// so a 1-element increment takes two; the largest dispatch the host sends as
// one request (64 KiB staged, client.SmallDispatch) fits a slab; more than a
// slab goes alone (0).
func TestStartedDispatchSlabNeed(t *testing.T) {
	u32 := func(n uint32) *binding {
		return &binding{Binding: gpukit.Binding{Decl: ir.BufferDecl{Type: ir.U32, Access: ir.Read}, Count: n}}
	}
	for _, c := range []struct {
		counts []uint32
		want   uint64
	}{
		{[]uint32{1, 1}, 2 * slabAlign},
		{[]uint32{0, 65}, slabAlign + 2*slabAlign},
		{[]uint32{8 << 10, 8 << 10}, 64 << 10},
		{[]uint32{16<<10 - 1, 1, 1}, 64<<10 + 2*slabAlign},
		{[]uint32{slabBytes / 4}, slabBytes},
		{[]uint32{slabBytes/4 + 1}, 0},
		{[]uint32{slabBytes / 8, slabBytes / 8, 1}, 0},
	} {
		var binds []*binding
		for _, n := range c.counts {
			binds = append(binds, u32(n))
		}
		if got := slabNeed(binds); got != c.want {
			t.Errorf("slabNeed(%v elements) = %d, want %d", c.counts, got, c.want)
		}
	}
}
