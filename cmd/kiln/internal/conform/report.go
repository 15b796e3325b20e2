package conform

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/host"
)

// Targets turns --backend names into adapter names: an id is every
// available adapter of that backend (or id:0 when none is, so that the
// failure to acquire it is reported), and no names is every available adapter
// of every backend that dispatches and is no reference oracle.
func Targets(h *host.Host, names []string) ([]string, error) {
	var out []string
	if len(names) == 0 {
		for _, id := range h.IDs() {
			d, err := h.Description(id)
			if err != nil || !d.Dispatches || host.IsReferenceOracle(d) {
				continue
			}
			for _, ad := range d.Adapters {
				if ad.Available {
					out = append(out, fmt.Sprintf("%s:%d", d.ID, ad.Index))
				}
			}
		}
		if len(out) == 0 {
			return nil, errors.New("no available backend to check (reference oracles are checked only when named). Fix: name one with --backend, for example --backend cpu-ref; `kiln backends` lists them")
		}
		return out, nil
	}
	for _, name := range names {
		if strings.Contains(name, ":") {
			out = append(out, name)
			continue
		}
		d, err := h.Description(name)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, ad := range d.Adapters {
			if ad.Available {
				out = append(out, fmt.Sprintf("%s:%d", d.ID, ad.Index))
			}
		}
		if len(out) == n {
			out = append(out, name+":0")
		}
	}
	return out, nil
}

// Failures lists the failed results under r, r included, that say why:
// the cases, and a part or table that failed before its cases ran.
func (r *Result) Failures() []*Result {
	var out []*Result
	if r.Status == Fail && len(r.Messages) > 0 {
		out = append(out, r)
	}
	for _, c := range r.Children {
		out = append(out, c.Failures()...)
	}
	return out
}

// IsTable reports whether a result's name is one row of the table:
// a part of the kit ("describe", "vector_add"), or one semantics table
// ("semantics/cast") rather than semantics as a whole.
func IsTable(name string) bool {
	switch parts := strings.Split(name, "/"); len(parts) {
	case 1:
		return name != "" && name != "semantics"
	case 2:
		return parts[0] == "semantics"
	}
	return false
}

// IsCase reports whether a result without subtests is a case
// ("describe", "contract/unknown_pipeline", "semantics/cast/f32.i32",
// "vector_add/size=257") rather than a part or table whose cases --run or
// --short left out.
func IsCase(name string) bool {
	parts := strings.Split(name, "/")
	switch {
	case name == "describe":
		return true
	case parts[0] == "semantics":
		return len(parts) >= 3
	}
	return len(parts) >= 2
}
