package client_test

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// tripler is about the smallest backend worth serving: the core interface
// only, and one adapter that "runs" any pipeline by tripling each u32 of its
// first input into its first output.
type tripler struct{}

func (tripler) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{ID: "tripler", Version: "1.0.0", Dispatches: true, Features: []string{"ir.v1"},
		Adapters: []pluginapi.Adapter{{Name: "tripler", Available: true}}}, nil
}

func (tripler) Open(context.Context, int) error { return nil }

func (tripler) Compile(context.Context, *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	return &pluginapi.CompileResult{Pipeline: 1}, nil
}

func (tripler) Dispatch(_ context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	out := make([]byte, len(req.Inputs[0]))
	for i := 0; i+4 <= len(out); i += 4 {
		binary.LittleEndian.PutUint32(out[i:], 3*binary.LittleEndian.Uint32(req.Inputs[0][i:]))
	}
	return &pluginapi.DispatchResult{Outputs: [][]byte{out}}, nil
}

func (tripler) Release(context.Context, uint64) error { return nil }
func (tripler) Close(context.Context) error           { return nil }

// A backend served in process over the real wire: what a host sees of it. A
// plugin's main would be just pluginapi.Serve(tripler{}).
func ExampleServeInProcess() {
	ctx := context.Background()
	conn, stop, err := client.ServeInProcess(ctx, tripler{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	caps := conn.Capabilities()
	fmt.Println(caps.Protocol, caps.Buffers, caps.Missing()[0])

	b := ir.NewBuilder("example.copy.u32", 64, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(out, i, ir.Load(in, i))
	pl, err := conn.Compile(ctx, &pluginapi.CompileRequest{Program: b.MustBuild()})
	if err != nil {
		fmt.Println(err)
		return
	}
	input := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 20), 21)
	res, err := conn.DispatchSized(ctx, &pluginapi.DispatchRequest{
		Pipeline: pl.Pipeline, Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{input, nil}, OutputCounts: []uint32{0, 2},
	}, []int{8})
	if err != nil {
		fmt.Println(err)
		return
	}
	o := res.Outputs[0]
	fmt.Println(binary.LittleEndian.Uint32(o), binary.LittleEndian.Uint32(o[4:]))
	// Output:
	// 2 false no pluginapi.Buffers: buffers are kept by the host and every dispatch sends its bytes inline
	// 60 63
}
