package cache

import (
	"bytes"
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
