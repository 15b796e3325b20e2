package plugintest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

// Usable describes b and checks that its id is id and that it has adapters.
// When adapter 0 is unavailable it checks that the reason says how to fix it
// and skips t, or fails t when the environment variable require is "1".
func Usable(t testing.TB, ctx context.Context, b pluginapi.Backend, id, require string) *pluginapi.Description {
	t.Helper()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != id || len(d.Adapters) == 0 {
		t.Fatalf("description %+v, want id %s with adapters", d, id)
	}
	if a := d.Adapters[0]; !a.Available {
		if !strings.Contains(a.Reason, "Fix: ") {
			t.Errorf("unavailable without a Fix: %q", a.Reason)
		}
		if os.Getenv(require) == "1" {
			t.Fatalf("%s=1 but adapter 0 is unavailable: %s", require, a.Reason)
		}
		t.Skipf("no usable %s device (%s); set %s=1 to fail instead", id, a.Reason, require)
	}
	return d
}

// VectorAdd runs the corpus's vector_add through b as the host does: Open of
// adapter 0, Compile (blob checks the blob it returns), a Dispatch of 100000
// elements checked against the reference, Release, a Dispatch of the released
// pipeline that must be a RejectedError, and Close. It returns the first
// Dispatch's result.
func VectorAdd(t testing.TB, ctx context.Context, b pluginapi.Backend, blob func([]byte) error) *pluginapi.DispatchResult {
	t.Helper()
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.Lookup("vector_add")
	c := k.NewCase(rand.New(rand.NewPCG(1, 2)), 100_000)
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		t.Fatal(err)
	}
	if err := blob(comp.Blob); err != nil {
		t.Error(err)
	}
	res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Check(res.Outputs, k.Reference(c)); err != nil {
		t.Error(err)
	}
	if err := b.Release(ctx, comp.Pipeline); err != nil {
		t.Error(err)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) {
		t.Errorf("dispatch of a released pipeline through the wire = %v, want a RejectedError", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Error(err)
	}
	return res
}
