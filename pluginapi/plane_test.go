//go:build linux

package pluginapi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// liar is a plugin side that answers every request frame with whatever reply
// makes, to check what the host accepts from a plugin that breaks the rules.
func liar(t *testing.T, reply func(r *request) []byte) *plane {
	t.Helper()
	return fakePlugin(t, func(fp *fakePeer) {
		for {
			req, ok := fp.request()
			if !ok {
				return
			}
			if !fp.answer(reply(req)) {
				return
			}
		}
	})
}

// fakePeer is the plugin's end of a data plane run by a test: the socket, the
// descriptors it received, and the mapped ring segment, which the test may
// also scribble on directly.
type fakePeer struct {
	t         *testing.T
	conn      *rawConn
	r         *fdReader
	mem       []byte
	req, done *ring
	in        []byte
}

// fakePlugin starts a host plane against a test's plugin side: serve runs once
// the hello frame has brought the ring segment; the host's hello is answered
// before serve runs.
func fakePlugin(t *testing.T, serve func(fp *fakePeer)) *plane {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, peer := &rawConn{fd: fds[0]}, &rawConn{fd: fds[1]}
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer peer.close()
		fp := &fakePeer{t: t, conn: peer, r: &fdReader{conn: peer}}
		b, err := fp.r.frame(maxRequestFrameBytes)
		if err != nil {
			return
		}
		hello, err := decodeRequest(b)
		if err != nil || hello.kind != frameHello {
			return
		}
		if fp.mem, err = mapRingSegment(fp.r.popFD()); err != nil {
			return
		}
		defer unix.Munmap(fp.mem)
		fp.req, fp.done = ringPair(fp.mem)
		if !fp.answer(encodeDone(frameHello, &done{seq: hello.seq})) {
			return
		}
		serve(fp)
	}()
	p, err := startPlane(ctxT(t), host, []byte("token"), func(uint64) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.close()
		<-served
	})
	return p
}

// request waits for the next request frame; false once the host is gone or
// the frame is broken.
func (fp *fakePeer) request() (*request, bool) {
	for {
		b, in, ok, err := fp.req.next(fp.in, maxRequestFrameBytes)
		fp.in = in
		if err != nil {
			return nil, false
		}
		if !ok {
			if hungUp(fp.conn.fd) {
				return nil, false
			}
			fp.req.sleep(10*time.Millisecond, func() bool { return false })
			continue
		}
		req, err := decodeRequest(b)
		if err != nil {
			return nil, false
		}
		if req.fd {
			fd, err := fp.r.note(req.seq)
			if err != nil {
				return nil, false
			}
			unix.Close(fd)
		}
		return req, true
	}
}

// answer publishes a frame on the completion ring.
func (fp *fakePeer) answer(b []byte) bool {
	for {
		switch err := fp.done.put(b); err {
		case nil:
			return true
		case errRingFull:
			if hungUp(fp.conn.fd) {
				return false
			}
			time.Sleep(time.Millisecond)
		default:
			return false
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestPlaneRefusesAnOutputLargerThanAskedFor(t *testing.T) {
	p := liar(t, func(r *request) []byte {
		if r.kind == frameDispatch {
			return encodeDone(frameDispatch, &done{seq: r.seq, sizes: []uint64{1 << 40}})
		}
		return encodeDone(r.kind, &done{seq: r.seq})
	})
	_, err := dispatchOnPlane(ctxT(t), p, &DispatchRequest{Pipeline: 1, OutputCounts: []uint32{4}}, []int{16})
	var re *ResultError
	if !errors.As(err, &re) {
		t.Fatalf("an output of 1 TiB where 16 bytes were asked for: %v, want a ResultError", err)
	}
	if p.closed() != nil {
		t.Error("a refused output closed the plane; only broken frames should")
	}
}

func TestPlaneClosesOnBrokenCompletions(t *testing.T) {
	cases := map[string]func(r *request) []byte{
		"unknown sequence number": func(r *request) []byte { return encodeDone(r.kind, &done{seq: r.seq + 100}) },
		"completion beyond its size limit": func(r *request) []byte {
			b := make([]byte, frameHeaderBytes)
			putHeader(b, frameHeader{size: 1 << 30, kind: frameDone, seq: r.seq})
			return b
		},
		"wrong number of output sizes": func(r *request) []byte {
			return encodeDone(frameDispatch, &done{seq: r.seq, sizes: []uint64{4, 4, 4}})
		},
		"request frame instead of a completion": func(r *request) []byte {
			b, _ := encodeRequest(&request{kind: frameFree, seq: r.seq, buffer: 1})
			return b
		},
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			p := liar(t, reply)
			_, err := dispatchOnPlane(ctxT(t), p, &DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("%s: %v, want a ProtocolError", name, err)
			}
			if !errors.As(p.closed(), &pe) {
				t.Errorf("%s: plane not closed (%v)", name, p.closed())
			}
		})
	}
}

func TestPlaneRefusesAMappingItDidNotOffer(t *testing.T) {
	p := liar(t, func(r *request) []byte {
		return encodeDone(r.kind, &done{seq: r.seq, buffer: 1, mapped: true})
	})
	_, _, err := allocOnPlane(ctxT(t), p, 0, &AllocRequest{Size: 64})
	var re *ResultError
	if !errors.As(err, &re) {
		t.Fatalf("alloc answered as mapped without a shared segment: %v, want a ResultError", err)
	}
}

func TestPlaneLostPeerOrphansSegments(t *testing.T) {
	p := liar(t, func(r *request) []byte { return encodeDone(r.kind, &done{seq: r.seq, buffer: 1, mapped: true}) })
	res, seg, err := allocOnPlane(ctxT(t), p, 0, &AllocRequest{Size: 4096, Usage: UsageMap})
	if err != nil || !res.Mapped || seg == nil {
		t.Fatalf("mapped alloc: %+v, %v", res, err)
	}
	seg.mem[0] = 7
	if n := memfdMappings(t); n < 1 {
		t.Fatalf("%d memfd mappings after a mapped alloc", n)
	}
	p.fail(errors.New("peer gone"))
	if n := memfdMappings(t); n != 0 {
		t.Errorf("%d memfd mappings after the plane closed, want 0", n)
	}
	if seg.mem[0] != 0 {
		t.Error("an orphaned segment still shows the shared bytes")
	}
	seg.mem[1] = 1 // the address stays writable
	p.dropSegment(seg)
	if _, err := p.roundTrip(ctxT(t), &request{kind: frameFree, buffer: 1}, -1, 0); err == nil {
		t.Error("a closed plane accepted a request")
	}
	if _, err := p.lease(ctxT(t), 100); err == nil {
		t.Error("a closed plane leased a new staging segment")
	}
	if _, err := dispatchOnPlane(ctxT(t), p, &DispatchRequest{Inputs: [][]byte{{1, 2, 3, 4}}}, []int{4}); err == nil {
		t.Error("a closed plane ran a dispatch")
	}
}

// memfdMappings counts this process's mappings of data-plane segments.
func memfdMappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("/memfd:"+SegmentName))
}
