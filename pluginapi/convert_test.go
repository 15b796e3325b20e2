package pluginapi

import (
	"errors"
	"math"
	"reflect"
	"testing"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
)

func TestSpecRoundTripsEveryKind(t *testing.T) {
	var m ir.SpecMap
	m.Set("u", ir.SpecU32(0xFFFFFFFF))
	m.Set("i", ir.SpecI32(-7))
	m.Set("nan", ir.SpecF32(math.Float32frombits(0x7FC00123))) // payload must survive
	m.Set("b", ir.SpecBool(true))
	for _, typ := range ir.Types() {
		m.Set("dtype_"+typ.String(), ir.SpecDType(typ))
	}
	back, err := specFromProto(specToProto(m))
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != m.Len() || back.CacheHash() != m.CacheHash() {
		t.Fatalf("round trip changed the map: %d entries hash %x, want %d entries hash %x", back.Len(), back.CacheHash(), m.Len(), m.CacheHash())
	}
	for _, name := range m.Names() {
		want, _ := m.Get(name)
		got, _ := back.Get(name)
		if got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}

func TestSpecDTypeTravelsAsStableTag(t *testing.T) {
	var m ir.SpecMap
	m.Set("t", ir.SpecDType(ir.F32))
	e := specToProto(m)
	if len(e) != 1 || e[0].Kind != kilnpb.SpecKind_SPEC_KIND_DTYPE || e[0].Bits != ir.DTypeTag(ir.F32) {
		t.Fatalf("dtype f32 went on the wire as %v, want kind DTYPE bits %#x", e, ir.DTypeTag(ir.F32))
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

func TestDescriptionRoundTrip(t *testing.T) {
	d := testDescription()
	pb, err := descriptionToProto(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := descriptionFromProto(pb); !reflect.DeepEqual(got, d) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, d)
	}
	// Precedence 0 is a rank; nil is none. They must stay apart.
	d.Precedence = nil
	pb, err = descriptionToProto(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := descriptionFromProto(pb); got.Precedence != nil {
		t.Errorf("nil precedence came back as %d", *got.Precedence)
	}
}

// TestDescriptionOfAnOlderPlugin pins that a description without the fields
// added since (memory, the bandwidth's status, the note), as a plugin built
// before them sends it, reads as unknown: zero and "unstated".
func TestDescriptionOfAnOlderPlugin(t *testing.T) {
	pb, err := descriptionToProto(testDescription())
	if err != nil {
		t.Fatal(err)
	}
	a := pb.Adapters[0]
	a.Note, a.Profile.MemBwStatus, a.Profile.MemoryBytes, a.Profile.MemoryFreeBytes = "", 0, 0, 0
	got := descriptionFromProto(pb).Adapters[0]
	if p := got.Profile; p.MemBWStatus != BandwidthUnstated || p.MemBWStatus.String() != "unstated" || p.MemoryBytes != 0 || p.MemoryFreeBytes != 0 || got.Note != "" || p.MemBWGBps != 123.5 {
		t.Errorf("adapter %+v", got)
	}
	if s := BandwidthStatus(9).String(); s != "BandwidthStatus(9)" {
		t.Errorf("an unknown status prints %q", s)
	}
}

func TestDescriptionRejectsNegativeAdapterIndex(t *testing.T) {
	d := testDescription()
	d.Adapters[1].Index = -1
	if _, err := descriptionToProto(d); err == nil {
		t.Fatal("adapter index -1 accepted")
	}
}

func TestInputsKeepNilApartFromEmpty(t *testing.T) {
	in := [][]byte{nil, {}, {1, 2, 3, 4}}
	got := inputsFromProto(inputsToProto(in))
	if got[0] != nil || got[1] == nil || len(got[1]) != 0 || !reflect.DeepEqual(got[2], in[2]) {
		t.Errorf("inputs %#v came back as %#v", in, got)
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
