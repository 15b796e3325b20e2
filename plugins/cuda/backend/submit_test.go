package backend

import (
	"testing"

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
	a := &adapter{index: 0, lim: h200(), info: pluginapi.Adapter{Index: 0, Name: "fake H200", Available: true}}
	d := &device{a: a, sem: make(chan struct{}, 1)}
	a.d = d
	k, _ := kernels.Lookup("vector_add")
	m, err := ptx.Emit(k.Program(), ptx.Options{Target: ptx.Target{SM: 80}})
	if err != nil {
		tb.Fatal(err)
	}
	args := driver.NewParams(len(m.Params))
	tb.Cleanup(args.Free)
	b := New(Config{})
	b.started = true
	b.adapters = []*adapter{a}
	b.pipelines[1] = &pipeline{d: d, prog: k.Program(), mod: m, args: args}
	b.buffers = map[uint64]*resident{}
	var bufs []pluginapi.BufferRange
	for h := uint64(1); h <= 3; h++ {
		b.buffers[h] = &resident{d: d, ptr: driver.DevicePtr(h << 20), size: 4}
		bufs = append(bufs, pluginapi.BufferRange{Buffer: h, Size: 4})
	}
	req := &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: 1, Grid: [3]uint32{1, 1, 1}, Bindings: bufs}}}
	return b, d, req
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
	if p := b.pipelines[1]; !p.use.TryLock() {
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
