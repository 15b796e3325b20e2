package host

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
)

// candidate is one (backend, adapter) that AcquirePreferred may pick, with the
// facts the preferred order sorts by (docs/design.md, "Backend selection").
type candidate struct {
	ID          string
	Adapter     int
	Precedence  uint32 // none = math.MaxUint32
	Score       int
	Timing      pluginapi.TimingQuality
	MemBWGBps   float64
	Acquisition time.Duration
}

// name is the candidate's explicit acquisition name, "id:adapter".
func (c candidate) name() string { return fmt.Sprintf("%s:%d", c.ID, c.Adapter) }

// newCandidate collects the selection facts of adapter a of the backend d.
func newCandidate(d *pluginapi.Description, a pluginapi.Adapter, acquisition time.Duration) candidate {
	return candidate{
		ID:          d.ID,
		Adapter:     a.Index,
		Precedence:  precedence(d),
		Score:       a.Profile.CapabilityScore(),
		Timing:      a.Profile.TimingQuality,
		MemBWGBps:   a.Profile.MemBWGBps,
		Acquisition: acquisition,
	}
}

// precedence returns d's rank; a backend without one sorts last.
func precedence(d *pluginapi.Description) uint32 {
	if d.Precedence == nil {
		return math.MaxUint32
	}
	return *d.Precedence
}

// compareCandidates orders candidates best first, exactly as docs/design.md,
// "Backend selection": capability score (high first), timing quality (high
// first), memory bandwidth (high first), precedence (low first), measured
// acquisition time (low first), then id and adapter index.
func compareCandidates(a, b candidate) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Timing, a.Timing); c != 0 {
		return c
	}
	if c := cmp.Compare(b.MemBWGBps, a.MemBWGBps); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Precedence, b.Precedence); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Acquisition, b.Acquisition); c != 0 {
		return c
	}
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Adapter, b.Adapter)
}

// IsReferenceOracle reports whether d describes a reference oracle, which is
// never chosen implicitly: it says so itself, or its id is cpu-ref or reference.
func IsReferenceOracle(d *pluginapi.Description) bool {
	return d.ReferenceOracle || d.ID == "cpu-ref" || d.ID == "reference"
}

// opener prepares adapter of the backend with id and returns how long it took.
type opener func(ctx context.Context, id string, adapter int) (time.Duration, error)

// choosePreferred applies AcquirePreferred's rules to the started backends descs:
// backends that do not dispatch are skipped, reference oracles are skipped and
// named, every available adapter of the others is opened with open (its measured
// time is the acquisition time), and the best candidate by compareCandidates wins.
// startFailures are plugins that never started; they are listed in the error when
// nothing is usable, as is every failure met here.
func choosePreferred(ctx context.Context, descs []*pluginapi.Description, startFailures []string, open opener) (candidate, error) {
	failures := append([]string(nil), startFailures...)
	var oracles, nonDispatching []string
	var cands []candidate
	for _, d := range descs {
		switch {
		case !d.Dispatches:
			nonDispatching = append(nonDispatching, d.ID)
			continue
		case IsReferenceOracle(d):
			oracles = append(oracles, d.ID)
			continue
		}
		if len(d.Adapters) == 0 {
			failures = append(failures, d.ID+": reports no adapters")
		}
		for _, a := range d.Adapters {
			label := fmt.Sprintf("%s:%d (%s)", d.ID, a.Index, a.Name)
			if !a.Available {
				failures = append(failures, label+": unavailable: "+a.Reason)
				continue
			}
			took, err := open(ctx, d.ID, a.Index)
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", label, err))
				continue
			}
			cands = append(cands, newCandidate(d, a, took))
		}
	}
	if len(cands) == 0 {
		return candidate{}, &NoBackendError{Failures: failures, SkippedOracles: oracles, NonDispatching: nonDispatching}
	}
	sort.SliceStable(cands, func(i, j int) bool { return compareCandidates(cands[i], cands[j]) < 0 })
	return cands[0], nil
}
