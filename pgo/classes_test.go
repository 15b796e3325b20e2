package pgo

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// costBackend takes fixed + perKiB·(launch KiB) per dispatch: a known cost
// model, so measurements say which backend is fastest at which size.
type costBackend struct {
	id            Live
	fixed, perKiB time.Duration
}

func (c *costBackend) Identity() Live { return c.id }

func (c *costBackend) Dispatch(_ context.Context, _ *ir.Program, inputs [][]byte, l Launch) (time.Duration, error) {
	return c.fixed + c.perKiB*time.Duration(LaunchBytes(inputs, l.OutputCounts)/1024), nil
}

func costly(id string, fixed, perKiB time.Duration) *costBackend {
	return &costBackend{id: Live{ID: id, AdapterFingerprint: "fp-" + id, PluginVersion: "1.0.0"}, fixed: fixed, perKiB: perKiB}
}

// point is a launch of one input of kib KiB and an output of as many bytes.
func point(kib int) Point {
	return Point{Inputs: [][]byte{make([]byte, kib*1024), nil}, Launch: Launch{OutputCounts: []uint32{0, uint32(kib * 256)}}}
}

// A CPU backend with little overhead wins small launches, a GPU with a large
// fixed cost but fast per byte wins large ones: the size classes say so, and
// a launch follows the class nearest its size.
func TestCertifyClassesRouteSmallAndLargeApart(t *testing.T) {
	tbl := New(tablePath(t))
	cpu := costly("cpu-fast:0", 2*time.Microsecond, 100*time.Nanosecond)
	gpu := costly("gpu:0", 40*time.Microsecond, time.Nanosecond)
	points := []Point{point(1024), point(1), point(32)}
	r, err := tbl.CertifyClasses(context.Background(), "op", testProgram, points, Config{Timed: 1}, []Candidate{cpu, gpu})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Classes) != 3 {
		t.Fatalf("%d classes, want 3: %+v", len(r.Classes), r)
	}
	want := []struct {
		kib     int64
		backend string
	}{{1, "cpu-fast:0"}, {32, "cpu-fast:0"}, {1024, "gpu:0"}}
	for i, c := range r.Classes {
		if c.Bytes != 2*1024*want[i].kib || c.Backend != want[i].backend || c.AdapterFingerprint != "fp-"+want[i].backend || len(c.Observations) != 2 {
			t.Errorf("class %d: %+v, want %d KiB → %s", i, c, want[i].kib, want[i].backend)
		}
	}
	if r.Backend != "gpu:0" || !reflect.DeepEqual(r.Observations, r.Classes[2].Observations) {
		t.Errorf("the top-level route %s must repeat the largest class", r.Backend)
	}
	live := []Live{cpu.id, gpu.id}
	for _, tc := range []struct {
		bytes int64
		want  string
	}{{0, "cpu-fast:0"}, {100, "cpu-fast:0"}, {64 << 10, "cpu-fast:0"}, {1 << 20, "gpu:0"}, {1 << 30, "gpu:0"}} {
		got, why := tbl.FreshFor("op", tc.bytes, live)
		if why != "" || got.Backend != tc.want {
			t.Errorf("a launch of %d bytes follows %s (%q), want %s", tc.bytes, got.Backend, why, tc.want)
		}
	}
	// Without the GPU live, large launches find their class stale; small ones
	// still route.
	if _, why := tbl.FreshFor("op", 1<<30, []Live{cpu.id}); !strings.Contains(why, "size class 2097152 bytes is stale") {
		t.Errorf("stale large class: %q", why)
	}
	if got, why := tbl.FreshFor("op", 100, []Live{cpu.id}); why != "" || got.Backend != "cpu-fast:0" {
		t.Errorf("small class without the GPU: %s %q", got.Backend, why)
	}
	if stale := tbl.Stale([]Live{cpu.id}); len(stale) != 1 || !strings.Contains(stale[0].Reason, "gpu:0") {
		t.Errorf("Stale = %+v", stale)
	}
	if stale := tbl.Stale([]Live{gpu.id}); len(stale) != 1 || !strings.Contains(stale[0].Reason, "size class") {
		t.Errorf("Stale without the CPU backend = %+v", stale)
	}
}

