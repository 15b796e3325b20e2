package backend

import "testing"

// TestConformanceOnEveryAdapter runs the conformance kit on vulkan:1..N-1
// (vulkan:0 is TestConformance's); with one adapter there is nothing more to run.
func TestConformanceOnEveryAdapter(t *testing.T) {
	vulkan.ConformanceOnEveryAdapter(t, newTestBackend(t))
}
