package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
)

func words(v ...uint32) []byte { return kernels.U32Bytes(v) }

func TestBuffersAndSubmitInProcess(t *testing.T) {
	ctx := context.Background()
	b := New()
	alloc := func(size uint64, shared []byte) *pluginapi.AllocResult {
		t.Helper()
		r, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: size, Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	shared := make([]byte, 16)
	x := alloc(16, shared)
	y := alloc(16, nil)
	if !x.Mapped || y.Mapped {
		t.Fatalf("mapped: x %v (shared memory offered), y %v (none)", x.Mapped, y.Mapped)
	}
	copy(shared, words(1, 2, 3, 4)) // the host fills a mapped buffer in place

	pb := ir.NewBuilder("test.axpy.u32", 64, 1, 1)
	n := pb.Uniform("n", ir.U32)
	xb := pb.Buffer("x", ir.U32, ir.Read)
	yb := pb.Buffer("y", ir.U32, ir.ReadWrite)
	i := pb.Let("i", ir.GlobalID(0))
	pb.If(ir.Lt(i, ir.Len(yb)), func(then *ir.Block) {
		then.Store(yb, i, ir.Add(ir.Mul(ir.Load(xb, i), n), ir.Load(yb, i)))
	})
	prog := pb.MustBuild()
	pl, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := ir.EncodeUniforms(prog, map[string]ir.Literal{"n": ir.LitU32(10)})
	whole := func(h uint64) pluginapi.BufferRange { return pluginapi.BufferRange{Buffer: h, Size: 16} }
	_, err = b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
		pluginapi.FillCommand{Dst: whole(y.Buffer), Value: 5},
		pluginapi.DispatchCommand{Pipeline: pl.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{whole(x.Buffer), whole(y.Buffer)}, Uniforms: block},
		pluginapi.DispatchCommand{Pipeline: pl.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{whole(x.Buffer), whole(y.Buffer)}, Uniforms: block},
		pluginapi.CopyCommand{Src: pluginapi.BufferRange{Buffer: y.Buffer, Size: 4}, Dst: pluginapi.BufferRange{Buffer: x.Buffer, Offset: 12, Size: 4}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := b.ReadBuffer(ctx, y.Buffer, 0, got); err != nil {
		t.Fatal(err)
	}
	if want := words(25, 45, 65, 85); string(got) != string(want) {
		t.Errorf("y = %v, want %v (two dependent dispatches after the fill)", got, want)
	}
	if want := words(1, 2, 3, 25); string(shared) != string(want) {
		t.Errorf("x's shared memory = %v, want %v (the copy lands in place)", shared, want)
	}

	_, err = b.Submit(ctx, &pluginapi.SubmitRequest{Commands: []pluginapi.SubmitCommand{
		pluginapi.DispatchCommand{Pipeline: pl.Pipeline, Grid: [3]uint32{1, 1, 1}, Bindings: []pluginapi.BufferRange{whole(x.Buffer), whole(y.Buffer)}},
	}})
	var rej *pluginapi.RejectedError
	if !errors.As(err, &rej) {
		t.Errorf("dispatch without its uniform block: %v, want a RejectedError", err)
	}
	if err := b.FreeBuffer(ctx, y.Buffer); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteBuffer(ctx, y.Buffer, 0, got); !errors.As(err, &rej) {
		t.Errorf("write to a freed buffer: %v, want a RejectedError", err)
	}
	if _, err := b.AllocBuffer(ctx, &pluginapi.AllocRequest{Size: maxBufferBytes + 1}); !errors.As(err, &rej) {
		t.Errorf("oversized alloc: %v, want a RejectedError", err)
	}
}
