package pluginapi

import (
	"testing"
)

func TestCapabilityScoreTable(t *testing.T) {
	cases := []struct {
		name string
		p    DeviceProfile
		want int
	}{
		{"empty", DeviceProfile{}, 0},
		{"storage binding size", DeviceProfile{MaxStorageBufferBindingSize: 1}, 16},
		{"invocations 63", DeviceProfile{MaxInvocationsPerWorkgroup: 63}, 0},
		{"invocations 64", DeviceProfile{MaxInvocationsPerWorkgroup: 64}, 8},
		{"invocations 255", DeviceProfile{MaxInvocationsPerWorkgroup: 255}, 8},
		{"invocations 256", DeviceProfile{MaxInvocationsPerWorkgroup: 256}, 12},
		{"subgroup size", DeviceProfile{SubgroupSize: 32}, 8},
		{"subgroup ops", DeviceProfile{SupportsSubgroupOps: true}, 8},
		{"shuffle", DeviceProfile{HasSubgroupShuffle: true}, 4},
		{"shared memory", DeviceProfile{HasSharedMemory: true}, 4},
		{"f16", DeviceProfile{SupportsF16: true}, 2},
		{"bf16", DeviceProfile{SupportsBF16: true}, 2},
		{"tensor cores", DeviceProfile{SupportsTensorCores: true}, 4},
		{"indirect dispatch", DeviceProfile{SupportsIndirectDispatch: true}, 2},
		{"device timestamps", DeviceProfile{SupportsDeviceTimestamps: true}, 2},
		{"hardware counters", DeviceProfile{SupportsHardwareCounters: true}, 2},
		{"bandwidth and timing do not score", DeviceProfile{MemBWGBps: 900, TimingQuality: HardwareCounters}, 0},
		{"everything", DeviceProfile{
			MaxStorageBufferBindingSize: 1 << 30, MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32,
			SupportsSubgroupOps: true, HasSubgroupShuffle: true, HasSharedMemory: true, SupportsF16: true,
			SupportsBF16: true, SupportsTensorCores: true, SupportsIndirectDispatch: true,
			SupportsDeviceTimestamps: true, SupportsHardwareCounters: true,
		}, 66},
	}
	for _, c := range cases {
		if got := c.p.CapabilityScore(); got != c.want {
			t.Errorf("%s: CapabilityScore() = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFingerprintIsStable(t *testing.T) {
	id := DeviceIdentity{Vendor: "kiln", Device: "CPU reference interpreter", DriverVersion: "1.0.0", DeviceType: "cpu"}
	// Computed outside Go: sha256("kiln-device-identity-v1" + for each field: its
	// length as a little-endian uint64, then its bytes), first 16 bytes in hex.
	const want = "fa10bea9fb147374b5b0ad2c313a2210"
	got := id.Fingerprint()
	if len(got) != 32 {
		t.Fatalf("Fingerprint() = %q, want 32 hex digits", got)
	}
	if got != id.Fingerprint() {
		t.Fatal("Fingerprint() differs between calls")
	}
	if got != want {
		t.Errorf("Fingerprint() = %s, want %s (the fingerprint keys stored caches; it must never change)", got, want)
	}
}

func TestFingerprintSeparatesFields(t *testing.T) {
	base := DeviceIdentity{Vendor: "v", Device: "d", DriverVersion: "1", DeviceType: "gpu"}
	variants := []DeviceIdentity{
		{Vendor: "w", Device: "d", DriverVersion: "1", DeviceType: "gpu"},
		{Vendor: "v", Device: "e", DriverVersion: "1", DeviceType: "gpu"},
		{Vendor: "v", Device: "d", DriverVersion: "2", DeviceType: "gpu"},
		{Vendor: "v", Device: "d", DriverVersion: "1", DeviceType: "cpu"},
		// Moving a byte between adjacent fields must change the fingerprint.
		{Vendor: "vd", Device: "", DriverVersion: "1", DeviceType: "gpu"},
	}
	seen := map[string]DeviceIdentity{base.Fingerprint(): base}
	for _, v := range variants {
		fp := v.Fingerprint()
		if other, dup := seen[fp]; dup {
			t.Errorf("%+v and %+v share fingerprint %s", v, other, fp)
		}
		seen[fp] = v
	}
}

func TestTimingQualityOrderAndNames(t *testing.T) {
	order := []TimingQuality{HostOnly, HostEnqueueWait, DeviceTimestamps, HardwareCounters}
	names := []string{"HostOnly", "HostEnqueueWait", "DeviceTimestamps", "HardwareCounters"}
	for i, q := range order {
		if int(q) != i {
			t.Errorf("%s = %d, want %d", q, int(q), i)
		}
		if q.String() != names[i] {
			t.Errorf("TimingQuality(%d).String() = %q, want %q", i, q.String(), names[i])
		}
	}
	if got := TimingQuality(9).String(); got != "TimingQuality(9)" {
		t.Errorf("TimingQuality(9).String() = %q", got)
	}
	if got := TimingQuality(-1).String(); got != "TimingQuality(-1)" {
		t.Errorf("TimingQuality(-1).String() = %q", got)
	}
}

// Identical GPUs have distinct device fingerprints (their Instance, a UUID,
// differs) and one model fingerprint, which keys the shared pipeline cache.
func TestInstanceSeparatesIdenticalDevices(t *testing.T) {
	a := DeviceIdentity{Vendor: "NVIDIA", Device: "NVIDIA H200 (sm_90)", DriverVersion: "580", DeviceType: "discrete-gpu", Instance: "GPU-a6b56e12"}
	b := a
	b.Instance = "GPU-b7988894"
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("two GPUs with different UUIDs share a device fingerprint")
	}
	if a.ModelFingerprint() != b.ModelFingerprint() {
		t.Fatal("two GPUs of one model and driver have different model fingerprints")
	}
	model := a
	model.Instance = ""
	if model.Fingerprint() != a.ModelFingerprint() || a.Fingerprint() == a.ModelFingerprint() {
		t.Fatal("without an Instance the device fingerprint must be the model fingerprint, with one it must differ")
	}
	again := DeviceIdentity{Vendor: "NVIDIA", Device: "NVIDIA H200 (sm_90)", DriverVersion: "580", DeviceType: "discrete-gpu", Instance: "GPU-a6b56e12"}
	if again.Fingerprint() != a.Fingerprint() {
		t.Fatal("the device fingerprint is not stable")
	}
}
