package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// TestTargetFromProperties pins what the emitter may use: float controls only
// with shaderSignedZeroInfNanPreserveFloat32 and shaderDenormPreserveFloat32,
// subgroup classes only when compute shaders have them, and only the classes IR
// v1.1 uses.
func TestTargetFromProperties(t *testing.T) {
	p := vk.Properties{Subgroup: vk.Subgroup{Size: 32, Stages: vk.StageCompute, Operations: 0xFF},
		FloatControls: &vk.FloatControls{SignedZeroInfNanPreserveFloat32: true, DenormPreserveFloat32: true}}
	want := spirv.Target{SignedZeroInfNanPreserve: true, DenormPreserve: true,
		Subgroups: spirv.SubgroupBasic | spirv.SubgroupArithmetic | spirv.SubgroupBallot | spirv.SubgroupShuffle}
	if got := target(p, vk.Features{}); got != want {
		t.Errorf("target = %+v, want %+v", got, want)
	}
	p.Subgroup.Stages = 0
	p.FloatControls.SignedZeroInfNanPreserveFloat32 = false
	p.FloatControls.DenormPreserveFloat32 = false
	if got := target(p, vk.Features{}); got != (spirv.Target{}) {
		t.Errorf("target without compute subgroups or float controls = %+v", got)
	}
	p.FloatControls = nil
	if got := target(p, vk.Features{}); got != (spirv.Target{}) {
		t.Errorf("target without float controls = %+v", got)
	}
}

// TestSubgroupRequirement pins how a pipeline's subgroup size is chosen and when a
// program is rejected, on a device with a fixed size and one with size control.
func TestSubgroupRequirement(t *testing.T) {
	fixed := &adapter{props: vk.Properties{Subgroup: vk.Subgroup{Size: 32}}}
	control := &adapter{
		props: vk.Properties{Subgroup: vk.Subgroup{Size: 32},
			SubgroupSizeControl: &vk.SubgroupSizeControl{MinSubgroupSize: 16, MaxSubgroupSize: 64, RequiredStages: vk.StageCompute}},
		features: vk.Features{SubgroupSizeControl: true, ComputeFullSubgroups: true},
	}
	prog := func(required uint32) *ir.Program {
		b := ir.NewBuilder("t.sg", 64, 1, 1)
		b.RequireSubgroupSize(required)
		return b.Program()
	}
	for _, c := range []struct {
		name     string
		a        *adapter
		required uint32
		wg       [3]uint32
		want     vk.SubgroupRequirement
		reject   string
	}{
		{"any size on a fixed device", fixed, 0, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{}, ""},
		{"its own size on a fixed device", fixed, 32, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{}, ""},
		{"another size on a fixed device", fixed, 16, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{}, "no subgroup size control"},
		{"a workgroup smaller than the fixed size", fixed, 0, [3]uint32{8, 1, 1}, vk.SubgroupRequirement{}, "multiple of 32"},
		{"any size with control", control, 0, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{Size: 32, FullSubgroups: true}, ""},
		{"a size in range", control, 64, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{Size: 64, FullSubgroups: true}, ""},
		{"a size below the range", control, 8, [3]uint32{64, 1, 1}, vk.SubgroupRequirement{}, "16 to 64"},
		{"any size, the default not dividing", control, 0, [3]uint32{16, 1, 1}, vk.SubgroupRequirement{Size: 16, FullSubgroups: true}, ""},
		{"x not a multiple: no full subgroups", control, 0, [3]uint32{2, 16, 1}, vk.SubgroupRequirement{Size: 32}, ""},
		{"no size divides", control, 0, [3]uint32{8, 1, 1}, vk.SubgroupRequirement{}, "multiple of 16"},
	} {
		got, err := c.a.subgroupRequirement(prog(c.required), c.wg)
		var rejected *pluginapi.RejectedError
		switch {
		case c.reject == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		case c.reject != "" && (!errors.As(err, &rejected) || !strings.Contains(err.Error(), c.reject) || !strings.Contains(err.Error(), "Fix:")):
			t.Errorf("%s: error %v, want a RejectedError mentioning %q with a Fix", c.name, err, c.reject)
		}
	}
}

