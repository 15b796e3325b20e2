package pgo

import "strings"

// RoutesTo reports whether r sends any launch to backend: its own backend or
// that of one of its size classes. backend is a routing id ("vulkan:0") or a
// backend id ("vulkan"), which matches every adapter of that backend.
func (r Route) RoutesTo(backend string) bool {
	matches := func(name string) bool {
		id, _, _ := strings.Cut(name, ":")
		return name == backend || id == backend
	}
	if matches(r.Backend) {
		return true
	}
	for _, c := range r.Classes {
		if matches(c.Backend) {
			return true
		}
	}
	return false
}

// Forget removes every route that match accepts and returns their ops, sorted.
// Like [Table.Remove], it changes the table only; [Table.Save] writes the
// removals.
func (t *Table) Forget(match func(op string, r Route) bool) []string {
	var gone []string
	for _, op := range t.Ops() {
		if r, ok := t.Route(op); ok && match(op, r) && t.Remove(op) {
			gone = append(gone, op)
		}
	}
	return gone
}
