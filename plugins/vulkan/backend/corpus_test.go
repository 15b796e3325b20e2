package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestCorpusMatchesReference runs every corpus kernel at every corpus size on the
// Vulkan backend and on the CPU reference interpreter and compares the outputs with
// the kernel's Check (docs/design.md, "Conformance kit"), under the validation layer, with
// buffers mapped directly and staged.
func TestCorpusMatchesReference(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) { corpus(t, b) })
}

func corpus(t *testing.T, b *Backend) {
	ctx := context.Background()
	for _, k := range kernels.All() {
		for _, size := range k.Sizes {
			t.Run(fmt.Sprintf("%s/%d", k.Name, size), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(size), 0x6b696c6e))
				c := k.NewCase(rng, size)
				p := k.Program()
				want, err := interp.Run(ctx, p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
					interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
				if err != nil {
					t.Fatalf("interp: %v", err)
				}
				comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize})
				if err != nil {
					t.Fatalf("vulkan: %v", err)
				}
				t.Cleanup(func() {
					if err := b.Release(ctx, comp.Pipeline); err != nil {
						t.Errorf("Release: %v", err)
					}
				})
				got, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid,
					Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
				if err != nil {
					t.Fatalf("vulkan: %v", err)
				}
				if err := k.Check(got.Outputs, want); err != nil {
					t.Errorf("vulkan differs from cpu-ref: %v", err)
				}
			})
		}
	}
}
