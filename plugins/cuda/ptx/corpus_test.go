package ptx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/verify"
)

// maxCaseInvocations keeps the interpreted corpus runs short: every size of the
// corpus but the largest ones, and with -short or under the race detector only
// the small sizes.
func maxCaseInvocations() uint64 {
	if testing.Short() || raceEnabled {
		return 1 << 12
	}
	return 1 << 17
}

// TestCorpusRunsOnInterpreter runs every corpus kernel at each of its sizes that
// fits maxCaseInvocations on the PTX interpreter and compares the outputs with the
// CPU reference interpreter (the oracle) under the semantics in docs/design.md, "The program (IR)", and with the
// kernel's plain-Go reference.
func TestCorpusRunsOnInterpreter(t *testing.T) {
	for _, k := range kernels.All() {
		t.Run(k.Name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			p := k.Program()
			ran := 0
			for _, size := range k.Sizes {
				c := k.NewCase(rng, size)
				wg := p.WorkgroupSize
				if c.WorkgroupSize != ([3]uint32{}) {
					wg = c.WorkgroupSize
				}
				if uint64(c.Grid[0])*uint64(c.Grid[1])*uint64(c.Grid[2])*uint64(wg[0]*wg[1]*wg[2]) > maxCaseInvocations() {
					continue
				}
				ran++
				got, err := dispatchCase(p, c, c.Uniforms)
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				want, err := interp.Run(context.Background(), p, interp.Options{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize},
					interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
				if err != nil {
					t.Fatalf("size %d: oracle: %v", size, err)
				}
				if _, err := verify.Compare(p, got, want); err != nil {
					t.Errorf("size %d: differs from the oracle: %v", size, err)
				}
				if err := k.Check(got, k.Reference(c)); err != nil {
					t.Errorf("size %d: %v", size, err)
				}
			}
			if ran == 0 {
				t.Errorf("no size of %v fits %d invocations", k.Sizes, maxCaseInvocations())
			}
		})
	}
}

func ExampleEmit() {
	k, _ := kernels.Lookup("vector_add")
	m, err := Emit(k.Program(), Options{Target: Target{SM: 80}})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Entry, m.Target, m.WorkgroupSize, len(m.Params))
	// Output: kiln_main sm_80 [256 1 1] 6
}
