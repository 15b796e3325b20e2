package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// The submit path (see docs/design.md, "Vulkan"): a repeated submit reuses its
// recorded command buffer, allocates nothing but its result, and sees a short
// job done by polling its fence.

// addProgram adds the uniform k to every element of x.
func addProgram() *ir.Program {
	b := ir.NewBuilder("test.submitpath.add", 64, 1, 1)
	x := b.Buffer("x", ir.U32, ir.ReadWrite)
	k := b.Uniform("k", ir.U32)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Add(ir.Load(x, i), k))
	})
	return b.MustBuild()
}

// submitPath is a backend with addProgram compiled and a zeroed buffer of n
// words, and the command that adds k to its words [from, from+count).
type submitPath struct {
	b        *Backend
	d        *device
	pipeline uint64
	buf      uint64
}

func newSubmitPath(t *testing.T, n int) *submitPath {
	t.Helper()
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: addProgram()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4 * uint64(n)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.FreeBuffer(ctx, a.Buffer); err != nil {
			t.Errorf("FreeBuffer: %v", err)
		}
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	return &submitPath{b: b, d: b.adapters.List()[0].current(), pipeline: c.Pipeline, buf: a.Buffer}
}

func (s *submitPath) add(from, count, k uint32) *pluginapi.SubmitRequest {
	u := binary.LittleEndian.AppendUint32(nil, k)
	return &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.DispatchCommand{
		Pipeline: s.pipeline, Grid: [3]uint32{(count + 63) / 64, 1, 1}, Uniforms: u,
		Bindings: []pluginapi.BufferRange{{Buffer: s.buf, Offset: 4 * uint64(from), Size: 4 * uint64(count)}},
	}}}
}

func (s *submitPath) submit(t *testing.T, req *pluginapi.SubmitRequest) {
	t.Helper()
	if _, err := s.b.Submit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

func (s *submitPath) read(t *testing.T, n int) []uint32 {
	t.Helper()
	out := make([]byte, 4*n)
	if err := s.b.ReadBuffer(context.Background(), s.buf, 0, out); err != nil {
		t.Fatal(err)
	}
	return wordsOf(out)
}

// TestSubmitReusesItsRecording submits the same dispatch 50 times: it is
// recorded once and submitted 50 times. A submit with another uniform, or over
// another range, is recorded again, and every submit's work is done.
func TestSubmitReusesItsRecording(t *testing.T) {
	s := newSubmitPath(t, 8)
	same := s.add(0, 4, 1)
	s.submit(t, same)
	before := s.d.vk.Calls()
	for range 50 {
		s.submit(t, same)
	}
	after := s.d.vk.Calls()
	if n := after.Recordings - before.Recordings; n != 0 {
		t.Errorf("50 identical submits recorded %d command buffers, want 0 (the first submit's is reused)", n)
	}
	if n := after.Submits - before.Submits; n != 50 {
		t.Errorf("50 identical submits made %d vkQueueSubmit calls", n)
	}
	s.submit(t, s.add(0, 4, 10))
	s.submit(t, s.add(4, 4, 100))
	if n := s.d.vk.Calls().Recordings - after.Recordings; n != 2 {
		t.Errorf("a submit with another uniform and one over another range recorded %d command buffers, want 2", n)
	}
	got := s.read(t, 8)
	want := []uint32{61, 61, 61, 61, 100, 100, 100, 100}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("buffer = %v after the submits, want %v", got, want)
		}
	}
}

// TestSubmitResetsItsTimestamps submits the same dispatch 50 times, reusing
// its recording: on a device with hostQueryReset (lavapipe has it) the
// recording holds no query reset and each submission resets its two queries
// on the host; without it the recording resets them. Either way every submit
// reports the device time of its own work (fresh timestamps; the validation
// layer, on in tests, also reports a timestamp written to a query not reset).
func TestSubmitResetsItsTimestamps(t *testing.T) {
	s := newSubmitPath(t, 8)
	if !s.d.a.timestamps {
		t.Fatalf("adapter %q has no timestamps: the test needs them", s.d.a.info.Name)
	}
	same := s.add(0, 8, 1)
	before := s.d.vk.Calls()
	for i := range 50 {
		res, err := s.b.Submit(context.Background(), same)
		if err != nil {
			t.Fatal(err)
		}
		if res.DeviceNanos <= 0 || res.DeviceNanos > int64(time.Second) {
			t.Fatalf("submit %d: device time %d ns", i, res.DeviceNanos)
		}
	}
	after := s.d.vk.Calls()
	recorded, onHost := after.QueryResets-before.QueryResets, after.HostQueryResets-before.HostQueryResets
	if s.d.a.hostReset {
		if recorded != 0 || onHost != 50 {
			t.Errorf("with hostQueryReset: %d resets recorded and %d on the host for 50 submits, want 0 and 50", recorded, onHost)
		}
	} else if recorded != 1 || onHost != 0 {
		t.Errorf("without hostQueryReset: %d resets recorded and %d on the host for 50 submits of one recording, want 1 and 0", recorded, onHost)
	}
	if got := s.read(t, 1)[0]; got != 50 {
		t.Errorf("buffer[0] = %d after 50 submits adding 1", got)
	}
}

