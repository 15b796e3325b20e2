package conformance

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// Options tune Run: the adapter, the corpus kernels and sizes, the seed of the
// inputs, the timeout of each call, the largest corpus size (see kit.Options).
type Options = kit.Options

// shortMaxSize is the largest corpus size Run runs under go test -short.
const shortMaxSize = 4096

// Run checks b against the CPU reference interpreter, in-process, from a plugin
// author's test: kit.Check on t, one subtest per part, table and case
// ("describe", "contract", "semantics/cast/f32.i32", "vector_add/size=257").
// Under -short, corpus sizes above 4096 are skipped (unless Options.MaxSize
// says otherwise).
func Run(t *testing.T, b pluginapi.Backend, opts Options) {
	t.Helper()
	if testing.Short() && opts.MaxSize == 0 {
		opts.MaxSize = shortMaxSize
	}
	kit.Check(testingT{t}, b, opts)
}

// testingT is a *testing.T as a kit.T.
type testingT struct{ *testing.T }

func (t testingT) Run(name string, f func(t kit.T)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testingT{t}) })
}
