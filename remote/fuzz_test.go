package remote

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeTuning feeds arbitrary objects to the tuning-record decoder: it
// must never panic, and whatever it accepts must survive its encoding.
func FuzzDecodeTuning(f *testing.F) {
	good, _ := json.Marshal(tuningDoc{Format: 1, Key: "41000100010000000240632400000000", Backend: "vulkan", Fingerprint: "5f0c",
		WorkgroupSize: [3]uint32{64, 1, 1}, Unroll: 4, RecordedAt: "2026-05-02", MeasuredAt: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)})
	f.Add(good)
	f.Add([]byte(`{"kiln_tuning":2}`))
	f.Add([]byte(`{"kiln_tuning":1,"key":"x"}{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeTuning(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(tuningDoc{Format: 1, Key: r.Key, Backend: r.BackendID, Fingerprint: r.Fingerprint, WorkgroupSize: r.Record.WorkgroupSize,
			Unroll: r.Record.Unroll, Tile: r.Record.Tile, RecordedAt: r.Record.RecordedAt, MeasuredAt: r.MeasuredAt})
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeTuning(enc)
		if err != nil || again != r {
			t.Fatalf("round trip: %+v → %+v, %v", r, again, err)
		}
	})
}

// FuzzDecodeRoute feeds arbitrary objects to the route decoder: it must never
// panic, and whatever it accepts is a route a table can hold.
func FuzzDecodeRoute(f *testing.F) {
	good, _ := json.Marshal(routeDoc{Format: 1, Op: "kiln.op", Backend: "vulkan:0", AdapterFingerprint: "5f0c", PluginVersion: "1.0",
		MeasuredAt: time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC), Observations: []observationDoc{{"vulkan:0", 10}}})
	f.Add(good)
	f.Add([]byte(`{"kiln_route":1,"op":"","backend":"x"}`))
	f.Add([]byte(`{"kiln_route":1,"op":"a","backend":"b","adapter_fingerprint":"c","observations":[{"backend":"b","median_ns":-1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		op, r, err := decodeRoute(data)
		if err != nil {
			return
		}
		if op == "" || r.Backend == "" || !validSegment(r.AdapterFingerprint) {
			t.Fatalf("accepted an incomplete route: %q %+v", op, r)
		}
	})
}

// FuzzStampTime checks that only names stamp makes read back as stamps.
func FuzzStampTime(f *testing.F) {
	f.Add(stamp(time.Unix(0, 1777716005000000000)))
	f.Add("00000000000000000001-zzzzzzzzzzzzzzzz.json")
	f.Fuzz(func(t *testing.T, name string) {
		at, ok := stampTime(name)
		if ok && at.UnixNano() < 0 {
			t.Fatalf("%q reads as %v", name, at)
		}
	})
}
