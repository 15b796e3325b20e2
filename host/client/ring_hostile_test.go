//go:build linux

package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestPlaneRefusesAHostileCompletionRing pins the host's distrust of the
// completion ring: a plugin that writes made-up indices or sizes into it ends
// the plane with a ProtocolError (no crash, no hang, nothing read beyond what
// was checked), and so does one that moves the request ring's tail.
func TestPlaneRefusesAHostileCompletionRing(t *testing.T) {
	cases := map[string]func(fp *fakePeer, r *wire.Request){
		"head far beyond the ring": func(fp *fakePeer, r *wire.Request) {
			atomic.StoreUint64(fp.done.Head(), 1<<62)
		},
		"head moved back": func(fp *fakePeer, r *wire.Request) {
			atomic.StoreUint64(fp.done.Head(), 0)
		},
		"part of a header": func(fp *fakePeer, r *wire.Request) {
			atomic.StoreUint64(fp.done.Head(), fp.done.Pos()+8)
		},
		"size beyond what was published": func(fp *fakePeer, r *wire.Request) {
			b := wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq})
			binary.LittleEndian.PutUint32(b, uint32(len(b)+64))
			fp.done.CopyIn(b, fp.done.Pos())
			atomic.StoreUint64(fp.done.Head(), fp.done.Pos()+uint64(len(b)))
		},
		"size beyond the completion limit": func(fp *fakePeer, r *wire.Request) {
			b := make([]byte, 4096)
			wire.PutHeader(b, wire.FrameHeader{Size: uint32(len(b)) + wire.MaxDoneBytes, Kind: wire.FrameDone, Seq: r.Seq})
			fp.done.CopyIn(b, fp.done.Pos())
			atomic.StoreUint64(fp.done.Head(), fp.done.Pos()+uint64(len(b)))
		},
		"request ring tail past its head": func(fp *fakePeer, r *wire.Request) {
			atomic.StoreUint64(fp.req.Tail(), 1<<40)
			fp.answer(wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq, Sizes: []uint64{4}}))
		},
	}
	for name, lie := range cases {
		t.Run(name, func(t *testing.T) {
			p := fakePlugin(t, func(fp *fakePeer) {
				r, ok := fp.request()
				if !ok {
					return
				}
				lie(fp, r)
				fp.done.Interrupt()
				fp.request() // keeps the socket open until the host closes the plane
			})
			ctx := ctxT(t)
			_, err := dispatchOnPlane(ctx, p, &pluginapi.DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
			if err == nil && strings.HasPrefix(name, "request ring") {
				// The lie shows on the next request the host sends.
				_, err = p.roundTrip(ctx, &wire.Request{Kind: wire.FrameFree, Buffer: 1}, -1, 0)
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("%v, want a ProtocolError", err)
			}
			if !errors.As(p.closed(), &pe) {
				t.Errorf("plane not closed (%v)", p.closed())
			}
		})
	}
}

// TestPlaneNoticesAPeerThatDies pins liveness: a plugin that dies while the host
// waits for a completion (asleep on the futex word, or spinning) ends the wait
// with an error at once, not after a timeout or never.
func TestPlaneNoticesAPeerThatDies(t *testing.T) {
	p := fakePlugin(t, func(fp *fakePeer) {
		if _, ok := fp.request(); !ok {
			return
		}
		time.Sleep(50 * time.Millisecond) // the host is asleep on the ring by now
		fp.conn.Shutdown()
	})
	_, err := p.roundTrip(ctxT(t), &wire.Request{Kind: wire.FrameFree, Buffer: 1}, -1, 0)
	if err == nil || errors.Is(err, ctxT(t).Err()) {
		t.Fatalf("a request to a plugin that died: %v, want the lost plane", err)
	}
	if p.closed() == nil {
		t.Error("the plane is still open")
	}
}

// TestPlaneUnmapsItsRingSegment pins the ring segment's lifetime in the host:
// mapped while the plane is open, no descriptor kept, unmapped once it closed.
func TestPlaneUnmapsItsRingSegment(t *testing.T) {
	p := liar(t, func(r *wire.Request) []byte { return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq}) })
	at := mappedRing(t, p)
	p.close()
	if !eventually(func() bool { return !ringMappedAt(t, at) }) {
		t.Fatal("the ring segment is still mapped after the plane closed")
	}
}

// ringAddr is the address of a ring segment's mapping.
func ringAddr(mem []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(mem))) }

// ringDescriptors counts this process's open descriptors of ring segments.
func ringDescriptors(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, wire.RingSegmentName) {
			n++
		}
	}
	return n
}

// ringMappings counts this process's mappings of ring segments.
func ringMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("/memfd:"+wire.RingSegmentName))
}

// hostilePlane opens a real plugin-side data plane (over a memory backend) and
// connects a real host-side plane to it, for a test that then plays a hostile
// host by writing into the request ring directly.
func hostilePlane(t *testing.T) *plane {
	t.Helper()
	p := inProcessPlane(t, newMemBackend())
	if _, err := p.roundTrip(ctxT(t), &wire.Request{Kind: wire.FrameAlloc, Size: 16}, -1, 0); err != nil {
		t.Fatalf("a well-formed request: %v", err)
	}
	return p
}

