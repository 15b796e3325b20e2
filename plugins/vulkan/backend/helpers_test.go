package backend

import (
	"context"
	"encoding/binary"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// requireEnv set to 1 turns "no usable Vulkan" from a skip into a failure.
const requireEnv = "KILN_REQUIRE_VULKAN"

// newTestBackend starts a validating backend and opens adapter 0, or skips the test
// when no Vulkan device is usable (fails under KILN_REQUIRE_VULKAN=1). At cleanup it
// closes the backend and fails the test on any validation message. KILN_VK_VALIDATION=0
// runs without the layer, for machines that do not have it; KILN_VULKAN_LOADER is
// honoured.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	cfg := ConfigFromEnv()
	cfg.Validation = os.Getenv(ValidationEnv) != "0"
	cfg.NoBandwidth = true
	b := New(cfg)
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
			t.Fatalf("%s=1 but Vulkan is unusable: %s", requireEnv, reason)
		}
		t.Skipf("no usable Vulkan device (%s); set %s=1 to fail instead", reason, requireEnv)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n, text := b.ValidationMessages(); n != 0 {
			t.Errorf("%d validation messages:\n%s", n, text)
		}
	})
	return b
}

// run compiles p on adapter 0, dispatches it once and releases it.
func run(t testing.TB, b *Backend, p *ir.Program, spec ir.SpecMap, wg [3]uint32, grid [3]uint32, inputs [][]byte, counts []uint32) (*pluginapi.DispatchResult, error) {
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
	return b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: c.Pipeline, Grid: grid, Inputs: inputs, OutputCounts: counts})
}

// bothMemoryPaths runs f as a subtest twice: with buffers mapped directly and with
// buffers staged through host-visible copies, whichever the device would pick, so
// both dispatch paths run on every device.
func bothMemoryPaths(t *testing.T, b *Backend, f func(t *testing.T)) {
	d := b.adapters[0].dev
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
