package backend

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

// TestConformance runs the SDK's conformance kit (the semantics tables and the
// whole corpus against the CPU reference under docs/design.md's rules) on the
// Vulkan backend with the validation layer enabled, with buffers mapped directly
// and staged through host-visible copies; newTestBackend fails the test on any
// validation message. This is the test to run on a GPU machine:
//
//	go test -c -o vulkan-backend.test ./plugins/vulkan/backend
//	KILN_REQUIRE_VULKAN=1 ./vulkan-backend.test -test.run '^TestConformance$' -test.v
func TestConformance(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		conformance.Run(t, b, conformance.Options{})
	})
}
