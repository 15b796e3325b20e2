package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/driver"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
)

// fakeSubmitState is a backend with one H200-like adapter, a device that was
// never opened on a driver, vector_add's pipeline and three 1-element buffers at
// made-up device addresses: enough to run the plugin's side of a submit (finding
// and checking everything, resolving the kernel parameters) without a GPU.
func fakeSubmitState(tb testing.TB) (*Backend, *device, *pluginapi.SubmitRequest) {
	tb.Helper()
	b, reqs := fakeAdapters(tb, 1)
	return b, b.adapters.List()[0].d, reqs[0]
}

// fakeAdapters is fakeSubmitState with n adapters, each with its device, its
// vector_add pipeline (handle 1+adapter) and its buffers, and a submit request
// per adapter.
func fakeAdapters(tb testing.TB, n int) (*Backend, []*pluginapi.SubmitRequest) {
	tb.Helper()
	k, _ := kernels.Lookup("vector_add")
	m, err := ptx.Emit(k.Program(), ptx.Options{Target: ptx.Target{SM: 80}, NonCoherentReads: true})
	if err != nil {
		tb.Fatal(err)
	}
	b := New(Config{})
	var adapters []*adapter
	var reqs []*pluginapi.SubmitRequest
	for i := range n {
		a := &adapter{index: i, lim: h200(), info: pluginapi.Adapter{Index: i, Name: "fake H200", Available: true}}
		d := &device{a: a, sem: make(chan struct{}, 1)}
		a.d = d
		adapters = append(adapters, a)
		args := driver.NewParams(len(m.Params))
		tb.Cleanup(args.Free)
		pipe := b.pipelines.Add(&pipeline{d: d, prog: k.Program(), mod: m, args: args, nc: true})
		var bufs []pluginapi.BufferRange
		for j := range 3 {
			h := b.buffers.Add(&resident{d: d, ptr: driver.DevicePtr(10*i+j+1) << 20, size: 4})
			bufs = append(bufs, pluginapi.BufferRange{Buffer: h, Size: 4})
		}
		reqs = append(reqs, &pluginapi.SubmitRequest{Adapter: i, Commands: []pluginapi.SubmitCommand{
			pluginapi.DispatchCommand{Pipeline: pipe, Grid: [3]uint32{1, 1, 1}, Bindings: bufs}}})
	}
	if _, err := b.adapters.Start(func() ([]*adapter, string) { return adapters, "" }, nil); err != nil {
		tb.Fatal(err)
	}
	return b, reqs
}

// TestAdaptersDoNotWaitForEachOther: while adapter 0's stream is taken (a
// submit runs there), adapter 1 takes its own and resolves its submit; a
// command naming another adapter's pipeline or buffer is refused.
func TestAdaptersDoNotWaitForEachOther(t *testing.T) {
	b, reqs := fakeAdapters(t, 2)
	d0, d1 := b.adapters.List()[0].d, b.adapters.List()[1].d
	ctx := context.Background()
	if err := d0.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	defer d0.release()
	done := make(chan error, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		a, err := b.adapterAt(1)
		if err == nil {
			err = a.d.acquire(tctx)
		}
		if err != nil {
			done <- err
			return
		}
		defer a.d.release()
		s := &a.d.scratch
		s.reset()
		err = b.prepare(a.d, reqs[1].Commands, s)
		s.unlock()
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("adapter 1 while adapter 0 is busy: %v", err)
	}
	if got := d1.scratch.args[0]; got != 11<<20 {
		t.Errorf("adapter 1's first parameter = %#x, want its own buffer %#x", got, 11<<20)
	}
	s := &d1.scratch
	s.reset()
	err := b.prepare(d1, reqs[0].Commands, s)
	s.unlock()
	if err == nil || !strings.Contains(err.Error(), "compiled for adapter 0, not 1") {
		t.Errorf("adapter 0's pipeline on adapter 1: %v", err)
	}
}

