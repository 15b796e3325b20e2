package cache

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeEntry feeds arbitrary files to the entry parser: it must never panic,
// and whatever it accepts must re-encode to the same bytes.
func FuzzDecodeEntry(f *testing.F) {
	var good bytes.Buffer
	k := sampleKey()
	writeEntry(&good, k.Encode(), []byte("payload"))
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:headerSize])
	f.Add([]byte("KILNPIPE"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		key, payload, err := decodeEntry(data, nil)
		if err != nil {
			return
		}
		var again bytes.Buffer
		if err := writeEntry(&again, key, payload); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), data) {
			t.Fatal("an accepted entry does not re-encode to the same bytes")
		}
		if k, err := decodeKey(key); err == nil && !bytes.Equal(k.Encode(), key) {
			t.Fatal("an accepted key does not re-encode to the same bytes")
		}
		if _, _, err := parseHeader(data[:headerSize], int64(len(data))); err != nil {
			t.Fatalf("the header of an accepted entry fails alone: %v", err)
		}
	})
}

// FuzzParseEntry feeds arbitrary objects to the parser the fleet tier uses for
// entries of unknown key: whatever it accepts must re-encode to the same bytes
// and decode as a hit for its own key, and for that key only.
func FuzzParseEntry(f *testing.F) {
	good, _ := EncodeEntry(sampleKey(), []byte("payload"))
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("KILNPIPE"))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, payload, miss := ParseEntry(data)
		if miss != MissNone {
			if p, why := DecodeEntry(data, sampleKey()); p != nil || why == MissNone {
				t.Fatal("DecodeEntry accepted what ParseEntry refused")
			}
			return
		}
		again, err := EncodeEntry(key, payload)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("an accepted entry does not re-encode to the same bytes: %v", err)
		}
		if p, why := DecodeEntry(data, key); why != MissNone || !bytes.Equal(p, payload) {
			t.Fatalf("DecodeEntry refused the entry for its own key: %s", why)
		}
		other := key
		other.PluginVersion += "x"
		if _, why := DecodeEntry(data, other); why != MissForeignKey {
			t.Fatalf("DecodeEntry for another key: %s, want foreign-key", why)
		}
	})
}

// FuzzDecodeUsage feeds arbitrary usage files to the decoder: it must never
// panic, and whatever it accepts must encode and decode to the same counts.
func FuzzDecodeUsage(f *testing.F) {
	f.Add([]byte(`{"format":1,"since":"2026-05-02T10:00:00Z","local":{"hits":1,"misses":{"absent":2},"errors":0,"writes":3,"dropped":0},"remote":{"hits":0,"misses":{},"errors":1,"writes":0,"dropped":4}}`))
	f.Add([]byte(`{"format":2}`))
	f.Add([]byte(`{"format":1,"local":{"misses":{"sideways":1}}}`))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := decodeUsage(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeUsage(enc)
		if err != nil {
			t.Fatalf("an accepted usage file does not survive its encoding: %v\n%s", err, enc)
		}
		if again.Local.MissCount() != u.Local.MissCount() || again.Remote.Hits != u.Remote.Hits || !again.Since.Equal(u.Since) {
			t.Fatalf("round trip changed the counts: %+v → %+v", u, again)
		}
	})
}
