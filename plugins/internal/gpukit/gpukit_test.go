package gpukit

import (
	"errors"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

func TestAdapterAt(t *testing.T) {
	type adapter struct{ info pluginapi.Adapter }
	adapters := []*adapter{
		{info: pluginapi.Adapter{Index: 0, Name: "GPU", Available: true}},
		{info: pluginapi.Adapter{Index: 1, Name: "old GPU", Reason: "too old"}},
	}
	info := func(a *adapter) *pluginapi.Adapter { return &a.info }
	if a, err := AdapterAt("cuda", adapters, 0, info); err != nil || a != adapters[0] {
		t.Fatalf("adapter 0: %v, %v", a, err)
	}
	var rejected *pluginapi.RejectedError
	for _, i := range []int{-1, 2} {
		a, err := AdapterAt("cuda", adapters, i, info)
		if !errors.As(err, &rejected) || a != nil {
			t.Fatalf("adapter %d: %v, %v; want a RejectedError", i, a, err)
		}
	}
	_, err := AdapterAt("vulkan", adapters, 5, info)
	if want := "vulkan has no adapter 5 (it has 2). Fix: use an adapter index from 0 to 1 as `kiln backends` lists them"; err.Error() != want {
		t.Errorf("out of range: %q, want %q", err, want)
	}
	var unavailable *pluginapi.UnavailableError
	a, err := AdapterAt("cuda", adapters, 1, info)
	if !errors.As(err, &unavailable) || a != nil {
		t.Fatalf("unavailable adapter: %v, %v; want an UnavailableError", a, err)
	}
	if want := "cuda adapter 1 (old GPU) is unavailable: too old"; err.Error() != want {
		t.Errorf("unavailable: %q, want %q", err, want)
	}
}

// cudaLimits and vulkanLimits are how the backends name their limits.
var (
	cudaLimits = ProgramLimits{Workgroup: [3]uint32{1024, 64, 64}, WorkgroupName: "maximum block dimensions",
		Invocations: 512, InvocationsText: "%d threads per block", SharedBytes: 16 << 10, SharedText: "%d per block"}
	vulkanLimits = ProgramLimits{Workgroup: [3]uint32{256, 256, 64}, WorkgroupName: "maxComputeWorkGroupSize",
		Invocations: 256, InvocationsText: "maxComputeWorkGroupInvocations %d", SharedBytes: 24 << 10, SharedText: "maxComputeSharedMemorySize %d"}
)

func program(wg [3]uint32, shared uint32) *ir.Program {
	b := ir.NewBuilder("p", wg[0], wg[1], wg[2])
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Param("k", ir.U32, ir.LitU32(1))
	if shared > 0 {
		b.Shared("s", ir.U32, shared)
	}
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(in)), func(then *ir.Block) {
		then.Store(out, i, ir.Load(in, i))
	})
	return b.MustBuild()
}

