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
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, peer := &rawConn{fd: fds[0]}, &rawConn{fd: fds[1]}
	go func() {
		defer peer.close()
		r := &fdReader{conn: peer}
		for {
			b, err := r.frame(maxRequestFrameBytes)
			if err != nil {
				return
			}
			req, err := decodeRequest(b)
			if err != nil {
				return
			}
			if req.fd {
				unix.Close(r.popFD())
			}
			if err := peer.write(reply(req), nil); err != nil {
				return
			}
		}
	}()
	p := newPlane(host, func(uint64) {})
	t.Cleanup(p.close)
	return p
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

// TestSpinIsBounded pins the polling before a data-plane read sleeps: it stops
// at the first bytes or error, and gives up once its window has passed (an idle
// plane sleeps instead of polling).
func TestSpinIsBounded(t *testing.T) {
	tries := 0
	got, err := spin(time.Now().Add(time.Hour), func() (bool, error) { tries++; return tries == 3, nil })
	if !got || err != nil || tries != 3 {
		t.Errorf("spin until the third try: got %v, %v after %d tries", got, err, tries)
	}
	boom := errors.New("boom")
	if got, err := spin(time.Now().Add(time.Hour), func() (bool, error) { return false, boom }); got || err != boom {
		t.Errorf("spin with a failing try: %v, %v", got, err)
	}
	tries = 0
	if got, err := spin(time.Now().Add(-time.Second), func() (bool, error) { tries++; return false, nil }); got || err != nil || tries != 1 {
		t.Errorf("spin past its window: %v, %v after %d tries, want one try", got, err, tries)
	}
}
