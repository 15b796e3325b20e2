package autotune

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Key identifies a record: a SpecCacheKey folded into 16 bytes (32 hex digits)
// and an adapter id. Keys are made by NewKey or read from a store file; the zero
// Key is not a valid key.
type Key struct {
	hex, adapter string
}

// NewKey folds spec into 16 bytes exactly as vyre's autotune store does: bytes
// 0..7 are SpecHash and bytes 8..15 ShaderHash, little-endian; then byte i
// (i < 8) is XORed with byte i of the workgroup fold (x ^ y<<16 ^ z<<32) and byte
// 8+i with byte i of BindingSig. The key is those bytes in lowercase hex, with
// adapter beside it.
func NewKey(spec ir.SpecCacheKey, adapter string) Key {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], spec.SpecHash)
	binary.LittleEndian.PutUint64(b[8:], spec.ShaderHash)
	var wg uint64
	for i, dim := range spec.WorkgroupSize {
		wg ^= uint64(dim) << (16 * i)
	}
	for i := 0; i < 8; i++ {
		b[i] ^= byte(wg >> (8 * i))
		b[8+i] ^= byte(spec.BindingSig >> (8 * i))
	}
	return Key{hex: hex.EncodeToString(b[:]), adapter: adapter}
}

// KeyFor is the key of the record for program p specialized by spec on adapter
// (the host uses DeviceAdapter, "vulkan/5f0c…"): NewKey of p's digest,
// its binding signature, its declared workgroup size and spec's hash. A record
// tunes a program variant, so the declared size, not a tuned one, is in the key.
func KeyFor(p *ir.Program, spec ir.SpecMap, adapter string) Key {
	return NewKey(ir.NewSpecCacheKey(p.Digest(), ir.BindingSignature(p), p.WorkgroupSize, spec), adapter)
}

// OptionsKey is the key of the record of a corpus kernel's searched options
// (matmul_tc's tile: the options that build its program, see kernels.Option)
// on adapter: the first 16 bytes of the SHA-256 of "kiln.options", the kernel's
// name and its fixed options (fixed, such as type=bf16; every value, element
// types included, in name order). The searched options' values are the
// record's params; the tile they build is a program of its own, whose
// workgroup size and tunables are that program's KeyFor record.
func OptionsKey(kernel string, fixed ir.SpecMap, adapter string) Key {
	h := sha256.New()
	h.Write([]byte("kiln.options\x00" + kernel + "\x00"))
	var buf [8]byte
	for _, name := range fixed.Names() {
		v, _ := fixed.Get(name)
		h.Write([]byte(name + "\x00"))
		binary.LittleEndian.PutUint64(buf[:], v.CacheHash())
		h.Write(buf[:])
	}
	return Key{hex: hex.EncodeToString(h.Sum(nil)[:16]), adapter: adapter}
}

// Hex returns the folded digest as 32 lowercase hex digits.
func (k Key) Hex() string { return k.hex }

// Adapter returns the adapter id.
func (k Key) Adapter() string { return k.adapter }

// String is "hex@adapter".
func (k Key) String() string { return k.hex + "@" + k.adapter }

// validHex reports whether s is 32 lowercase hex digits.
func validHex(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// DeviceAdapter is the adapter id the host keys records by: the backend's id
// and the adapter's device fingerprint, "vulkan/5f0c…". Unlike the routing name
// "vulkan:0", it follows the device, not its index, so a record survives GPU
// reordering, a config directory synced between machines, and the fleet tier.
func DeviceAdapter(backendID, fingerprint string) string { return backendID + "/" + fingerprint }

// SplitDeviceAdapter undoes DeviceAdapter; ok is false for an adapter id of
// another form.
func SplitDeviceAdapter(adapter string) (backendID, fingerprint string, ok bool) {
	i := strings.LastIndexByte(adapter, '/')
	if i <= 0 || i == len(adapter)-1 {
		return "", "", false
	}
	return adapter[:i], adapter[i+1:], true
}

// ParseKey rebuilds a Key from its Hex and Adapter, as the fleet tier stores
// them; the hex must be 32 lowercase hex digits.
func ParseKey(hex, adapter string) (Key, error) {
	if !validHex(hex) {
		return Key{}, fmt.Errorf("autotune key %q is not 32 lowercase hex digits", hex)
	}
	return Key{hex: hex, adapter: adapter}, nil
}
