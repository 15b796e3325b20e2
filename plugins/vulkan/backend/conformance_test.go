package backend

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

// TestConformance runs the SDK's conformance kit (the whole corpus against the CPU
// reference under DESIGN.md's rules) on the Vulkan backend with the validation layer
// enabled; newTestBackend fails the test on any validation message.
func TestConformance(t *testing.T) {
	conformance.Run(t, newTestBackend(t), conformance.Options{})
}
