package pluginapi

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
)

// peerBackend is memBackend with PeerCopier, recording the copies it gets.
type peerBackend struct {
	*memBackend
	mu     sync.Mutex
	copies [][2]BufferRange
}

func (p *peerBackend) PeerCopy(_ context.Context, dst, src BufferRange) error {
	p.mu.Lock()
	p.copies = append(p.copies, [2]BufferRange{dst, src})
	p.mu.Unlock()
	copy(p.view(dst), p.view(src))
	return nil
}

func (p *peerBackend) copyCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.copies)
}

// A copy frame reaches the backend's PeerCopy on the data plane; over gRPC,
// and for a backend without PeerCopier, the host's side says unimplemented
// (the host then copies through its memory).
func TestPeerCopyOnThePlane(t *testing.T) {
	planes(t, func(t *testing.T, shared bool) {
		ctx := context.Background()
		pb := &peerBackend{memBackend: newMemBackend()}
		conn := serveV2(t, pb)
		if !conn.Capabilities().PeerCopy {
			t.Fatalf("capabilities %v: want peer copy", conn.Capabilities())
		}
		var bufs [2]uint64
		for i := range bufs {
			r, err := conn.AllocBuffer(ctx, &AllocRequest{Size: 64})
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = r.Buffer
		}
		src := bytes.Repeat([]byte("0123456789abcdef"), 4)
		if err := conn.WriteBuffer(ctx, bufs[0], 0, src); err != nil {
			t.Fatal(err)
		}
		err := conn.PeerCopy(ctx, BufferRange{Buffer: bufs[1], Offset: 8, Size: 40}, BufferRange{Buffer: bufs[0], Offset: 3, Size: 40})
		var unimpl *UnimplementedError
		if !shared {
			if !errors.As(err, &unimpl) {
				t.Fatalf("peer copy over gRPC: %v, want an UnimplementedError", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 64)
		if err := conn.ReadBuffer(ctx, bufs[1], 0, got); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, 64)
		copy(want[8:], src[3:43])
		if !bytes.Equal(got, want) {
			t.Fatalf("destination %q, want %q", got, want)
		}
		if n := pb.copyCount(); n != 1 {
			t.Fatalf("the backend got %d copies, want 1", n)
		}
	})
	plain := serveV2(t, newMemBackend())
	if plain.Capabilities().PeerCopy {
		t.Fatal("a backend without PeerCopier reports peer copy")
	}
	var unimpl *UnimplementedError
	if err := plain.PeerCopy(context.Background(), BufferRange{}, BufferRange{}); !errors.As(err, &unimpl) {
		t.Fatalf("peer copy on a backend without PeerCopier: %v, want an UnimplementedError", err)
	}
}

// The plugin's SDK checks a copy's ranges against its table before the backend
// sees it, whatever the host sent.
func TestPeerCopyRangesCheckedInThePlugin(t *testing.T) {
	ctx := context.Background()
	pb := &peerBackend{memBackend: newMemBackend()}
	d := newDevice(pb)
	var bufs [2]uint64
	for i := range bufs {
		r, err := d.alloc(ctx, &AllocRequest{Size: 64})
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = r.Buffer
	}
	for _, tc := range []struct {
		name     string
		dst, src BufferRange
	}{
		{"source past the end", BufferRange{Buffer: bufs[1], Size: 16}, BufferRange{Buffer: bufs[0], Offset: 60, Size: 16}},
		{"destination past the end", BufferRange{Buffer: bufs[1], Offset: 56, Size: 16}, BufferRange{Buffer: bufs[0], Size: 16}},
		{"offset overflow", BufferRange{Buffer: bufs[1], Offset: ^uint64(0) - 3, Size: 16}, BufferRange{Buffer: bufs[0], Size: 16}},
		{"unknown buffer", BufferRange{Buffer: 99, Size: 16}, BufferRange{Buffer: bufs[0], Size: 16}},
		{"sizes differ", BufferRange{Buffer: bufs[1], Size: 8}, BufferRange{Buffer: bufs[0], Size: 16}},
		{"overlap in one buffer", BufferRange{Buffer: bufs[0], Offset: 8, Size: 16}, BufferRange{Buffer: bufs[0], Size: 16}},
	} {
		var rej *RejectedError
		if err := d.copyPeer(ctx, tc.dst, tc.src); !errors.As(err, &rej) {
			t.Errorf("%s: %v, want a RejectedError", tc.name, err)
		}
	}
	if n := pb.copyCount(); n != 0 {
		t.Fatalf("the backend got %d refused copies", n)
	}
	if err := d.copyPeer(ctx, BufferRange{Buffer: bufs[0], Offset: 16, Size: 16}, BufferRange{Buffer: bufs[0], Size: 16}); err != nil {
		t.Fatalf("a copy between disjoint ranges of one buffer: %v", err)
	}
}
