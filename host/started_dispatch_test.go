//go:build linux

package host

import (
	"bytes"
	"context"
	"testing"
)

// TestSmallDispatchIsStartedOnThePlane pins the host's route for v1
// dispatches to a plugin whose data plane starts them
// (Capabilities.PipelinedDispatch, fx-started): a small one goes as one
// dispatch request, started by the plugin (its outputs carry fx-started's
// mark), while one whose bytes exceed a small staging segment still goes
// through scratch buffers and a submit (fx-resident's dispatch command runs
// nothing: the read_write output is its input). Before, every v1 dispatch to
// a plugin that keeps buffers went as a write, a submit and a read.
func TestSmallDispatchIsStartedOnThePlane(t *testing.T) {
	h := openHost(t, "fx-started")
	b, pl := compileOn(t, h, "fx-started", fourBuffers(t))
	for _, p := range h.Report().Plugins {
		if c := p.Capabilities; !c.PipelinedDispatch || !c.SharedMemory {
			t.Fatalf("fx-started reports %s, want pipelined dispatch over shared memory", c)
		}
	}
	ctx := context.Background()
	res, err := b.Dispatch(ctx, pl, fixtureWork())
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range res.Outputs {
		if len(o) == 0 || !bytes.Equal(o, bytes.Repeat([]byte{0x5A}, len(o))) {
			t.Fatalf("output %d of a small dispatch is % x, want fx-started's mark: it was not started on the plane", i, o)
		}
	}
	const big = 64 << 10
	in := bytes.Repeat([]byte{1, 2, 3, 4}, big/4)
	res, err = b.Dispatch(ctx, pl, Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{in, in}, OutputCounts: []uint32{0, 0, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Outputs[0], in) {
		t.Fatal("a dispatch of 128 KiB of inputs was started on the plane, want scratch buffers and a submit")
	}
}
