package host

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// BenchmarkDispatchLoad is the load test of `kiln bench --load` in a benchmark:
// g goroutines share one host and one pipeline on the cpu-ref plugin process
// and dispatch a 1-element increment through the v1 API; ns/op is the time per
// dispatch of all of them together (so more goroutines going faster shows as
// fewer ns/op).
func BenchmarkDispatchLoad(b *testing.B) {
	ctx := context.Background()
	dir, err := examplePluginDir()
	if err != nil {
		b.Fatal(err)
	}
	h, err := Open(ctx, Options{PluginDir: dir, NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	be, err := h.Acquire(ctx, "cpu-ref")
	if err != nil {
		b.Fatal(err)
	}
	bld := ir.NewBuilder("bench.increment.f32", 64, 1, 1)
	buf := bld.Buffer("buf", ir.F32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	pl, err := be.Compile(ctx, bld.MustBuild(), CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, g := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var wg sync.WaitGroup
			errs := make([]error, g)
			for k := range g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					work := Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4)}}
					for j := k; j < b.N; j += g {
						if _, err := be.Dispatch(ctx, pl, work); err != nil {
							errs[k] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
