package backend

import (
	"context"
	"encoding/binary"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// requireEnv set to 1 turns "no usable CUDA device" from a skip into a failure.
const requireEnv = "KILN_REQUIRE_CUDA"

// newTestBackend starts a backend from the environment (KILN_CUDA_DRIVER is
// honoured) and opens adapter 0, or skips the test when no CUDA device is usable
// (fails under KILN_REQUIRE_CUDA=1). The backend is closed at cleanup.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b := New(ConfigFromEnv())
	ctx := context.Background()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if len(d.Adapters) == 0 || !d.Adapters[0].Available {
		reason := "no adapters"
		if len(d.Adapters) > 0 {
			reason = d.Adapters[0].Reason
		}
		b.Close(ctx)
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s=1 but CUDA is unusable: %s", requireEnv, reason)
		}
		t.Skipf("no usable CUDA device (%s); set %s=1 to fail instead", reason, requireEnv)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// run compiles p on adapter 0, dispatches it once and releases it.
func run(t testing.TB, b *Backend, p *ir.Program, spec ir.SpecMap, wg [3]uint32, grid [3]uint32, inputs [][]byte, counts []uint32) (*pluginapi.DispatchResult, error) {
	t.Helper()
	return runWith(t, b, p, spec, wg, grid, inputs, counts, nil)
}

// runWith is run with a uniform block.
func runWith(t testing.TB, b *Backend, p *ir.Program, spec ir.SpecMap, wg [3]uint32, grid [3]uint32, inputs [][]byte, counts []uint32, uniforms []byte) (*pluginapi.DispatchResult, error) {
	t.Helper()
	ctx := context.Background()
	c, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p, Spec: spec, WorkgroupSize: wg})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := b.Release(ctx, c.Pipeline); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	return b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, Inputs: inputs, OutputCounts: counts, Uniforms: uniforms})
}

func words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

func wordsOf(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func u32s(n int, f func(i int) uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// addOne is out[i] = in[i] + 1 over u32, 64 invocations per workgroup.
func addOne() *ir.Program {
	b := ir.NewBuilder("test.add_one", 64, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(in)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(ir.Load(in, i), ir.LitU32(1)))
	})
	return b.MustBuild()
}

// h200 is the limits of an H200 (compute capability 9.0), for tests that need a
// device's limits without a device.
func h200() limits {
	return limits{maxThreadsPerBlock: 1024, maxBlock: [3]uint32{1024, 1024, 64}, maxGrid: [3]uint32{1<<31 - 1, 65535, 65535},
		sharedPerBlock: 48 << 10, warp: 32, sms: 132, totalMem: 150_000 << 20, ccMajor: 9, ccMinor: 0,
		memClockKHz: 3_201_000, busBits: 6144}
}
