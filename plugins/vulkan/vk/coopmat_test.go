package vk

import (
	"slices"
	"strings"
	"testing"
)

// TestCooperativeMatrices reads the device's cooperative-matrix support and
// creates a device that enables what it has (the chain of feature structs
// through kiln_device_options.next), under the validation layer. lavapipe
// lists no cooperative matrices: the query says none without an error.
func TestCooperativeMatrices(t *testing.T) {
	inst, pd, _, family := openDevice(t)
	s, err := pd.CooperativeMatrices()
	if err != nil {
		t.Fatalf("CooperativeMatrices: %v", err)
	}
	t.Logf("%s: cooperative matrices %s (extension %v, feature %v, memory model %v, bf16 %v, NV2 %v)",
		pd.Properties().Name, s, s.Extension, s.Feature, s.VulkanMemoryModel, s.BFloat16, s.CooperativeMatrix2)
	if s.CooperativeMatrix2 {
		t.Logf("%s: %s %s", pd.Properties().Name, ExtCooperativeMatrix2, s.Matrix2)
	}
	if !s.Extension && (len(s.Properties) != 0 || s.Usable() || s.String() != "none") {
		t.Errorf("no %s but %+v", ExtCooperativeMatrix, s)
	}
	_, sizeControl, exts := pd.Needs()
	f := pd.Features()
	enable := CoopMatrixEnable{Matrix: s.Usable(), MemoryModel: s.VulkanMemoryModel, DeviceScope: s.VulkanMemoryModelDeviceScope,
		BFloat16: s.Usable() && s.BFloat16}
	if enable.Matrix {
		exts = append(exts, ExtCooperativeMatrix)
		for _, p := range s.Properties {
			if p.M == 0 || p.N == 0 || p.K == 0 {
				t.Errorf("property %v has a zero side", p)
			}
		}
	}
	if enable.BFloat16 {
		exts = append(exts, ExtShaderBFloat16)
	}
	dev, err := pd.CreateDevice(family, DeviceOptions{Extensions: exts, Cooperative: enable,
		SubgroupSizeControl: sizeControl && f.SubgroupSizeControl, ComputeFullSubgroups: sizeControl && f.ComputeFullSubgroups})
	if err != nil {
		t.Fatalf("CreateDevice with %+v: %v", enable, err)
	}
	dev.Destroy()
	if n, text := inst.Messages(); n != 0 {
		t.Errorf("%d validation messages:\n%s", n, text)
	}
}

func TestCoopMatrixStrings(t *testing.T) {
	f := CoopMatrixFlexible{CoopMatrixProperties: CoopMatrixProperties{M: 16, N: 16, K: 16, A: ComponentFloat16, B: ComponentFloat16,
		C: ComponentFloat32, Result: ComponentFloat32, Scope: ScopeWorkgroup}, Invocations: 128}
	if got, want := f.String(), "16x16x16 f16*f16+f32=f32 workgroup at 128 invocations"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	m := CoopMatrix2{WorkgroupScope: true, MaxWorkgroupSize: 256, Flexible: []CoopMatrixFlexible{f, f}}
	if got := m.String(); !strings.HasPrefix(got, "workgroup scope true,") || !strings.HasSuffix(got, "flexible: "+f.String()+", "+f.String()) {
		t.Errorf("CoopMatrix2.String = %q", got)
	}
	p := CoopMatrixProperties{M: 16, N: 16, K: 16, A: ComponentBFloat16, B: ComponentBFloat16, C: ComponentFloat32, Result: ComponentFloat32, Scope: ScopeSubgroup}
	if got, want := p.String(), "16x16x16 bf16*bf16+f32=f32 subgroup"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	s := CoopMatrixSupport{Extension: true, Feature: true, VulkanMemoryModel: true, Properties: []CoopMatrixProperties{p}}
	if !s.Usable() || s.String() != p.String() {
		t.Errorf("support %+v: usable %v, %q", s, s.Usable(), s)
	}
	for _, broken := range []func(*CoopMatrixSupport){
		func(s *CoopMatrixSupport) { s.Feature = false },
		func(s *CoopMatrixSupport) { s.VulkanMemoryModel = false },
		func(s *CoopMatrixSupport) { s.Properties = nil },
	} {
		c := s
		c.Properties = slices.Clone(s.Properties)
		broken(&c)
		if c.Usable() || c.String() != "none" {
			t.Errorf("%+v is usable", c)
		}
	}
	if ComponentType(99).String() != "component(99)" {
		t.Errorf("unknown component: %s", ComponentType(99))
	}
}
