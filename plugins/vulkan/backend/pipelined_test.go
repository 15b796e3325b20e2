package backend

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// overPipelined is the backend with Dispatch running through started work, as
// the data plane runs a pipelined adapter: every binding is a resident buffer;
// the writes, the submit and the reads are all started before the first
// completion is called, and the completions are called in start order.
type overPipelined struct{ *Backend }

func (o overPipelined) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
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
		a, err := o.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: bd.Bytes()})
		if err != nil {
			return nil, err
		}
		handles = append(handles, a.Buffer)
		cmd.Bindings = append(cmd.Bindings, pluginapi.BufferRange{Buffer: a.Buffer, Size: bd.Bytes()})
	}
	var waits []pluginapi.Completion
	// Every completion is called, whatever fails: the started work uses the
	// buffers the deferred frees give back.
	var first error
	settle := func() {
		for _, w := range waits {
			if _, err := w(); err != nil && first == nil {
				first = err
			}
		}
		waits = nil
	}
	defer settle()
	start := func(w pluginapi.Completion, err error) bool {
		if err != nil {
			first = err
			return false
		}
		waits = append(waits, w)
		return true
	}
	for i, bd := range binds {
		if bd.ReadsInput() && !start(o.StartWrite(ctx, handles[i], 0, bd.Input)) {
			return nil, first
		}
	}
	w, err := o.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{cmd}})
	if !start(w, err) {
		return nil, first
	}
	at := len(waits) - 1
	res := &pluginapi.DispatchResult{}
	for i, bd := range binds {
		if !bd.Decl.Access.IsOutput() {
			continue
		}
		out := make([]byte, bd.Bytes())
		res.Outputs = append(res.Outputs, out)
		if !start(o.StartRead(ctx, handles[i], 0, out)) {
			return nil, first
		}
	}
	for i, w := range waits {
		r, err := w()
		if err != nil && first == nil {
			first = err
		}
		if i == at && r != nil {
			res.HostNanos, res.DeviceNanos = r.HostNanos, r.DeviceNanos
		}
	}
	waits = nil
	if first != nil {
		return nil, first
	}
	return res, nil
}

// TestConformanceOverPipelinedBuffers runs the whole conformance kit (semantics
// and corpus) through StartWrite, StartSubmit and StartRead, each case's
// writes, submit and reads started before any of them completes, mapped and
// staged, under the validation layer with synchronization validation.
func TestConformanceOverPipelinedBuffers(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		conformance.Run(t, overPipelined{b}, conformance.Options{})
	})
}

// holdFences makes every fence of adapter 0's device read as unsignalled
// until the returned function is called (at cleanup at the latest): the
// device seems to still run every job submitted meanwhile.
func holdFences(t *testing.T, b *Backend) (*device, func()) {
	t.Helper()
	d := b.adapters.List()[0].current()
	hold := make(chan struct{})
	d.hold.Store(&hold)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
			d.hold.Store(nil)
		}
	}
	t.Cleanup(release)
	return d, release
}

// startAll runs starts on its own goroutine and returns their completions,
// failing the test when they do not all return within a generous bound: a
// Start method that waited for an earlier job's fence (held) returns only
// once release is called.
func startAll(t *testing.T, release func(), starts ...func() (pluginapi.Completion, error)) []pluginapi.Completion {
	t.Helper()
	type started struct {
		waits []pluginapi.Completion
		err   error
	}
	ch := make(chan started, 1)
	go func() {
		var s started
		for _, f := range starts {
			w, err := f()
			if err != nil {
				s.err = err
				break
			}
			s.waits = append(s.waits, w)
		}
		ch <- s
	}()
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s.waits
	case <-time.After(20 * time.Second):
		// Let the starts end, and complete what they started (started
		// work holds the backend until its completion returns).
		release()
		for _, w := range (<-ch).waits {
			_, _ = w()
		}
		t.Fatal("a Start method waited for the fence of work started before it")
		return nil
	}
}

