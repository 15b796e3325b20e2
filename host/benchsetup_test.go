package host

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// benchCPURef opens a host on the example plugins without the cache, autotune
// or PGO (edit, when not nil, changes those options first) and acquires its
// cpu-ref backend; the caller closes the host.
func benchCPURef(ctx context.Context, b *testing.B, edit func(*Options)) (*Host, *Backend) {
	b.Helper()
	dir, err := examplePluginDir()
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{PluginDir: dir, NoCache: true, NoAutotune: true, NoPGO: true}
	if edit != nil {
		edit(&opts)
	}
	h, err := Open(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	be, err := h.Acquire(ctx, "cpu-ref")
	if err != nil {
		h.Close()
		b.Fatal(err)
	}
	return h, be
}

// benchCompile compiles the program bld builds on be.
func benchCompile(ctx context.Context, b *testing.B, be *Backend, bld *ir.Builder) *Pipeline {
	b.Helper()
	pl, err := be.Compile(ctx, bld.MustBuild(), CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return pl
}

// benchIncrement compiles buf[i] += 1 on be.
func benchIncrement(ctx context.Context, b *testing.B, be *Backend) *Pipeline {
	b.Helper()
	bld := ir.NewBuilder("bench.increment.f32", 64, 1, 1)
	buf := bld.Buffer("buf", ir.F32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.If(ir.Lt(i, ir.Len(buf)), func(then *ir.Block) {
		then.Store(buf, i, ir.Add(ir.Load(buf, i), ir.LitF32(1)))
	})
	return benchCompile(ctx, b, be, bld)
}

// benchSaxpy compiles y = 2x + y on be and allocates its two 1-element
// resident buffers; it returns the pipeline and a batch of one dispatch of it
// over them.
func benchSaxpy(ctx context.Context, b *testing.B, be *Backend) (*Pipeline, *Batch) {
	b.Helper()
	bld := ir.NewBuilder("bench.saxpy.f32", 64, 1, 1)
	xb := bld.Buffer("x", ir.F32, ir.Read)
	yb := bld.Buffer("y", ir.F32, ir.ReadWrite)
	i := bld.Let("i", ir.GlobalID(0))
	bld.If(ir.Lt(i, ir.Len(yb)), func(then *ir.Block) {
		then.Store(yb, i, ir.Add(ir.Mul(ir.LitF32(2), ir.Load(xb, i)), ir.Load(yb, i)))
	})
	pl := benchCompile(ctx, b, be, bld)
	var bufs []Binding
	for range 2 {
		buf, err := be.Alloc(ctx, 4, UsageMap)
		if err != nil {
			b.Fatal(err)
		}
		bufs = append(bufs, Bind(buf))
	}
	var batch Batch
	batch.Dispatch(pl, BoundWork{Grid: [3]uint32{1, 1, 1}, Bindings: bufs})
	return pl, &batch
}
