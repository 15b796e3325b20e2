//go:build linux

package client

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/pluginapi"
)

// The plugin's SDK checks a copy's ranges against its table before the backend
// sees it, whatever the host sent: here, copy frames that bypass the host's
// checks.
func TestPeerCopyRangesCheckedInThePlugin(t *testing.T) {
	ctx := context.Background()
	pb := &peerBackend{memBackend: newMemBackend()}
	conn := serveV2(t, pb)
	_, p := conn.v2.snapshot()
	if p == nil {
		t.Fatalf("no data plane: %s", conn.Capabilities().DataPlane)
	}
	// Copy frames sent on the plane directly skip the host's own checks.
	peerCopy := func(dst, src pluginapi.BufferRange) error {
		_, err := p.roundTrip(ctx, &wire.Request{Kind: wire.FrameCopy, Src: rangeToWire(src), Dst: rangeToWire(dst)}, -1, 0)
		return err
	}
	var bufs [2]uint64
	for i := range bufs {
		r, err := conn.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: 64})
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = r.Buffer
	}
	for _, tc := range []struct {
		name     string
		dst, src pluginapi.BufferRange
	}{
		{"source past the end", pluginapi.BufferRange{Buffer: bufs[1], Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Offset: 60, Size: 16}},
		{"destination past the end", pluginapi.BufferRange{Buffer: bufs[1], Offset: 56, Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}},
		{"offset overflow", pluginapi.BufferRange{Buffer: bufs[1], Offset: ^uint64(0) - 3, Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}},
		{"unknown buffer", pluginapi.BufferRange{Buffer: 99, Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}},
		{"sizes differ", pluginapi.BufferRange{Buffer: bufs[1], Size: 8}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}},
		{"overlap in one buffer", pluginapi.BufferRange{Buffer: bufs[0], Offset: 8, Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}},
	} {
		var rej *pluginapi.RejectedError
		if err := peerCopy(tc.dst, tc.src); !errors.As(err, &rej) {
			t.Errorf("%s: %v, want a RejectedError", tc.name, err)
		}
	}
	if n := pb.copyCount(); n != 0 {
		t.Fatalf("the backend got %d refused copies", n)
	}
	if err := peerCopy(pluginapi.BufferRange{Buffer: bufs[0], Offset: 16, Size: 16}, pluginapi.BufferRange{Buffer: bufs[0], Size: 16}); err != nil {
		t.Fatalf("a copy between disjoint ranges of one buffer: %v", err)
	}
}
