package client

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// peerBackend is memBackend with PeerCopier, recording the copies it gets.
type peerBackend struct {
	*memBackend
	mu     sync.Mutex
	copies [][2]pluginapi.BufferRange
}

func (p *peerBackend) PeerCopy(_ context.Context, dst, src pluginapi.BufferRange) error {
	p.mu.Lock()
	p.copies = append(p.copies, [2]pluginapi.BufferRange{dst, src})
	p.mu.Unlock()
	copy(p.Range(dst), p.Range(src))
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
			r, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 64})
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = r.Buffer
		}
		src := bytes.Repeat([]byte("0123456789abcdef"), 4)
		if err := conn.WriteBuffer(ctx, bufs[0], 0, src); err != nil {
			t.Fatal(err)
		}
		err := conn.PeerCopy(ctx, pluginapi.BufferRange{Buffer: bufs[1], Offset: 8, Size: 40}, pluginapi.BufferRange{Buffer: bufs[0], Offset: 3, Size: 40})
		var unimpl *pluginapi.UnimplementedError
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
		t.Fatal("a backend without pluginapi.PeerCopier reports peer copy")
	}
	var unimpl *pluginapi.UnimplementedError
	if err := plain.PeerCopy(context.Background(), pluginapi.BufferRange{}, pluginapi.BufferRange{}); !errors.As(err, &unimpl) {
		t.Fatalf("peer copy on a backend without PeerCopier: %v, want an UnimplementedError", err)
	}
}

// A batch with a copy between adapters runs in order: the commands before it
// as one Submit, the copy through PeerCopy, the rest as another Submit; a
// backend without PeerCopier gets a RejectedError and no command runs.
func TestSubmitCopyAcrossAdapters(t *testing.T) {
	ctx := context.Background()
	for _, peer := range []bool{true, false} {
		mb := newMemBackend()
		var impl pluginapi.Backend = mb
		pb := &peerBackend{memBackend: mb}
		if peer {
			impl = pb
		}
		conn := serveV2(t, impl)
		var bufs [3]uint64
		for i, adapter := range []int{0, 1, 1} {
			r, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Adapter: adapter, Size: 16})
			if err != nil {
				t.Fatal(err)
			}
			bufs[i] = r.Buffer
		}
		whole := func(b uint64) pluginapi.BufferRange { return pluginapi.BufferRange{Buffer: b, Size: 16} }
		// The buffers are read back over the wire, as the host would: the
		// backend wrote them on the plugin's side of it.
		read := func(b uint64) []byte {
			got := make([]byte, 16)
			if err := conn.ReadBuffer(ctx, b, 0, got); err != nil {
				t.Fatal(err)
			}
			return got
		}
		_, err := conn.Submit(ctx, &pluginapi.SubmitRequest{Adapter: 1, Commands: []pluginapi.SubmitCommand{
			pluginapi.FillCommand{Dst: whole(bufs[0]), Value: 7}, // adapter 0's buffer, filled by adapter 1's batch: not a copy, left to the backend
			pluginapi.CopyCommand{Src: whole(bufs[0]), Dst: whole(bufs[1])},
			pluginapi.CopyCommand{Src: whole(bufs[1]), Dst: whole(bufs[2])},
		}})
		if !peer {
			var rej *pluginapi.RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("copy between adapters without PeerCopier: %v, want a RejectedError", err)
			}
			if got := read(bufs[0]); !bytes.Equal(got, make([]byte, 16)) {
				t.Fatalf("a refused batch ran its fill: %v", got)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte{7, 0, 0, 0}, 4)
		if got := read(bufs[2]); !bytes.Equal(got, want) {
			t.Fatalf("the last buffer holds %v, want %v: the commands ran out of order", got, want)
		}
		if n := pb.copyCount(); n != 1 {
			t.Fatalf("PeerCopy ran %d times, want 1 (only the copy between adapters)", n)
		}
	}
}
