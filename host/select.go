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

// compareCandidates orders candidates best first, as docs/design.md, "Backend
// selection" says: capability score (high first), timing quality (high first),
// memory bandwidth quantized to two significant digits (high first),
// precedence (low first), measured acquisition time (low first; only between
// different backends), then id and adapter index. Identical GPUs of one backend
// thus come in adapter order whatever their measured bandwidths and opening
// times jitter.
func compareCandidates(a, b candidate) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Timing, a.Timing); c != 0 {
		return c
	}
	if c := cmp.Compare(quantizeBandwidth(b.MemBWGBps), quantizeBandwidth(a.MemBWGBps)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Precedence, b.Precedence); c != 0 {
		return c
	}
	if a.ID != b.ID {
		if c := cmp.Compare(a.Acquisition, b.Acquisition); c != 0 {
			return c
		}
	}
	if c := strings.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.Adapter, b.Adapter)
}

// quantizeBandwidth rounds a bandwidth to two significant digits (2183.4 and
// 2193.7 GB/s both become 2200), so measurement noise between identical devices
// does not order them.
func quantizeBandwidth(gbps float64) float64 {
	if gbps <= 0 || math.IsNaN(gbps) || math.IsInf(gbps, 0) {
		return 0
	}
	step := math.Pow(10, math.Floor(math.Log10(gbps))-1)
	return math.Round(gbps/step) * step
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
// nothing is usable, as is every failure met here. keep, when not nil, leaves out
// the adapters it refuses (those a failing-over launch already tried) unopened.
func choosePreferred(ctx context.Context, descs []*pluginapi.Description, startFailures []string, open opener, keep func(candidate) bool) (candidate, error) {
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
			if keep != nil && !keep(candidate{ID: d.ID, Adapter: a.Index}) {
				failures = append(failures, label+": already tried")
				continue
			}
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
