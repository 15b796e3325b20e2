package client

import (
	"context"
	"reflect"
	"testing"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/internal/wire/wiretest"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

func testDescription() *pluginapi.Description {
	zero := uint32(0)
	return &pluginapi.Description{
		ID: "fake", Version: "1.2.3", ReferenceOracle: true, Dispatches: true, Precedence: &zero,
		Features: []string{"ir.v1", "shared"},
		Adapters: []pluginapi.Adapter{
			{Index: 0, Name: "dev0", Available: true,
				Profile: pluginapi.DeviceProfile{
					MaxStorageBufferBindingSize: 1 << 40, MaxInvocationsPerWorkgroup: 1024, SubgroupSize: 32,
					SupportsSubgroupOps: true, HasSubgroupShuffle: true, HasSharedMemory: true, SupportsF16: true,
					SupportsBF16: true, SupportsTensorCores: true, SupportsIndirectDispatch: true,
					SupportsDeviceTimestamps: true, SupportsHardwareCounters: true, MemBWGBps: 123.5,
					TimingQuality: pluginapi.DeviceTimestamps, MemBWStatus: pluginapi.BandwidthMeasured, MemoryBytes: 80 << 30, MemoryFreeBytes: 79 << 30,
				},
				Identity: pluginapi.DeviceIdentity{Vendor: "v", Device: "d", DriverVersion: "9", DeviceType: "gpu", Instance: "GPU-1"},
				Note:     "float controls: none"},
			{Index: 1, Name: "dev1", Reason: "driver missing. Fix: install it"},
		},
	}
}

// TestDescriptionRoundTrip describes a served backend on both protocols: every
// field comes back as the plugin described it, and precedence 0 (a rank)
// stays apart from nil (none).
func TestDescriptionRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, serve := range []func(testing.TB, pluginapi.Backend) *Conn{serveInProcess, serveV2} {
		d := testDescription()
		got, err := serve(t, &fakeBackend{desc: d}).Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, d)
		}
		d.Precedence = nil
		got, err = serve(t, &fakeBackend{desc: d}).Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Precedence != nil {
			t.Errorf("nil precedence came back as %d", *got.Precedence)
		}
	}
}

// TestDescriptionOfAnOlderPlugin pins that a description without the fields
// added since (memory, the bandwidth's status, the note), as a plugin built
// before them sends it, reads as unknown: zero and "unstated".
func TestDescriptionOfAnOlderPlugin(t *testing.T) {
	pb := &kilnpb.DescribeResponse{Id: "old", Adapters: []*kilnpb.Adapter{{Name: "dev0", Available: true, Profile: &kilnpb.DeviceProfile{MemBwGbps: 123.5}}}}
	got := descriptionFromProto(pb).Adapters[0]
	if p := got.Profile; p.MemBWStatus != pluginapi.BandwidthUnstated || p.MemBWStatus.String() != "unstated" || p.MemoryBytes != 0 || p.MemoryFreeBytes != 0 || got.Note != "" || p.MemBWGBps != 123.5 {
		t.Errorf("adapter %+v", got)
	}
	if s := pluginapi.BandwidthStatus(9).String(); s != "BandwidthStatus(9)" {
		t.Errorf("an unknown status prints %q", s)
	}
}

// TestInputsKeepNilApartFromEmpty: a nil input (a write buffer) reaches the
// backend as nil, an empty one as empty.
func TestInputsKeepNilApartFromEmpty(t *testing.T) {
	fake := &fakeBackend{}
	b := serveInProcess(t, fake)
	in := [][]byte{nil, {}, {1, 2, 3, 4}}
	if _, err := b.Dispatch(context.Background(), &pluginapi.DispatchRequest{Pipeline: 1, Grid: [3]uint32{1, 1, 1}, Inputs: in}); err != nil {
		t.Fatal(err)
	}
	got := fake.dispatches[0].Inputs
	if len(got) != 3 || got[0] != nil || got[1] == nil || len(got[1]) != 0 || !reflect.DeepEqual(got[2], in[2]) {
		t.Errorf("inputs %#v came back as %#v", in, got)
	}
}

// TestSpecRoundTripsEveryKind pins the host's side of the specialization map:
// a value of each kind (an f32 NaN's payload must survive) goes out as the
// entries wiretest.EverySpecKind writes out by hand, in name order, which
// pluginapi's test of the same name decodes back into the map.
func TestSpecRoundTripsEveryKind(t *testing.T) {
	m, want := wiretest.EverySpecKind()
	got := specToProto(m)
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Kind != want[i].Kind || got[i].Bits != want[i].Bits {
			t.Errorf("entry %d is %v, want %v", i, got[i], want[i])
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
