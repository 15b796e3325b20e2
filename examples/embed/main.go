package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
)

func main() {
	plugins := flag.String("plugins", "", "plugins directory (default: $KILN_PLUGIN_DIR, then the host's default places)")
	backend := flag.String("backend", "cpu-ref", `backend to run on ("" for the preferred one)`)
	n := flag.Int("n", 8, "number of elements")
	flag.Parse()
	if err := run(context.Background(), *plugins, *backend, *n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run is the whole application: open, list, dispatch, print.
func run(ctx context.Context, plugins, backend string, n int, out io.Writer) error {
	h, err := host.Open(ctx, host.Options{PluginDir: plugins})
	if err != nil {
		return err
	}
	defer h.Close()

	backends, err := h.Survey(ctx)
	if err != nil {
		return err
	}
	for _, b := range backends {
		fmt.Fprintf(out, "backend %s: %s %s\n", b.Name(), b.Status, b.Reason)
	}

	prog, err := saxpy()
	if err != nil {
		return err
	}
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), 1
	}
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(3))
	res, err := h.Dispatch(ctx, prog, host.Launch{
		Backend:        backend,
		CompileOptions: host.CompileOptions{Spec: spec},
		Work: host.Work{
			Invocations: [3]uint32{uint32(n), 1, 1},
			Named:       []host.NamedInput{host.Input("x", x), host.Input("y", y)},
		},
	})
	if err != nil {
		return err
	}
	ys, err := host.OutputAs[float32](res, "y")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "saxpy a=3 on %s (compile %v, dispatch %v):\n", res.Backend, res.Compile, res.Dispatch)
	for i, v := range ys {
		fmt.Fprintf(out, "y[%d] = %g\n", i, v)
	}
	return resident(ctx, h, prog, res.Backend, x, out)
}

// resident repeats saxpy (a=2) ten times over buffers that stay in the plugin:
// one upload, one batch of ten dependent dispatches, one download.
func resident(ctx context.Context, h *host.Host, prog *ir.Program, backend string, x []float32, out io.Writer) error {
	b, err := h.Acquire(ctx, backend)
	if err != nil {
		return err
	}
	pl, err := b.Compile(ctx, prog, host.CompileOptions{})
	if err != nil {
		return err
	}
	defer b.Release(ctx, pl)
	size := int64(4 * len(x))
	xb, err := b.Alloc(ctx, size, host.UsageMap)
	if err != nil {
		return err
	}
	defer xb.Free(ctx)
	yb, err := b.Alloc(ctx, size, 0)
	if err != nil {
		return err
	}
	defer yb.Free(ctx)
	if err := host.Upload(ctx, xb, x); err != nil {
		return err
	}
	var batch host.Batch
	batch.Fill(host.Bind(yb), math.Float32bits(1))
	for range 10 {
		batch.Dispatch(pl, host.BoundWork{Invocations: [3]uint32{uint32(len(x)), 1, 1}, Bindings: []host.Binding{host.Bind(xb), host.Bind(yb)}})
	}
	res, err := b.Submit(ctx, &batch)
	if err != nil {
		return err
	}
	y, err := host.Download[float32](ctx, yb)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d commands in one submit on resident buffers (%v):\n", res.Commands, res.Submit)
	for i, v := range y {
		fmt.Fprintf(out, "y[%d] = %g\n", i, v)
	}
	return nil
}

// saxpy builds y = a*x + y over f32 buffers, with a a specialization parameter.
func saxpy() (*ir.Program, error) {
	b := ir.NewBuilder("example.saxpy.f32", 64, 1, 1)
	a := b.Param("a", ir.F32, ir.LitF32(2))
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
	})
	return b.Build()
}
