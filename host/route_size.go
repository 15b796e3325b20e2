package host

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/pgo"
)

// launchBytes is the size of a launch as PGO size classes measure it
// (pgo.LaunchBytes): its input bytes, by binding and by name, plus 4 bytes per
// output element it asks for. Host.Dispatch routes by it: a route with size
// classes sends the launch to the backend of the class nearest this size. See
// docs/design.md, "PGO routes".
func launchBytes(w Work) int64 {
	inputs := slices.Clip(w.Inputs)
	for _, in := range w.Named {
		inputs = append(inputs, in.data)
	}
	return pgo.LaunchBytes(inputs, w.OutputCounts)
}

// freshRoute is the route a launch of size bytes follows for op: the local
// table's route for the nearest size class — or, when that is stale only
// because the driver enumerates its device under another index, the same
// route aimed at the device's new name (pgo.Route.Follow) — or the fleet tier's
// when it is newer or the local one is stale. stale says why there is none;
// measuredAs is the name the route's backend had when it was measured, which
// its observations use.
func (h *Host) freshRoute(t *pgo.Table, op string, bytes int64) (route pgo.Route, stale, measuredAs string) {
	live := h.Live()
	route, stale = t.FreshFor(op, bytes, live)
	measuredAs = route.Backend
	if r, ok := t.Route(op); ok && stale != "" {
		sized := r.ForSize(bytes)
		if moved, ok := sized.Follow(live); ok {
			route, stale, measuredAs = moved, "", sized.Backend
		}
	}
	if theirs, ok := h.stores.remoteRoute(op, live); ok && (stale != "" || theirs.MeasuredAt.After(route.MeasuredAt)) {
		if sized := theirs.ForSize(bytes); sized.StaleReason(live) == "" {
			route, stale, measuredAs = sized, "", sized.Backend
		}
	}
	return route, stale, measuredAs
}

// routeReason is Result.Selection for a routed launch of size bytes: the
// size class when the route has classes, the name the route's backend was
// measured under when it followed its device to another adapter index
// (measuredAs, which its observations use), and the backend's median among
// the observations.
func routeReason(r pgo.Route, bytes int64, measuredAs string) string {
	obs := r.Observations
	var notes []string
	if c, ok := r.NearestClass(bytes); ok {
		obs = c.Observations
		notes = append(notes, fmt.Sprintf("size class %d bytes", c.Bytes))
	}
	if measuredAs != r.Backend {
		notes = append(notes, fmt.Sprintf("measured as %s, the same device", measuredAs))
	}
	head := "pgo route"
	if len(notes) > 0 {
		head += " (" + strings.Join(notes, ", ") + ")"
	}
	for _, o := range obs {
		if o.Backend == measuredAs {
			return fmt.Sprintf("%s: fastest of %d, median %.1f µs", head, len(obs), float64(o.MedianNs)/float64(time.Microsecond))
		}
	}
	return fmt.Sprintf("%s: fastest of %d", head, len(obs))
}
