//go:build linux

package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// startBackend is a pipeBackend that is also a pluginapi.DispatchStarter: its
// StartDispatch logs "start" like the other Start methods, and its completion
// waits for the gate when the pipeline was compiled on adapter 0, then runs
// the kernel in place in the host's memory for the output (outputs[0]).
type startBackend struct {
	*pipeBackend
	adapters map[uint64]int // pipeline → adapter (under mu)
}

func newStartBackend() *startBackend {
	return &startBackend{pipeBackend: newHeldPipeBackend(), adapters: map[uint64]int{}}
}

func (b *startBackend) Compile(ctx context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	res, err := b.memBackend.Compile(ctx, req)
	if err == nil {
		b.mu.Lock()
		b.adapters[res.Pipeline] = req.Adapter
		b.mu.Unlock()
	}
	return res, err
}

func (b *startBackend) StartDispatch(ctx context.Context, req *pluginapi.DispatchRequest, outputs [][]byte) (pluginapi.DispatchCompletion, error) {
	b.mu.Lock()
	a := b.adapters[req.Pipeline]
	k := b.kernels[req.Pipeline]
	b.mu.Unlock()
	c, err := b.completion(ctx, a, func() (*pluginapi.SubmitResult, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	return func() (*pluginapi.DispatchResult, error) {
		if _, err := c(); err != nil {
			return nil, err
		}
		out := outputs[0][:len(req.Inputs[0])]
		copy(out, req.Inputs[0])
		if err := k.RunBound(context.Background(), req.Grid, req.Uniforms, [][]byte{out}); err != nil {
			return nil, pluginapi.Rejected("%w", err)
		}
		return &pluginapi.DispatchResult{Outputs: [][]byte{out}}, nil
	}, nil
}

// incrementProgram adds 1 to each f32 of its one read_write buffer.
func incrementProgram(t testing.TB) *ir.Program {
	t.Helper()
	b := ir.NewBuilder("test.increment.f32", 64, 1, 1)
	buf := b.Buffer("buf", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	prog, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// waitWritten waits until p has written a request past mark (requestsSent).
func waitWritten(t *testing.T, p *plane, mark uint64) {
	t.Helper()
	for until := time.Now().Add(20 * time.Second); requestsSent(p) == mark; time.Sleep(time.Millisecond) {
		if time.Now().After(until) {
			t.Fatal("the request was not written")
		}
	}
}

// TestPlaneDispatchStartsWhileEarlierRuns pins the pipelined v1 dispatch:
// while the completion of a dispatch on adapter 0 waits (the device still
// runs it), the adapter's queue starts the next dispatch; both are answered
// once their completions return, each with its own result written in place.
// Without pluginapi.DispatchStarter's support the plugin ran Dispatch to its
// end, one at a time, and started nothing meanwhile.
func TestPlaneDispatchStartsWhileEarlierRuns(t *testing.T) {
	b := newStartBackend()
	conn := serveV2(t, b)
	if c := conn.Capabilities(); !c.PipelinedDispatch || !strings.Contains(c.String(), "pipelined dispatch") {
		t.Fatalf("a ConcurrentAdapters DispatchStarter reports %+v (%s), want PipelinedDispatch", c, c)
	}
	_, p := conn.v2.snapshot()
	if p == nil {
		t.Fatal("no data plane")
	}
	compiled, err := conn.Compile(ctxT(t), &pluginapi.CompileRequest{Adapter: 0, Program: incrementProgram(t)})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		v   float32
		err error
	}
	var answered atomic.Int32
	dispatch := func(v float32, to chan<- result) {
		in := make([]byte, 4)
		binary.LittleEndian.PutUint32(in, math.Float32bits(v))
		res, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Pipeline: compiled.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}, OutputCounts: []uint32{0}}, []int{4})
		answered.Add(1)
		if err != nil {
			to <- result{err: err}
			return
		}
		to <- result{v: math.Float32frombits(binary.LittleEndian.Uint32(res.Outputs[0]))}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	mark := requestsSent(p)
	go dispatch(1, first)
	waitWritten(t, p, mark)
	release := b.holdFirstUntilRead(t, p, requestsSent(p))
	go dispatch(10, second)
	release()
	waitStarts(t, b.pipeBackend, 2)
	if n := answered.Load(); n != 0 {
		close(b.gate)
		t.Fatalf("%d dispatches were answered before their completions returned", n)
	}
	close(b.gate)
	for _, c := range []struct {
		ch   chan result
		want float32
	}{{first, 2}, {second, 11}} {
		r := <-c.ch
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.v != c.want {
			t.Fatalf("a dispatch returned %v, want %v", r.v, c.want)
		}
	}
	if ev := b.events(); !slices.Equal(ev, []string{"start", "start", "done", "done"}) {
		t.Fatalf("the backend saw %v, want [start start done done]", ev)
	}
}

// quickStarter is a DispatchStarter whose dispatches echo their input at once,
// for the plane's own cost per dispatch.
type quickStarter struct{ *memBackend }

func (quickStarter) ConcurrentAdapters() bool { return true }

func (quickStarter) StartDispatch(_ context.Context, req *pluginapi.DispatchRequest, outputs [][]byte) (pluginapi.DispatchCompletion, error) {
	return func() (*pluginapi.DispatchResult, error) {
		out := outputs[0][:len(req.Inputs[0])]
		copy(out, req.Inputs[0])
		return &pluginapi.DispatchResult{Outputs: [][]byte{out}}, nil
	}, nil
}

// BenchmarkPlaneDispatchStarted measures 1-element dispatches through the data
// plane to a DispatchStarter that finishes at once, by 1, 16 and 64 callers
// sharing the plane: the cost of the host's and the plugin's sides alone.
func BenchmarkPlaneDispatchStarted(b *testing.B) {
	conn := serveV2(b, quickStarter{newMemBackend()})
	_, p := conn.v2.snapshot()
	prog := incrementProgram(b)
	compiled, err := conn.Compile(context.Background(), &pluginapi.CompileRequest{Program: prog})
	if err != nil {
		b.Fatal(err)
	}
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					in := make([]byte, 4)
					for left.Add(-1) >= 0 {
						if _, err := dispatchOnPlane(context.Background(), p, &pluginapi.DispatchRequest{Pipeline: compiled.Pipeline, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in}, OutputCounts: []uint32{0}}, []int{4}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