// inProcessPlane serves b in process (ServeInProcess) and returns the host's
// side of its data plane; both end when the test does.
func inProcessPlane(t *testing.T, b pluginapi.Backend) *plane {
	t.Helper()
	conn := serveV2(t, b)
	_, p := conn.v2.snapshot()
	if p == nil {
		t.Fatalf("no data plane: %s", conn.Capabilities().DataPlane)
	}
	return p
}

// TestPluginRefusesAHostileRequestRing pins the plugin's distrust of the request
// ring: made-up indices, sizes, frames and descriptor flags make the plugin end
// the plane (its end of the socket closes, which the host sees) instead of
// crashing or reading beyond the ring.
func TestPluginRefusesAHostileRequestRing(t *testing.T) {
	frame := func(r *wire.Request) []byte {
		r.Seq = 1 << 20
		b, err := wire.EncodeRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := map[string]func(q *wire.Ring){
		"head far beyond the ring": func(q *wire.Ring) { atomic.StoreUint64(q.Head(), 1<<62) },
		"head moved back":          func(q *wire.Ring) { atomic.StoreUint64(q.Head(), 0) },
		"part of a header":         func(q *wire.Ring) { atomic.StoreUint64(q.Head(), q.Pos()+8) },
		"size beyond what was published": func(q *wire.Ring) {
			b := frame(&wire.Request{Kind: wire.FrameFree, Buffer: 1})
			binary.LittleEndian.PutUint32(b, uint32(len(b)+64))
			q.CopyIn(b, q.Pos())
			atomic.StoreUint64(q.Head(), q.Pos()+uint64(len(b)))
		},
		"size beyond the request limit": func(q *wire.Ring) {
			b := make([]byte, 64)
			wire.PutHeader(b, wire.FrameHeader{Size: wire.MaxRequestFrameBytes + 8, Kind: wire.FrameFree})
			q.CopyIn(b, q.Pos())
			atomic.StoreUint64(q.Head(), q.Pos()+uint64(len(b)))
		},
		"a frame that does not decode": func(q *wire.Ring) {
			b := frame(&wire.Request{Kind: wire.FrameFree, Buffer: 1})
			b[4] = 99
			_ = q.Put(b)
		},
		"a descriptor flag without a descriptor": func(q *wire.Ring) {
			_ = q.Put(frame(&wire.Request{Kind: wire.FrameAttach, Segment: 7, Size: 4096, FD: true}))
		},
		"a second hello in the ring": func(q *wire.Ring) {
			_ = q.Put(frame(&wire.Request{Kind: wire.FrameHello, Token: []byte("x"), FD: true}))
		},
	}
	for name, lie := range cases {
		t.Run(name, func(t *testing.T) {
			p := hostilePlane(t)
			p.wlock <- struct{}{}
			lie(p.req)
			p.req.Interrupt()
			<-p.wlock
			if !eventually(func() bool { return p.closed() != nil }) {
				t.Fatal("the plugin kept the plane open")
			}
		})
	}
}

// TestPluginLeavesAHostThatIsGone pins the plugin side's liveness: with the
// host's end of the socket closed, a plugin asleep on the request ring stops
// serving and unmaps its ring segment instead of waiting forever.
func TestPluginLeavesAHostThatIsGone(t *testing.T) {
	before := ringMappings(t)
	p := inProcessPlane(t, newMemBackend())
	// Host and plugin share this process: each maps the ring segment once.
	if n := ringMappings(t) - before; n != 2 {
		t.Fatalf("%d more mappings of the ring segment, want 2 (the host's and the plugin's)", n)
	}
	time.Sleep(20 * time.Millisecond) // the plugin is asleep on the ring by now
	p.close()
	if !eventually(func() bool { return ringMappings(t) == before }) {
		t.Fatal("the plugin's ring segment is still mapped after the host left: it still serves")
	}
}

// TestPlaneBurstLargerThanBothRings pins that a burst of asynchronous submits
// larger than the request and completion rings together completes in order:
// the plugin waits for room in the completion ring, and the host, waiting for
// room in the request ring, delivers the completions nobody is reading yet.
func TestPlaneBurstLargerThanBothRings(t *testing.T) {
	conn := serveV2(t, newMemBackend())
	ctx := ctxT(t)
	if !conn.Capabilities().SharedMemory {
		t.Fatalf("no data plane: %+v", conn.Capabilities())
	}
	buf, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	req := &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{pluginapi.FillCommand{Dst: pluginapi.BufferRange{Buffer: buf.Buffer, Size: 4}, Value: 1}}}
	cmds, err := commandsToWire(req.Commands)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := wire.EncodeRequest(&wire.Request{Kind: wire.FrameSubmit, Commands: cmds})
	if err != nil {
		t.Fatal(err)
	}
	n := wire.RingRequestSize/len(frame) + wire.RingDoneSize/len(wire.EncodeDone(wire.FrameSubmit, &wire.Done{})) + 1000
	pending := make([]*Pending, 0, n)
	for range n {
		p, err := conn.SubmitAsync(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	for i, p := range pending {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("submit %d of %d: %v", i, n, err)
		}
	}
}
