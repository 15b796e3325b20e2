package pluginapi

import (
	"errors"
	"testing"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/internal/wire/wiretest"
	"github.com/kiln-dev/kiln/ir"
)

// TestSpecRoundTripsEveryKind pins the plugin's side of the specialization
// map: the entries of every kind (as host/client's test of the same name
// checks the host sends them) come back as the map.
func TestSpecRoundTripsEveryKind(t *testing.T) {
	m, entries := wiretest.EverySpecKind()
	back, err := specFromProto(entries)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != m.Len() || back.CacheHash() != m.CacheHash() {
		t.Fatalf("the entries decoded to %d entries hash %x, want %d entries hash %x", back.Len(), back.CacheHash(), m.Len(), m.CacheHash())
	}
	for _, name := range m.Names() {
		want, _ := m.Get(name)
		got, _ := back.Get(name)
		if got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}

func TestSpecKindNumberingMatchesIR(t *testing.T) {
	pairs := map[ir.SpecKind]kilnpb.SpecKind{
		ir.SpecKindU32: kilnpb.SpecKind_SPEC_KIND_U32, ir.SpecKindI32: kilnpb.SpecKind_SPEC_KIND_I32,
		ir.SpecKindF32: kilnpb.SpecKind_SPEC_KIND_F32, ir.SpecKindBool: kilnpb.SpecKind_SPEC_KIND_BOOL,
		ir.SpecKindDType: kilnpb.SpecKind_SPEC_KIND_DTYPE,
	}
	for k, w := range pairs {
		if int32(k) != int32(w) {
			t.Errorf("ir.SpecKind %d travels as %d", k, w)
		}
	}
}

func TestSpecFromProtoRejects(t *testing.T) {
	cases := map[string][]*kilnpb.SpecEntry{
		"duplicate name": {{Name: "a", Kind: kilnpb.SpecKind_SPEC_KIND_U32}, {Name: "a", Kind: kilnpb.SpecKind_SPEC_KIND_U32, Bits: 1}},
		"bool bits 2":    {{Name: "b", Kind: kilnpb.SpecKind_SPEC_KIND_BOOL, Bits: 2}},
		"unknown dtype":  {{Name: "t", Kind: kilnpb.SpecKind_SPEC_KIND_DTYPE, Bits: 0xFFFF}},
		"unknown kind":   {{Name: "k", Kind: kilnpb.SpecKind(42)}},
	}
	for name, entries := range cases {
		_, err := specFromProto(entries)
		if !isRejected(err) {
			t.Errorf("%s: got %v, want a RejectedError", name, err)
		}
	}
}

func TestCheckSpec(t *testing.T) {
	b := ir.NewBuilder("t.spec", 1, 1, 1)
	b.Param("a", ir.F32, ir.LitF32(1))
	p := b.Program()
	var ok, unknown, wrongType, dtype ir.SpecMap
	ok.Set("a", ir.SpecF32(2))
	unknown.Set("z", ir.SpecF32(2))
	wrongType.Set("a", ir.SpecU32(2))
	dtype.Set("a", ir.SpecDType(ir.F32))
	if err := checkSpec(p, ok); err != nil {
		t.Errorf("matching value rejected: %v", err)
	}
	for name, m := range map[string]ir.SpecMap{"unknown name": unknown, "wrong type": wrongType, "dtype": dtype} {
		if err := checkSpec(p, m); !isRejected(err) {
			t.Errorf("%s: got %v, want a RejectedError", name, err)
		}
	}
}

func TestCheckWorkgroupOverride(t *testing.T) {
	for _, wg := range [][3]uint32{{0, 0, 0}, {64, 1, 1}, {8, 8, 4}} {
		if err := checkWorkgroupOverride(wg); err != nil {
			t.Errorf("%v rejected: %v", wg, err)
		}
	}
	for _, wg := range [][3]uint32{{64, 0, 0}, {0, 1, 1}, {1, 0, 1}} {
		if err := checkWorkgroupOverride(wg); !isRejected(err) {
			t.Errorf("%v: got %v, want a RejectedError", wg, err)
		}
	}
}

func testDescription() *Description {
	zero := uint32(0)
	return &Description{
		ID: "fake", Version: "1.2.3", ReferenceOracle: true, Dispatches: true, Precedence: &zero,
		Features: []string{"ir.v1", "shared"},
		Adapters: []Adapter{
			{Index: 0, Name: "dev0", Available: true,
				Profile: DeviceProfile{
					MaxStorageBufferBindingSize: 1 << 40, MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32,
					SupportsSubgroupOps: true, HasSubgroupShuffle: true, HasSharedMemory: true, SupportsF16: true,
					SupportsBF16: true, SupportsTensorCores: true, SupportsIndirectDispatch: true,
					SupportsDeviceTimestamps: true, SupportsHardwareCounters: true, MemBWGBps: 123.5,
					TimingQuality: DeviceTimestamps, MemBWStatus: BandwidthMeasured, MemoryBytes: 80 << 30, MemoryFreeBytes: 79 << 30,
				},
				Identity: DeviceIdentity{Vendor: "v", Device: "d", DriverVersion: "9", DeviceType: "gpu", Instance: "GPU-1"},
				Note:     "float controls: none"},
			{Index: 1, Name: "dev1", Reason: "driver missing. Fix: install it"},
		},
	}
}

func TestDescriptionRejectsNegativeAdapterIndex(t *testing.T) {
	d := testDescription()
	d.Adapters[1].Index = -1
	if _, err := descriptionToProto(d); err == nil {
		t.Fatal("adapter index -1 accepted")
	}
}

func TestCompileRequestRejectsGarbageProgram(t *testing.T) {
	_, err := compileRequestFromProto(&kilnpb.CompileRequest{Program: []byte("not a program")})
	if !isRejected(err) {
		t.Fatalf("got %v, want a RejectedError", err)
	}
	var dec *ir.DecodeError
	if !errors.As(err, &dec) {
		t.Errorf("%v does not wrap the *ir.DecodeError", err)
	}
}

// FuzzCompileRequest feeds arbitrary program bytes, specialization entries and
// workgroup overrides to the plugin side's request decoder and the SDK's
// CheckCompile: they must never panic,
// and every failure must be a RejectedError.
func FuzzCompileRequest(f *testing.F) {
	b := ir.NewBuilder("fuzz.seed", 64, 1, 1)
	b.Param("a", ir.U32, ir.LitU32(1))
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(out, i, ir.Param("a"))
	seed, err := ir.Encode(b.Program())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, "a", uint8(0), uint32(7), uint32(0), uint32(0), uint32(0))
	f.Add(seed, "a", uint8(4), uint32(11), uint32(64), uint32(1), uint32(1))
	f.Add([]byte{}, "", uint8(9), uint32(0), uint32(1), uint32(0), uint32(0))
	f.Fuzz(func(t *testing.T, prog []byte, name string, kind uint8, bits, x, y, z uint32) {
		req := &kilnpb.CompileRequest{
			Program:    prog,
			Spec:       []*kilnpb.SpecEntry{{Name: name, Kind: kilnpb.SpecKind(kind), Bits: bits}},
			WorkgroupX: x, WorkgroupY: y, WorkgroupZ: z,
		}
		got, err := compileRequestFromProto(req)
		if err == nil {
			err = CheckCompile(got)
		}
		if err != nil {
			if !isRejected(err) {
				t.Fatalf("failure is %T, not a RejectedError: %v", err, err)
			}
			return
		}
		if got.Program == nil {
			t.Fatal("accepted request without a program")
		}
	})
}
