package host

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// The per-call paths of a dispatch allocate only what they return: a
// successful call's error classification nothing (it took four allocations,
// the targets of errors.As escaping), a backend's name one string (fmt.Sprintf
// took three).
func TestHotPathAllocations(t *testing.T) {
	b := &Backend{p: &plugin{desc: &pluginapi.Description{ID: "cpu-ref"}}, adapter: pluginapi.Adapter{Index: 1}}
	if n := testing.AllocsPerRun(100, func() { _ = b.hostError(nil, "prog", nil) }); n != 0 {
		t.Errorf("hostError of a success allocates %v times, want 0", n)
	}
	var name string
	if n := testing.AllocsPerRun(100, func() { name = b.Name() }); n > 1 {
		t.Errorf("Name allocates %v times, want at most 1", n)
	}
	if name != "cpu-ref:1" {
		t.Errorf("Name is %q, want cpu-ref:1", name)
	}
}
