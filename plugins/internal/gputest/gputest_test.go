package gputest_test

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cpuref/backend"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// The shared checks that are not about a GPU backend's handle contract
// (ReleaseAndClose: the reference releases twice and compiles after Close) hold
// on the CPU reference backend, which every GPU backend is compared with; a
// check that failed there would be the check's bug.

var cpu = gputest.Device{Name: "CPU reference"}

func open(t *testing.T) *backend.Backend {
	b := backend.New()
	cpu.Open(t, b)
	return b
}

func TestGridWithAZeroAxisRunsNothingOnTheReference(t *testing.T) {
	gputest.GridWithAZeroAxisRunsNothing(t, open(t))
}

func TestConcurrentDispatchesOnTheReference(t *testing.T) {
	gputest.ConcurrentDispatches(t, open(t))
}

func TestBadLaunchesOnTheReference(t *testing.T) {
	b := open(t)
	c, err := b.Compile(t.Context(), &pluginapi.CompileRequest{Program: gputest.AddOne()})
	if err != nil {
		t.Fatal(err)
	}
	gputest.DispatchRejects(t, b, gputest.BadLaunches(c.Pipeline))
}

// TestV12ChecksOnTheReference runs the IR v1.2 checks on the CPU reference
// (the oracle, ir/interp), so their plain-Go expectations agree with it.
func TestV12ChecksOnTheReference(t *testing.T) {
	b := open(t)
	for _, c := range gputest.V12Checks() {
		t.Run(c.Name, func(t *testing.T) { c.Check(t, b) })
	}
}
