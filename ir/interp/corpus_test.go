package interp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// corpusSeed fixes the random inputs, so a failure reproduces; each size draws its
// own stream from it.
const corpusSeed = 0x6b696c6e

// runCase dispatches c on the interpreter, in strict mode too, and checks the
// outputs against the kernel's Go reference; strict mode must find no
// shared-memory hazard in any corpus kernel.
func runCase(t *testing.T, k kernels.Kernel, p *ir.Program, c kernels.Case) {
	t.Helper()
	want := k.Reference(c)
	for _, strict := range []bool{false, true} {
		got, err := interp.Run(context.Background(), p,
			interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec, Strict: strict},
			interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
		if err != nil {
			t.Fatalf("interp.Run (strict %v): %v", strict, err)
		}
		if err := k.Check(got, want); err != nil {
			t.Fatalf("strict %v: %v", strict, err)
		}
	}
}

func TestCorpus(t *testing.T) {
	for _, k := range kernels.All() {
		p := k.Program()
		for _, size := range k.Sizes {
			t.Run(fmt.Sprintf("%s/%d", k.Name, size), func(t *testing.T) {
				t.Parallel()
				runCase(t, k, p, k.NewCase(rand.New(rand.NewPCG(corpusSeed, uint64(size))), size))
			})
		}
	}
}

// matmulTile sets matmul's tile depth and covers its (size+2)×size output with
// workgroups of the case's size.
func matmulTile(tile uint32) func(c *kernels.Case) {
	return func(c *kernels.Case) {
		c.Spec.Set("tile", ir.SpecU32(tile))
		n, wg := uint32(c.Size), c.WorkgroupSize
		c.Grid = [3]uint32{(n + 2 + wg[0] - 1) / wg[0], (n + wg[1] - 1) / wg[1], 1}
	}
}

// TestCorpusOverrides runs the kernels that adapt to their workgroup size with an
// override, so the reference's handling of overrides and the interpreter's agree.
func TestCorpusOverrides(t *testing.T) {
	variants := []struct {
		kernel string
		size   int
		wg     [3]uint32
		adjust func(c *kernels.Case)
	}{
		{"reduce_sum", 1000, [3]uint32{64, 1, 1}, func(c *kernels.Case) {
			c.Grid[0] = (1000 + 63) / 64
			c.OutputCounts[1] = c.Grid[0]
		}},
		{"dot", 1000, [3]uint32{32, 1, 1}, func(c *kernels.Case) {
			c.Grid[0] = (1000 + 31) / 32
			c.OutputCounts[2] = c.Grid[0]
		}},
		{"exclusive_scan", 1000, [3]uint32{100, 1, 1}, func(c *kernels.Case) { c.Grid[0] = 10 }},
		{"histogram", 1000, [3]uint32{64, 1, 1}, func(c *kernels.Case) { c.Grid[0] = (1000 + 63) / 64 }},
		{"histogram", 1000, [3]uint32{512, 1, 1}, func(c *kernels.Case) { c.Grid[0] = 2 }},
		{"matmul", 37, [3]uint32{8, 8, 1}, matmulTile(8)},
		// A full tile on the largest square workgroup: before IR v1.1's matmul the
		// shared tiles held 256 elements and this silently gave a wrong c.
		{"matmul", 45, [3]uint32{32, 32, 1}, matmulTile(32)},
		// A tile shallower than the workgroup, and a non-square workgroup.
		{"matmul", 40, [3]uint32{32, 32, 1}, matmulTile(5)},
		{"matmul", 23, [3]uint32{8, 4, 1}, matmulTile(3)},
		{"collatz", 300, [3]uint32{64, 1, 1}, func(c *kernels.Case) {
			c.Grid[0] = (300 + 63) / 64
			c.Spec.Set("max_steps", ir.SpecU32(50))
		}},
	}
	for _, v := range variants {
		k, ok := kernels.Lookup(v.kernel)
		if !ok {
			t.Fatalf("no corpus kernel %q", v.kernel)
		}
		t.Run(fmt.Sprintf("%s/%d/wg%dx%d", v.kernel, v.size, v.wg[0], v.wg[1]), func(t *testing.T) {
			t.Parallel()
			c := k.NewCase(rand.New(rand.NewPCG(corpusSeed, uint64(v.size))), v.size)
			c.WorkgroupSize = v.wg
			v.adjust(&c)
			runCase(t, k, k.Program(), c)
		})
	}
}
