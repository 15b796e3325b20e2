package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// TestUniformsThroughAProcess compiles one program with a uniform once and
// dispatches it with two values through the plugin process: the uniform block
// crosses the wire and no recompile is needed.
func TestUniformsThroughAProcess(t *testing.T) {
	bin := buildPlugin(t)
	var logs bytes.Buffer
	_, b := start(t, bin, &logs)
	ctx := context.Background()
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pb := ir.NewBuilder("test.uniform_fill", 64, 1, 1)
	n := pb.Uniform("n", ir.U32)
	out := pb.Buffer("out", ir.U32, ir.Write)
	i := pb.Let("i", ir.GlobalID(0))
	pb.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) { then.Store(out, i, ir.Mul(i, n)) })
	prog := pb.MustBuild()
	res, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	for _, factor := range []uint32{3, 7} {
		block, err := ir.EncodeUniforms(prog, map[string]ir.Literal{"n": ir.LitU32(factor)})
		if err != nil {
			t.Fatal(err)
		}
		d, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{2, 1, 1},
			OutputCounts: []uint32{100}, Uniforms: block})
		if err != nil {
			t.Fatalf("dispatch: %v\nlog:\n%s", err, &logs)
		}
		for j := range 100 {
			if got := binary.LittleEndian.Uint32(d.Outputs[0][4*j:]); got != uint32(j)*factor {
				t.Fatalf("n=%d: out[%d] = %d, want %d", factor, j, got, uint32(j)*factor)
			}
		}
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{1}})
	var rejected *pluginapi.RejectedError
	if err == nil || !errors.As(err, &rejected) {
		t.Fatalf("a dispatch without the uniform block: %v, want a RejectedError", err)
	}
}