// TestSubgroupProgramsAreRejectedWithAReason runs on the real device: a program
// requiring a subgroup size the adapter does not run is rejected at compile
// time, naming the sizes, and one that runs with the adapter's size compiles.
func TestSubgroupProgramsAreRejectedWithAReason(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	a := b.adapters.List()[0]
	if a.target.Subgroups&spirv.SubgroupArithmetic == 0 {
		t.Skipf("adapter %q has no subgroup arithmetic in compute shaders", a.info.Name)
	}
	build := func(size uint32) *ir.Program {
		bl := ir.NewBuilder(fmt.Sprintf("t.sg.%d", size), 128, 1, 1)
		bl.RequireSubgroupSize(size)
		out := bl.Buffer("out", ir.U32, ir.Write)
		bl.Store(out, ir.GlobalID(0), ir.SubgroupAdd(ir.LitU32(1)))
		return bl.MustBuild()
	}
	own := a.props.Subgroup.Size
	res, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: build(own)})
	if err != nil {
		t.Fatalf("a program requiring the adapter's own size %d: %v", own, err)
	}
	out, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{128}})
	if err != nil || len(out.Outputs) != 1 || wordsOf(out.Outputs[0])[5] != own {
		t.Fatalf("subgroup_add(1) with subgroups of %d: %v, %v", own, out, err)
	}
	var other uint32
	for s := uint32(1); s <= 128; s *= 2 {
		sc := a.props.SubgroupSizeControl
		if s != own && (sc == nil || !a.sizeControl() || s < sc.MinSubgroupSize || s > sc.MaxSubgroupSize) {
			other = s
			break
		}
	}
	_, err = b.Compile(ctx, &pluginapi.CompileRequest{Program: build(other)})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), fmt.Sprintf("requires subgroups of %d lanes", other)) {
		t.Errorf("a program requiring %d lanes: %v, want a rejection naming the size", other, err)
	}
}

// TestUniformsArePushedAfterTheCounts runs a program with buffers and uniforms:
// each uniform reaches the shader with its bits, next to the element counts, and
// a dispatch with a uniform block of the wrong size is rejected (by the SDK's
// checks, which every caller goes through).
func TestUniformsArePushedAfterTheCounts(t *testing.T) {
	b := pluginapi.Checked(newTestBackend(t))
	ctx := context.Background()
	bl := ir.NewBuilder("t.uniforms", 1, 1, 1)
	in := bl.Buffer("in", ir.U32, ir.Read)
	out := bl.Buffer("out", ir.U32, ir.Write)
	x := bl.Uniform("x", ir.U32)
	y := bl.Uniform("y", ir.F32)
	bl.Store(out, ir.LitU32(0), ir.Add(x, ir.Len(in)))
	bl.Store(out, ir.LitU32(1), ir.Bitcast(ir.U32, y))
	bl.Store(out, ir.LitU32(2), ir.Len(out))
	p := bl.MustBuild()
	res, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: p})
	if err != nil {
		t.Fatal(err)
	}
	uniforms, err := ir.EncodeUniforms(p, map[string]ir.Literal{"x": ir.LitU32(40), "y": {Type: ir.F32, Bits: 0x7FC00123}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{words([]uint32{1, 2}), nil}, OutputCounts: []uint32{0, 3}, Uniforms: uniforms})
	if err != nil {
		t.Fatal(err)
	}
	if w := wordsOf(got.Outputs[0]); fmt.Sprint(w) != fmt.Sprint([]uint32{42, 0x7FC00123, 3}) {
		t.Errorf("outputs %#x, want [42 0x7fc00123 3]", w)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: res.Pipeline, Grid: [3]uint32{1, 1, 1},
		Inputs: [][]byte{words([]uint32{1, 2}), nil}, OutputCounts: []uint32{0, 3}, Uniforms: uniforms[:4]})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "uniforms") {
		t.Errorf("a short uniform block: %v, want a RejectedError", err)
	}
}

// TestDenormPreserveIsDeclared pins that a target with DenormPreserve makes the
// module declare the DenormPreserve capability and its 32-bit execution mode
// (lavapipe lacks the property, so no device test runs the mode there).
func TestDenormPreserveIsDeclared(t *testing.T) {
	const (
		opCapability    = 17
		opExecutionMode = 16
		denormCap       = 4464
		denormMode      = 4459
	)
	for _, on := range []bool{false, true} {
		m, err := spirv.EmitFor(addOne(), spirv.Target{DenormPreserve: on})
		if err != nil {
			t.Fatal(err)
		}
		capability, mode := false, false
		for i := 5; i < len(m.Words); {
			n, op := int(m.Words[i]>>16), m.Words[i]&0xffff
			if n == 0 {
				t.Fatalf("zero-length instruction at word %d", i)
			}
			args := m.Words[i+1 : i+n]
			capability = capability || (op == opCapability && args[0] == denormCap)
			mode = mode || (op == opExecutionMode && len(args) == 3 && args[1] == denormMode && args[2] == 32)
			i += n
		}
		if capability != on || mode != on {
			t.Errorf("DenormPreserve %v: capability %v, execution mode %v", on, capability, mode)
		}
	}
}
