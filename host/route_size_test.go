package host

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/pgo"
)

// sizedWork is a launch of test.four with inputs of kib KiB each.
func sizedWork(kib int) Work {
	n := kib * 1024
	return Work{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{make([]byte, n), make([]byte, n)}, OutputCounts: []uint32{0, 0, 4}}
}

// Two fixture plugins with known costs: fx-cost-fixed takes 40ms whatever the
// size, fx-cost-per-kib 200µs per KiB of input. Certifying at a small and a
// large size routes the small class to fx-cost-per-kib (0.4ms against 40ms)
// and the large one to fx-cost-fixed (40ms against 200ms), and dispatches
// that name no backend follow the class nearest their size.
func TestSizeClassesRouteSmallAndLargeLaunchesApart(t *testing.T) {
	if testing.Short() {
		t.Skip("times fixture plugins that sleep")
	}
	table := pgo.New(filepath.Join(t.TempDir(), "pgo.toml"))
	h := openWith(t, Options{PGO: table, NoCache: true, NoAutotune: true}, "fx-cost-fixed", "fx-cost-per-kib")
	ctx := context.Background()
	prog := fourBuffers(t)
	var backends []pgo.Candidate
	for _, name := range []string{"fx-cost-fixed", "fx-cost-per-kib"} {
		b, err := h.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		pb := NewPGOCandidate(b)
		defer pb.Close(ctx)
		backends = append(backends, pb)
	}
	small, large := sizedWork(1), sizedWork(500)
	point := func(w Work) pgo.Point {
		return pgo.Point{Inputs: w.Inputs, Launch: pgo.Launch{Grid: w.Grid, OutputCounts: w.OutputCounts}}
	}
	r, err := table.CertifyClasses(ctx, prog.Name, prog, []pgo.Point{point(large), point(small)}, pgo.Config{Timed: 1}, backends)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Classes) != 2 || r.Classes[0].Backend != "fx-cost-per-kib:0" || r.Classes[1].Backend != "fx-cost-fixed:0" {
		t.Fatalf("classes %+v; want the small one on fx-cost-per-kib:0, the large one on fx-cost-fixed:0", r.Classes)
	}
	for _, tc := range []struct {
		w    Work
		want string
	}{{small, "fx-cost-per-kib:0"}, {sizedWork(4), "fx-cost-per-kib:0"}, {large, "fx-cost-fixed:0"}, {sizedWork(200), "fx-cost-fixed:0"}} {
		res, err := h.Dispatch(ctx, prog, Launch{Work: tc.w})
		if err != nil {
			t.Fatal(err)
		}
		if res.Backend != tc.want || !strings.HasPrefix(res.Selection, "pgo route (size class ") {
			t.Errorf("a launch of %d bytes ran on %s (%q), want %s by its size class", launchBytes(tc.w), res.Backend, res.Selection, tc.want)
		}
	}
}
