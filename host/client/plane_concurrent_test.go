//go:build linux

package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// gateBackend is a memory backend of two adapters whose submits on adapter 0
// wait for gate to close, and which records the fill values of every submit
// per adapter in the order its Submit ran them.
type gateBackend struct {
	*memBackend
	concurrent bool
	gate       chan struct{} // nil: no submit waits
	entered    chan struct{} // a submit on adapter 0 reached the gate

	mu        sync.Mutex
	order     map[int][]uint32
	ran       []int // the adapter of every submit, in the order they ran
	adapterOf map[uint64]int
}

func newGateBackend(concurrent bool, gated bool) *gateBackend {
	g := &gateBackend{memBackend: newMemBackend(), concurrent: concurrent, order: map[int][]uint32{},
		adapterOf: map[uint64]int{}, entered: make(chan struct{}, 1)}
	if gated {
		g.gate = make(chan struct{})
	}
	return g
}

func (g *gateBackend) ConcurrentAdapters() bool { return g.concurrent }

// hold waits for the gate when there is one and adapter is 0.
func (g *gateBackend) hold(ctx context.Context, adapter int) error {
	if adapter != 0 || g.gate == nil {
		return nil
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gateBackend) AllocBuffer(ctx context.Context, req *pluginapi.AllocRequest) (*pluginapi.AllocResult, error) {
	res, err := g.memBackend.AllocBuffer(ctx, req)
	if err == nil {
		g.mu.Lock()
		g.adapterOf[res.Buffer] = req.Adapter
		g.mu.Unlock()
	}
	return res, err
}

func (g *gateBackend) WriteBuffer(ctx context.Context, h, off uint64, src []byte) error {
	g.mu.Lock()
	a := g.adapterOf[h]
	g.mu.Unlock()
	if err := g.hold(ctx, a); err != nil {
		return err
	}
	return g.memBackend.WriteBuffer(ctx, h, off, src)
}

func (g *gateBackend) Submit(ctx context.Context, req *pluginapi.SubmitRequest) (*pluginapi.SubmitResult, error) {
	if err := g.hold(ctx, req.Adapter); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.ran = append(g.ran, req.Adapter)
	for _, c := range req.Commands {
		if f, ok := c.(pluginapi.FillCommand); ok {
			g.order[req.Adapter] = append(g.order[req.Adapter], f.Value)
		}
	}
	g.mu.Unlock()
	return g.memBackend.Submit(ctx, req)
}

func allocOn(t *testing.T, p *plane, adapter uint32, size uint64) uint64 {
	t.Helper()
	res, _, err := allocOnPlane(ctxT(t), p, adapter, &pluginapi.AllocRequest{Size: size, Usage: pluginapi.UsageStorage | pluginapi.UsageCopySrc | pluginapi.UsageCopyDst})
	if err != nil {
		t.Fatal(err)
	}
	return res.Buffer
}

func fill(adapter uint32, buffer, offset, size uint64, v uint32) *wire.Request {
	return &wire.Request{Kind: wire.FrameSubmit, Adapter: adapter,
		Commands: []wire.Command{{Op: wire.OpFill, Dst: wire.Range{Buffer: buffer, Offset: offset, Size: size}, Value: v}}}
}

// TestPlaneAdapterRunsWhileAnotherIsBusy pins the concurrent plugin runtime:
// while a submit on adapter 0 is held inside the backend, a write, a submit
// and a read on adapter 1 are read, run and answered (their completions come
// back before the earlier request's). On the serial loop they waited for
// adapter 0 and the bounded context below ran out.
func TestPlaneAdapterRunsWhileAnotherIsBusy(t *testing.T) {
	g := newGateBackend(true, true)
	p := inProcessPlane(t, g)
	a0, b1 := allocOn(t, p, 0, 16), allocOn(t, p, 1, 16)

	held, err := p.send(ctxT(t), fill(0, a0, 0, 16, 7), -1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	adapterOneRuns(t, p, b1)

	close(g.gate)
	if _, _, err := p.wait(ctxT(t), held); err != nil {
		t.Fatalf("adapter 0's submit: %v", err)
	}
	got := make([]byte, 16)
	if err := transferOnPlane(ctxT(t), p, wire.FrameRead, a0, 0, got); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(got[12:]); v != 7 {
		t.Fatalf("adapter 0's buffer reads % x, want the fill of 7", got)
	}
}

// TestPlaneAdapterRunsWhileATransferIsBusy is the same with a write of 8 MiB
// into a buffer of adapter 0 held in the backend: a long transfer on one
// adapter does not hold up another adapter's work.
func TestPlaneAdapterRunsWhileATransferIsBusy(t *testing.T) {
	const size = 8 << 20
	g := newGateBackend(true, true)
	p := inProcessPlane(t, g)
	a0, b1 := allocOn(t, p, 0, size), allocOn(t, p, 1, 16)

	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i * 7)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- transferOnPlane(ctxT(t), p, wire.FrameWrite, a0, 0, src) }()
	<-g.entered
	adapterOneRuns(t, p, b1)

	close(g.gate)
	if err := <-wrote; err != nil {
		t.Fatalf("adapter 0's write: %v", err)
	}
	got := make([]byte, size)
	if err := transferOnPlane(ctxT(t), p, wire.FrameRead, a0, 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("adapter 0's buffer does not hold what was written")
	}
}

