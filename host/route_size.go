package host

import (
	"fmt"
	"time"

	"github.com/kiln-dev/kiln/pgo"
)

// launchBytes is the size of a launch as PGO size classes measure it
// (pgo.LaunchBytes): its input bytes plus 4 bytes per output element it asks
// for. Host.Dispatch routes by it: a route with size classes sends the launch
// to the backend of the class nearest this size. See docs/design.md, "PGO
// routes".
func launchBytes(w Work) int64 { return pgo.LaunchBytes(w.Inputs, w.OutputCounts) }

// freshRoute is the route a launch of size bytes follows for op: the local
// table's route for the nearest size class, or the fleet tier's when it is
// newer or the local one is stale; stale says why there is none.
func (h *Host) freshRoute(t *pgo.Table, op string, bytes int64) (route pgo.Route, stale string) {
	live := h.Live()
	route, stale = t.FreshFor(op, bytes, live)
	if theirs, ok := h.stores.remoteRoute(op, live); ok && (stale != "" || theirs.MeasuredAt.After(route.MeasuredAt)) {
		if sized := theirs.ForSize(bytes); sized.StaleReason(live) == "" {
			route, stale = sized, ""
		}
	}
	return route, stale
}

// sizedRouteReason is Result.Selection for a launch routed by a size class:
// routeReason with the class.
func sizedRouteReason(r pgo.Route, bytes int64) string {
	c, ok := r.NearestClass(bytes)
	if !ok {
		return routeReason(r)
	}
	for _, o := range c.Observations {
		if o.Backend == c.Backend {
			return fmt.Sprintf("pgo route (size class %d bytes): fastest of %d, median %.1f µs", c.Bytes, len(c.Observations), float64(o.MedianNs)/float64(time.Microsecond))
		}
	}
	return fmt.Sprintf("pgo route (size class %d bytes): fastest of %d", c.Bytes, len(c.Observations))
}
