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

// compareVersions orders two plugin versions: the dot-separated release
// numbers compare numerically (a leading "v" is ignored, 1.10 > 1.9), a
// release is above its pre-releases (1.0.0 > 1.0.0-rc.1), pre-release fields
// compare numerically when both are numbers and as text otherwise (a number
// below text), and build metadata after "+" is ignored. A version that is not
// of this form sorts below every one that is; two such versions are equal.
func compareVersions(a, b string) int {
	ra, prea, oka := splitVersion(a)
	rb, preb, okb := splitVersion(b)
	if !oka || !okb {
		return cmp.Compare(boolRank(oka), boolRank(okb))
	}
	if c := compareFields(ra, rb); c != 0 {
		return c
	}
	if len(prea) == 0 || len(preb) == 0 {
		return cmp.Compare(len(preb), len(prea)) // no pre-release is the higher
	}
	return compareFields(prea, preb)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitVersion splits v into its release numbers and pre-release fields; ok
// is false when the release part is not dot-separated numbers.
func splitVersion(v string) (release, pre []string, ok bool) {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "+")
	main, prerelease, hasPre := strings.Cut(v, "-")
	release = strings.Split(main, ".")
	for _, f := range release {
		if !isNumber(f) {
			return nil, nil, false
		}
	}
	if hasPre {
		pre = strings.Split(prerelease, ".")
	}
	return release, pre, true
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// compareFields compares version fields one by one: numbers by value (of any
// length), a number below text, text by bytes; a prefix is the lower.
func compareFields(a, b []string) int {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		nx, ny := isNumber(x), isNumber(y)
		switch {
		case nx && ny:
			x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
			if c := cmp.Compare(len(x), len(y)); c != 0 {
				return c
			}
		case nx != ny:
			return cmp.Compare(boolRank(ny), boolRank(nx))
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// outranks reports whether plugin a, rather than b, provides the backend id
// both report: the higher version wins, then the path that sorts first.
func outranks(a, b *plugin) bool {
	if c := compareVersions(a.desc.Version, b.desc.Version); c != 0 {
		return c > 0
	}
	return a.path < b.path
}