func TestNearestClassIsLogarithmic(t *testing.T) {
	r := Route{Backend: "b", Classes: []ClassRoute{{Bytes: 1 << 10, Backend: "small"}, {Bytes: 1 << 20, Backend: "large"}}}
	for bytes, want := range map[int64]string{1 << 14: "small", 1 << 15: "small", 1 << 16: "large", 0: "small", -5: "small"} {
		if c, _ := r.NearestClass(bytes); c.Backend != want {
			t.Errorf("%d bytes: %s, want %s", bytes, c.Backend, want)
		}
	}
	if _, ok := (Route{Backend: "b"}).NearestClass(5); ok {
		t.Error("a route without classes has a nearest class")
	}
	if got := (Route{Backend: "b"}).ForSize(5); got.Backend != "b" {
		t.Errorf("ForSize without classes: %s", got.Backend)
	}
}

func TestCertifyOnePointHasNoClasses(t *testing.T) {
	tbl := New(tablePath(t))
	r, err := tbl.CertifyClasses(context.Background(), "op", testProgram, []Point{point(4), point(4)}, Config{Timed: 1},
		[]Candidate{costly("a:0", time.Microsecond, 0), costly("b:0", 2*time.Microsecond, 0)})
	if err != nil || len(r.Classes) != 0 || r.Backend != "a:0" {
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := tbl.CertifyClasses(context.Background(), "op", testProgram, nil, Config{}, []Candidate{costly("a:0", 0, 0)}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Fatalf("no points: %v", err)
	}
}

func classRoute() Route {
	r := sampleRoute("gpu:0")
	r.Classes = []ClassRoute{
		{Bytes: 4096, Backend: "cpu:0", AdapterFingerprint: "fp-cpu", PluginVersion: "2.0.0", Observations: []Observation{{"cpu:0", 900}, {"gpu:0", 40000}}},
		{Bytes: 1 << 24, Backend: "gpu:0", AdapterFingerprint: "fp-gpu:0", PluginVersion: "1.0.0", Observations: r.Observations},
	}
	return r
}

// Tables without classes stay schema 1; a route with classes makes the file
// schema 2, and both read back.
func TestClassesSchema(t *testing.T) {
	path := tablePath(t)
	tbl := loadTable(t, path)
	set(t, tbl, "plain", sampleRoute("vulkan:0"))
	saveTable(t, tbl)
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "schema = 1\n") {
		t.Fatalf("a table without classes:\n%s", data)
	}
	set(t, tbl, "sized", classRoute())
	saveTable(t, tbl)
	data, _ = os.ReadFile(path)
	if !strings.HasPrefix(string(data), "schema = 2\n") || !strings.Contains(string(data), "[[routes.sized.classes]]") {
		t.Fatalf("a table with classes:\n%s", data)
	}
	again := loadTable(t, path)
	if got, _ := again.Route("sized"); !reflect.DeepEqual(got, classRoute()) {
		t.Fatalf("read back %+v\nwant %+v", got, classRoute())
	}
	if got, _ := again.Route("plain"); !reflect.DeepEqual(got, sampleRoute("vulkan:0")) {
		t.Fatalf("plain route read back %+v", got)
	}
}

func TestClassesFormatErrors(t *testing.T) {
	const head = "[routes.op]\nbackend = 'a'\nmeasured_at = 2026-05-02T10:00:00Z\n"
	for name, tc := range map[string]struct{ file, want string }{
		"classes in schema 1": {"schema = 1\n" + head + "[[routes.op.classes]]\nbytes = 1\nbackend = 'a'\n", "classes need schema 2"},
		"no bytes":            {"schema = 2\n" + head + "[[routes.op.classes]]\nbackend = 'a'\n", "bytes and backend are required"},
		"descending":          {"schema = 2\n" + head + "[[routes.op.classes]]\nbytes = 9\nbackend = 'a'\n[[routes.op.classes]]\nbytes = 3\nbackend = 'a'\n", "ascending"},
		"negative":            {"schema = 2\n" + head + "[[routes.op.classes]]\nbytes = -1\nbackend = 'a'\n", "negative bytes"},
		"bad observation":     {"schema = 2\n" + head + "[[routes.op.classes]]\nbytes = 1\nbackend = 'a'\n[[routes.op.classes.observations]]\nbackend = 'a'\n", "median_ns are required"},
	} {
		if _, err := parse([]byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
