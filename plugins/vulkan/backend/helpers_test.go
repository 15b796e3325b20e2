package backend

import (
	"context"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// requireEnv set to 1 turns "no usable Vulkan" from a skip into a failure.
const requireEnv = "KILN_REQUIRE_VULKAN"

// vulkan is how the tests reach a Vulkan device.
var vulkan = gputest.Device{Name: "Vulkan", RequireEnv: requireEnv}

// newTestBackend starts a validating backend and opens adapter 0, or skips the test
// when no Vulkan device is usable (fails under KILN_REQUIRE_VULKAN=1). At cleanup it
// closes the backend and fails the test on any validation message. KILN_VK_VALIDATION=0
// runs without the layer, for machines that do not have it; KILN_VULKAN_LOADER is
// honoured.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b := New(testConfig())
	vulkan.Open(t, b, func(t testing.TB) {
		if n, text := b.ValidationMessages(); n != 0 {
			t.Errorf("%d validation messages:\n%s", n, text)
		}
	})
	return b
}

// testConfig is the configuration of the tests' backends: from the
// environment, validating unless KILN_VK_VALIDATION=0, and with no bandwidth
// measurement.
func testConfig() Config {
	cfg := ConfigFromEnv()
	cfg.Validation = os.Getenv(ValidationEnv) != "0"
	cfg.NoBandwidth = true
	return cfg
}

// describeNew starts a backend of cfg and describes it; the backend is closed
// at cleanup.
func describeNew(t *testing.T, cfg Config) (*Backend, *pluginapi.Description) {
	t.Helper()
	b := New(cfg)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	d, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b, d
}

// run compiles p on adapter 0, dispatches it once and releases it.
func run(t testing.TB, b *Backend, p *ir.Program, spec ir.SpecMap, wg [3]uint32, grid [3]uint32, inputs [][]byte, counts []uint32) (*pluginapi.DispatchResult, error) {
	t.Helper()
	return gputest.Run(t, b, p, kernels.Case{Spec: spec, WorkgroupSize: wg, Grid: grid, Inputs: inputs, OutputCounts: counts})
}

// bothMemoryPaths runs f as a subtest twice: with buffers mapped directly and with
// buffers staged through host-visible copies, whichever the device would pick, so
// both dispatch paths run on every device.
func bothMemoryPaths(t *testing.T, b *Backend, f func(t *testing.T)) {
	d := b.adapters.List()[0].dev
	for _, direct := range []bool{true, false} {
		name := "staged"
		if direct {
			name = "direct"
		}
		own := d.direct.Swap(direct)
		t.Run(name, f)
		d.direct.Store(own)
	}
}

func words(ws []uint32) []byte { return kernels.U32Bytes(ws) }

func wordsOf(b []byte) []uint32 { return kernels.BytesU32(b) }

func u32s(n int, f func(i int) uint32) []uint32 { return gputest.U32s(n, f) }

// addOne is out[i] = in[i] + 1 over u32, 64 invocations per workgroup.
func addOne() *ir.Program { return gputest.AddOne() }
