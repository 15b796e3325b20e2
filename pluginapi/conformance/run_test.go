package conformance

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/pluginapi"
)

// interpBackend runs programs on the interpreter: the smallest correct backend.
// When broken, it flips the lowest bit of every output's first element and runs
// any unknown pipeline handle as the last compiled one.
type interpBackend struct {
	broken bool

	mu      sync.Mutex
	next    uint64
	kernels map[uint64]*interp.Kernel
}

func (b *interpBackend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{
		ID: "test-interp", Version: "0", Dispatches: true, Features: []string{"ir.v1"},
		Adapters: []pluginapi.Adapter{{Index: 0, Name: "interp", Available: true}},
	}, nil
}

func (b *interpBackend) Open(context.Context, int) error { return nil }

func (b *interpBackend) Compile(_ context.Context, req *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	k, err := interp.Compile(req.Program, interp.Options{WorkgroupSize: req.WorkgroupSize, Spec: req.Spec})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kernels == nil {
		b.kernels = map[uint64]*interp.Kernel{}
	}
	b.next++
	b.kernels[b.next] = k
	return &pluginapi.CompileResult{Pipeline: b.next}, nil
}

func (b *interpBackend) Dispatch(ctx context.Context, req *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	b.mu.Lock()
	k, ok := b.kernels[req.Pipeline]
	if !ok && b.broken {
		k, ok = b.kernels[b.next]
	}
	b.mu.Unlock()
	if !ok {
		return nil, pluginapi.Rejected("pipeline %d is unknown", req.Pipeline)
	}
	outs, err := k.Run(ctx, interp.Launch{Grid: req.Grid, Inputs: req.Inputs, OutputCounts: req.OutputCounts, Uniforms: req.Uniforms})
	if err != nil {
		return nil, pluginapi.Rejected("%w", err)
	}
	if b.broken {
		for _, o := range outs {
			if len(o) > 0 {
				o[0] ^= 1
			}
		}
	}
	return &pluginapi.DispatchResult{Outputs: outs}, nil
}

func (b *interpBackend) Release(_ context.Context, pipeline uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.kernels, pipeline)
	return nil
}

func (b *interpBackend) Close(context.Context) error { return nil }

func TestRunPassesOnTheInterpreter(t *testing.T) {
	Run(t, &interpBackend{}, Options{Seed: 1})
}

const brokenEnv = "KILN_CONFORMANCE_BROKEN_HELPER"

// TestBrokenBackendHelper is run by TestRunCatchesABrokenBackend in a child
// process; it skips otherwise.
func TestBrokenBackendHelper(t *testing.T) {
	if os.Getenv(brokenEnv) == "" {
		t.Skip("helper for TestRunCatchesABrokenBackend")
	}
	Run(t, &interpBackend{broken: true}, Options{Kernels: []string{"vector_add"}, Sizes: []int{61}})
}

// TestRunCatchesABrokenBackend pins that Run fails a backend whose outputs are one
// bit off and that runs pipelines it never compiled.
func TestRunCatchesABrokenBackend(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenBackendHelper$", "-test.v")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("conformance passed a broken backend:\n%s", out)
	}
	for _, want := range []string{
		"--- FAIL: TestBrokenBackendHelper/vector_add/size=61",
		"differ from the CPU reference",
		"--- FAIL: TestBrokenBackendHelper/contract/unknown_pipeline",
		"never compiled succeeded",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