// TestPipelinedStartsBeforeEarlierFences pins the pipelining, on both memory
// paths: while every fence of the device reads as unsignalled (the device
// seems to run everything), two rounds of write, submit and read on each of
// four buffers are all started and submitted — nothing started waited for
// the work before it — and once the fences signal, the completions, called in
// start order, return every result right. Without StartSubmit, StartWrite and
// StartRead enqueuing their work, the first Start waits for its fence and the
// test fails.
func TestPipelinedStartsBeforeEarlierFences(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		p := compileT(t, b, incr())
		const bufs, n = 4, 300
		var xs [bufs]uint64
		for i := range xs {
			xs[i] = allocT(t, b, make([]uint32, n))
		}
		value := func(round, buf, i int) uint32 { return uint32(round*100000 + buf*1000 + i) }
		d, release := holdFences(t, b)
		calls, seen := d.vk.Calls(), d.completed()
		var starts []func() (pluginapi.Completion, error)
		var outs [][]byte
		for round := range 2 {
			for k, x := range xs {
				src := words(u32s(n, func(i int) uint32 { return value(round, k, i) }))
				out := make([]byte, 4*n)
				outs = append(outs, out)
				starts = append(starts,
					func() (pluginapi.Completion, error) { return b.StartWrite(ctx, x, 0, src) },
					func() (pluginapi.Completion, error) {
						return b.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, n)}})
					},
					func() (pluginapi.Completion, error) { return b.StartRead(ctx, x, 0, out) })
			}
		}
		waits := startAll(t, release, starts...)
		after := d.vk.Calls()
		// Every submit is on the queue, and each round's reads and the
		// second round's writes are copy jobs (their buffers are in use).
		if got := after.Submits - calls.Submits; got < 2*bufs*2 {
			t.Errorf("%d jobs were submitted while the fences read unsignalled, want at least %d", got, 2*bufs*2)
		}
		if d.completed() != seen {
			t.Errorf("a job was seen finished while the fences were held")
		}
		release()
		for i, w := range waits {
			res, err := w()
			if err != nil {
				t.Fatalf("completion %d: %v", i, err)
			}
			if i%3 == 1 && (res == nil || res.HostNanos <= 0) {
				t.Errorf("submit %d reports %+v", i/3, res)
			}
		}
		for j, out := range outs {
			round, k := j/bufs, j%bufs
			for i, v := range wordsOf(out) {
				if want := value(round, k, i) + 1; v != want {
					t.Fatalf("round %d, buffer %d: out[%d] = %d, want %d", round, k, i, v, want)
				}
			}
		}
	})
}

// TestPipelinedDeadlineWaitsForTheDevice pins deadlines and cancellation of
// started work: a started submit whose deadline passes, and a started read
// whose context is cancelled, while the device still runs them (held fences)
// get ctx's error as Submit and ReadBuffer do, but only once the device is
// done (their memory stays in use until then); a Start whose context has
// already ended submits nothing; and the adapter works afterwards.
func TestPipelinedDeadlineWaitsForTheDevice(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		p := compileT(t, b, incr())
		x := allocT(t, b, []uint32{1, 2})
		d, release := holdFences(t, b)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		cancelled, cancelRead := context.WithCancel(ctx)
		out := make([]byte, 8)
		waits := startAll(t, release,
			func() (pluginapi.Completion, error) {
				return b.StartSubmit(short, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 2)}})
			},
			func() (pluginapi.Completion, error) { return b.StartRead(cancelled, x, 0, out) })
		type outcome struct {
			err error
			at  int
		}
		// Each completion waits on its own goroutine, so that both are
		// waiting when their contexts end.
		done := make(chan outcome, len(waits))
		for i, w := range waits {
			go func() {
				_, err := w()
				done <- outcome{err, i}
			}()
		}
		<-short.Done()
		cancelRead()
		// Give a completion that returns at its context's end the time to.
		time.Sleep(100 * time.Millisecond)
		select {
		case o := <-done:
			t.Fatalf("completion %d returned %v while the device still ran its work", o.at, o.err)
		default:
		}
		release()
		for range waits {
			o := <-done
			want := []error{context.DeadlineExceeded, context.Canceled}[o.at]
			if !errors.Is(o.err, want) || !strings.Contains(o.err.Error(), "stopped waiting for the device") {
				t.Errorf("completion %d = %v, want %v after stopping waiting for the device", o.at, o.err, want)
			}
		}
		ended, end := context.WithCancel(ctx)
		end()
		calls := d.vk.Calls()
		if _, err := b.StartSubmit(ended, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 2)}}); !errors.Is(err, context.Canceled) {
			t.Errorf("StartSubmit with an ended context = %v, want context.Canceled", err)
		}
		if d.vk.Calls().Submits != calls.Submits {
			t.Error("a start whose context had ended submitted its work")
		}
		if got := readT(t, b, x, 0, 2); got[0] != 2 || got[1] != 3 {
			t.Errorf("x = %v after the abandoned increment ran, want [2 3]", got)
		}
	})
}

