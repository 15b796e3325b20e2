package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/ptx"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// tcBench is one matmul_tc measurement: operands, size, tile and workgroup.
type tcBench struct {
	op         ir.Type
	s          int
	tm, tn, tk uint32
	wg         uint32
}

// tcBenches are the measurements of BenchmarkMatmulTC: per operand type at
// 4096³ the default tile (64×128×32, 128 invocations: wgmma on an H200) and the
// fastest measured (256×128×64 bf16/f16, 256×128×32 tf32, 512 invocations, in
// dynamic shared memory), and bf16 at 8192³.
var tcBenches = []tcBench{
	{ir.BF16, 4096, 64, 128, 32, 128}, {ir.BF16, 4096, 256, 128, 64, 512},
	{ir.F16, 4096, 64, 128, 32, 128}, {ir.F16, 4096, 256, 128, 64, 512},
	{ir.F32, 4096, 64, 128, 32, 128}, {ir.F32, 4096, 256, 128, 32, 512},
	{ir.BF16, 8192, 64, 128, 32, 128}, {ir.BF16, 8192, 256, 128, 64, 512},
}

// tcValue is the small integer at element i of operand seed: in [-3, 3], so
// every product and K-sum is exact in f32 and the result is checked bit for bit.
func tcValue(i, seed int) float32 { return float32((i*7+seed*13+i/97)%7 - 3) }

// tcBytes encodes n values of operand seed as op's elements.
func tcBytes(op ir.Type, n, seed int) []byte {
	out := make([]byte, n*int(op.Size()))
	for i := range n {
		v := tcValue(i, seed)
		switch op {
		case ir.BF16:
			binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewBFloat16(v)))
		case ir.F16:
			binary.LittleEndian.PutUint16(out[2*i:], uint16(half.NewFloat16(v)))
		default:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	}
	return out
}

// BenchmarkMatmulTC runs matmul_tc (the tensor-core matmul: wgmma on an H200,
// mma.sync on sm_80) through the backend over resident buffers, submitted back
// to back after a warm-up, and reports the best device time's TFLOP/s (2·s³
// flops) next to the module's path; c is checked exactly at 64 sampled
// elements first. scripts/gpu-cuda-run.sh runs torch.matmul on the same shapes
// in the same run.
func BenchmarkMatmulTC(b *testing.B) {
	for _, tb := range tcBenches {
		opName := tb.op.String()
		if tb.op == ir.F32 {
			opName = "tf32"
		}
		b.Run(fmt.Sprintf("%s/s=%d/tile=%dx%dx%d/wg=%d", opName, tb.s, tb.tm, tb.tn, tb.tk, tb.wg), func(b *testing.B) {
			be, adapter := benchBackend(b)
			ctx := context.Background()
			s := tb.s
			p := gputest.CorpusTC(b, tb.op, tb.tm, tb.tn, tb.tk)
			c, err := be.Compile(ctx, &pluginapi.CompileRequest{Adapter: adapter, Program: p, WorkgroupSize: [3]uint32{tb.wg, 1, 1}})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Release(ctx, c.Pipeline)
			words := func(bytes int) int { return (bytes + 3) / 4 }
			ab, bb := tcBytes(tb.op, s*s, 1), tcBytes(tb.op, s*s, 2)
			bufs := []pluginapi.BufferRange{
				{Buffer: gputest.ResidentBuffer(b, be, adapter, words(len(ab)), ab), Size: uint64(len(ab))},
				{Buffer: gputest.ResidentBuffer(b, be, adapter, words(len(bb)), bb), Size: uint64(len(bb))},
				{Buffer: gputest.ResidentBuffer(b, be, adapter, s*s, nil), Size: 4 * uint64(s*s)},
			}
			grid := [3]uint32{(uint32(s) + tb.tn - 1) / tb.tn, (uint32(s) + tb.tm - 1) / tb.tm, 1}
			req := &pluginapi.SubmitRequest{Adapter: adapter, Commands: []pluginapi.SubmitCommand{
				pluginapi.DispatchCommand{Pipeline: c.Pipeline, Grid: grid, Bindings: bufs,
					Uniforms: kernels.U32Bytes([]uint32{uint32(s), uint32(s), uint32(s)})}}}
			if _, err := be.Submit(ctx, req); err != nil {
				b.Fatal(err)
			}
			out := make([]byte, 4*s*s)
			if err := be.ReadBuffer(ctx, bufs[2].Buffer, 0, out); err != nil {
				b.Fatal(err)
			}
			for i := range 64 {
				r, col := (i*2654435761)%s, (i*40503+i*i)%s
				var want float64
				for k := range s {
					want += float64(tcValue(r*s+k, 1)) * float64(tcValue(k*s+col, 2))
				}
				if got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(r*s+col):])); float64(got) != want {
					b.Fatalf("c[%d][%d] = %v, want %v", r, col, got, want)
				}
			}
			best := gputest.Submits(b, be, req, gputest.WarmUp).BestDevice
			b.ReportMetric(2*math.Pow(float64(s), 3)/float64(best)/1e3, "best-TFLOP/s")
			b.Logf("%s: %s", b.Name(), tcPath(be, adapter, p, tb.wg))
		})
	}
}

// tcPath is the first line of the module the backend emits for p: the path.
func tcPath(be *Backend, adapter int, p *ir.Program, wg uint32) string {
	a, _, err := be.deviceAt(adapter)
	if err != nil {
		return err.Error()
	}
	m, err := ptx.Emit(p, emitOptions(a, ir.SpecMap{}, [3]uint32{wg, 1, 1}))
	if err != nil {
		return err.Error()
	}
	first, _, _ := strings.Cut(m.Text, "\n")
	return first
}
