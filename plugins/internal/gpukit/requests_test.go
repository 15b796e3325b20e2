package gpukit

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/handles"
)

func TestCompileContext(t *testing.T) {
	req := &pluginapi.CompileRequest{Program: &ir.Program{Name: "p"}}
	if err := CompileContext(context.Background(), "vulkan", req); err != nil {
		t.Errorf("a live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := CompileContext(ctx, "vulkan", req)
	if want := `vulkan: compile "p": context canceled`; err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: got %v, want %s", err, want)
	}
}

func TestHandleLookups(t *testing.T) {
	var tab handles.Table[*int]
	one := 1
	h := tab.Add(&one)
	held := 0
	hold := func(*int) { held++ }
	if p, err := DispatchPipeline("cuda", &tab, h, hold); err != nil || p != &one || held != 1 {
		t.Fatalf("DispatchPipeline(%d) = %v, %v (held %d)", h, p, err, held)
	}
	if r, err := Buffer("cuda", &tab, h); err != nil || r != &one {
		t.Fatalf("Buffer(%d) = %v, %v", h, r, err)
	}
	var rejected *pluginapi.RejectedError
	for _, tc := range []struct {
		f    func() (*int, error)
		want string
	}{
		{func() (*int, error) { return DispatchPipeline("cuda", &tab, 7, hold) },
			"cuda has no pipeline 7 (never compiled or already released). Fix: dispatch a handle returned by Compile"},
		{func() (*int, error) {
			return nil, ReleasePipeline("vulkan", &tab, 7, func(*int) { t.Error("destroyed a missing pipeline") })
		},
			"vulkan has no pipeline 7 (never compiled or already released). Fix: release only handles returned by Compile, once"},
		{func() (*int, error) { return Buffer("cuda", &tab, 7) },
			"cuda has no buffer 7 (never allocated or already freed). Fix: use handles AllocBuffer returned, and free each once"},
		{func() (*int, error) { return FreeBuffer("vulkan", &tab, 7) },
			"vulkan has no buffer 7 (never allocated or already freed). Fix: free each buffer once"},
	} {
		r, err := tc.f()
		if r != nil || err == nil || err.Error() != tc.want || !errors.As(err, &rejected) {
			t.Errorf("got %v, %v; want %s", r, err, tc.want)
		}
	}
	if held != 1 {
		t.Errorf("hold ran %d times, want once (not for a missing handle)", held)
	}
	var destroyed *int
	if err := ReleasePipeline("cuda", &tab, h, func(p *int) { destroyed = p }); err != nil || destroyed != &one {
		t.Fatalf("ReleasePipeline(%d) = %v, destroyed %v", h, err, destroyed)
	}
	if _, err := FreeBuffer("cuda", &tab, h); err == nil {
		t.Fatal("a released handle was freed")
	}
	h = tab.Add(&one)
	if r, err := FreeBuffer("cuda", &tab, h); err != nil || r != &one || tab.Len() != 0 {
		t.Fatalf("FreeBuffer(%d) = %v, %v", h, r, err)
	}
}
