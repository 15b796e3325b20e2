package cache

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestFeatureFlagBitsMatchTheSeed(t *testing.T) {
	bits := []FeatureFlags{FeatureSubgroupOps, FeatureF16, FeatureBF16, FeatureTensorCores, FeatureAsyncCompute,
		FeaturePushConstants, FeatureIndirectDispatch, FeatureSpeculative, FeaturePersistentThread}
	for i, f := range bits {
		if f.Bits() != 1<<i {
			t.Errorf("flag %v = %#x, want %#x", f, f.Bits(), 1<<i)
		}
	}
}

func TestFeatureFlagContainsAndUnion(t *testing.T) {
	a := FeatureSubgroupOps.Union(FeatureF16)
	if !a.Contains(FeatureSubgroupOps) || !a.Contains(FeatureF16) || !a.Contains(a) || !a.Contains(0) {
		t.Fatalf("%v misses one of its bits", a)
	}
	if a.Contains(FeatureTensorCores) || a.Contains(FeatureF16.Union(FeatureTensorCores)) {
		t.Fatalf("%v contains bits it does not have", a)
	}
	if a.Bits() != 0b11 {
		t.Fatalf("Bits = %#b", a.Bits())
	}
	if got := a.Union(1 << 20).String(); got != "subgroup_ops|f16|0x100000" {
		t.Fatalf("String = %q", got)
	}
	if FeatureFlags(0).String() != "none" {
		t.Fatal("empty set does not print as none")
	}
}

func sampleKey() Key {
	return Key{
		ProgramDigest:     [32]byte{1, 2, 3},
		BindingSignature:  0x0405060708090a0b,
		PushConstantSize:  16,
		WorkgroupSize:     [3]uint32{64, 1, 1},
		Features:          FeatureSubgroupOps,
		SpecHash:          0xfeedface,
		BackendID:         "vulkan",
		PluginVersion:     "1.2.0",
		DeviceFingerprint: "0011223344556677",
	}
}

// TestEveryKeyFieldChangesTheKey has one case per field: changing only that field
// must change the encoding and the digest.
func TestEveryKeyFieldChangesTheKey(t *testing.T) {
	cases := map[string]func(*Key){
		"ProgramDigest":     func(k *Key) { k.ProgramDigest[31] ^= 1 },
		"BindingSignature":  func(k *Key) { k.BindingSignature ^= 1 },
		"PushConstantSize":  func(k *Key) { k.PushConstantSize = 32 },
		"WorkgroupSize.x":   func(k *Key) { k.WorkgroupSize[0] = 128 },
		"WorkgroupSize.y":   func(k *Key) { k.WorkgroupSize[1] = 2 },
		"WorkgroupSize.z":   func(k *Key) { k.WorkgroupSize[2] = 2 },
		"Features":          func(k *Key) { k.Features = k.Features.Union(FeatureF16) },
		"SpecHash":          func(k *Key) { k.SpecHash++ },
		"BackendID":         func(k *Key) { k.BackendID = "cuda" },
		"PluginVersion":     func(k *Key) { k.PluginVersion = "1.2.1" },
		"DeviceFingerprint": func(k *Key) { k.DeviceFingerprint = "8899aabbccddeeff" },
	}
	base := sampleKey()
	for field, change := range cases {
		t.Run(field, func(t *testing.T) {
			k := base
			change(&k)
			if bytes.Equal(k.Encode(), base.Encode()) || k.Hex() == base.Hex() {
				t.Fatalf("changing %s left the key unchanged", field)
			}
		})
	}
}

func TestKeyVersionChangesTheKey(t *testing.T) {
	k := sampleKey()
	if bytes.Equal(k.encode(KeyVersion), k.encode(KeyVersion+1)) {
		t.Fatal("a new key version gives the same encoding")
	}
	if !bytes.Equal(k.Encode(), k.encode(KeyVersion)) {
		t.Fatal("Encode does not use the current KeyVersion")
	}
}

func TestKeyEncodingIsUnambiguous(t *testing.T) {
	a, b := sampleKey(), sampleKey()
	a.BackendID, a.DeviceFingerprint = "ab", "c"
	b.BackendID, b.DeviceFingerprint = "a", "bc"
	if a.Hex() == b.Hex() {
		t.Fatal(`("ab", "c") and ("a", "bc") share a key`)
	}
	a, b = sampleKey(), sampleKey()
	a.BackendID, a.PluginVersion = "vulkan1", ".0"
	b.BackendID, b.PluginVersion = "vulkan", "1.0"
	if a.Hex() == b.Hex() {
		t.Fatal(`("vulkan1", ".0") and ("vulkan", "1.0") share a key`)
	}
}

func TestKeyEncodingRoundTrips(t *testing.T) {
	k := sampleKey()
	got, err := decodeKey(k.Encode())
	if err != nil || got != k {
		t.Fatalf("decodeKey = %+v, %v; want %+v", got, err, k)
	}
	enc := k.Encode()
	for name, bad := range map[string][]byte{
		"trailing byte": append(append([]byte(nil), enc...), 0),
		"truncated":     enc[:len(enc)-1],
		"old version":   k.encode(KeyVersion + 1),
		"empty":         nil,
	} {
		if _, err := decodeKey(bad); err == nil {
			t.Errorf("%s: decodeKey accepted it", name)
		}
	}
}

func TestProgramDigest(t *testing.T) {
	build := func(name string) *ir.Program {
		b := ir.NewBuilder(name, 64, 1, 1)
		out := b.Buffer("out", ir.U32, ir.Write)
		b.Store(out, ir.GlobalID(0), ir.LitU32(1))
		return b.MustBuild()
	}
	a, err := ProgramDigest(build("p"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ir.Encode(build("p"))
	if err != nil {
		t.Fatal(err)
	}
	if a != sha256.Sum256(enc) {
		t.Fatal("ProgramDigest is not the SHA-256 of the canonical encoding")
	}
	if b, _ := ProgramDigest(build("q")); b == a {
		t.Fatal("a renamed program has the same digest")
	}
	if _, err := ProgramDigest(&ir.Program{Name: "bad", WorkgroupSize: [3]uint32{1, 1, 1}, Body: []ir.Stmt{ir.LetStmt{Name: "x", Value: ir.Expr(nil)}}}); err == nil {
		t.Fatal("an unencodable program has a digest")
	}
}
