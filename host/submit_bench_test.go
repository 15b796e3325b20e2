package host

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// BenchmarkSubmitRoundTrip is one submit of a 1-element dispatch over a
// resident buffer on the cpu-ref plugin process, and BenchmarkDispatchRoundTrip
// the same dispatch through the v1 API (bytes in, bytes out).
func BenchmarkSubmitRoundTrip(b *testing.B) {
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
	bld := ir.NewBuilder("bench.saxpy.f32", 64, 1, 1)
	xb := bld.Buffer("x", ir.F32, ir.Read)
	yb := bld.Buffer("y", ir.F32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.If(ir.Lt(i, ir.Len(yb)), func(then *ir.Block) {
		then.Store(yb, i, ir.Add(ir.Mul(ir.LitF32(2), ir.Load(xb, i)), ir.Load(yb, i)))
	})
	pl, err := be.Compile(ctx, bld.MustBuild(), CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	x, err := be.Alloc(ctx, 4, UsageMap)
	if err != nil {
		b.Fatal(err)
	}
	y, err := be.Alloc(ctx, 4, UsageMap)
	if err != nil {
		b.Fatal(err)
	}
	var batch Batch
	batch.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: []Binding{Bind(x), Bind(y)}})
	b.Run("submit", func(b *testing.B) {
		var plugin int64
		for range b.N {
			res, err := be.Submit(ctx, &batch)
			if err != nil {
				b.Fatal(err)
			}
			plugin += res.PluginTime.Nanoseconds()
		}
		b.ReportMetric(float64(plugin)/float64(b.N), "plugin-ns/op")
	})
	work := Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, 4), make([]byte, 4)}}
	b.Run("dispatch", func(b *testing.B) {
		for range b.N {
			if _, err := be.Dispatch(ctx, pl, work); err != nil {
				b.Fatal(err)
			}
		}
	})
}
