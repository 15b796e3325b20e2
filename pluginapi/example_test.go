package pluginapi_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

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

// CapabilitiesOf finds the optional interfaces of a backend with type
// assertions, as Serve does.
func ExampleCapabilitiesOf() {
	c := pluginapi.CapabilitiesOf(&doubler{})
	fmt.Println(c.Buffers, c.Submit, c.Artifacts, c.Health)
	// Output: false false false false
}
