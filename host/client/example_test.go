package client_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/kiln-dev/kiln/host/client"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// doubler is a complete minimal backend: the core interface only. Its one
// adapter "runs" a program by doubling every u32 of its first input into its
// first output — enough to show the SDK; plugins/cpuref is a real one.
type doubler struct {
	mu   sync.Mutex
	next uint64
}

func (*doubler) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID: "doubler", Version: "1.0.0", Dispatches: true, Features: []string{"ir.v1"},
		Adapters: []pluginapi.Adapter{{Index: 0, Name: "doubler", Available: true}},
	}, nil
}

func (*doubler) Open(_ context.Context, adapter int) error {
	if adapter != 0 {
		return pluginapi.Unavailable("doubler has no adapter %d. Fix: use adapter 0", adapter)
	}
	return nil
}

func (d *doubler) Compile(context.Context, *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	return &pluginapi.CompileResult{Pipeline: d.next}, nil
}

func (*doubler) Dispatch(_ context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	in := req.Inputs[0]
	out := make([]byte, len(in))
	for i := 0; i+4 <= len(in); i += 4 {
		binary.LittleEndian.PutUint32(out[i:], 2*binary.LittleEndian.Uint32(in[i:]))
	}
	return &pluginapi.DispatchResult{Outputs: [][]byte{out}}, nil
}

func (*doubler) Release(context.Context, uint64) error { return nil }
func (*doubler) Close(context.Context) error           { return nil }

// A backend served in process over the real wire: what a host sees of it. A
// plugin's main would be just pluginapi.Serve(&doubler{}).
func ExampleServeInProcess() {
	ctx := context.Background()
	conn, stop, err := client.ServeInProcess(ctx, &doubler{})
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
	// 40 42
}
