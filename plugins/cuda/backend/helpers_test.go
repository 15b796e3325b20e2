package backend

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// requireEnv set to 1 turns "no usable CUDA device" from a skip into a failure.
const requireEnv = "KILN_REQUIRE_CUDA"

// cuda is how the tests reach a CUDA device.
var cuda = gputest.Device{Name: "CUDA", RequireEnv: requireEnv}

// newTestBackend starts a backend from the environment (KILN_CUDA_DRIVER is
// honoured) and opens adapter 0, or skips the test when no CUDA device is usable
// (fails under KILN_REQUIRE_CUDA=1). The backend is closed at cleanup.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b := New(ConfigFromEnv())
	cuda.Open(t, b)
	return b
}

// run compiles p on adapter 0, dispatches it once and releases it.
func run(t testing.TB, b *Backend, p *ir.Program, spec ir.SpecMap, wg [3]uint32, grid [3]uint32, inputs [][]byte, counts []uint32) (*pluginapi.DispatchResult, error) {
	t.Helper()
	return gputest.Run(t, b, p, kernels.Case{Spec: spec, WorkgroupSize: wg, Grid: grid, Inputs: inputs, OutputCounts: counts})
}

func words(ws []uint32) []byte { return kernels.U32Bytes(ws) }

func wordsOf(b []byte) []uint32 { return kernels.BytesU32(b) }

func u32s(n int, f func(i int) uint32) []uint32 { return gputest.U32s(n, f) }

// addOne is out[i] = in[i] + 1 over u32, 64 invocations per workgroup.
func addOne() *ir.Program { return gputest.AddOne() }

// h200 is the limits of an H200 (compute capability 9.0), for tests that need a
// device's limits without a device.
func h200() limits {
	return limits{maxThreadsPerBlock: 1024, maxBlock: [3]uint32{1024, 1024, 64}, maxGrid: [3]uint32{1<<31 - 1, 65535, 65535},
		sharedPerBlock: 48 << 10, warp: 32, sms: 132, totalMem: 150_000 << 20, ccMajor: 9, ccMinor: 0,
		memClockKHz: 3_201_000, busBits: 6144}
}
