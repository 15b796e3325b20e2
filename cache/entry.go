package cache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// MaxEntryBytes bounds the payload of one entry: Write refuses a larger blob and
// Read refuses to load a larger file.
const MaxEntryBytes = 64 << 20

// An entry file is a 32-byte header, the key's encoding (the key echo) and the
// payload:
//
//	offset  size  field
//	0       8     magic "KILNPIPE"
//	8       4     format version (entryFormat), little-endian
//	12      4     key length K, little-endian, at most maxKeyBytes
//	16      8     payload length P, little-endian, at most MaxEntryBytes
//	24      8     xxhash64 of bytes 0..24, the key and the payload, little-endian
//	32      K     key (Key.Encode)
//	32+K    P     payload
//
// The file is exactly 32+K+P bytes long. Anything else is corrupt.
const (
	entryMagic   = "KILNPIPE"
	entryFormat  = 1
	headerSize   = 32
	maxFileBytes = headerSize + maxKeyBytes + MaxEntryBytes
)

// corruptError says why an entry file is not a valid entry.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return e.reason }

func corrupt(format string, args ...any) error {
	return &corruptError{fmt.Sprintf(format, args...)}
}

func entrySum(head []byte, key, payload []byte) uint64 {
	d := xxhash.New()
	d.Write(head[:24])
	d.Write(key)
	d.Write(payload)
	return d.Sum64()
}

// writeEntry writes the entry for key (encoded) and payload to w.
func writeEntry(w io.Writer, key, payload []byte) error {
	var head [headerSize]byte
	copy(head[:], entryMagic)
	binary.LittleEndian.PutUint32(head[8:], entryFormat)
	binary.LittleEndian.PutUint32(head[12:], uint32(len(key)))
	binary.LittleEndian.PutUint64(head[16:], uint64(len(payload)))
	binary.LittleEndian.PutUint64(head[24:], entrySum(head[:], key, payload))
	for _, b := range [][]byte{head[:], key, payload} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// parseHeader checks the fixed header and returns the key and payload lengths.
// size is the file's length, or -1 when only a prefix is at hand.
func parseHeader(head []byte, size int64) (keyLen, payloadLen int64, err error) {
	if len(head) < headerSize {
		return 0, 0, corrupt("truncated: %d bytes, shorter than the %d-byte header", len(head), headerSize)
	}
	if string(head[:8]) != entryMagic {
		return 0, 0, corrupt("not a kiln pipeline entry (magic %q)", head[:8])
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != entryFormat {
		return 0, 0, corrupt("entry format %d, want %d", v, entryFormat)
	}
	keyLen = int64(binary.LittleEndian.Uint32(head[12:]))
	payloadLen64 := binary.LittleEndian.Uint64(head[16:])
	if keyLen > maxKeyBytes {
		return 0, 0, corrupt("key length %d exceeds %d", keyLen, maxKeyBytes)
	}
	if payloadLen64 > MaxEntryBytes {
		return 0, 0, corrupt("payload length %d exceeds %d", payloadLen64, MaxEntryBytes)
	}
	payloadLen = int64(payloadLen64)
	if want := headerSize + keyLen + payloadLen; size >= 0 && size != want {
		return 0, 0, corrupt("file is %d bytes, header says %d", size, want)
	}
	return keyLen, payloadLen, nil
}

// decodeEntry checks a whole entry file and returns its key echo and payload. When
// wantKey is non-nil the echo must equal it.
func decodeEntry(data, wantKey []byte) (key, payload []byte, err error) {
	keyLen, _, err := parseHeader(data, int64(len(data)))
	if err != nil {
		return nil, nil, err
	}
	key = data[headerSize : headerSize+keyLen]
	payload = data[headerSize+keyLen:]
	if got, want := entrySum(data, key, payload), binary.LittleEndian.Uint64(data[24:]); got != want {
		return nil, nil, corrupt("checksum %016x, header says %016x", got, want)
	}
	if wantKey != nil && !bytes.Equal(key, wantKey) {
		return nil, nil, corrupt("entry belongs to another key")
	}
	return key, payload, nil
}
