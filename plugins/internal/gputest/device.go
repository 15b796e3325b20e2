package gputest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

// Device says how a backend's tests reach their device.
type Device struct {
	// Name is the API in messages: "CUDA", "Vulkan".
	Name string
	// RequireEnv is the variable that, set to 1, turns "no usable device" from a
	// skip into a failure: KILN_REQUIRE_CUDA, KILN_REQUIRE_VULKAN; empty, a
	// missing device always skips.
	RequireEnv string
}

// Open describes b and opens its adapter 0, or skips t when the adapter is not
// usable (fails when RequireEnv is 1). At cleanup it closes b, failing t on an
// error, then runs each of closed (a backend's own checks after Close).
func (d Device) Open(t testing.TB, b pluginapi.Backend, closed ...func(t testing.TB)) {
	t.Helper()
	ctx := context.Background()
	desc, err := b.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if len(desc.Adapters) == 0 || !desc.Adapters[0].Available {
		reason := "no adapters"
		if len(desc.Adapters) > 0 {
			reason = desc.Adapters[0].Reason
		}
		b.Close(ctx)
		if d.RequireEnv == "" {
			t.Skipf("no usable %s device (%s)", d.Name, reason)
		}
		if os.Getenv(d.RequireEnv) == "1" {
			t.Fatalf("%s=1 but %s is unusable: %s", d.RequireEnv, d.Name, reason)
		}
		t.Skipf("no usable %s device (%s); set %s=1 to fail instead", d.Name, reason, d.RequireEnv)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, f := range closed {
			f(t)
		}
	})
}

// ConformanceOnEveryAdapter runs the conformance kit on the adapters of b after
// the first (adapter 0 is the backend's TestConformance's), one subtest each
// named "<id>:<index>"; with one adapter there is nothing more to run.
func (d Device) ConformanceOnEveryAdapter(t *testing.T, b pluginapi.Backend) {
	desc, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Adapters) < 2 {
		t.Skipf("%d %s adapter: %s:0 is TestConformance's", len(desc.Adapters), d.Name, desc.ID)
	}
	for _, a := range desc.Adapters[1:] {
		t.Run(fmt.Sprintf("%s:%d", desc.ID, a.Index), func(t *testing.T) {
			if !a.Available {
				t.Fatalf("%s:%d is unavailable: %s", desc.ID, a.Index, a.Reason)
			}
			if err := b.Open(context.Background(), a.Index); err != nil {
				t.Fatal(err)
			}
			conformance.Run(t, b, conformance.Options{Adapter: a.Index})
		})
	}
}
