package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
)

// MaxEntryBytes bounds the payload of one entry: [DiskCache.Write] refuses a
// larger blob and Read refuses to load a larger file.
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

// MaxEntryFileBytes bounds an entry file: the header, the longest key and the
// largest payload. A file or remote object over it is never read.
const MaxEntryFileBytes = maxFileBytes

// MissReason says why a read found no usable entry.
type MissReason string

// The reasons a read misses. Every reason but [MissAbsent] means a file or
// object was there and was not used.
const (
	// MissNone: not a miss; the read hit.
	MissNone MissReason = ""
	// MissAbsent: there is no entry for the key.
	MissAbsent MissReason = "absent"
	// MissCorrupt: the entry fails its magic, format, lengths or checksum.
	MissCorrupt MissReason = "corrupt"
	// MissTruncated: the entry is shorter than its header says.
	MissTruncated MissReason = "truncated"
	// MissForeignKey: a valid entry, but of another key (its key echo differs).
	MissForeignKey MissReason = "foreign-key"
	// MissOversize: larger than any entry can be ([MaxEntryFileBytes]).
	MissOversize MissReason = "oversize"
	// MissUnavailable: the fleet tier behind the cache (package remote)
	// failed, ran past its deadline, or was skipped while down.
	MissUnavailable MissReason = "unavailable"
)

// missReasons lists the reasons in the order Stats and kiln cache stats show
// them.
var missReasons = []MissReason{MissAbsent, MissCorrupt, MissTruncated, MissForeignKey, MissOversize, MissUnavailable}

// corruptError says why an entry file is not a valid entry.
type corruptError struct {
	kind   MissReason
	reason string
}

func (e *corruptError) Error() string { return e.reason }

func corrupt(kind MissReason, format string, args ...any) error {
	return &corruptError{kind, fmt.Sprintf(format, args...)}
}

// missReason classifies an error of parseHeader or decodeEntry.
func missReason(err error) MissReason {
	var c *corruptError
	if errors.As(err, &c) {
		return c.kind
	}
	return MissCorrupt
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
		return 0, 0, corrupt(MissTruncated, "truncated: %d bytes, shorter than the %d-byte header", len(head), headerSize)
	}
	if string(head[:8]) != entryMagic {
		return 0, 0, corrupt(MissCorrupt, "not a kiln pipeline entry (magic %q)", head[:8])
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != entryFormat {
		return 0, 0, corrupt(MissCorrupt, "entry format %d, want %d", v, entryFormat)
	}
	keyLen = int64(binary.LittleEndian.Uint32(head[12:]))
	payloadLen64 := binary.LittleEndian.Uint64(head[16:])
	if keyLen > maxKeyBytes {
		return 0, 0, corrupt(MissCorrupt, "key length %d exceeds %d", keyLen, maxKeyBytes)
	}
	if payloadLen64 > MaxEntryBytes {
		return 0, 0, corrupt(MissCorrupt, "payload length %d exceeds %d", payloadLen64, MaxEntryBytes)
	}
	payloadLen = int64(payloadLen64)
	if want := headerSize + keyLen + payloadLen; size >= 0 && size < want {
		return 0, 0, corrupt(MissTruncated, "truncated: %d bytes, header says %d", size, want)
	} else if size > want {
		return 0, 0, corrupt(MissCorrupt, "file is %d bytes, header says %d", size, want)
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
		return nil, nil, corrupt(MissCorrupt, "checksum %016x, header says %016x", got, want)
	}
	if wantKey != nil && !bytes.Equal(key, wantKey) {
		return nil, nil, corrupt(MissForeignKey, "entry belongs to another key")
	}
	return key, payload, nil
}

// EncodeEntry returns the entry file for key and payload: what [DiskCache]
// stores, and what the fleet tier uploads as an object named key.Hex().
func EncodeEntry(key Key, payload []byte) ([]byte, error) {
	if len(payload) > MaxEntryBytes {
		return nil, fmt.Errorf("pipeline blob of %d bytes for backend %q exceeds the %d-byte cache entry limit. Fix: the backend must return a smaller blob, or none", len(payload), key.BackendID, MaxEntryBytes)
	}
	enc := key.Encode()
	if len(enc) > maxKeyBytes {
		return nil, fmt.Errorf("pipeline cache key for backend %q encodes to %d bytes, over %d. Fix: shorten the backend id and device fingerprint", key.BackendID, len(enc), maxKeyBytes)
	}
	var b bytes.Buffer
	b.Grow(headerSize + len(enc) + len(payload))
	if err := writeEntry(&b, enc, payload); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DecodeEntry checks data, an entry file or object that should hold key's
// entry, and returns its payload; otherwise why it cannot be used (never
// [MissNone] or [MissAbsent]). Nothing but a whole, checksummed entry whose key
// echo is exactly key is ever a hit.
func DecodeEntry(data []byte, key Key) ([]byte, MissReason) {
	if len(data) > maxFileBytes {
		return nil, MissOversize
	}
	_, payload, err := decodeEntry(data, key.Encode())
	if err != nil {
		return nil, missReason(err)
	}
	return payload, MissNone
}

// ParseEntry checks data, an entry of a key not known beforehand (an object
// listed in the fleet tier), and returns its key and payload, or why it cannot
// be used. The caller must still check that the key's [Key.Hex] is the name the
// entry was found under.
func ParseEntry(data []byte) (Key, []byte, MissReason) {
	if len(data) > maxFileBytes {
		return Key{}, nil, MissOversize
	}
	enc, payload, err := decodeEntry(data, nil)
	if err != nil {
		return Key{}, nil, missReason(err)
	}
	key, err := decodeKey(enc)
	if err != nil {
		return Key{}, nil, MissCorrupt
	}
	return key, payload, MissNone
}
