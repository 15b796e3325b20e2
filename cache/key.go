package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// KeyVersion is the version of the key encoding. Raising it changes every key, so
// every entry written under an older version is never read again and ages out
// through trimming. Version 2 replaced version 1's SHA-256 binding-layout hash by
// ir.BindingSignature; version 3 added PluginVersion.
const KeyVersion uint32 = 3

// maxKeyBytes bounds an encoded key, which bounds the backend id and device
// fingerprint; an entry header claiming a longer key is corrupt.
const maxKeyBytes = 4096

// Key identifies a compiled pipeline. Two compilations share an entry only when
// every field is equal; a change of any field, or of [KeyVersion], gives a
// different key.
type Key struct {
	// ProgramDigest is the digest of the program's canonical encoding.
	ProgramDigest [32]byte
	// BindingSignature is ir.BindingSignature of the program: its buffers'
	// bindings, element types, accesses and fixed counts.
	BindingSignature uint64
	// PushConstantSize is the push-constant range in bytes (0 when none).
	PushConstantSize uint32
	// WorkgroupSize is the size the pipeline was compiled for, after any override.
	WorkgroupSize [3]uint32
	// Features are the capability bits the pipeline assumes.
	Features FeatureFlags
	// SpecHash is ir.SpecMap.CacheHash of the specialization values compiled in
	// (the hash of the empty map when there are none).
	SpecHash uint64
	// BackendID names the backend that compiled it ("vulkan").
	BackendID string
	// PluginVersion is the version the backend's plugin reported: a blob of
	// compiled code is only ever handed back to the build that made it.
	PluginVersion string
	// DeviceFingerprint is the adapter's identity fingerprint.
	DeviceFingerprint string
}

// Encode returns the key's unambiguous encoding: [KeyVersion] as 4
// little-endian bytes, then every field in declaration order as a 4-byte
// little-endian length followed by its bytes (integers little-endian, the
// workgroup size as three u32s). Because every field carries its length, no two
// different keys encode alike. Entries echo this encoding in their header.
func (k Key) Encode() []byte { return k.encode(KeyVersion) }

func (k Key) encode(version uint32) []byte {
	out := binary.LittleEndian.AppendUint32(nil, version)
	field := func(b []byte) {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	field(k.ProgramDigest[:])
	field(binary.LittleEndian.AppendUint64(nil, k.BindingSignature))
	field(binary.LittleEndian.AppendUint32(nil, k.PushConstantSize))
	var wg []byte
	for _, n := range k.WorkgroupSize {
		wg = binary.LittleEndian.AppendUint32(wg, n)
	}
	field(wg)
	field(binary.LittleEndian.AppendUint32(nil, uint32(k.Features)))
	field(binary.LittleEndian.AppendUint64(nil, k.SpecHash))
	field([]byte(k.BackendID))
	field([]byte(k.PluginVersion))
	field([]byte(k.DeviceFingerprint))
	return out
}

// Digest is the SHA-256 of [Key.Encode].
func (k Key) Digest() [32]byte { return sha256.Sum256(k.Encode()) }

// Hex is [Key.Digest] in lowercase hex: the entry's file name without its
// extension, and its object name in the fleet tier.
func (k Key) Hex() string {
	d := k.Digest()
	return hex.EncodeToString(d[:])
}

// decodeKey parses Encode's output; it accepts only the current KeyVersion, the
// exact field lengths and no trailing bytes.
func decodeKey(b []byte) (Key, error) {
	var k Key
	if len(b) < 4 {
		return k, errors.New("key shorter than its version")
	}
	if v := binary.LittleEndian.Uint32(b); v != KeyVersion {
		return k, fmt.Errorf("key version %d, want %d", v, KeyVersion)
	}
	b = b[4:]
	next := func(fixed int) ([]byte, error) {
		if len(b) < 4 {
			return nil, errors.New("key truncated before a field length")
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, fmt.Errorf("key field of %d bytes runs past the key's end", n)
		}
		if fixed >= 0 && int(n) != fixed {
			return nil, fmt.Errorf("key field of %d bytes, want %d", n, fixed)
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		return v, nil
	}
	fields := []int{32, 8, 4, 12, 4, 8, -1, -1, -1}
	vals := make([][]byte, len(fields))
	for i, fixed := range fields {
		v, err := next(fixed)
		if err != nil {
			return Key{}, err
		}
		vals[i] = v
	}
	if len(b) != 0 {
		return Key{}, fmt.Errorf("%d bytes after the key's last field", len(b))
	}
	copy(k.ProgramDigest[:], vals[0])
	k.BindingSignature = binary.LittleEndian.Uint64(vals[1])
	k.PushConstantSize = binary.LittleEndian.Uint32(vals[2])
	for i := range k.WorkgroupSize {
		k.WorkgroupSize[i] = binary.LittleEndian.Uint32(vals[3][4*i:])
	}
	k.Features = FeatureFlags(binary.LittleEndian.Uint32(vals[4]))
	k.SpecHash = binary.LittleEndian.Uint64(vals[5])
	k.BackendID = string(vals[6])
	k.PluginVersion = string(vals[7])
	k.DeviceFingerprint = string(vals[8])
	return k, nil
}

// ProgramDigest is the SHA-256 of p's canonical encoding (ir.Encode): the
// [Key]'s ProgramDigest, and what [DiskCache.InvalidateImpacted]'s digests
// name. It fails only for a program ir.Encode refuses.
func ProgramDigest(p *ir.Program) ([32]byte, error) {
	enc, err := ir.Encode(p)
	if err != nil {
		return [32]byte{}, fmt.Errorf("pipeline cache: digest of program: %w", err)
	}
	return sha256.Sum256(enc), nil
}
