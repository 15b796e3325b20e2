package main

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi/conformance"
)

// TestConformance is the one test every plugin should have: the standard kernel
// corpus on this backend, compared with the CPU reference.
func TestConformance(t *testing.T) {
	conformance.Run(t, newBackend(), conformance.Options{})
}