// TestPrepareResolvesWithoutAllocating pins the plugin's side of a small submit:
// the parameters are the buffers' addresses and counts, and resolving them
// allocates nothing once the device's scratch has grown.
func TestPrepareResolvesWithoutAllocating(t *testing.T) {
	b, d, req := fakeSubmitState(t)
	s := &d.scratch
	prepare := func() {
		s.reset()
		if err := b.prepare(d, req.Commands, s); err != nil {
			t.Fatal(err)
		}
		s.unlock()
	}
	prepare()
	if len(s.launches) != 1 || s.launches[0].kind != launchDispatch {
		t.Fatalf("launches %+v", s.launches)
	}
	want := []uint64{1 << 20, 2 << 20, 3 << 20, 1, 1, 1}
	for i, v := range want {
		if s.args[i] != v {
			t.Errorf("parameter %d = %#x, want %#x", i, s.args[i], v)
		}
	}
	if n := testing.AllocsPerRun(100, prepare); n != 0 {
		t.Errorf("preparing a 1-dispatch submit allocates %v times, want 0", n)
	}
	if p, _ := b.pipelines.Get(1); !p.use.TryLock() {
		t.Error("the pipeline is still read-locked after unlock")
	} else {
		p.use.Unlock()
	}
}

// BenchmarkPrepareSmall is the plugin's own CPU work of a 1-element submit before
// the driver is called: finding the adapter, pipeline and buffers, checking the
// dispatch, resolving the kernel parameters. No GPU needed.
func BenchmarkPrepareSmall(b *testing.B) {
	be, d, req := fakeSubmitState(b)
	s := &d.scratch
	b.ReportAllocs()
	for range b.N {
		if _, err := be.adapterAt(0); err != nil {
			b.Fatal(err)
		}
		s.reset()
		if err := be.prepare(d, req.Commands, s); err != nil {
			b.Fatal(err)
		}
		s.unlock()
	}
}

// TestAliasedBindingsUseTheSafeKernel: a dispatch whose read binding overlaps its
// written one runs the kernel without non-coherent reads; reads of one buffer
// twice, or disjoint parts of one buffer, keep the fast kernel.
func TestAliasedBindingsUseTheSafeKernel(t *testing.T) {
	b, d, _ := fakeSubmitState(t)
	a := b.adapters.List()[0]
	big := &resident{d: a.d, size: 64}
	nine := b.buffers.Add(big)
	big.ptr = driver.DevicePtr(nine << 20)
	r := func(h, off, size uint64) pluginapi.BufferRange {
		return pluginapi.BufferRange{Buffer: h, Offset: off, Size: size}
	}
	for _, tc := range []struct {
		name     string
		bindings []pluginapi.BufferRange // a, b (read), out (write)
		safe     bool
	}{
		{"separate buffers", []pluginapi.BufferRange{r(1, 0, 4), r(2, 0, 4), r(3, 0, 4)}, false},
		{"a is out", []pluginapi.BufferRange{r(1, 0, 4), r(2, 0, 4), r(1, 0, 4)}, true},
		{"b is out", []pluginapi.BufferRange{r(1, 0, 4), r(3, 0, 4), r(3, 0, 4)}, true},
		{"a is b", []pluginapi.BufferRange{r(1, 0, 4), r(1, 0, 4), r(3, 0, 4)}, false},
		{"disjoint halves", []pluginapi.BufferRange{r(nine, 0, 16), r(nine, 0, 16), r(nine, 16, 16)}, false},
		{"overlapping ranges", []pluginapi.BufferRange{r(nine, 0, 16), r(nine, 0, 16), r(nine, 12, 16)}, true},
		{"touching ranges", []pluginapi.BufferRange{r(nine, 16, 16), r(nine, 32, 16), r(nine, 0, 16)}, false},
	} {
		s := &d.scratch
		s.reset()
		err := b.prepare(d, []pluginapi.SubmitCommand{pluginapi.DispatchCommand{Pipeline: 1, Grid: [3]uint32{1, 1, 1}, Bindings: tc.bindings}}, s)
		s.unlock()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := s.launches[0].safe; got != tc.safe {
			t.Errorf("%s: safe kernel %v, want %v", tc.name, got, tc.safe)
		}
	}
}
