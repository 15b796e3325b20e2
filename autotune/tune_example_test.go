package autotune_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// costRunner is a Runner with known costs: 100 µs per workgroup of 64 and
// fewer invocations with more elements each; epi = 8 computes a wrong result.
type costRunner struct{}

func (costRunner) Run(_ context.Context, c autotune.Candidate, _ bool) (autotune.Sample, error) {
	epi, _ := c.Spec.Get("epi")
	out := []byte{1}
	if epi.Bits() == 8 {
		out = []byte{0}
	}
	d := time.Duration(c.WorkgroupSize[0]/64+1) * 100 * time.Microsecond / time.Duration(epi.Bits())
	return autotune.Sample{Time: d, Device: true, Outputs: [][]byte{out}}, nil
}

// A tuner searches the workgroup sizes and the tunables, checks each
// candidate's first and last runs against the oracle, and picks the fastest
// correct candidate.
func ExampleTune() {
	b := ir.NewBuilder("example.fill", 64, 1, 1)
	epi := b.Tunable("epi", ir.U32, ir.LitU32(1), ir.LitU32(1), ir.LitU32(2), ir.LitU32(8))
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.GlobalID(0), epi)
	prog := b.MustBuild()

	space := autotune.Space(prog, [][3]uint32{{32, 1, 1}, {128, 1, 1}})
	oracle := func(outputs [][]byte) error {
		if outputs[0][0] != 1 {
			return fmt.Errorf("wrong")
		}
		return nil
	}
	res, err := autotune.Tune(context.Background(), costRunner{}, space, autotune.Config{Check: oracle})
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ := res.Winner()
	fmt.Println(len(space), "candidates; winner", w.Candidate, "at", w.Median)
	fmt.Println("record params:", w.Candidate.Record("2026-05-02").Params)
	// Output:
	// 9 candidates; winner wg 32×1×1 epi=2 at 50µs
	// record params: epi=2
}
