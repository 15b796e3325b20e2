//go:build linux

package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// liar is a plugin side that answers every request frame with whatever reply
// makes, to check what the host accepts from a plugin that breaks the rules.
func liar(t *testing.T, reply func(r *wire.Request) []byte) *plane {
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
	conn      *wire.RawConn
	r         *peerReader
	mem       []byte
	req, done *wire.Ring
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
	host, peer := rawConn(t, fds[0]), rawConn(t, fds[1])
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer peer.Close()
		fp := &fakePeer{t: t, conn: peer, r: &peerReader{conn: peer}}
		b, err := fp.r.frame(wire.MaxRequestFrameBytes)
		if err != nil {
			return
		}
		hello, err := wire.DecodeRequest(b)
		if err != nil || hello.Kind != wire.FrameHello {
			return
		}
		if fp.mem, err = wire.MapRingSegment(fp.r.popFD()); err != nil {
			return
		}
		defer unix.Munmap(fp.mem)
		fp.req, fp.done = wire.RingPair(fp.mem)
		if !fp.answer(wire.EncodeDone(wire.FrameHello, &wire.Done{Seq: hello.Seq})) {
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

// peerReader reads what the host sends on a test's plugin end of the socket
// (the hello frame, the 8-byte notes of requests that carry a descriptor) and
// the descriptors that come with it, waiting for each.
type peerReader struct {
	conn *wire.RawConn
	buf  []byte // read and not yet taken
	fds  []int
}

// fill reads more bytes and any descriptors with them.
func (pr *peerReader) fill() error {
	b, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(16*4))
	n, oobn, _, err := pr.conn.Recv(b, oob, 0)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return perr
		}
		for i := range msgs {
			fds, perr := unix.ParseUnixRights(&msgs[i])
			if perr != nil {
				return perr
			}
			pr.fds = append(pr.fds, fds...)
		}
	}
	pr.buf = append(pr.buf, b[:n]...)
	return err
}

// take returns the next n bytes.
func (pr *peerReader) take(n int) ([]byte, error) {
	for len(pr.buf) < n {
		if err := pr.fill(); err != nil {
			return nil, err
		}
	}
	b := pr.buf[:n:n]
	pr.buf = pr.buf[n:]
	return b, nil
}

// frame returns the next whole frame.
func (pr *peerReader) frame(limit int) ([]byte, error) {
	for len(pr.buf) < wire.FrameHeaderBytes {
		if err := pr.fill(); err != nil {
			return nil, err
		}
	}
	h, err := wire.ParseHeader(pr.buf[:wire.FrameHeaderBytes], limit)
	if err != nil {
		return nil, err
	}
	return pr.take(int(h.Size))
}

// note returns the descriptor the host sent for request seq.
func (pr *peerReader) note(seq uint64) (int, error) {
	b, err := pr.take(8)
	if err != nil {
		return -1, err
	}
	fd := pr.popFD()
	if got := binary.LittleEndian.Uint64(b); got != seq || fd < 0 {
		return -1, fmt.Errorf("descriptor note for request %d (with descriptor: %v), want one for %d", got, fd >= 0, seq)
	}
	return fd, nil
}

// popFD returns the oldest received descriptor, or -1 when none is left.
func (pr *peerReader) popFD() int {
	if len(pr.fds) == 0 {
		return -1
	}
	fd := pr.fds[0]
	pr.fds = pr.fds[1:]
	return fd
}