// TestCheckLimitsErrors pins the texts each backend's own check had.
func TestCheckLimitsErrors(t *testing.T) {
	var rejected *pluginapi.RejectedError
	for _, tc := range []struct {
		backend  string
		lim      ProgramLimits
		p        *ir.Program
		override [3]uint32
		want     string
	}{
		{"cuda", cudaLimits, program([3]uint32{64, 1, 1}, 0), [3]uint32{1, 128, 1},
			`cuda: program "p": workgroup size [1 128 1] exceeds the device's maximum block dimensions [1024 64 64] on axis 1. Fix: use a workgroup of at most 64 on that axis`},
		{"vulkan", vulkanLimits, program([3]uint32{64, 1, 1}, 0), [3]uint32{1, 512, 1},
			`vulkan: program "p": workgroup size [1 512 1] exceeds the device's maxComputeWorkGroupSize [256 256 64] on axis 1. Fix: use a workgroup of at most 256 on that axis`},
		{"cuda", cudaLimits, program([3]uint32{64, 16, 1}, 0), [3]uint32{},
			`cuda: program "p": workgroup size [64 16 1] has 1024 invocations, more than the device's 512 threads per block. Fix: use a smaller workgroup`},
		{"vulkan", vulkanLimits, program([3]uint32{64, 8, 1}, 0), [3]uint32{},
			`vulkan: program "p": workgroup size [64 8 1] has 512 invocations, more than the device's maxComputeWorkGroupInvocations 256. Fix: use a smaller workgroup`},
		{"cuda", cudaLimits, program([3]uint32{64, 1, 1}, 8<<10), [3]uint32{},
			`cuda: program "p" uses 32768 bytes of shared memory, more than the device's 16384 per block. Fix: use smaller shared arrays`},
		{"vulkan", vulkanLimits, program([3]uint32{64, 1, 1}, 8<<10), [3]uint32{},
			`vulkan: program "p" uses 32768 bytes of shared memory, more than the device's maxComputeSharedMemorySize 24576. Fix: use smaller shared arrays`},
	} {
		_, err := CheckLimits(tc.backend, tc.p, tc.override, tc.lim)
		if err == nil || err.Error() != tc.want || !errors.As(err, &rejected) {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
	wg, err := CheckLimits("vulkan", program([3]uint32{64, 1, 1}, 8), [3]uint32{32, 2, 1}, vulkanLimits)
	if err != nil || wg != [3]uint32{32, 2, 1} {
		t.Errorf("a good program with an override: %v, %v", wg, err)
	}
	if wg, err := CheckLimits("cuda", program([3]uint32{64, 1, 1}, 8), [3]uint32{}, cudaLimits); err != nil || wg != [3]uint32{64, 1, 1} {
		t.Errorf("a good program without an override: %v, %v", wg, err)
	}
}

type wrapped struct {
	Binding
	extra int
}

func TestSizeBindings(t *testing.T) {
	p := program([3]uint32{64, 1, 1}, 0)
	lim := BindingLimit{Adapter: 2, Bytes: 64, Text: "adapter %d's %d"}
	wrap := func(b Binding) *wrapped { return &wrapped{Binding: b, extra: 1} }
	binds, err := SizeBindings("cuda", p, &pluginapi.DispatchRequest{Inputs: [][]byte{make([]byte, 12)}, OutputCounts: []uint32{0, 5}}, lim, wrap)
	if err != nil {
		t.Fatal(err)
	}
	if len(binds) != 2 || binds[0].Count != 3 || binds[1].Count != 5 || binds[0].extra != 1 || binds[0].Decl.Name != "in" {
		t.Fatalf("bindings %+v %+v", binds[0], binds[1])
	}
	if !binds[0].ReadsInput() || binds[1].ReadsInput() {
		t.Error("ReadsInput: want the read binding only")
	}
	outs := UnchangedOutputs(binds)
	if len(outs) != 1 || !slices.Equal(outs[0], make([]byte, 20)) {
		t.Errorf("UnchangedOutputs = %v, want one 20-byte zero output", outs)
	}
	var rejected *pluginapi.RejectedError
	for _, tc := range []struct {
		backend string
		lim     BindingLimit
		req     *pluginapi.DispatchRequest
		want    string
	}{
		{"cuda", lim, &pluginapi.DispatchRequest{Inputs: [][]byte{make([]byte, 68)}},
			`cuda: program "p": buffer "in" (binding 0) has 68 bytes, more than adapter 2's 64. Fix: split the work into buffers of at most 16 elements`},
		{"vulkan", BindingLimit{Adapter: 0, Bytes: 64, Text: "adapter %d binds (maxStorageBufferRange %d, no buffer device addresses)"}, &pluginapi.DispatchRequest{OutputCounts: []uint32{0, 17}},
			`vulkan: program "p": buffer "out" (binding 1) has 68 bytes, more than adapter 0 binds (maxStorageBufferRange 64, no buffer device addresses). Fix: split the work into buffers of at most 16 elements`},
	} {
		_, err := SizeBindings(tc.backend, p, tc.req, tc.lim, wrap)
		if err == nil || err.Error() != tc.want || !errors.As(err, &rejected) {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
}

func TestSizeBindingsFixedCount(t *testing.T) {
	p := &ir.Program{Name: "f", Buffers: []ir.BufferDecl{
		{Name: "a", Binding: 0, Type: ir.U32, Access: ir.ReadWrite, Count: 2},
		{Name: "o", Binding: 1, Type: ir.U32, Access: ir.Write, Count: 3}}}
	lim := BindingLimit{Bytes: 1 << 20, Text: "adapter %d's %d"}
	id := func(b Binding) *Binding { return &b }
	binds, err := SizeBindings("cuda", p, &pluginapi.DispatchRequest{Inputs: [][]byte{{1, 0, 0, 0, 2, 0, 0, 0}}, OutputCounts: []uint32{0, 9}}, lim, id)
	if err != nil || binds[0].Count != 2 || binds[1].Count != 3 {
		t.Fatalf("fixed counts: %v, %v", binds, err)
	}
	outs := UnchangedOutputs(binds)
	if len(outs) != 2 || !slices.Equal(outs[0], []byte{1, 0, 0, 0, 2, 0, 0, 0}) || len(outs[1]) != 12 {
		t.Errorf("UnchangedOutputs = %v", outs)
	}
	outs[0][0] = 9
	if binds[0].Input[0] != 1 {
		t.Error("UnchangedOutputs shares the read_write input")
	}
}

func TestCheckGridInvocations(t *testing.T) {
	if err := CheckGridInvocations("cuda", "p", [3]uint32{1 << 26, 1, 1}, [3]uint32{64, 1, 1}); err != nil {
		t.Errorf("exactly 2^32 invocations: %v", err)
	}
	err := CheckGridInvocations("vulkan", "p", [3]uint32{1, 1<<26 + 1, 1}, [3]uint32{1, 64, 1})
	if want := `vulkan: program "p": grid [1 67108865 1] with workgroup size [1 64 1] gives more than 2^32 invocations on axis 1, beyond a u32 global_id. Fix: use a smaller grid`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
