package ir

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
)

// SpecKind is the variant of a SpecValue.
type SpecKind uint8

// The SpecValue variants. The numbering is the variant tag in CacheHash; never
// renumber it.
const (
	SpecKindU32 SpecKind = iota
	SpecKindI32
	SpecKindF32
	SpecKindBool
	SpecKindDType
)

// SpecValue is one specialization value: a u32, i32, f32 (kept and hashed by its
// bits), bool, or an element type (dtype).
type SpecValue struct {
	kind SpecKind
	bits uint32
}

// SpecU32 is a u32 specialization value.
func SpecU32(v uint32) SpecValue { return SpecValue{SpecKindU32, v} }

// SpecI32 is an i32 specialization value.
func SpecI32(v int32) SpecValue { return SpecValue{SpecKindI32, uint32(v)} }

// SpecF32 is an f32 specialization value; it is hashed by its bit pattern.
func SpecF32(v float32) SpecValue { return SpecValue{SpecKindF32, math.Float32bits(v)} }

// SpecBool is a bool specialization value.
func SpecBool(v bool) SpecValue {
	if v {
		return SpecValue{SpecKindBool, 1}
	}
	return SpecValue{SpecKindBool, 0}
}

// SpecDType is an element-type specialization value.
func SpecDType(t Type) SpecValue { return SpecValue{SpecKindDType, uint32(t)} }

// Kind returns the value's variant.
func (v SpecValue) Kind() SpecKind { return v.kind }

// Bits returns the value's 32-bit pattern (the type's tag for a dtype).
func (v SpecValue) Bits() uint32 { return v.bits }

// Literal returns the scalar as a Literal; ok is false for a dtype.
func (v SpecValue) Literal() (l Literal, ok bool) {
	switch v.kind {
	case SpecKindU32:
		return Literal{U32, v.bits}, true
	case SpecKindI32:
		return Literal{I32, v.bits}, true
	case SpecKindF32:
		return Literal{F32, v.bits}, true
	case SpecKindBool:
		return Literal{Bool, v.bits}, true
	}
	return Literal{}, false
}

// DType returns the element type of a dtype value; ok is false otherwise.
func (v SpecValue) DType() (t Type, ok bool) {
	if v.kind != SpecKindDType {
		return 0, false
	}
	return Type(v.bits), true
}

// String formats the value for messages ("u32 7", "dtype f32").
func (v SpecValue) String() string {
	if t, ok := v.DType(); ok {
		return "dtype " + t.String()
	}
	l, _ := v.Literal()
	return l.Type.String() + " " + l.String()
}

// CacheHash is the value's 64-bit cache contribution: the variant tag in the low
// byte and the 32-bit payload (the dtype tag for a dtype) above it, so values of
// different variants never collide.
func (v SpecValue) CacheHash() uint64 {
	payload := v.bits
	if v.kind == SpecKindDType {
		payload = DTypeTag(Type(v.bits))
	}
	return uint64(v.kind) | uint64(payload)<<8
}

// dtypeTags gives every Type a stable tag for SpecDType hashes and the wire. A type
// added without a tag here fails TestDTypeTagCoversEveryType.
var dtypeTags = map[Type]uint32{
	U32:  0x01,
	I32:  0x02,
	Bool: 0x06,
	F32:  0x0B,
	F16:  0x09,
	BF16: 0x0A,
}

// DTypeTag returns the stable tag of t; unknown types get 0xFFFFFFFF.
func DTypeTag(t Type) uint32 {
	if tag, ok := dtypeTags[t]; ok {
		return tag
	}
	return 0xFFFFFFFF
}

// SpecMap is an ordered map from parameter name to SpecValue. The zero value is an
// empty map ready to use. Its hash and iteration order do not depend on the order
// of insertion.
type SpecMap struct {
	entries map[string]SpecValue
}

// Set inserts or replaces name's value.
func (m *SpecMap) Set(name string, v SpecValue) {
	if m.entries == nil {
		m.entries = make(map[string]SpecValue)
	}
	m.entries[name] = v
}

// Get returns name's value.
func (m SpecMap) Get(name string) (SpecValue, bool) {
	v, ok := m.entries[name]
	return v, ok
}

// Len returns the number of entries.
func (m SpecMap) Len() int { return len(m.entries) }

// Names returns the names in sorted order.
func (m SpecMap) Names() []string {
	names := make([]string, 0, len(m.entries))
	for n := range m.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Merge returns a new map of m's entries and other's, other's winning where
// both set a name; m and other are left as they are.
func (m SpecMap) Merge(other SpecMap) SpecMap {
	var out SpecMap
	for _, src := range []SpecMap{m, other} {
		for name, v := range src.entries {
			out.Set(name, v)
		}
	}
	return out
}

// CacheHash folds the entries, in name order, into a 64-bit FNV-1a hash: each name's
// bytes, a zero separator (names never contain one), then the value's CacheHash in
// little-endian order.
func (m SpecMap) CacheHash() uint64 {
	const offset, prime = 0xcbf29ce484222325, 0x100000001b3
	h := uint64(offset)
	mix := func(b byte) { h ^= uint64(b); h *= prime }
	var buf [8]byte
	for _, name := range m.Names() {
		for i := 0; i < len(name); i++ {
			mix(name[i])
		}
		mix(0)
		binary.LittleEndian.PutUint64(buf[:], m.entries[name].CacheHash())
		for _, b := range buf {
			mix(b)
		}
	}
	return h
}

// SpecCacheKey is a pipeline identity extended with specialization values.
type SpecCacheKey struct {
	ShaderHash    uint64
	BindingSig    uint64
	WorkgroupSize [3]uint32
	SpecHash      uint64
}

// NewSpecCacheKey folds specs into a key for the given shader and binding layout.
func NewSpecCacheKey(shaderHash, bindingSig uint64, workgroupSize [3]uint32, specs SpecMap) SpecCacheKey {
	return SpecCacheKey{
		ShaderHash:    shaderHash,
		BindingSig:    bindingSig,
		WorkgroupSize: workgroupSize,
		SpecHash:      specs.CacheHash(),
	}
}

// artifactKeyDomain separates artifact keys from any other SHA-256 use.
const artifactKeyDomain = "kiln-specialization-artifact-key-v1"

// ArtifactKey is the hex SHA-256 key of a specialization artifact identified by
// (cache version, specialization hash, backend fingerprint). Variable-length fields
// are length-prefixed, so ("ab", "cd") and ("abc", "d") never collide.
func ArtifactKey(cacheVersion uint32, specHash, backendFingerprint string) string {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(artifactKeyDomain))
	h.Write([]byte{0})
	binary.LittleEndian.PutUint32(n[:4], cacheVersion)
	h.Write(n[:4])
	for _, field := range []string{specHash, backendFingerprint} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write([]byte(field))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// String formats the literal's value ("1.5", "-3", "true", "7").
func (l Literal) String() string {
	switch l.Type {
	case F32, F16, BF16:
		return fmt.Sprint(l.Float32())
	case I32:
		return fmt.Sprint(l.I32())
	case Bool:
		return fmt.Sprint(l.Bool())
	}
	return fmt.Sprint(l.Bits)
}