// request waits for the next request frame; false once the host is gone or
// the frame is broken.
func (fp *fakePeer) request() (*wire.Request, bool) {
	for {
		b, in, ok, err := fp.req.Next(fp.in, wire.MaxRequestFrameBytes)
		fp.in = in
		if err != nil {
			return nil, false
		}
		if !ok {
			if wire.HungUp(fp.conn.FD()) {
				return nil, false
			}
			fp.req.Sleep(10*time.Millisecond, func() bool { return false })
			continue
		}
		req, err := wire.DecodeRequest(b)
		if err != nil {
			return nil, false
		}
		if req.FD {
			fd, err := fp.r.note(req.Seq)
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
		switch err := fp.done.Put(b); err {
		case nil:
			return true
		case wire.ErrRingFull:
			if wire.HungUp(fp.conn.FD()) {
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
	p := liar(t, func(r *wire.Request) []byte {
		if r.Kind == wire.FrameDispatch {
			return wire.EncodeDone(wire.FrameDispatch, &wire.Done{Seq: r.Seq, Sizes: []uint64{1 << 40}})
		}
		return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq})
	})
	_, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Pipeline: 1, OutputCounts: []uint32{4}}, []int{16})
	var re *ResultError
	if !errors.As(err, &re) {
		t.Fatalf("an output of 1 TiB where 16 bytes were asked for: %v, want a ResultError", err)
	}
	if p.closed() != nil {
		t.Error("a refused output closed the plane; only broken frames should")
	}
}

func TestPlaneClosesOnBrokenCompletions(t *testing.T) {
	cases := map[string]func(r *wire.Request) []byte{
		"unknown sequence number": func(r *wire.Request) []byte { return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq + 100}) },
		"completion beyond its size limit": func(r *wire.Request) []byte {
			b := make([]byte, wire.FrameHeaderBytes)
			wire.PutHeader(b, wire.FrameHeader{Size: 1 << 30, Kind: wire.FrameDone, Seq: r.Seq})
			return b
		},
		"wrong number of output sizes": func(r *wire.Request) []byte {
			return wire.EncodeDone(wire.FrameDispatch, &wire.Done{Seq: r.Seq, Sizes: []uint64{4, 4, 4}})
		},
		"request frame instead of a completion": func(r *wire.Request) []byte {
			b, _ := wire.EncodeRequest(&wire.Request{Kind: wire.FrameFree, Seq: r.Seq, Buffer: 1})
			return b
		},
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			p := liar(t, reply)
			_, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Pipeline: 1, OutputCounts: []uint32{1}}, []int{4})
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
	p := liar(t, func(r *wire.Request) []byte {
		return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq, Buffer: 1, Mapped: true})
	})
	_, _, err := allocOnPlane(ctxT(t), p, 0, &pluginapi.AllocRequest{Size: 64})
	var re *ResultError
	if !errors.As(err, &re) {
		t.Fatalf("alloc answered as mapped without a shared segment: %v, want a ResultError", err)
	}
}

func TestPlaneLostPeerOrphansSegments(t *testing.T) {
	p := liar(t, func(r *wire.Request) []byte {
		return wire.EncodeDone(r.Kind, &wire.Done{Seq: r.Seq, Buffer: 1, Mapped: true})
	})
	res, seg, err := allocOnPlane(ctxT(t), p, 0, &pluginapi.AllocRequest{Size: 4096, Usage: pluginapi.UsageMap})
	if err != nil || !res.Mapped || seg == nil {
		t.Fatalf("mapped alloc: %+v, %v", res, err)
	}
	seg.Mem[0] = 7
	if n := memfdMappings(t); n < 1 {
		t.Fatalf("%d memfd mappings after a mapped alloc", n)
	}
	p.fail(errors.New("peer gone"))
	if n := memfdMappings(t); n != 0 {
		t.Errorf("%d memfd mappings after the plane closed, want 0", n)
	}
	if seg.Mem[0] != 0 {
		t.Error("an orphaned segment still shows the shared bytes")
	}
	seg.Mem[1] = 1 // the address stays writable
	p.dropSegment(seg)
	if _, err := p.roundTrip(ctxT(t), &wire.Request{Kind: wire.FrameFree, Buffer: 1}, -1, 0); err == nil {
		t.Error("a closed plane accepted a request")
	}
	if _, err := p.lease(ctxT(t), 100); err == nil {
		t.Error("a closed plane leased a new staging segment")
	}
	if _, err := dispatchOnPlane(ctxT(t), p, &pluginapi.DispatchRequest{Inputs: [][]byte{{1, 2, 3, 4}}}, []int{4}); err == nil {
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
	return bytes.Count(b, []byte("/memfd:"+wire.SegmentName))
}

// rawConn takes over one end of a socket pair as a data-plane socket.
func rawConn(t *testing.T, fd int) *wire.RawConn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socket")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := wire.RawFrom(c.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
