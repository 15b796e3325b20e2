package pgo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// fakeBackend reports the latencies in times, one per dispatch (the last one
// repeats), and records what it was given.
type fakeBackend struct {
	id        Live
	times     []time.Duration
	failAt    int // 1-based dispatch that fails; 0 never
	calls     int
	gotInputs [][]byte
	gotLaunch Launch
	gotProg   *ir.Program
}

func (f *fakeBackend) Identity() Live { return f.id }

func (f *fakeBackend) Dispatch(ctx context.Context, p *ir.Program, inputs [][]byte, l Launch) (time.Duration, error) {
	f.calls++
	f.gotProg, f.gotInputs, f.gotLaunch = p, inputs, l
	if f.calls == f.failAt {
		return 0, errors.New("device lost")
	}
	return f.times[min(f.calls, len(f.times))-1], nil
}

func fake(id string, times ...time.Duration) *fakeBackend {
	return &fakeBackend{id: Live{ID: id, AdapterFingerprint: "fp-" + id, PluginVersion: "1.0.0"}, times: times}
}

var testProgram = &ir.Program{Name: "primitive.test.pgo", WorkgroupSize: [3]uint32{64, 1, 1}}

func certify(t *testing.T, tbl *Table, cfg Config, backends ...Candidate) Route {
	t.Helper()
	r, err := tbl.Certify(context.Background(), testProgram.Name, testProgram, nil, cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCertifyRoutesToTheFastestBackend(t *testing.T) {
	tbl := New(tablePath(t))
	slow, fast := fake("slow", time.Millisecond), fake("fast", time.Microsecond)
	r := certify(t, tbl, Config{}, slow, fast)
	if r.Backend != "fast" || r.AdapterFingerprint != "fp-fast" || r.PluginVersion != "1.0.0" {
		t.Fatalf("route = %+v", r)
	}
	if b, ok := tbl.Fastest(testProgram.Name); !ok || b != "fast" {
		t.Fatalf("Fastest = %q, %v", b, ok)
	}
	want := []Observation{{"fast", 1000}, {"slow", 1_000_000}}
	if len(r.Observations) != 2 || r.Observations[0] != want[0] || r.Observations[1] != want[1] {
		t.Fatalf("observations = %v, want %v", r.Observations, want)
	}
	if r.MeasuredAt.IsZero() || r.MeasuredAt.Location() != time.UTC {
		t.Fatalf("MeasuredAt = %v", r.MeasuredAt)
	}
	if !tbl.IsDirty() {
		t.Fatal("Certify did not dirty the table")
	}
}

func TestCertifyWarmsUpThenTakesTheMedian(t *testing.T) {
	// The warm-up's hour is ignored; the median of 50, 10, 30 µs is 30 µs.
	b := fake("b", time.Hour, 50*time.Microsecond, 10*time.Microsecond, 30*time.Microsecond)
	r := certify(t, New(tablePath(t)), Config{}, b)
	if b.calls != 1+DefaultTimed {
		t.Fatalf("%d dispatches, want 1 warm-up + %d timed", b.calls, DefaultTimed)
	}
	if r.Observations[0].MedianNs != 30_000 {
		t.Fatalf("median = %d ns, want 30000", r.Observations[0].MedianNs)
	}
	b5 := fake("b", time.Hour, 5, 1, 4, 2, 3)
	r = certify(t, New(tablePath(t)), Config{Timed: 5}, b5)
	if b5.calls != 6 || r.Observations[0].MedianNs != 3 {
		t.Fatalf("Timed 5: %d dispatches, median %d", b5.calls, r.Observations[0].MedianNs)
	}
}

func TestCertifyBreaksTiesByID(t *testing.T) {
	r := certify(t, New(tablePath(t)), Config{}, fake("zeta", 7), fake("alpha", 7), fake("mid", 3))
	var ids []string
	for _, o := range r.Observations {
		ids = append(ids, o.Backend)
	}
	if got := strings.Join(ids, ","); got != "mid,alpha,zeta" || r.Backend != "mid" {
		t.Fatalf("order = %s, route %s", got, r.Backend)
	}
	r = certify(t, New(tablePath(t)), Config{}, fake("zeta", 7), fake("alpha", 7))
	if r.Backend != "alpha" {
		t.Fatalf("tie went to %s, want alpha", r.Backend)
	}
}

func TestCertifyPassesTheDispatchThrough(t *testing.T) {
	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(2))
	launch := Launch{Grid: [3]uint32{4, 1, 1}, OutputCounts: []uint32{0, 256}, Spec: spec, WorkgroupSize: [3]uint32{32, 1, 1}}
	inputs := [][]byte{{1, 2, 3, 4}, nil}
	b := fake("b", 1)
	if _, err := New(tablePath(t)).Certify(context.Background(), "op", testProgram, inputs, Config{Launch: launch}, []Candidate{b}); err != nil {
		t.Fatal(err)
	}
	if b.gotProg != testProgram || &b.gotInputs[0][0] != &inputs[0][0] || b.gotLaunch.Grid != launch.Grid ||
		b.gotLaunch.WorkgroupSize != launch.WorkgroupSize || len(b.gotLaunch.OutputCounts) != 2 || b.gotLaunch.Spec.Len() != 1 {
		t.Fatalf("the backend got %+v, %v", b.gotLaunch, b.gotInputs)
	}
}

func TestCertifyWithoutBackendsFails(t *testing.T) {
	_, err := New(tablePath(t)).Certify(context.Background(), "op", testProgram, nil, Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "no backends") || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("err = %v", err)
	}
}

func TestCertifyRejectsBadArguments(t *testing.T) {
	tbl := New(tablePath(t))
	if _, err := tbl.Certify(context.Background(), "op", testProgram, nil, Config{Timed: -1}, []Candidate{fake("a", 1)}); err == nil {
		t.Error("negative Timed accepted")
	}
	if _, err := tbl.Certify(context.Background(), "op", testProgram, nil, Config{}, []Candidate{fake("a", 1), fake("a", 2)}); err == nil {
		t.Error("a backend given twice was accepted")
	}
	if _, err := tbl.Certify(context.Background(), "", testProgram, nil, Config{}, []Candidate{fake("a", 1)}); err == nil {
		t.Error("an empty op id was accepted")
	}
	if tbl.Len() != 0 || tbl.IsDirty() {
		t.Fatal("a refused certification changed the table")
	}
}

func TestCertifyFailsOnAFailedDispatchAndKeepsTheOldRoute(t *testing.T) {
	tbl := New(tablePath(t))
	certify(t, tbl, Config{}, fake("a", 5))
	for _, failAt := range []int{1, 3} {
		bad := fake("b", 1)
		bad.failAt = failAt
		_, err := tbl.Certify(context.Background(), testProgram.Name, testProgram, nil, Config{}, []Candidate{fake("a", 5), bad})
		if err == nil || !strings.Contains(err.Error(), "on b") || !strings.Contains(err.Error(), "device lost") {
			t.Fatalf("failAt %d: err = %v", failAt, err)
		}
		if b, _ := tbl.Fastest(testProgram.Name); b != "a" {
			t.Fatalf("failAt %d: the route changed to %s", failAt, b)
		}
	}
}
