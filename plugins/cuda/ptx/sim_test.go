package ptx

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// simBackend is a pluginapi.Backend that runs emitted modules on the PTX
// interpreter of interp_test.go, so the conformance kit checks the emitter's text
// without a driver in between. Like a CUDA device it runs subgroups of up to 32
// lanes, f16 and bf16, and says so in its profile.
type simBackend struct {
	pipelines handles.Table[simPipeline]
}

type simPipeline struct {
	p    *ir.Program
	spec ir.SpecMap
	wg   [3]uint32
}

func (b *simBackend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID: "ptx-sim", Version: "0", Dispatches: true, Features: []string{"ir.v1", "ir.v1.1", "ir.v1.2"},
		Adapters: []pluginapi.Adapter{{Index: 0, Name: "PTX interpreter", Available: true,
			Profile: pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 1024, HasSharedMemory: true, SubgroupSize: WarpSize,
				SupportsSubgroupOps: true, HasSubgroupShuffle: true, SupportsF16: true, SupportsBF16: true}}},
	}, nil
}

func (b *simBackend) Open(context.Context, int) error { return nil }

// Compile emits the module once to reject what the emitter rejects; Dispatch
// emits it again for the launch, as dispatchCase does.
func (b *simBackend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	if _, err := Emit(req.Program, Options{Spec: req.Spec, WorkgroupSize: req.WorkgroupSize}); err != nil {
		return nil, pluginapi.Rejected("ptx-sim: %w", err)
	}
	h := b.pipelines.Add(simPipeline{p: req.Program, spec: req.Spec, wg: req.WorkgroupSize})
	return &pluginapi.CompileResult{Pipeline: h}, nil
}

func (b *simBackend) Dispatch(_ context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	pl, ok := b.pipelines.Get(req.Pipeline)
	if !ok {
		return nil, pluginapi.Rejected("ptx-sim has no pipeline %d", req.Pipeline)
	}
	if err := ir.CheckUniforms(pl.p, req.Uniforms); err != nil {
		return nil, pluginapi.Rejected("ptx-sim: %w", err)
	}
	c := kernels.Case{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Spec: pl.spec, WorkgroupSize: pl.wg}
	outs, err := dispatchCase(pl.p, c, req.Uniforms)
	if err != nil {
		return nil, pluginapi.DeviceFailed("ptx-sim: %s: %w", pl.p.Name, err)
	}
	return &pluginapi.DispatchResult{Outputs: outs}, nil
}

func (b *simBackend) Release(_ context.Context, pipeline uint64) error {
	if _, ok := b.pipelines.Remove(pipeline); !ok {
		return pluginapi.Rejected("ptx-sim has no pipeline %d", pipeline)
	}
	return nil
}

func (b *simBackend) Close(context.Context) error { return nil }

// TestConformanceOnTheInterpreter runs the conformance kit on emitted PTX,
// interpreted: the description and handle contract, the kit's semantics tables
// where it has them, and the corpus at small sizes.
func TestConformanceOnTheInterpreter(t *testing.T) {
	conformance.Run(t, &simBackend{}, conformance.Options{Sizes: []int{0, 1, 7, 33}})
}
