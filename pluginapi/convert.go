package pluginapi

import (
	"fmt"
	"math"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
)

// adapterIndex checks that an adapter index fits the wire's uint32.
func adapterIndex(i int) (uint32, error) {
	if i < 0 || uint64(i) > math.MaxUint32 {
		return 0, Rejected("adapter index %d is out of range. Fix: use an index from the backend's Describe", i)
	}
	return uint32(i), nil
}

func descriptionToProto(d *Description) (*kilnpb.DescribeResponse, error) {
	out := &kilnpb.DescribeResponse{
		Id:              d.ID,
		Version:         d.Version,
		ReferenceOracle: d.ReferenceOracle,
		Dispatches:      d.Dispatches,
		Features:        d.Features,
	}
	if d.Precedence != nil {
		p := *d.Precedence
		out.Precedence = &p
	}
	for _, a := range d.Adapters {
		idx, err := adapterIndex(a.Index)
		if err != nil {
			return nil, fmt.Errorf("backend %q describes adapter %q: %w", d.ID, a.Name, err)
		}
		out.Adapters = append(out.Adapters, &kilnpb.Adapter{
			Index:     idx,
			Name:      a.Name,
			Available: a.Available,
			Reason:    a.Reason,
			Note:      a.Note,
			Profile:   profileToProto(a.Profile),
			Identity: &kilnpb.DeviceIdentity{
				Vendor:        a.Identity.Vendor,
				Device:        a.Identity.Device,
				DriverVersion: a.Identity.DriverVersion,
				DeviceType:    a.Identity.DeviceType,
				Instance:      a.Identity.Instance,
			},
		})
	}
	return out, nil
}

func profileToProto(p DeviceProfile) *kilnpb.DeviceProfile {
	return &kilnpb.DeviceProfile{
		MaxStorageBufferBindingSize: p.MaxStorageBufferBindingSize,
		MaxInvocationsPerWorkgroup:  p.MaxInvocationsPerWorkgroup,
		SubgroupSize:                p.SubgroupSize,
		SupportsSubgroupOps:         p.SupportsSubgroupOps,
		HasSubgroupShuffle:          p.HasSubgroupShuffle,
		HasSharedMemory:             p.HasSharedMemory,
		SupportsF16:                 p.SupportsF16,
		SupportsBf16:                p.SupportsBF16,
		SupportsTensorCores:         p.SupportsTensorCores,
		SupportsIndirectDispatch:    p.SupportsIndirectDispatch,
		SupportsDeviceTimestamps:    p.SupportsDeviceTimestamps,
		SupportsHardwareCounters:    p.SupportsHardwareCounters,
		MemBwGbps:                   p.MemBWGBps,
		TimingQuality:               kilnpb.TimingQuality(p.TimingQuality),
		MemBwStatus:                 kilnpb.BandwidthStatus(p.MemBWStatus),
		MemoryBytes:                 p.MemoryBytes,
		MemoryFreeBytes:             p.MemoryFreeBytes,
	}
}

// specFromProto rebuilds a SpecMap, rejecting duplicate names, unknown kinds, bool
// values other than 0 and 1, and unknown dtype tags.
func specFromProto(entries []*kilnpb.SpecEntry) (ir.SpecMap, error) {
	var m ir.SpecMap
	for _, e := range entries {
		name, bits := e.GetName(), e.GetBits()
		if _, dup := m.Get(name); dup {
			return ir.SpecMap{}, Rejected("specialization map sets %q twice. Fix: set each parameter once", name)
		}
		var v ir.SpecValue
		switch e.GetKind() {
		case kilnpb.SpecKind_SPEC_KIND_U32:
			v = ir.SpecU32(bits)
		case kilnpb.SpecKind_SPEC_KIND_I32:
			v = ir.SpecI32(int32(bits))
		case kilnpb.SpecKind_SPEC_KIND_F32:
			v = ir.SpecF32(math.Float32frombits(bits))
		case kilnpb.SpecKind_SPEC_KIND_BOOL:
			if bits > 1 {
				return ir.SpecMap{}, Rejected("specialization value %q: bool bits %d are neither 0 nor 1. Fix: send 0 or 1", name, bits)
			}
			v = ir.SpecBool(bits == 1)
		case kilnpb.SpecKind_SPEC_KIND_DTYPE:
			t, ok := dtypeFromTag(bits)
			if !ok {
				return ir.SpecMap{}, Rejected("specialization value %q: unknown dtype tag %#x. Fix: use a type of IR v1", name, bits)
			}
			v = ir.SpecDType(t)
		default:
			return ir.SpecMap{}, Rejected("specialization value %q has unknown kind %d. Fix: update the host or the plugin so both speak the same protocol", name, e.GetKind())
		}
		m.Set(name, v)
	}
	return m, nil
}

func dtypeFromTag(tag uint32) (ir.Type, bool) {
	for _, t := range ir.Types() {
		if ir.DTypeTag(t) == tag {
			return t, true
		}
	}
	return 0, false
}

// checkSpec rejects a specialization value that names no parameter of p or whose
// type differs from the parameter's.
func checkSpec(p *ir.Program, m ir.SpecMap) error {
	for _, name := range m.Names() {
		v, _ := m.Get(name)
		decl, ok := p.Param(name)
		if !ok {
			return Rejected("specialization map sets %q, which program %q does not declare. Fix: set only the program's parameters", name, p.Name)
		}
		lit, ok := v.Literal()
		if !ok || lit.Type != decl.Type {
			return Rejected("specialization value %q is %s but the parameter is %s. Fix: pass a %s value", name, v, decl.Type, decl.Type)
		}
	}
	return nil
}

// checkWorkgroupOverride rejects an override that is zero on some axes only.
func checkWorkgroupOverride(wg [3]uint32) error {
	zeros := 0
	for _, n := range wg {
		if n == 0 {
			zeros++
		}
	}
	if zeros != 0 && zeros != 3 {
		return Rejected("workgroup size override %v is zero on some axes only. Fix: give all three axes, or all zero to keep the program's size", wg)
	}
	return nil
}

func inputsFromProto(in []*kilnpb.Buffer) [][]byte {
	out := make([][]byte, len(in))
	for i, b := range in {
		out[i] = b.GetData()
	}
	return out
}

func rangeFromProto(r *kilnpb.BufferRange) BufferRange {
	return BufferRange{Buffer: r.GetBuffer(), Offset: r.GetOffset(), Size: r.GetSize()}
}

func commandsFromProto(cmds []*kilnpb.Command) ([]SubmitCommand, error) {
	out := make([]SubmitCommand, len(cmds))
	for i, c := range cmds {
		switch op := c.GetOp().(type) {
		case *kilnpb.Command_Dispatch:
			d := op.Dispatch
			dc := DispatchCommand{Pipeline: d.GetPipeline(), Grid: [3]uint32{d.GetGridX(), d.GetGridY(), d.GetGridZ()}, Uniforms: d.GetUniforms()}
			for _, b := range d.GetBindings() {
				dc.Bindings = append(dc.Bindings, rangeFromProto(b))
			}
			out[i] = dc
		case *kilnpb.Command_Copy:
			out[i] = CopyCommand{Src: rangeFromProto(op.Copy.GetSrc()), Dst: rangeFromProto(op.Copy.GetDst())}
		case *kilnpb.Command_Fill:
			out[i] = FillCommand{Dst: rangeFromProto(op.Fill.GetDst()), Value: op.Fill.GetValue()}
		default:
			return nil, Rejected("command %d has no operation. Fix: update the host or the plugin so both speak the same protocol", i)
		}
	}
	return out, nil
}
