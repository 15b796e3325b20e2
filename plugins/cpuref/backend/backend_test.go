package backend

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, New(), conformance.Options{})
}

func TestDescribe(t *testing.T) {
	d, err := New().Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "cpu-ref" || d.Version != Version || !d.ReferenceOracle || !d.Dispatches || d.Precedence != nil {
		t.Errorf("description %+v: want id cpu-ref, version %s, a dispatching reference oracle without precedence", d, Version)
	}
	if len(d.Adapters) != 1 {
		t.Fatalf("%d adapters, want 1", len(d.Adapters))
	}
	a := d.Adapters[0]
	wantID := pluginapi.DeviceIdentity{Vendor: "kiln", Device: "CPU reference interpreter", DriverVersion: Version, DeviceType: "cpu"}
	if a.Index != 0 || a.Name != "CPU reference interpreter" || !a.Available || a.Identity != wantID {
		t.Errorf("adapter %+v", a)
	}
	p := a.Profile
	if p.TimingQuality != pluginapi.HostOnly || p.MaxInvocationsPerWorkgroup != 1024 || !p.HasSharedMemory ||
		p.SubgroupSize != 0 || p.MemBWGBps != 0 || p.MaxStorageBufferBindingSize < 1<<30 ||
		!p.SupportsF16 || !p.SupportsBF16 || p.SupportsTensorCores {
		t.Errorf("profile %+v", p)
	}
	// 16 (storage) + 8 + 4 (1024 invocations) + 4 (shared memory) + 2 (f16) + 2 (bf16).
	if got := p.CapabilityScore(); got != 36 {
		t.Errorf("capability score %d, want 36", got)
	}
}

func vectorAdd(t *testing.T) (*ir.Program, kernels.Case) {
	t.Helper()
	k, ok := kernels.Lookup("vector_add")
	if !ok {
		t.Fatal("corpus has no vector_add")
	}
	return k.Program(), k.NewCase(rand.New(rand.NewPCG(1, 2)), 0)
}

func isRejected(err error) bool {
	var r *pluginapi.RejectedError
	return errors.As(err, &r)
}

func TestOnlyAdapterZero(t *testing.T) {
	b := New()
	ctx := context.Background()
	if err := b.Open(ctx, 0); err != nil {
		t.Errorf("Open(0): %v", err)
	}
	if err := b.Open(ctx, 1); !isRejected(err) {
		t.Errorf("Open(1): got %v, want a RejectedError", err)
	}
	p, _ := vectorAdd(t)
	if _, err := b.Compile(ctx, &pluginapi.CompileRequest{Adapter: 1, Program: p}); !isRejected(err) {
		t.Errorf("Compile on adapter 1: got %v, want a RejectedError", err)
	}
}

func TestCompileFailuresAreRejections(t *testing.T) {
	p, _ := vectorAdd(t)
	var spec ir.SpecMap
	spec.Set("no_such_param", ir.SpecU32(1))
	_, err := New().Compile(context.Background(), &pluginapi.CompileRequest{Program: p, Spec: spec})
	if !isRejected(err) {
		t.Errorf("unknown parameter: got %v, want a RejectedError", err)
	}
	_, err = New().Compile(context.Background(), &pluginapi.CompileRequest{Program: p, WorkgroupSize: [3]uint32{2048, 1, 1}})
	if !isRejected(err) {
		t.Errorf("2048 invocations: got %v, want a RejectedError", err)
	}
}

func compile(t *testing.T, b *Backend, p *ir.Program) uint64 {
	t.Helper()
	res, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: p})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blob != nil || res.CompileNanos <= 0 {
		t.Errorf("compile result %+v: want no blob and a positive time", res)
	}
	return res.Pipeline
}

func TestPipelineLifecycle(t *testing.T) {
	b := New()
	ctx := context.Background()
	p, _ := vectorAdd(t)
	h1, h2 := compile(t, b, p), compile(t, b, p)
	if h1 == h2 {
		t.Fatalf("two compiles returned the same handle %d", h1)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: h1 + h2}); !isRejected(err) {
		t.Errorf("unknown pipeline: got %v, want a RejectedError", err)
	}
	if err := b.Release(ctx, h1); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, h1); err != nil {
		t.Errorf("second Release: %v (releasing is idempotent)", err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: h1}); !isRejected(err) {
		t.Errorf("released pipeline: got %v, want a RejectedError", err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: h2, Inputs: [][]byte{{}, {}, nil}}); err != nil {
		t.Errorf("live pipeline: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: h2}); !isRejected(err) {
		t.Errorf("pipeline after Close: got %v, want a RejectedError", err)
	}
}

func TestDispatchRejectsBadLaunch(t *testing.T) {
	b := New()
	p, _ := vectorAdd(t)
	h := compile(t, b, p)
	_, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: h, Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{{1, 2, 3}, {}, nil}})
	if !isRejected(err) {
		t.Errorf("3-byte f32 input: got %v, want a RejectedError", err)
	}
}

func TestDispatchHonoursContext(t *testing.T) {
	b := New()
	k, _ := kernels.Lookup("vector_add")
	c := k.NewCase(rand.New(rand.NewPCG(1, 2)), 4096)
	h := compile(t, b, k.Program())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: h, Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if !errors.Is(err, context.Canceled) || isRejected(err) {
		t.Errorf("canceled context: got %v, want an error wrapping context.Canceled that is not a rejection", err)
	}
}

func TestConcurrentDispatch(t *testing.T) {
	b := New()
	k, _ := kernels.Lookup("saxpy")
	p := k.Program()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := k.NewCase(rand.New(rand.NewPCG(1, uint64(i))), 100+i)
			comp, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: p, Spec: c.Spec, WorkgroupSize: c.WorkgroupSize})
			if err != nil {
				t.Error(err)
				return
			}
			res, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
			if err != nil {
				t.Error(err)
				return
			}
			if err := k.Check(res.Outputs, k.Reference(c)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
