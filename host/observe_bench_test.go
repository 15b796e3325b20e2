package host

import (
	"context"
	"io"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// BenchmarkSubmitTracing is the 1-element resident submit of
// BenchmarkSubmitRoundTrip on two hosts in one run: "off" without a trace or
// a hook (the fast path: its allocations must not grow), "on" writing a
// trace (to io.Discard: the cost is the host's and the plugin's timing and
// the events' encoding, not a disk).
func BenchmarkSubmitTracing(b *testing.B) {
	ctx := context.Background()
	dir, err := examplePluginDir()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"off", "on"} {
		opts := Options{PluginDir: dir, NoCache: true, NoAutotune: true, NoPGO: true}
		if mode == "on" {
			opts.Trace = io.Discard
		}
		h, err := Open(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
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
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := be.Submit(ctx, &batch); err != nil {
					b.Fatal(err)
				}
			}
		})
		h.Close()
	}
}
