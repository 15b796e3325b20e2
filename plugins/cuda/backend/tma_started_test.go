package backend

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// A started dispatch of a kernel with tensor maps (matmul_tc bf16 on sm_90)
// encodes the maps from its own buffers and sizes: a blocking dispatch of
// another size before it must not lend it its maps (they would copy from that
// dispatch's freed buffers with its row lengths), and the blocking launch
// really encodes them. Needs a GPU; on one without the copy engine the kernel
// has no maps and the test checks plain results.
func TestStartedDispatchTMAUsesItsOwnMaps(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: gputest.CorpusTC(t, ir.BF16, 64, 128, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, c.Pipeline)
	request := func(s, seed int) *pluginapi.DispatchRequest {
		return &pluginapi.DispatchRequest{Pipeline: c.Pipeline,
			Grid:         [3]uint32{uint32(s+127) / 128, uint32(s+63) / 64, 1},
			Inputs:       [][]byte{tcBytes(ir.BF16, s*s, seed), tcBytes(ir.BF16, s*s, seed+1), nil},
			OutputCounts: []uint32{0, 0, uint32(s * s)},
			Uniforms:     kernels.U32Bytes([]uint32{uint32(s), uint32(s), uint32(s)})}
	}
	check := func(what string, s, seed int, out []byte) {
		t.Helper()
		if len(out) != 4*s*s {
			t.Fatalf("%s: %d output bytes, want %d", what, len(out), 4*s*s)
		}
		for r := range s {
			for col := range s {
				var want float64
				for k := range s {
					want += float64(tcValue(r*s+k, seed)) * float64(tcValue(k*s+col, seed+1))
				}
				if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(r*s+col):])); float64(got) != want {
					t.Fatalf("%s: c[%d][%d] = %v, want %v", what, r, col, got, want)
				}
			}
		}
	}
	res, err := b.Dispatch(ctx, request(192, 1))
	if err != nil {
		t.Fatal(err)
	}
	check("blocking dispatch 192³", 192, 1, res.Outputs[0])
	// Where the module stages through the copy engine, the launch encoded its
	// maps: without that the kernel would fall back and still be right.
	if p, _ := b.pipelines.Get(c.Pipeline); len(p.mod.TensorMaps) > 0 && !p.tmaps.ready {
		t.Errorf("a launch of a module with %d tensor maps left them unencoded (the kernel ran its cp.async loop)", len(p.mod.TensorMaps))
	}
	for i, s := range []int{64, 96, 64} {
		out := make([]byte, 4*s*s)
		wait, err := b.StartDispatch(ctx, request(s, 3+i), [][]byte{out})
		if err != nil {
			t.Fatal(err)
		}
		res, err := wait()
		if err != nil {
			t.Fatal(err)
		}
		check("started dispatch", s, 3+i, res.Outputs[0])
	}
}
