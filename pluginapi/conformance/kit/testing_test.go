package kit

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// testingT is a *testing.T as a T, as conformance.Run wraps one.
type testingT struct{ *testing.T }

func (t testingT) Run(name string, f func(t T)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testingT{t}) })
}

// check runs the kit on t as conformance.Run does: corpus sizes up to 4096
// under -short.
func check(t *testing.T, b pluginapi.Backend, opts Options) {
	t.Helper()
	if testing.Short() && opts.MaxSize == 0 {
		opts.MaxSize = 4096
	}
	Check(testingT{t}, b, opts)
}
