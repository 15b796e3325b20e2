package main

import (
	"context"
	"errors"
	"sync"

	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/pluginapi"
)

func main() { pluginapi.Serve(newBackend()) }

// backend keeps compiled pipelines by handle.
type backend struct {
	mu        sync.Mutex
	next      uint64
	pipelines map[uint64]*interp.Kernel
}

func newBackend() *backend {
	return &backend{pipelines: make(map[uint64]*interp.Kernel)}
}

// Describe says who the backend is and what its one adapter can do. The profile
// drives the host's choice of a preferred backend.
func (b *backend) Describe(context.Context) (*pluginapi.Description, error) {
	rank := uint32(100)
	return &pluginapi.Description{
		ID:         "example-cpu",
		Version:    "1.0.0",
		Dispatches: true,
		Precedence: &rank,
		Features:   []string{"ir.v1", "ir.v1.1", "ir.v1.2", "shared", "atomics", "barrier"},
		Adapters: []pluginapi.Adapter{{
			Index:     0,
			Name:      "example CPU",
			Available: true,
			Profile: pluginapi.DeviceProfile{
				MaxStorageBufferBindingSize: 1 << 30,
				MaxInvocationsPerWorkgroup:  1024,
				HasSharedMemory:             true,
				SupportsF16:                 true, // the interpreter runs IR v1.2's 16-bit types
				SupportsBF16:                true,
				TimingQuality:               pluginapi.HostOnly,
			},
			Identity: pluginapi.DeviceIdentity{Vendor: "example", Device: "example CPU", DriverVersion: "1.0.0", DeviceType: "cpu"},
		}},
	}, nil
}

func checkAdapter(adapter int) error {
	if adapter != 0 {
		return pluginapi.Rejected("example-cpu has no adapter %d. Fix: use adapter 0", adapter)
	}
	return nil
}

// Open has nothing to prepare for adapter 0; a real backend creates its device here.
func (b *backend) Open(_ context.Context, adapter int) error { return checkAdapter(adapter) }

// Compile gets a program the SDK has already decoded and validated.
func (b *backend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	if err := checkAdapter(req.Adapter); err != nil {
		return nil, err
	}
	k, err := interp.Compile(req.Program, interp.Options{WorkgroupSize: req.WorkgroupSize, Spec: req.Spec})
	if err != nil {
		return nil, pluginapi.Rejected("example-cpu cannot compile %q: %w", req.Program.Name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	b.pipelines[b.next] = k
	return &pluginapi.CompileResult{Pipeline: b.next}, nil
}

// Dispatch runs a pipeline; the SDK measures the host time because HostNanos is
// left zero.
func (b *backend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	b.mu.Lock()
	k, ok := b.pipelines[req.Pipeline]
	b.mu.Unlock()
	if !ok {
		return nil, pluginapi.Rejected("example-cpu has no pipeline %d. Fix: compile the program first", req.Pipeline)
	}
	outs, err := k.Run(ctx, interp.Launch{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Uniforms: req.Uniforms})
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, err
		}
		return nil, pluginapi.Rejected("example-cpu cannot run pipeline %d: %w", req.Pipeline, err)
	}
	return &pluginapi.DispatchResult{Outputs: outs}, nil
}

// Release forgets a pipeline.
func (b *backend) Release(_ context.Context, pipeline uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pipelines, pipeline)
	return nil
}

// Close forgets every pipeline; the process exits afterwards.
func (b *backend) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.pipelines)
	return nil
}