// adapterOneRuns writes, fills and reads b1 on adapter 1 within a bounded
// time, while adapter 0 is held.
func adapterOneRuns(t *testing.T, p *plane, b1 uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	if err := transferOnPlane(ctx, p, wire.FrameWrite, b1, 0, make([]byte, 16)); err != nil {
		t.Fatalf("write on adapter 1 while adapter 0 is busy: %v", err)
	}
	if _, err := p.roundTrip(ctx, fill(1, b1, 4, 8, 9), -1, 0); err != nil {
		t.Fatalf("submit on adapter 1 while adapter 0 is busy: %v", err)
	}
	got := make([]byte, 16)
	if err := transferOnPlane(ctx, p, wire.FrameRead, b1, 0, got); err != nil {
		t.Fatalf("read on adapter 1 while adapter 0 is busy: %v", err)
	}
	if v := binary.LittleEndian.Uint32(got[4:]); v != 9 || binary.LittleEndian.Uint32(got) != 0 {
		t.Fatalf("adapter 1's buffer reads % x, want the fill of 9 at [4, 12)", got)
	}
}

// TestPlaneSerialBackendKeepsHostOrder pins the default for a backend that
// does not opt into ConcurrentAdapters: a submit on adapter 1 that the plugin
// has already read (its request is registered) runs only after the held submit
// on adapter 0, in the host's order.
func TestPlaneSerialBackendKeepsHostOrder(t *testing.T) {
	g := newGateBackend(false, true)
	p := inProcessPlane(t, g)
	a0, b1 := allocOn(t, p, 0, 16), allocOn(t, p, 1, 16)

	first, err := p.send(ctxT(t), fill(0, a0, 0, 16, 1), -1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered
	second, err := p.send(ctxT(t), fill(1, b1, 0, 16, 2), -1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The reader is not held up by the running submit: it reads the second
	// request off the ring (and registers it, for Cancel) while the first
	// still runs.
	for until := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		p.wlock <- struct{}{}
		unread := atomic.LoadUint64(p.req.Tail()) != p.req.Pos()
		<-p.wlock
		if !unread {
			break
		}
		if time.Now().After(until) {
			close(g.gate)
			t.Fatal("the second request was not read and kept waiting while the first ran")
		}
	}
	close(g.gate)
	for _, c := range []*call{first, second} {
		if _, _, err := p.wait(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ran) != 2 || g.ran[0] != 0 || g.ran[1] != 1 {
		t.Fatalf("submits ran on adapters %v, want [0 1]: a backend without pluginapi.ConcurrentAdapters got a call while another ran", g.ran)
	}
}

// TestPlaneManyCallersOneAdapter pins per-adapter order under load: 64
// goroutines each send 100 fills of their own slot on one adapter, ten in
// flight at a time; every one completes, the backend runs each goroutine's
// fills in the order it sent them, and each slot ends with its last value.
func TestPlaneManyCallersOneAdapter(t *testing.T) {
	const callers, each, window = 64, 100, 10
	g := newGateBackend(true, false)
	p := inProcessPlane(t, g)
	buf := allocOn(t, p, 0, callers*4)
	other := allocOn(t, p, 1, 4)

	var wg sync.WaitGroup
	errs := make(chan error, callers+1)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var inflight []*call
			for i := range each {
				call, err := p.send(ctxT(t), fill(0, buf, uint64(c*4), 4, uint32(c<<16|i)), -1, 0, nil)
				if err != nil {
					errs <- err
					return
				}
				inflight = append(inflight, call)
				if len(inflight) == window || i == each-1 {
					for _, w := range inflight {
						if _, _, err := p.wait(ctxT(t), w); err != nil {
							errs <- err
							return
						}
					}
					inflight = inflight[:0]
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // another adapter's traffic meanwhile
		defer wg.Done()
		for i := range each {
			if _, err := p.roundTrip(ctxT(t), fill(1, other, 0, 4, uint32(i)), -1, 0); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got := make([]byte, callers*4)
	if err := transferOnPlane(ctxT(t), p, wire.FrameRead, buf, 0, got); err != nil {
		t.Fatal(err)
	}
	for c := range callers {
		if v := binary.LittleEndian.Uint32(got[c*4:]); v != uint32(c<<16|(each-1)) {
			t.Fatalf("slot %d holds %#x, want %#x", c, v, c<<16|(each-1))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	next := make([]int, callers)
	for _, v := range g.order[0] {
		c, i := int(v>>16), int(v&0xffff)
		if i != next[c] {
			t.Fatalf("caller %d's fill %d ran when its fill %d was next: adapter 0's queue broke the host's order", c, i, next[c])
		}
		next[c]++
	}
	if len(g.order[0]) != callers*each || len(g.order[1]) != each {
		t.Fatalf("%d fills ran on adapter 0 and %d on adapter 1, want %d and %d", len(g.order[0]), len(g.order[1]), callers*each, each)
	}
}

// TestCapabilitiesReportConcurrentAdaptersAndSpans pins what a plugin declares
// when described beyond its optional interfaces: whether its calls for
// different adapters run concurrently, and that its SDK ships spans.
func TestCapabilitiesReportConcurrentAdaptersAndSpans(t *testing.T) {
	if c := serveV2(t, newGateBackend(true, false)).Capabilities(); !c.ConcurrentAdapters || !c.Spans || !strings.Contains(c.String(), "concurrent adapters") {
		t.Errorf("a ConcurrentAdapters backend: %+v (%s)", c, c)
	}
	if c := serveV2(t, newGateBackend(false, false)).Capabilities(); c.ConcurrentAdapters || !c.Spans {
		t.Errorf("a backend whose ConcurrentAdapters says false: %+v", c)
	}
	if c := serveV2(t, newMemBackend()).Capabilities(); c.ConcurrentAdapters {
		t.Errorf("a backend without ConcurrentAdapters: %+v", c)
	}
}
