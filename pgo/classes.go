package pgo

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// ClassRoute is an op's route for one size class: the fastest backend at
// launches of Bytes bytes, with every backend's median there.
type ClassRoute struct {
	// Bytes is the size the class was measured at: [LaunchBytes] of its launch.
	Bytes int64
	// Backend, AdapterFingerprint and PluginVersion name the fastest backend
	// as [Route]'s fields do.
	Backend            string
	AdapterFingerprint string
	PluginVersion      string
	// Observations are every measured backend, fastest first (ties by id).
	Observations []Observation
}

// LaunchBytes is the size of a launch as size classes measure it: the bytes
// of its inputs (by binding) plus 4 bytes per element of its output counts.
func LaunchBytes(inputs [][]byte, outputCounts []uint32) int64 {
	var n int64
	for _, in := range inputs {
		n += int64(len(in))
	}
	for _, c := range outputCounts {
		n += 4 * int64(c)
	}
	return n
}

// NearestClass returns the class whose Bytes is nearest bytes on a log scale
// (sizes below 1 count as 1; a tie goes to the smaller class); ok is false for
// a route without classes.
func (r Route) NearestClass(bytes int64) (c ClassRoute, ok bool) {
	best := math.Inf(1)
	at := math.Log2(float64(max(bytes, 1)))
	for _, class := range r.Classes {
		d := math.Abs(math.Log2(float64(max(class.Bytes, 1))) - at)
		if d < best {
			best, c, ok = d, class, true
		}
	}
	return c, ok
}

// ForSize returns the route a launch of bytes follows: r with its backend,
// identity and observations replaced by those of the nearest class, or r
// itself when it has no classes.
func (r Route) ForSize(bytes int64) Route {
	c, ok := r.NearestClass(bytes)
	if !ok {
		return r
	}
	r.Backend, r.AdapterFingerprint, r.PluginVersion, r.Observations = c.Backend, c.AdapterFingerprint, c.PluginVersion, c.Observations
	return r
}

// FreshFor is [Table.Fresh] for a launch of bytes: op's route for the nearest
// size class ([Route.ForSize]), when that is fresh against live.
func (t *Table) FreshFor(op string, bytes int64, live []Live) (Route, string) {
	r, ok := t.Route(op)
	if !ok {
		return Route{}, fmt.Sprintf("no PGO route for %s", op)
	}
	r = r.ForSize(bytes)
	if why := r.StaleReason(live); why != "" {
		if len(r.Classes) > 0 {
			c, _ := r.NearestClass(bytes)
			return Route{}, fmt.Sprintf("the PGO route for %s at size class %d bytes is stale: %s", op, c.Bytes, why)
		}
		return Route{}, fmt.Sprintf("the PGO route for %s is stale: %s", op, why)
	}
	return r, ""
}

// Point is one size at which [Table.CertifyClasses] measures an op.
type Point struct {
	// Inputs are by binding: read and read_write buffers, nil for write ones.
	Inputs [][]byte
	Launch Launch
}

// Bytes is the point's [LaunchBytes].
func (p Point) Bytes() int64 { return LaunchBytes(p.Inputs, p.Launch.OutputCounts) }

// CertifyClasses measures op's program on every backend at each point — one
// warm-up dispatch, then cfg.Timed timed ones, the median — and records a route
// with one size class per point (points of equal bytes count once): the fastest
// backend of each class, and at the top level the largest class's. With a
// single point the route has no classes, as [Table.Certify] records it. Any
// failed dispatch fails the whole certification and leaves the table as it was.
// cfg.Launch is not used; each point carries its launch.
func (t *Table) CertifyClasses(ctx context.Context, op string, p *ir.Program, points []Point, cfg Config, backends []Candidate) (Route, error) {
	if len(points) == 0 {
		return Route{}, fmt.Errorf("PGO certification of %s got no sizes. Fix: pass at least one point", op)
	}
	if len(backends) == 0 {
		return Route{}, fmt.Errorf("PGO certification of %s got no backends. Fix: pass every ready backend to Certify", op)
	}
	timed := cfg.Timed
	if timed == 0 {
		timed = DefaultTimed
	}
	if timed < 0 {
		return Route{}, fmt.Errorf("PGO certification of %s: %d timed dispatches. Fix: pass a positive Config.Timed, or 0 for %d", op, timed, DefaultTimed)
	}
	ids := map[string]Live{}
	for _, b := range backends {
		id := b.Identity()
		if _, dup := ids[id.ID]; dup {
			return Route{}, fmt.Errorf("PGO certification of %s got backend %s twice. Fix: pass each backend once", op, id.ID)
		}
		ids[id.ID] = id
	}
	points = slices.Clone(points)
	slices.SortStableFunc(points, func(a, b Point) int { return cmp.Compare(a.Bytes(), b.Bytes()) })
	points = slices.CompactFunc(points, func(a, b Point) bool { return a.Bytes() == b.Bytes() })
	var classes []ClassRoute
	for _, pt := range points {
		obs := make([]Observation, 0, len(backends))
		for _, b := range backends {
			id := b.Identity()
			median, err := measure(ctx, b, p, pt.Inputs, pt.Launch, timed)
			if err != nil {
				return Route{}, fmt.Errorf("PGO certification of %s on %s at %d bytes: %w", op, id.ID, pt.Bytes(), err)
			}
			obs = append(obs, Observation{Backend: id.ID, MedianNs: median.Nanoseconds()})
		}
		slices.SortFunc(obs, func(a, b Observation) int {
			return cmp.Or(cmp.Compare(a.MedianNs, b.MedianNs), strings.Compare(a.Backend, b.Backend))
		})
		best := ids[obs[0].Backend]
		classes = append(classes, ClassRoute{Bytes: pt.Bytes(), Backend: best.ID, AdapterFingerprint: best.AdapterFingerprint, PluginVersion: best.PluginVersion, Observations: obs})
	}
	top := classes[len(classes)-1]
	r := Route{
		Backend:            top.Backend,
		AdapterFingerprint: top.AdapterFingerprint,
		PluginVersion:      top.PluginVersion,
		Observations:       top.Observations,
		MeasuredAt:         time.Now().UTC().Truncate(time.Second),
	}
	if len(classes) > 1 {
		r.Classes = classes
	}
	if err := t.Set(op, r); err != nil {
		return Route{}, err
	}
	return r, nil
}
