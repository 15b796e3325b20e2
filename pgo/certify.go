package pgo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// DefaultTimed is the number of timed dispatches per backend when Config.Timed
// is zero.
const DefaultTimed = 3

// Launch is what a dispatch needs besides the program and its inputs.
type Launch struct {
	// Grid is the number of workgroups on each axis.
	Grid [3]uint32
	// OutputCounts are by binding: element counts of write buffers without a
	// fixed count.
	OutputCounts []uint32
	// Spec sets parameters; unset ones take their defaults.
	Spec ir.SpecMap
	// WorkgroupSize overrides the program's when non-zero.
	WorkgroupSize [3]uint32
	// Uniforms is the program's uniform block (IR v1.1), empty when it has none.
	Uniforms []byte
}

// Config is how [Table.Certify] measures.
type Config struct {
	Launch Launch
	// Timed is the number of timed dispatches per backend after the warm-up; 0
	// means [DefaultTimed].
	Timed int
}

// Candidate is a backend [Table.Certify] measures. The host satisfies it with a thin
// adapter over its backend handle; tests with fakes.
type Candidate interface {
	// Identity returns the routing id, adapter fingerprint and plugin version.
	Identity() Live
	// Dispatch runs p once on inputs (by binding: read and read_write buffers,
	// nil for write buffers) and returns its latency: the host's wall time from
	// sending the request to holding the outputs, so every backend is measured
	// the same way.
	Dispatch(ctx context.Context, p *ir.Program, inputs [][]byte, l Launch) (time.Duration, error)
}

// Certify measures op's program on every backend — one warm-up dispatch, then
// cfg.Timed timed ones, keeping the median (the upper one for an even count) —
// records the fastest as op's route (ties broken by id) and returns it. Any
// failed dispatch fails the whole certification and leaves the table as it was.
func (t *Table) Certify(ctx context.Context, op string, p *ir.Program, inputs [][]byte, cfg Config, backends []Candidate) (Route, error) {
	return t.CertifyClasses(ctx, op, p, []Point{{Inputs: inputs, Launch: cfg.Launch}}, cfg, backends)
}

// measure runs one warm-up and timed timed dispatches and returns the median.
func measure(ctx context.Context, b Candidate, p *ir.Program, inputs [][]byte, l Launch, timed int) (time.Duration, error) {
	if _, err := b.Dispatch(ctx, p, inputs, l); err != nil {
		return 0, fmt.Errorf("warm-up dispatch: %w", err)
	}
	samples := make([]time.Duration, timed)
	for i := range samples {
		d, err := b.Dispatch(ctx, p, inputs, l)
		if err != nil {
			return 0, fmt.Errorf("timed dispatch %d of %d: %w", i+1, timed, err)
		}
		samples[i] = max(d, 0)
	}
	slices.Sort(samples)
	return samples[timed/2], nil
}
