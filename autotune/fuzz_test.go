package autotune

import (
	"maps"
	"testing"

	"github.com/kiln-dev/kiln/internal/tomlstore"
)

// FuzzParse feeds arbitrary bytes to the store file parser: it must never panic,
// and whatever it accepts must encode and parse back to the same records.
func FuzzParse(f *testing.F) {
	for _, m := range malformed {
		f.Add([]byte(m))
	}
	good, _ := encode(map[Key]Record{NewKey(sampleSpec(1), "vulkan:0"): sampleRecord(4)})
	f.Add(good)
	withParams, _ := encode(map[Key]Record{NewKey(sampleSpec(2), "vulkan/fp"): {WorkgroupSize: [3]uint32{16, 16, 1}, Params: "bm=8 bn=4 tk=16"}})
	f.Add(withParams)
	withProgram, _ := encode(map[Key]Record{NewKey(sampleSpec(3), "cuda/fp"): {WorkgroupSize: [3]uint32{64, 1, 1}, Params: "epi=2", Program: "my.prog"}})
	f.Add(withProgram)
	f.Fuzz(func(t *testing.T, data []byte) {
		records, err := parse(data)
		if err != nil {
			return
		}
		checkRoundTrip(t, records)
	})
}

// FuzzEncode puts records with arbitrary strings and numbers: whatever Put
// accepts must survive a save and load.
func FuzzEncode(f *testing.F) {
	f.Add("vulkan:0", "2026-05-02", uint32(64), uint32(4), uint32(16), "")
	f.Add("a\"b\\c\n'''", "\x00\t", uint32(0), uint32(1<<31), uint32(1), "prog\n\"x\"")
	f.Fuzz(func(t *testing.T, adapter, date string, wg, unroll, tile uint32, program string) {
		s := &Store{m: tomlstore.NewMap("", codec)}
		r := Record{WorkgroupSize: [3]uint32{wg, 1, wg}, Unroll: unroll, Tile: [3]uint32{tile, tile, 0}, RecordedAt: date, Program: program}
		if err := s.Put(NewKey(sampleSpec(uint64(wg)), adapter), r); err != nil {
			return
		}
		checkRoundTrip(t, s.Records())
	})
}

func checkRoundTrip(t *testing.T, records map[Key]Record) {
	t.Helper()
	data, err := encode(records)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	again, err := parse(data)
	if err != nil {
		t.Fatalf("the encoding does not parse: %v\n%s", err, data)
	}
	if !maps.Equal(records, again) {
		t.Fatalf("round trip changed the records: %v → %v", records, again)
	}
}

// FuzzParseParams: no params string panics ParseParams; what it accepts
// formats to canonical params that parse to the same values.
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{"", "epi=1", "epi=8 unroll=1", "epi=01", "unroll=1 epi=2", "epi=-1", "x=1"} {
		f.Add(s)
	}
	p := tunableProgram()
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseParams(p, s)
		if err != nil {
			return
		}
		canon := FormatParams(spec)
		if err := checkParams(canon); err != nil {
			t.Fatalf("FormatParams wrote %q, which checkParams refuses: %v", canon, err)
		}
		again, err := ParseParams(p, canon)
		if err != nil || again.CacheHash() != spec.CacheHash() {
			t.Fatalf("%q → %q does not parse back to the same values (%v)", s, canon, err)
		}
	})
}
