//go:build linux

package client

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// pipeBackend is a gateBackend that implements Pipelined: its Start methods
// log "start", and each completion waits for the gate (when there is one and
// the work is on adapter 0), runs the blocking method and logs "done"; its
// FreeBuffer logs "free".
type pipeBackend struct {
	*gateBackend
	started chan struct{} // receives once per Start
	// holdFirst, when not nil, holds the first Start until it is closed, so
	// that a test can queue requests behind it: the queue's goroutine then
	// finds work waiting and hands the first completion to the completer
	// instead of completing it itself.
	holdFirst chan struct{}
	first     sync.Once

	logMu sync.Mutex
	log   []string
}

func newPipeBackend(gated bool) *pipeBackend {
	return &pipeBackend{gateBackend: newGateBackend(true, gated), started: make(chan struct{}, 1024)}
}

// newHeldPipeBackend is newPipeBackend(true) whose first Start waits for
// holdFirst (see holdFirstUntilRead); the channel is made before the plane
// runs.
func newHeldPipeBackend() *pipeBackend {
	b := newPipeBackend(true)
	b.holdFirst = make(chan struct{})
	return b
}

// requestsSent is how far p has written its request ring, for
// holdFirstUntilRead.
func requestsSent(p *plane) uint64 {
	p.wlock <- struct{}{}
	defer func() { <-p.wlock }()
	return p.req.Pos()
}

// holdFirstUntilRead returns the function that waits until the plugin has
// read every request p sent, including one sent after mark (requestsSent
// before it), gives the reader a moment to queue them, and then lets the held
// first Start go.
func (b *pipeBackend) holdFirstUntilRead(t *testing.T, p *plane, mark uint64) func() {
	return func() {
		t.Helper()
		for until := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
			p.wlock <- struct{}{}
			pos := p.req.Pos()
			read := pos != mark && atomic.LoadUint64(p.req.Tail()) == pos
			<-p.wlock
			if read {
				break
			}
			if time.Now().After(until) {
				t.Fatal("the plugin did not read the requests sent")
			}
		}
		time.Sleep(50 * time.Millisecond)
		close(b.holdFirst)
	}
}

func (b *pipeBackend) note(s string) {
	b.logMu.Lock()
	b.log = append(b.log, s)
	b.logMu.Unlock()
}

func (b *pipeBackend) events() []string {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return slices.Clone(b.log)
}

// completion waits for the gate on adapter 0, then runs do.
func (b *pipeBackend) completion(ctx context.Context, adapter int, do func() (*pluginapi.SubmitResult, error)) (pluginapi.Completion, error) {
	if b.holdFirst != nil {
		b.first.Do(func() { <-b.holdFirst })
	}
	b.note("start")
	b.started <- struct{}{}
	return func() (*pluginapi.SubmitResult, error) {
		if adapter == 0 && b.gate != nil {
			<-b.gate // a completion waits for its work whatever ctx says
		}
		res, err := do()
		b.note("done")
		return res, err
	}, nil
}

func (b *pipeBackend) StartSubmit(ctx context.Context, req *pluginapi.SubmitRequest) (pluginapi.Completion, error) {
	return b.completion(ctx, req.Adapter, func() (*pluginapi.SubmitResult, error) {
		b.mu.Lock()
		for _, c := range req.Commands {
			if f, ok := c.(pluginapi.FillCommand); ok {
				b.order[req.Adapter] = append(b.order[req.Adapter], f.Value)
			}
		}
		b.mu.Unlock()
		return b.memBackend.Submit(ctx, req)
	})
}

func (b *pipeBackend) transfer(ctx context.Context, buffer uint64, do func() error) (pluginapi.Completion, error) {
	b.mu.Lock()
	a := b.adapterOf[buffer]
	b.mu.Unlock()
	return b.completion(ctx, a, func() (*pluginapi.SubmitResult, error) { return nil, do() })
}

func (b *pipeBackend) StartWrite(ctx context.Context, buffer, offset uint64, src []byte) (pluginapi.Completion, error) {
	return b.transfer(ctx, buffer, func() error { return b.memBackend.WriteBuffer(ctx, buffer, offset, src) })
}

func (b *pipeBackend) StartRead(ctx context.Context, buffer, offset uint64, dst []byte) (pluginapi.Completion, error) {
	return b.transfer(ctx, buffer, func() error { return b.memBackend.ReadBuffer(ctx, buffer, offset, dst) })
}

func (b *pipeBackend) FreeBuffer(ctx context.Context, h uint64) error {
	b.note("free")
	return b.memBackend.FreeBuffer(ctx, h)
}

// waitStarts waits until n Start calls were made, or fails the test after a
// generous bound (releasing the gate so that the plane can close).
func waitStarts(t *testing.T, b *pipeBackend, n int) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for range n {
		select {
		case <-b.started:
		case <-timeout:
			close(b.gate)
			t.Fatalf("the plugin did not start %d requests while the first one's completion was pending: it waited for it", n)
		}
	}
}

