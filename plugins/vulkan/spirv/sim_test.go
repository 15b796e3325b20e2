package spirv

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

// simBackend is a pluginapi.Backend that runs emitted modules on the SPIR-V
// interpreter of interp_test.go, so the conformance kit checks the emitter's
// words without a driver in between. Every module it compiles must pass
// spirv-val. The interpreter has no subgroups, so the backend rejects subgroup
// programs, as a device without them does.
type simBackend struct {
	t   *testing.T
	val string
	// fold emits every module with its compile's specialization folded
	// (Target.FoldSpec).
	fold bool
	// guard emits every module with the loop guard (Target.LoopGuard), and
	// loopLimit ends loops as llvmpipe does (see dispatchLimited); a dispatch
	// whose guard flag is set is rejected, as the Vulkan backend rejects it.
	guard     bool
	loopLimit int
	// wide16 emits without Int16 (and without device addresses, which a bf16
	// buffer needs it for), so bf16 shared arrays hold u32 words.
	wide16 bool

	pipelines handles.Table[simPipeline]
}

type simPipeline struct {
	p    *ir.Program
	m    *Module
	spec ir.SpecMap
}

// simTarget is the target the simulated device offers: float controls, f16
// arithmetic and 16-bit storage (IR v1.2), no
// subgroups. Its pipelines reach the odd bindings through buffer device
// addresses, and it launches at most simLimit workgroups per axis at a time, so
// the whole kit runs through both buffer paths and split grids.
var simTarget = Target{SignedZeroInfNanPreserve: true, Float16: true, Storage16: true, Int16: true, SignedZeroInfNanPreserve16: true}

var simLimit = [3]uint32{3, 2, 2}

func (b *simBackend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID: "spirv-sim", Version: "0", Dispatches: true, Features: []string{"ir.v1", "ir.v1.1"},
		Adapters: []pluginapi.Adapter{{Index: 0, Name: "SPIR-V interpreter", Available: true,
			Profile: pluginapi.DeviceProfile{MaxInvocationsPerWorkgroup: 1024, HasSharedMemory: true, SupportsF16: true, SupportsBF16: true}}},
	}, nil
}

func (b *simBackend) Open(context.Context, int) error { return nil }

func (b *simBackend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	target := simTarget
	target.WorkgroupSize = req.WorkgroupSize
	target.BufferAddresses = 0xAAAAAAAA & (1<<len(req.Program.Buffers) - 1) // the odd bindings
	if b.fold {
		spec := req.Spec
		target.FoldSpec = &spec
	}
	target.LoopGuard = b.guard
	if b.wide16 {
		target.Int16, target.BufferAddresses = false, 0
	}
	m, err := EmitFor(req.Program, target)
	if err != nil {
		return nil, pluginapi.Rejected("spirv-sim: %w", err)
	}
	if b.val != "" {
		validate(b.t, b.val, req.Program.Name, m)
	}
	h := b.pipelines.Add(simPipeline{p: req.Program, m: m, spec: req.Spec})
	return &pluginapi.CompileResult{Pipeline: h}, nil
}

func (b *simBackend) Dispatch(_ context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	pl, ok := b.pipelines.Get(req.Pipeline)
	if !ok {
		return nil, pluginapi.Rejected("spirv-sim has no pipeline %d", req.Pipeline)
	}
	c := kernels.Case{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Spec: pl.spec}
	outs, err := dispatchLimited(pl.p, pl.m, c, req.Uniforms, simLimit, b.loopLimit)
	if errors.Is(err, errLoopCut) {
		return nil, pluginapi.Rejected("spirv-sim: %s: %w", pl.p.Name, err)
	}
	if err != nil {
		return nil, pluginapi.DeviceFailed("spirv-sim: %s: %w", pl.p.Name, err)
	}
	return &pluginapi.DispatchResult{Outputs: outs}, nil
}

func (b *simBackend) Release(_ context.Context, pipeline uint64) error {
	b.pipelines.Remove(pipeline)
	return nil
}

func (b *simBackend) Close(context.Context) error { return nil }

// TestConformanceOnTheInterpreter runs the conformance kit on emitted SPIR-V,
// interpreted: every semantics case but the subgroup ones (which the simulated
// device rejects, as its profile says), and the corpus at small sizes; spirv-val
// checks every module.
func TestConformanceOnTheInterpreter(t *testing.T) {
	val, err := exec.LookPath("spirv-val")
	if err != nil {
		val = spirvVal(t) // skips, or fails under KILN_REQUIRE_VULKAN=1
	}
	b := &simBackend{t: t, val: val}
	conformance.Run(t, b, conformance.Options{Sizes: []int{0, 1, 7, 33}})
}

// TestConformanceFoldedOnTheInterpreter runs the kit again on modules with the
// specialization folded in (Target.FoldSpec), where the value ranges fold the
// parameters and drop more shared-array checks, and with the loop guard on a
// device that ends loops as llvmpipe does, as the Vulkan backend runs on
// lavapipe: every case passes, and the long-loop cases are refused.
func TestConformanceFoldedOnTheInterpreter(t *testing.T) {
	val, err := exec.LookPath("spirv-val")
	if err != nil {
		val = spirvVal(t)
	}
	b := &simBackend{t: t, val: val, fold: true, guard: true, loopLimit: llvmpipeLoopLimit}
	conformance.Run(t, b, conformance.Options{Sizes: []int{0, 1, 7, 33}})
}
