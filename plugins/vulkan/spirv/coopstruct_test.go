package spirv

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// TestSelectCoop picks the cooperative path's types from device lists: an
// NVIDIA-like list gives f16 and bf16; each missing piece (the 16×16×16
// shape, f32 accumulators, subgroup scope, the bf16 type, 16-bit integers,
// shaderFloat16, a subgroup size) takes its type, or the path, away;
// lavapipe's empty list gives the zero target.
func TestSelectCoop(t *testing.T) {
	shape := func(m, n, k uint32, ab, c ir.Type, subgroup bool) CoopShape {
		return CoopShape{M: m, N: n, K: k, A: ab, B: ab, C: c, Result: c, Subgroup: subgroup}
	}
	nvidia := []CoopShape{shape(16, 16, 16, ir.F16, ir.F16, true), shape(16, 8, 16, ir.F16, ir.F32, true),
		shape(16, 16, 16, ir.F16, ir.F32, true), shape(16, 16, 32, 0, 0, true), shape(16, 16, 16, ir.BF16, ir.F32, true)}
	full := CoopTarget{F16: true, BF16: true, SubgroupSize: 32, DeviceScope: true}
	for _, tc := range []struct {
		name                     string
		shapes                   []CoopShape
		float16, bf16Type, int16 bool
		size                     uint32
		want                     CoopTarget
	}{
		{"nvidia", nvidia, true, true, true, 32, full},
		{"no bf16 type", nvidia, true, false, true, 32, CoopTarget{F16: true, SubgroupSize: 32, DeviceScope: true}},
		{"no int16", nvidia, true, true, false, 32, CoopTarget{F16: true, SubgroupSize: 32, DeviceScope: true}},
		{"no shaderFloat16", nvidia, false, true, true, 32, CoopTarget{BF16: true, SubgroupSize: 32, DeviceScope: true}},
		{"f16 accumulators only", []CoopShape{shape(16, 16, 16, ir.F16, ir.F16, true)}, true, true, true, 32, CoopTarget{}},
		{"16x8x16 only", []CoopShape{shape(16, 8, 16, ir.F16, ir.F32, true)}, true, true, true, 32, CoopTarget{}},
		{"workgroup scope", []CoopShape{shape(16, 16, 16, ir.F16, ir.F32, false)}, true, true, true, 32, CoopTarget{}},
		{"no subgroup size", nvidia, true, true, true, 0, CoopTarget{}},
		{"lavapipe", nil, true, false, true, 8, CoopTarget{}},
	} {
		if got := SelectCoop(tc.shapes, tc.float16, tc.bf16Type, tc.int16, tc.size, true); got != tc.want {
			t.Errorf("%s: SelectCoop = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestPlanCoop pins which programs take the cooperative path and the reason
// the others give.
func TestPlanCoop(t *testing.T) {
	withAtomic := func() *ir.Program {
		b := ir.NewBuilder("atomic", 64, 1, 1)
		x := b.Buffer("x", ir.F16, ir.Read)
		n := b.Buffer("n", ir.U32, ir.ReadWrite)
		acc := b.Matrix("acc", ir.F32, 16, 16)
		a := b.Matrix("a", ir.F16, 16, 16)
		b.MatrixLoad(a, x, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
		b.MatrixMMA(acc, a, a)
		b.Atomic(ir.AtomicAdd, n, ir.LitU32(0), ir.LitU32(1))
		return b.MustBuild()
	}
	noMMA := func() *ir.Program {
		b := ir.NewBuilder("fill", 64, 1, 1)
		o := b.Buffer("o", ir.F32, ir.Write)
		acc := b.Matrix("acc", ir.F32, 16, 16)
		b.MatrixFill(acc, ir.LitF32(1))
		b.MatrixStore(acc, o, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
		return b.MustBuild()
	}
	sized := gputest.TCProgram(ir.F16, false, 64, 64, 32, 128)
	sized.SubgroupSize = 64
	noScope := coopTarget
	noScope.Coop.DeviceScope = false
	f16Only := coopTarget
	f16Only.Coop.BF16 = false
	for _, tc := range []struct {
		name   string
		p      *ir.Program
		target Target
		wg     [3]uint32
		why    string // "" for the cooperative path
	}{
		{"bf16", gputest.TCProgram(ir.BF16, false, 64, 64, 32, 128), coopTarget, [3]uint32{128, 1, 1}, ""},
		{"f16", gputest.TCProgram(ir.F16, false, 64, 64, 32, 128), coopTarget, [3]uint32{128, 1, 1}, ""},
		{"tf32", gputest.TCProgram(ir.F32, true, 64, 64, 32, 128), coopTarget, [3]uint32{128, 1, 1}, "has f32 operands at tf32 precision"},
		{"f32", gputest.TCProgram(ir.F32, false, 64, 64, 32, 128), coopTarget, [3]uint32{128, 1, 1}, "has f32 operands, which"},
		{"bf16 without bf16", gputest.TCProgram(ir.BF16, false, 64, 64, 32, 128), f16Only, [3]uint32{128, 1, 1}, "has bf16 operands"},
		{"lavapipe", gputest.TCProgram(ir.F16, false, 64, 64, 32, 128), fullTarget, [3]uint32{128, 1, 1}, "lists no 16x16x16"},
		{"partial subgroups", gputest.TCProgram(ir.F16, false, 64, 64, 32, 48), coopTarget, [3]uint32{48, 1, 1}, "x size 48 is not a multiple of the subgroup size 32"},
		{"x below the subgroup", gputest.TCProgram(ir.F16, false, 64, 64, 32, 128), coopTarget, [3]uint32{16, 8, 1}, "x size 16"},
		{"subgroup size", sized, coopTarget, [3]uint32{128, 1, 1}, "requires subgroups of 64"},
		{"no mma", noMMA(), coopTarget, [3]uint32{64, 1, 1}, "no matrix_mma"},
		{"atomics without device scope", withAtomic(), noScope, [3]uint32{64, 1, 1}, "vulkanMemoryModelDeviceScope"},
		{"atomics with device scope", withAtomic(), coopTarget, [3]uint32{64, 1, 1}, ""},
	} {
		c, why := planCoop(tc.p, tc.target, tc.wg)
		switch {
		case tc.why == "" && c == nil:
			t.Errorf("%s: scalar path (%s), want cooperative", tc.name, why)
		case tc.why != "" && c != nil:
			t.Errorf("%s: cooperative path, want scalar (%s)", tc.name, tc.why)
		case tc.why != "" && !strings.Contains(why, tc.why):
			t.Errorf("%s: why = %q, want it to say %q", tc.name, why, tc.why)
		}
	}
}

// TestPartition pins how an accumulator's tiles are split among subgroups.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		rows, cols, groups uint32
		gr, gc, rr, rc     uint32
	}{
		{64, 64, 4, 2, 2, 2, 2},
		{128, 64, 4, 2, 2, 4, 2},
		{64, 64, 8, 2, 4, 2, 1},
		{16, 16, 4, 1, 1, 1, 1}, // three subgroups idle
		{48, 32, 4, 3, 1, 1, 2},
		{64, 64, 1, 1, 1, 4, 4},
		{256, 256, 32, 4, 8, 4, 2},
	} {
		r := partition(ir.MatrixDecl{Name: "acc", Type: ir.F32, Rows: tc.rows, Cols: tc.cols}, tc.groups)
		if r.gr != tc.gr || r.gc != tc.gc || r.rr != tc.rr || r.rc != tc.rc {
			t.Errorf("%dx%d over %d subgroups: grid %dx%d of %dx%d tiles, want %dx%d of %dx%d",
				tc.rows, tc.cols, tc.groups, r.gr, r.gc, r.rr, r.rc, tc.gr, tc.gc, tc.rr, tc.rc)
		}
		if r.gr*r.rr != tc.rows/16 || r.gc*r.rc != tc.cols/16 || r.gr*r.gc > tc.groups {
			t.Errorf("%dx%d over %d subgroups: grid %dx%d of %dx%d tiles does not cover the matrix", tc.rows, tc.cols, tc.groups, r.gr, r.gc, r.rr, r.rc)
		}
	}
}

// TestCoopModuleStructure checks the cooperative path's module where no
// validator knows SPV_KHR_cooperative_matrix (Debian's spirv-val 2023.1
// rejects capability 6022): the capabilities, extensions (after every
// capability, before the memory model), the Vulkan memory model, no
// Coherent buffer, NonPrivatePointer accesses to buffer and workgroup memory,
// barriers that make memory available and visible, the
// cooperative matrix types (Subgroup scope, 16×16, uses A, B and
// accumulator, bf16 with the BFloat16KHR encoding), MulAdd's operand types,
// the loads' and stores' layouts, pointers and strides, the SubgroupId
// input, the MulAdds of one K step, and the path in an OpSourceExtension.
func TestCoopModuleStructure(t *testing.T) {
	for _, typ := range []ir.Type{ir.BF16, ir.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			p := gputest.TCProgram(typ, false, 64, 64, 32, 128)
			m, err := EmitFor(p, coopTarget)
			if err != nil {
				t.Fatal(err)
			}
			if m.MatrixPath != MatrixPathCooperative || !m.Subgroups {
				t.Fatalf("MatrixPath %q, Subgroups %v", m.MatrixPath, m.Subgroups)
			}
			if again, _ := EmitFor(p, coopTarget); !slices.Equal(m.Words, again.Words) {
				t.Error("two emits differ")
			}
			checkCoopModule(t, typ, m)
		})
	}
}

// checkCoopModule is TestCoopModuleStructure's checks of m, emitted from
// tcProgram with operands of typ at 64×64×32 and 128 invocations.
func checkCoopModule(t *testing.T, typ ir.Type, m *Module) {
	_, insts := decode(t, m.Words)
	byID := resultIDs(insts)
	constant := func(id uint32) uint32 {
		in, ok := byID[id]
		if !ok || in.op != opConstant {
			t.Fatalf("%d is not a constant", id)
		}
		return in.args[2]
	}
	caps := map[uint32]bool{}
	var exts []string
	lastCap, firstExt, memModel := -1, -1, -1
	for i, in := range insts {
		switch in.op {
		case opCapability:
			caps[in.args[0]] = true
			lastCap = i
		case opExtension:
			exts = append(exts, wordsString(in.args))
			if firstExt < 0 {
				firstExt = i
			}
		case opMemoryModel:
			memModel = i
			if in.args[1] != memoryModelVulkan {
				t.Errorf("memory model %d, want Vulkan (%d)", in.args[1], memoryModelVulkan)
			}
		case opDecorate:
			if in.args[1] == decorationCoherent {
				t.Errorf("%d is Coherent, which the Vulkan memory model forbids", in.args[0])
			}
		case opControlBarrier:
			sem := constant(in.args[2])
			if sem&(semanticsMakeAvailable|semanticsMakeVisible) != semanticsMakeAvailable|semanticsMakeVisible || sem&semanticsAcquireRelease == 0 {
				t.Errorf("barrier semantics %#x lack AcquireRelease, MakeAvailable or MakeVisible", sem)
			}
		}
	}
	if firstExt < lastCap || memModel < firstExt {
		t.Errorf("capabilities end at %d, extensions start at %d, memory model at %d", lastCap, firstExt, memModel)
	}
	wantCaps := []uint32{capabilityCooperativeMatrixKHR, capabilityVulkanMemoryModel, capabilityVulkanMemoryModelDeviceScope,
		capabilityGroupNonUniform, capabilityStorageBuffer16BitAccess}
	wantExts := []string{extCooperativeMatrix, extVulkanMemoryModel, extension16BitStorage}
	if typ == ir.BF16 {
		wantCaps = append(wantCaps, capabilityBFloat16TypeKHR, capabilityBFloat16CooperativeMatrixKHR)
		wantExts = append(wantExts, extBFloat16)
	} else {
		wantCaps = append(wantCaps, capabilityFloat16)
	}
	for _, c := range wantCaps {
		if !caps[c] {
			t.Errorf("no capability %d", c)
		}
	}
	for _, x := range wantExts {
		if !slices.Contains(exts, x) {
			t.Errorf("no extension %s (have %v)", x, exts)
		}
	}
	uses := map[uint32]uint32{} // cooperative type id -> use
	comps := map[uint32]string{}
	for _, in := range insts {
		if in.op != opTypeCooperativeMatrixKHR {
			continue
		}
		id, comp := in.args[0], byID[in.args[1]]
		if scope, rows, cols := constant(in.args[2]), constant(in.args[3]), constant(in.args[4]); scope != scopeSubgroup || rows != 16 || cols != 16 {
			t.Errorf("type %d: scope %d, %dx%d", id, scope, rows, cols)
		}
		uses[id] = constant(in.args[5])
		switch {
		case comp.op == opTypeFloat && comp.args[1] == 32:
			comps[id] = "f32"
		case comp.op == opTypeFloat && comp.args[1] == 16 && len(comp.args) == 3 && comp.args[2] == fpEncodingBFloat16KHR:
			comps[id] = "bf16"
		case comp.op == opTypeFloat && comp.args[1] == 16 && len(comp.args) == 2:
			comps[id] = "f16"
		default:
			t.Errorf("type %d has component %v", id, comp)
		}
	}
	want := map[string]bool{typ.String() + "/0": true, typ.String() + "/1": true, "f32/2": true}
	for id, use := range uses {
		delete(want, fmt.Sprintf("%s/%d", comps[id], use))
	}
	if len(want) != 0 {
		t.Errorf("missing cooperative types %v (have uses %v, components %v)", want, uses, comps)
	}
	// resultIDs knows the core opcodes; add the cooperative ones with results.
	for _, in := range insts {
		switch in.op {
		case opCooperativeMatrixLoadKHR, opCooperativeMatrixMulAddKHR:
			byID[in.args[1]] = in
		}
	}
	typeOf := func(id uint32) uint32 { return byID[id].args[0] }
	mulAdds, loads, stores := 0, 0, 0
	classes := map[uint32]bool{}
	// staged counts the MulAdds whose a and b tiles were loaded from the
	// stages: Workgroup arrays of uvec4, at an odd stride (the padded pitch).
	staged := 0
	ptrType := func(tile uint32) inst { return byID[typeOf(byID[tile].args[2])] }
	fromStage := func(tile uint32) bool {
		pt := ptrType(tile)
		vec := byID[pt.args[2]]
		return pt.args[1] == storageWorkgroup && vec.op == opTypeVector && vec.args[2] == 4 && constant(byID[tile].args[4])%2 == 1
	}
	for _, in := range insts {
		switch in.op {
		case opCooperativeMatrixMulAddKHR:
			mulAdds++
			if fromStage(in.args[2]) && fromStage(in.args[3]) {
				staged++
			}
			if in.args[0] != typeOf(in.args[4]) || uses[typeOf(in.args[2])] != coopUseA || uses[typeOf(in.args[3])] != coopUseB || uses[in.args[0]] != coopUseAcc {
				t.Errorf("MulAdd %d: operand types %d %d %d, result %d", in.args[1], typeOf(in.args[2]), typeOf(in.args[3]), typeOf(in.args[4]), in.args[0])
			}
		case opCooperativeMatrixLoadKHR, opCooperativeMatrixStoreKHR:
			ops := in.args[2:5] // pointer, layout, stride
			if in.op == opCooperativeMatrixStoreKHR {
				ops = []uint32{in.args[0], in.args[2], in.args[3]}
				stores++
			} else {
				loads++
				if uses[in.args[0]] == 0 && comps[in.args[0]] == "" {
					t.Errorf("load %d of type %d, no cooperative type", in.args[1], in.args[0])
				}
			}
			ptr, layout, stride := ops[0], ops[1], ops[2]
			if l := constant(layout); l != coopRow && l != coopCol {
				t.Errorf("layout %d", l)
			}
			if st := byID[typeOf(stride)]; st.op != opTypeInt || st.args[1] != 32 {
				t.Errorf("stride %d of type %v", stride, st)
			}
			classes[byID[typeOf(ptr)].args[1]] = true
		}
	}
	if !classes[storageStorageBuffer] || !classes[storageWorkgroup] || len(classes) != 2 {
		t.Errorf("tiles move through storage classes %v, want StorageBuffer and Workgroup", classes)
	}
	// One K step of 32 on a 2×2 block of tiles: 2 k tiles × 4 products, all
	// from the stages (filled from the buffers whether or not the loads' test
	// passes).
	if mulAdds != 8 || staged != 8 || loads == 0 || stores == 0 {
		t.Errorf("%d MulAdds (want 8 from the stages, have %d), %d loads, %d stores", mulAdds, staged, loads, stores)
	}
	// The operands' bindings have a second, uvec4 view, read-only.
	views := map[uint32]int{}
	decos := decorations(insts)
	for _, in := range insts {
		if in.op != opVariable || in.args[2] != storageStorageBuffer {
			continue
		}
		views[decos[in.args[1]][decorationBinding][0]]++
	}
	if views[0] != 2 || views[1] != 2 || views[2] != 1 {
		t.Errorf("variables per binding %v, want 2 for a and b (their uvec4 views), 1 for c", views)
	}
	// Every access to buffer and workgroup memory is NonPrivatePointer.
	for _, in := range insts {
		var ptr uint32
		mask := 0
		switch in.op {
		case opLoad:
			ptr, mask = in.args[2], 3
		case opStore:
			ptr, mask = in.args[0], 2
		case opCooperativeMatrixLoadKHR:
			ptr, mask = in.args[2], 5
		case opCooperativeMatrixStoreKHR:
			ptr, mask = in.args[0], 4
		default:
			continue
		}
		switch byID[typeOf(ptr)].args[1] {
		case storageStorageBuffer, storageWorkgroup, storagePhysicalStorageBuffer:
			if len(in.args) <= mask || in.args[mask]&memoryAccessNonPrivatePointer == 0 {
				t.Errorf("opcode %d through %d: memory operands %v lack NonPrivatePointer", in.op, ptr, in.args[min(mask, len(in.args)):])
			}
		}
	}
	found := false
	for id, d := range decorations(insts) {
		if b, ok := d[decorationBuiltIn]; ok && b[0] == builtInSubgroupID {
			found = true
			if byID[typeOf(id)].args[1] != storageInput {
				t.Errorf("SubgroupId %d is not an Input", id)
			}
		}
	}
	if !found {
		t.Error("no SubgroupId input")
	}
	if got := sourceExtension(insts); !strings.HasPrefix(got, matrixPathPrefix+"cooperative: VK_KHR_cooperative_matrix 16x16x16, 4 subgroups of 32; acc 64x64 as 2x2 subgroups of 2x2 tiles; a_tile, b_tile staged through workgroup memory (16-byte loads, padded lines, two K slabs), the next K slab prefetched into registers") {
		t.Errorf("OpSourceExtension %q", got)
	}
}

// sourceExtension is the module's OpSourceExtension text ("" without one).
func sourceExtension(insts []inst) string {
	for _, in := range insts {
		if in.op == opSourceExtension {
			return wordsString(in.args)
		}
	}
	return ""
}

// wordsString decodes a literal string operand.
func wordsString(ws []uint32) string {
	var b []byte
	for _, w := range ws {
		for k := range 4 {
			c := byte(w >> (8 * k))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// TestScalarMatrixPathNamed checks that a program with matrices on the
// scalar path says so, and why, in an OpSourceExtension and passes
// spirv-val, and that a program without matrices has no such string.
func TestScalarMatrixPathNamed(t *testing.T) {
	val := spirvVal(t)
	for _, tc := range []struct {
		name   string
		p      *ir.Program
		target Target
		why    string
	}{
		{"tf32", gputest.TCProgram(ir.F32, true, 64, 64, 32, 128), coopTarget, "scalar: matrix_mma acc += a_tile·b_tile has f32 operands at tf32 precision"},
		{"no cooperative matrices", gputest.TCProgram(ir.BF16, false, 64, 64, 32, 128), fullTarget, "scalar: the device lists no 16x16x16"},
		{"no matrices", bare("bare", 4), coopTarget, ""},
	} {
		m, err := EmitFor(tc.p, tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		validate(t, val, tc.name, m)
		_, insts := decode(t, m.Words)
		got := sourceExtension(insts)
		if tc.why == "" {
			if got != "" || m.MatrixPath != "" {
				t.Errorf("%s: OpSourceExtension %q, MatrixPath %q", tc.name, got, m.MatrixPath)
			}
			continue
		}
		if !strings.HasPrefix(got, matrixPathPrefix+tc.why) || m.MatrixPath != MatrixPathScalar {
			t.Errorf("%s: OpSourceExtension %q, MatrixPath %q; want %q", tc.name, got, m.MatrixPath, tc.why)
		}
	}
}

// TestCoopPrefetchAfterFillBarrier pins where the K loop's prefetch sits,
// the order measured fastest on the H200 (docs/design.md, "Cooperative
// matrices"): the fill reads the prefetch registers before the barrier that
// precedes the products, and the next slab's loads are stored to them only
// after that barrier and before the first product, with one K slab (128×256×32
// at 256 invocations in 48 KiB) and with two (64×64×32 at 128). Issuing the
// loads before that barrier (between the fill and it) or before the fill
// (a second set of values held across the barrier) was slower: 225 and 206
// TFLOP/s bf16 against 243 at 128×256×32.
func TestCoopPrefetchAfterFillBarrier(t *testing.T) {
	for _, tc := range []struct {
		tm, tn, inv uint32
		limit       uint32
		slabs       string
	}{
		{128, 256, 256, 48 << 10, "one K slab"},
		{64, 64, 128, 0, "two K slabs"},
	} {
		t.Run(tc.slabs, func(t *testing.T) {
			target := coopTarget
			target.MaxSharedBytes = tc.limit
			m, err := EmitFor(gputest.TCProgram(ir.BF16, false, tc.tm, tc.tn, 32, tc.inv), target)
			if err != nil {
				t.Fatal(err)
			}
			_, insts := decode(t, m.Words)
			if got := sourceExtension(insts); !strings.Contains(got, tc.slabs+"), the next K slab prefetched into registers") {
				t.Fatalf("path %q, want %s and the prefetch", got, tc.slabs)
			}
			regs := map[uint32]bool{}
			for name, id := range names(insts) {
				if rest, ok := strings.CutPrefix(name, "kiln_prefetch_"); ok && !strings.HasSuffix(rest, "_flag") && !strings.HasSuffix(rest, "_key") {
					regs[id] = true
				}
			}
			mma, barrier := -1, -1
			for i, in := range insts {
				if in.op == opCooperativeMatrixMulAddKHR {
					mma = i
					break
				}
				if in.op == opControlBarrier {
					barrier = i
				}
			}
			if len(regs) == 0 || mma < 0 || barrier < 0 {
				t.Fatalf("%d prefetch registers, first product at %d, barrier before it at %d", len(regs), mma, barrier)
			}
			var loads, stores int
			for i, in := range insts {
				switch {
				case in.op == opLoad && regs[in.args[2]]:
					loads++
					if i > barrier {
						t.Errorf("instruction %d reads a prefetch register after the barrier at %d", i, barrier)
					}
				case in.op == opStore && regs[in.args[0]]:
					stores++
					if i < barrier || i > mma {
						t.Errorf("instruction %d stores a prefetch register outside the barrier at %d and the first product at %d", i, barrier, mma)
					}
				}
			}
			if loads != len(regs) || stores != len(regs) {
				t.Errorf("%d reads and %d stores of %d prefetch registers, want one each", loads, stores, len(regs))
			}
		})
	}
}