// TestSubmitRecordsAgainAfterASetLeft releases another pipeline between two
// identical submits: the device's recordings may bind what left with it, so the
// second submit records again, and its work is done.
func TestSubmitRecordsAgainAfterASetLeft(t *testing.T) {
	s := newSubmitPath(t, 4)
	ctx := context.Background()
	req := s.add(0, 4, 3)
	s.submit(t, req)
	s.submit(t, req)
	other, err := s.b.Compile(ctx, &pluginapi.CompileRequest{Program: addProgram()})
	if err != nil {
		t.Fatal(err)
	}
	otherReq := s.add(0, 4, 5)
	otherReq.Commands[0] = func() pluginapi.DispatchCommand {
		c := otherReq.Commands[0].(pluginapi.DispatchCommand)
		c.Pipeline = other.Pipeline
		return c
	}()
	s.submit(t, otherReq)
	if err := s.b.Release(ctx, other.Pipeline); err != nil {
		t.Fatal(err)
	}
	before := s.d.vk.Calls().Recordings
	s.submit(t, req)
	if n := s.d.vk.Calls().Recordings - before; n != 1 {
		t.Errorf("the submit after a pipeline was released recorded %d command buffers, want 1", n)
	}
	if got := s.read(t, 4); got[0] != 14 || got[3] != 14 {
		t.Errorf("buffer = %v, want 14 everywhere", got)
	}
}

// TestSubmitAllocatesOnlyItsResult pins that a warm submit of a dispatch
// allocates nothing on the Go heap but its SubmitResult: no job, op, descriptor
// key, push-constant block, timestamp slice or channel per submit.
func TestSubmitAllocatesOnlyItsResult(t *testing.T) {
	s := newSubmitPath(t, 4)
	ctx := context.Background()
	req := s.add(0, 4, 1)
	s.submit(t, req)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.b.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a warm submit allocates %.1f times, want 1 (its result)", allocs)
	}
}

// TestSubmitPollsItsFence gives the device a long poll: a short submit is then
// seen done by vkGetFenceStatus alone, without a vkWaitForFences call; with no
// poll (CPU devices) it waits in vkWaitForFences.
func TestSubmitPollsItsFence(t *testing.T) {
	s := newSubmitPath(t, 4)
	req := s.add(0, 4, 1)
	s.submit(t, req)
	own := s.d.spin.Load()
	defer s.d.spin.Store(own)
	s.d.spin.Store(int64(time.Minute))
	before := s.d.vk.Calls().FenceWaits
	for range 20 {
		s.submit(t, req)
	}
	if n := s.d.vk.Calls().FenceWaits - before; n != 0 {
		t.Errorf("20 short submits polling for a minute waited in vkWaitForFences %d times, want 0", n)
	}
	s.d.spin.Store(0)
	before = s.d.vk.Calls().FenceWaits
	s.submit(t, req)
	if n := s.d.vk.Calls().FenceWaits - before; n == 0 {
		t.Error("a submit without polling never waited in vkWaitForFences")
	}
	if got := s.read(t, 4); got[0] != 22 {
		t.Errorf("x[0] = %d after 22 increments", got[0])
	}
}

// TestSubmitPollGivesUpAtTheDeadline polls for a minute on a submit that runs
// for seconds: its deadline still ends the wait while the work runs.
func TestSubmitPollGivesUpAtTheDeadline(t *testing.T) {
	s := newSubmitPath(t, 1)
	long := blocker(t, s.b, 2*time.Second)
	own := s.d.spin.Load()
	defer s.d.spin.Store(own)
	s.d.spin.Store(int64(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.b.Submit(ctx, long)
	s.d.lock <- struct{}{}
	seq := s.d.seq
	s.d.release()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a submit running for seconds past its deadline = %v, want context.DeadlineExceeded", err)
	}
	if s.d.completed() >= seq {
		t.Error("the submit returned only after its work had finished")
	}
}

// BenchmarkSubmitLatency submits one dispatch over a resident 1-element buffer
// (configured from the environment, adapter 0; no validation layer unless
// KILN_VK_VALIDATION=1), after 300 ms of the same submits back to back to warm
// the GPU's clock up, and reports the end-to-end time's median-ns, p90-ns and
// p99-ns, and per submit the Vulkan calls the submit path made:
// recordings/op (vkBeginCommandBuffer; 0 when the command buffer is reused),
// submits/op (vkQueueSubmit) and fence-waits/op (vkWaitForFences: the fence
// was not seen signaled within the poll).
func BenchmarkSubmitLatency(b *testing.B) {
	ctx := context.Background()
	be := New(ConfigFromEnv())
	d, err := be.Describe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close(ctx)
	if len(d.Adapters) == 0 || !d.Adapters[0].Available {
		b.Skipf("adapter 0 is not usable: %+v", d.Adapters)
	}
	be.measured.Wait()
	c, err := be.Compile(ctx, &pluginapi.CompileRequest{Program: addProgram()})
	if err != nil {
		b.Fatal(err)
	}
	buf, err := be.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4})
	if err != nil {
		b.Fatal(err)
	}
	s := &submitPath{b: be, d: be.adapters.List()[0].current(), pipeline: c.Pipeline, buf: buf.Buffer}
	req := s.add(0, 1, 1)
	for began := time.Now(); time.Since(began) < 300*time.Millisecond; {
		if _, err := be.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	times := make([]time.Duration, b.N)
	before := s.d.vk.Calls()
	b.ResetTimer()
	for i := range b.N {
		began := time.Now()
		if _, err := be.Submit(ctx, req); err != nil {
			b.Fatal(err)
		}
		times[i] = time.Since(began)
	}
	b.StopTimer()
	after := s.d.vk.Calls()
	slices.Sort(times)
	at := func(q float64) float64 {
		return float64(times[min(int(q*float64(len(times))), len(times)-1)].Nanoseconds())
	}
	b.ReportMetric(at(0.5), "median-ns")
	b.ReportMetric(at(0.9), "p90-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	n := float64(b.N)
	b.ReportMetric(float64(after.Recordings-before.Recordings)/n, "recordings/op")
	b.ReportMetric(float64(after.Submits-before.Submits)/n, "submits/op")
	b.ReportMetric(float64(after.FenceWaits-before.FenceWaits)/n, "fence-waits/op")
}