// TestPipelinedLoopGuardAmongOthers starts a submit, one whose loops run
// longer than llvmpipe lets a shader loop, and another submit, all before the
// first completes: on llvmpipe the middle one's completion is the loop
// guard's RejectedError and the others' work is right; elsewhere all three
// run right.
func TestPipelinedLoopGuardAmongOthers(t *testing.T) {
	b := newTestBackend(t)
	guarded := endsLongLoops(b.adapters.List()[0].props)
	bothMemoryPaths(t, b, func(t *testing.T) {
		ctx := context.Background()
		p := compileT(t, b, incr())
		spin := compileT(t, b, spinUniform())
		x := allocT(t, b, []uint32{7})
		out := allocT(t, b, []uint32{0})
		_, release := holdFences(t, b)
		submit := func(cmd pluginapi.DispatchCommand) func() (pluginapi.Completion, error) {
			return func() (pluginapi.Completion, error) {
				return b.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{cmd}})
			}
		}
		waits := startAll(t, release, submit(incrCommand(p, x, 0, 1)),
			submit(pluginapi.DispatchCommand{Pipeline: spin, Grid: [3]uint32{1, 1, 1},
				Bindings: []pluginapi.BufferRange{{Buffer: out, Size: 4}}, Uniforms: kernels.U32Bytes([]uint32{200000})}),
			submit(incrCommand(p, x, 0, 1)))
		release()
		for i, w := range waits {
			_, err := w()
			var rejected *pluginapi.RejectedError
			switch {
			case i == 1 && guarded:
				if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "LP_MAX_TGSI_LOOP_ITERATIONS") {
					t.Errorf("the long loop's completion = %v, want the loop guard's RejectedError", err)
				}
			case err != nil:
				t.Errorf("completion %d: %v", i, err)
			}
		}
		if got := readT(t, b, x, 0, 1)[0]; got != 9 {
			t.Errorf("x = %d after two increments around the long loop, want 9", got)
		}
	})
}

// TestPipelinedDeviceLost pins a lost device seen by a completion: it is the
// DeviceError Submit returns, and the next transfers say the device is lost.
func TestPipelinedDeviceLost(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	p := compileT(t, b, incr())
	x := allocT(t, b, []uint32{5})
	d := b.adapters.List()[0].current()
	w, err := b.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{incrCommand(p, x, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	d.loseNext.Store(true)
	var devErr *pluginapi.DeviceError
	if _, err := w(); !errors.As(err, &devErr) || !vk.IsDeviceLost(err) {
		t.Fatalf("completion on a lost device = %v, want a DeviceError for VK_ERROR_DEVICE_LOST", err)
	}
	if _, err := b.StartRead(ctx, x, 0, make([]byte, 4)); !errors.As(err, &devErr) {
		t.Errorf("StartRead after a lost device = %v, want a DeviceError", err)
	}
	if _, err := b.StartWrite(ctx, x, 0, make([]byte, 4)); !errors.As(err, &devErr) {
		t.Errorf("StartWrite after a lost device = %v, want a DeviceError", err)
	}
}

// TestPipelinedTransfersOfSeveralChunks starts, behind a fill that keeps the
// buffer in use, a write and a read of more than three staging chunks, on
// both memory paths: such a transfer runs to its end in its Start method
// (bounded staging), after the fill, and every byte arrives. Started staging
// memory is reserved only up to maxStartedStaging and is all given back once
// the completions returned.
func TestPipelinedTransfersOfSeveralChunks(t *testing.T) {
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
		got := make([]byte, size+8)
		var waits []pluginapi.Completion
		for _, start := range []func() (pluginapi.Completion, error){
			func() (pluginapi.Completion, error) {
				return b.StartSubmit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
					pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: a.Buffer, Size: size + 8}, Value: 0x01010101}}})
			},
			func() (pluginapi.Completion, error) { return b.StartWrite(ctx, a.Buffer, 4, data) },
			func() (pluginapi.Completion, error) { return b.StartRead(ctx, a.Buffer, 0, got) },
		} {
			w, err := start()
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, w)
		}
		for i, w := range waits {
			if _, err := w(); err != nil {
				t.Fatalf("completion %d: %v", i, err)
			}
		}
		ones := []byte{1, 1, 1, 1}
		if !bytes.Equal(got[4:size+4], data) || !bytes.Equal(got[:4], ones) || !bytes.Equal(got[size+4:], ones) {
			t.Errorf("the buffer does not hold the written bytes between the fill's")
		}
		d := b.adapters.List()[0].current()
		if d.staged != 0 {
			t.Errorf("%d bytes of started staging memory still reserved", d.staged)
		}
		if !d.takeStaging(maxStartedStaging) || d.takeStaging(1) {
			t.Error("started staging memory is not bounded by maxStartedStaging")
		}
		d.giveStaging(maxStartedStaging)
	})
}
