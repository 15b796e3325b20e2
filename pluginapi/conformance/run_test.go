package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// describeOnly is a backend that does not dispatch: Run checks its description.
type describeOnly struct{ desc pluginapi.Description }

func (b describeOnly) Describe(context.Context) (*pluginapi.Description, error) { return &b.desc, nil }
func (describeOnly) Open(context.Context, int) error                            { return errors.New("no") }
func (describeOnly) Compile(context.Context, *pluginapi.CompileRequest) (*pluginapi.CompileResult, error) {
	return nil, errors.New("no")
}
func (describeOnly) Dispatch(context.Context, *pluginapi.DispatchRequest) (*pluginapi.DispatchResult, error) {
	return nil, errors.New("no")
}
func (describeOnly) Release(context.Context, uint64) error { return errors.New("no") }
func (describeOnly) Close(context.Context) error           { return nil }

// TestRunOnTestingT pins that Run drives the kit on a *testing.T: a backend
// that does not dispatch gets its "describe" subtest, and passes.
func TestRunOnTestingT(t *testing.T) {
	ran := false
	t.Run("kit", func(t *testing.T) {
		Run(t, describeOnly{pluginapi.Description{ID: "describe-only", Features: []string{"ir.v1"}}}, Options{})
		ran = true
	})
	if !ran {
		t.Fatal("Run ended the test")
	}
}