// TestPlanePipelinedStartsWhileEarlierRun pins the pipelined queue: while the
// completion of a submit on adapter 0 waits (the device still runs it), the
// queue's goroutine starts the next submit, write and read of that adapter;
// each is answered once its completion returns, and the backend's work ran in
// the host's order. Without it the queue ran each call to its end first and
// started nothing meanwhile.
func TestPlanePipelinedStartsWhileEarlierRun(t *testing.T) {
	b := newHeldPipeBackend()
	p := inProcessPlane(t, b)
	a0 := allocOn(t, p, 0, 16)

	var calls []*call
	for i := range 3 {
		c, err := p.send(ctxT(t), fill(0, a0, 0, 16, uint32(10+i)), -1, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	src := make([]byte, 4)
	binary.LittleEndian.PutUint32(src, 99)
	release := b.holdFirstUntilRead(t, p, requestsSent(p))
	wrote := make(chan error, 1)
	go func() { wrote <- transferOnPlane(ctxT(t), p, wire.FrameWrite, a0, 12, src) }()
	release()
	waitStarts(t, b, 4)
	for _, c := range calls {
		if c.ready() {
			t.Fatal("a submit was answered before its completion returned")
		}
	}
	close(b.gate)
	for _, c := range calls {
		if _, _, err := p.wait(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := transferOnPlane(ctxT(t), p, wire.FrameRead, a0, 0, got); err != nil {
		t.Fatal(err)
	}
	if v, w := binary.LittleEndian.Uint32(got), binary.LittleEndian.Uint32(got[12:]); v != 12 || w != 99 {
		t.Fatalf("the buffer reads % x, want the last fill (12) and then the write (99) at 12", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Equal(b.order[0], []uint32{10, 11, 12}) {
		t.Fatalf("fills ran as %v, want [10 11 12]", b.order[0])
	}
}

// TestPlanePipelinedFreeWaitsForStartedWork pins the barrier: a free on an
// adapter with started work comes to the backend only after every earlier
// completion of that adapter returned, so a buffer is never freed under
// running work.
func TestPlanePipelinedFreeWaitsForStartedWork(t *testing.T) {
	b := newHeldPipeBackend()
	p := inProcessPlane(t, b)
	a0, spare := allocOn(t, p, 0, 16), allocOn(t, p, 0, 16)
	release := b.holdFirstUntilRead(t, p, requestsSent(p))

	held, err := p.send(ctxT(t), fill(0, a0, 0, 16, 1), -1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := p.send(ctxT(t), &wire.Request{Kind: wire.FrameFree, Buffer: spare}, -1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	release()
	waitStarts(t, b, 1)
	// Give a free that skips the barrier the time to reach the backend.
	time.Sleep(50 * time.Millisecond)
	close(b.gate)
	for _, c := range []*call{held, freed} {
		if _, _, err := p.wait(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	if ev := b.events(); !slices.Equal(ev, []string{"start", "done", "free"}) {
		t.Fatalf("the backend saw %v, want [start done free]: the free ran before the started submit was done", ev)
	}
}

// TestPlanePipelinedCancelWaitsForTheDevice pins cancellation on a pipelined
// queue: a caller that gives up gets ctx's error at once, and the staging
// segment of its read is released only after the completion returned (the
// device may still fill it).
func TestPlanePipelinedCancelWaitsForTheDevice(t *testing.T) {
	b := newPipeBackend(true)
	p := inProcessPlane(t, b)
	a0 := allocOn(t, p, 0, 16)

	ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := transferOnPlane(ctx, p, wire.FrameRead, a0, 0, make([]byte, 16))
	if err == nil || ctx.Err() == nil {
		t.Fatalf("a read held by the device returned %v before its deadline", err)
	}
	if waited := time.Since(began); waited > 10*time.Second {
		t.Fatalf("the cancelled read returned after %v", waited)
	}
	p.mu.Lock()
	idle := len(p.idle) + len(p.idleSmall)
	p.mu.Unlock()
	if idle != 0 {
		t.Fatal("the read's staging segment was released while the device could still fill it")
	}
	close(b.gate)
	if err := transferOnPlane(ctxT(t), p, wire.FrameWrite, a0, 0, make([]byte, 16)); err != nil {
		t.Fatalf("a write after the cancelled read: %v", err)
	}
}

// TestPlaneKeepsStagingForConcurrentCallers pins the staging policy: the small
// staging segments of 16 transfers in flight at once all stay attached and
// idle when they end, so the next 16 lease them without a round trip. With
// four kept, the other twelve were detached and the next callers attached new
// ones (each a round trip, and a driver registration in a GPU plugin).
func TestPlaneKeepsStagingForConcurrentCallers(t *testing.T) {
	const callers = 16
	p := inProcessPlane(t, newMemBackend())
	var segs []*wire.Segment
	for range callers {
		s, err := p.lease(ctxT(t), 4)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, s)
	}
	for _, s := range segs {
		p.unlease(s)
	}
	p.mu.Lock()
	idle := len(p.idle) + len(p.idleSmall)
	p.mu.Unlock()
	if idle != callers {
		t.Fatalf("%d of %d small staging segments stayed idle, want all", idle, callers)
	}
	for range callers {
		s, err := p.lease(ctxT(t), 64)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(segs, s) {
			t.Fatalf("a lease attached segment %d while idle ones were kept", s.ID)
		}
	}
}
