package backend

import (
	"context"
	"fmt"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

// TestConformanceOnEveryAdapter runs the conformance kit on vulkan:1..N-1
// (vulkan:0 is TestConformance's); with one adapter there is nothing more to run.
func TestConformanceOnEveryAdapter(t *testing.T) {
	b := newTestBackend(t)
	d, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Adapters) < 2 {
		t.Skipf("%d Vulkan adapter: vulkan:0 is TestConformance's", len(d.Adapters))
	}
	for _, a := range d.Adapters[1:] {
		t.Run(fmt.Sprintf("vulkan:%d", a.Index), func(t *testing.T) {
			if !a.Available {
				t.Fatalf("vulkan:%d is unavailable: %s", a.Index, a.Reason)
			}
			if err := b.Open(context.Background(), a.Index); err != nil {
				t.Fatal(err)
			}
			conformance.Run(t, b, conformance.Options{Adapter: a.Index})
		})
	}
}
