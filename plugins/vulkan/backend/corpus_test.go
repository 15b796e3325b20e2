package backend

import (
	"testing"

	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// TestCorpusMatchesReference runs every corpus kernel at every corpus size on the
// Vulkan backend and on the CPU reference interpreter and compares the outputs with
// the kernel's Check (docs/design.md, "Conformance kit"), under the validation layer, with
// buffers mapped directly and staged.
func TestCorpusMatchesReference(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) { gputest.CorpusMatchesReference(t, b, "vulkan") })
}
