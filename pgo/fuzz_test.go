package pgo

import (
	"reflect"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary bytes to the table parser: it must never panic, and
// whatever it accepts must encode and parse back to the same routes.
func FuzzParse(f *testing.F) {
	for _, m := range malformedTables {
		f.Add([]byte(m))
	}
	good, _ := encode(map[string]Route{"kiln.vector.add.f32": sampleRoute("vulkan:0"), "x": {Backend: "b"}})
	f.Add(good)
	sized, _ := encode(map[string]Route{"op": classRoute()})
	f.Add(sized)
	f.Add([]byte("schema = 1\n[routes.op]\nbackend = 'a'\nmeasured_at = 2026-05-02T10:00:00.123456789+02:00\n"))
	f.Add([]byte("schema = 1\n[routes.op]\nbackend = 'a'\nmeasured_at = 2026-05-02\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		routes, err := parse(data)
		if err != nil {
			return
		}
		checkRoundTrip(t, routes)
	})
}

// FuzzSet stores routes with arbitrary strings and numbers: whatever Set accepts
// must survive a save and load.
func FuzzSet(f *testing.F) {
	f.Add("kiln.vector.add.f32", "vulkan:0", "fp", "1.0.0", int64(1200), int64(1_700_000_000))
	f.Add("a'b\"c", "\n", "\x00", "'''", int64(0), int64(-62135596800))
	f.Add("op", "b", "", "", int64(-1), int64(1e12))
	f.Fuzz(func(t *testing.T, op, backend, fp, version string, ns, unix int64) {
		tbl := New("unused")
		r := Route{Backend: backend, AdapterFingerprint: fp, PluginVersion: version,
			Observations: []Observation{{backend, ns}}, MeasuredAt: time.Unix(unix, ns%1e9)}
		if err := tbl.Set(op, r); err != nil {
			return
		}
		checkRoundTrip(t, tbl.Routes())
	})
}

func checkRoundTrip(t *testing.T, routes map[string]Route) {
	t.Helper()
	data, err := encode(routes)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	again, err := parse(data)
	if err != nil {
		t.Fatalf("the encoding does not parse: %v\n%s", err, data)
	}
	if len(again) != len(routes) {
		t.Fatalf("%d routes came back, want %d", len(again), len(routes))
	}
	for op, r := range routes {
		got := again[op]
		if !got.MeasuredAt.Equal(r.MeasuredAt) {
			t.Fatalf("%q: measured_at %v came back as %v", op, r.MeasuredAt, got.MeasuredAt)
		}
		got.MeasuredAt, r.MeasuredAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%q: %+v came back as %+v", op, r, got)
		}
	}
}
