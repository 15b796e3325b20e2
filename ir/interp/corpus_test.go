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

// runCase dispatches c on the interpreter and checks the outputs against the
// kernel's Go reference.
func runCase(t *testing.T, k kernels.Kernel, p *ir.Program, c kernels.Case) {
	t.Helper()
	want := k.Reference(c)
	got, err := interp.Run(context.Background(), p,
		interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
		interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts})
	if err != nil {
		t.Fatalf("interp.Run: %v", err)
	}
	if err := k.Check(got, want); err != nil {
		t.Fatal(err)
	}
}

// TestCorpus runs every corpus kernel at each of its sizes (empty, one element,
// primes, exact multiples of the workgroup, one large size) on random inputs.
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
		{"matmul", 37, [3]uint32{8, 8, 1}, func(c *kernels.Case) {
			c.Spec.Set("tile", ir.SpecU32(8))
			c.Grid = [3]uint32{(39 + 7) / 8, (37 + 7) / 8, 1}
		}},
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
