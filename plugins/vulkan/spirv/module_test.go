package spirv

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// allPrograms is the semantic table plus the corpus.
func allPrograms(t testing.TB) []namedProgram {
	progs := semanticPrograms(t, map[string]int{})
	for _, k := range kernels.All() {
		progs = append(progs, namedProgram{k.Name, k.Program()})
	}
	return progs
}

func TestHeaderAndBytes(t *testing.T) {
	for _, np := range allPrograms(t) {
		m := mustEmit(t, np.name, np.prog)
		bound, insts := decode(t, m.Words)
		for id := range resultIDs(insts) {
			if id == 0 || id >= bound {
				t.Errorf("%s: id %d outside the header's bound %d", np.name, id, bound)
			}
		}
		if m.EntryPoint != "main" {
			t.Errorf("%s: entry point %q", np.name, m.EntryPoint)
		}
		b := m.Bytes()
		for i, w := range m.Words {
			if binary.LittleEndian.Uint32(b[4*i:]) != w {
				t.Fatalf("%s: Bytes word %d is not little-endian %#x", np.name, i, w)
			}
		}
	}
}

func TestPushConstantBlockHasOneCountPerBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 5, ir.MaxBuffers} {
		m := mustEmit(t, "bare", bare("bare", n))
		if m.PushConstantBytes != uint32(4*n) || m.Grid != GridFree {
			t.Errorf("%d buffers: PushConstantBytes = %d, grid mode %d, want %d and GridFree", n, m.PushConstantBytes, m.Grid, 4*n)
		}
		_, insts := decode(t, m.Words)
		byID := resultIDs(insts)
		found := false
		for _, in := range insts {
			if in.op != opVariable || in.args[2] != storagePushConstant {
				continue
			}
			found = true
			block := byID[byID[in.args[0]].args[2]] // pointer -> struct
			arr := byID[block.args[1]]              // struct member 0
			length := byID[arr.args[2]]             // array length constant
			if arr.op != opTypeArray || length.args[2] != uint32(n) {
				t.Errorf("%d buffers: push-constant member is %v of length %v", n, arr, length)
			}
			if got := decorations(insts)[arr.args[0]][decorationArrayStride]; !slices.Equal(got, []uint32{4}) {
				t.Errorf("%d buffers: counts array stride %v, want 4", n, got)
			}
		}
		if found != (n > 0) {
			t.Errorf("%d buffers: push-constant block declared = %t", n, found)
		}
	}
}

func TestBufferInterface(t *testing.T) {
	for _, np := range allPrograms(t) {
		m := mustEmit(t, np.name, np.prog)
		_, insts := decode(t, m.Words)
		byID, decos, members, named := resultIDs(insts), decorations(insts), memberDecorations(insts), names(insts)
		barrier := hasBarrier(np.prog.Body)
		for _, b := range np.prog.Buffers {
			v, ok := named[b.Name]
			if !ok {
				t.Fatalf("%s: buffer %q not named in the module", np.name, b.Name)
			}
			d := decos[v]
			if !slices.Equal(d[decorationDescriptorSet], []uint32{0}) || !slices.Equal(d[decorationBinding], []uint32{b.Binding}) {
				t.Errorf("%s: buffer %q has set %v binding %v, want 0 and %d", np.name, b.Name,
					d[decorationDescriptorSet], d[decorationBinding], b.Binding)
			}
			if byID[v].args[2] != storageStorageBuffer {
				t.Errorf("%s: buffer %q in storage class %d", np.name, b.Name, byID[v].args[2])
			}
			st := byID[byID[v].args[0]].args[2]
			if _, ok := decos[st][decorationBlock]; !ok {
				t.Errorf("%s: buffer %q struct is not a Block", np.name, b.Name)
			}
			if rt := byID[byID[st].args[1]]; rt.op != opTypeRuntimeArray {
				t.Errorf("%s: buffer %q holds opcode %d, want a runtime array", np.name, b.Name, rt.op)
			}
			_, nonWritable := members[st][decorationNonWritable]
			if nonWritable != (b.Access == ir.Read) {
				t.Errorf("%s: buffer %q (%s) NonWritable = %t", np.name, b.Name, b.Access, nonWritable)
			}
			atomics := map[string]bool{}
			atomicTargets(np.prog.Body, atomics)
			_, nonReadable := members[st][decorationNonReadable]
			if want := b.Access == ir.Write && !atomics[b.Name]; nonReadable != want {
				t.Errorf("%s: buffer %q (%s, atomics %t) NonReadable = %t", np.name, b.Name, b.Access, atomics[b.Name], nonReadable)
			}
			if _, restrict := d[decorationRestrict]; restrict {
				t.Errorf("%s: buffer %q is Restrict without Target.DisjointBindings", np.name, b.Name)
			}
			_, coherent := d[decorationCoherent]
			if want := barrier && b.Access == ir.ReadWrite; coherent != want {
				t.Errorf("%s: buffer %q (%s, barrier %t) Coherent = %t, want %t", np.name, b.Name, b.Access, barrier, coherent, want)
			}
		}
	}
}

// specConstants maps spec ids to their instructions.
func specConstants(insts []inst) map[uint32]inst {
	byID, out := resultIDs(insts), map[uint32]inst{}
	for target, d := range decorations(insts) {
		if id, ok := d[decorationSpecID]; ok {
			out[id[0]] = byID[target]
		}
	}
	return out
}

func TestSpecializationConstants(t *testing.T) {
	b := ir.NewBuilder("spec.ids", 8, 4, 2)
	out := b.Buffer("out", ir.U32, ir.Write)
	params := []ir.ParamDecl{
		{Name: "a", Type: ir.F32, Default: ir.LitF32(-2.5)},
		{Name: "on", Type: ir.Bool, Default: ir.LitBool(true)},
		{Name: "off", Type: ir.Bool, Default: ir.LitBool(false)},
		{Name: "n", Type: ir.I32, Default: ir.LitI32(-7)},
		{Name: "u", Type: ir.U32, Default: ir.LitU32(9)},
	}
	for _, d := range params {
		b.Param(d.Name, d.Type, d.Default)
	}
	b.Store(out, ir.LitU32(0), ir.WorkgroupSize(1))
	p := b.MustBuild()
	m := mustEmit(t, p.Name, p)
	_, insts := decode(t, m.Words)
	spec := specConstants(insts)
	ids := map[uint32]bool{}
	for _, d := range params {
		id, ok := m.ParamIDs[d.Name]
		if !ok || ids[id] {
			t.Fatalf("param %q: id %d (present %t) collides or is missing", d.Name, id, ok)
		}
		ids[id] = true
		in := spec[id]
		switch {
		case d.Type == ir.Bool && d.Default.Bool():
			if in.op != opSpecConstantTrue {
				t.Errorf("param %q: opcode %d, want OpSpecConstantTrue", d.Name, in.op)
			}
		case d.Type == ir.Bool:
			if in.op != opSpecConstantFalse {
				t.Errorf("param %q: opcode %d, want OpSpecConstantFalse", d.Name, in.op)
			}
		case in.op != opSpecConstant || in.args[2] != d.Default.Bits:
			t.Errorf("param %q: %v, want OpSpecConstant %#x", d.Name, in, d.Default.Bits)
		}
	}
}

// localSize returns the operands of the module's LocalSize execution mode.
func localSize(t *testing.T, insts []inst) []uint32 {
	t.Helper()
	for _, in := range insts {
		if in.op == opExecutionMode && in.args[1] == executionModeLocalSize {
			return in.args[2:]
		}
	}
	t.Fatal("no LocalSize execution mode")
	return nil
}

// TestWorkgroupSizeIsLocalSize pins the workgroup size: the LocalSize execution
// mode (Target.WorkgroupSize, or the program's), never the deprecated
// WorkgroupSize builtin, and workgroup_size reads are constants.
func TestWorkgroupSizeIsLocalSize(t *testing.T) {
	b := ir.NewBuilder("wg", 8, 4, 2)
	out := b.Buffer("out", ir.U32, ir.Write)
	for axis := range uint8(3) {
		b.Store(out, ir.LitU32(uint32(axis)), ir.WorkgroupSize(axis))
	}
	p := b.MustBuild()
	for _, c := range []struct{ over, want [3]uint32 }{{[3]uint32{}, [3]uint32{8, 4, 2}}, {[3]uint32{16, 1, 3}, [3]uint32{16, 1, 3}}} {
		m, err := EmitFor(p, Target{WorkgroupSize: c.over})
		if err != nil {
			t.Fatal(err)
		}
		_, insts := decode(t, m.Words)
		if got := localSize(t, insts); !slices.Equal(got, c.want[:]) || m.WorkgroupSize != c.want {
			t.Errorf("override %v: LocalSize %v, Module.WorkgroupSize %v, want %v", c.over, got, m.WorkgroupSize, c.want)
		}
		for target, d := range decorations(insts) {
			if got, ok := d[decorationBuiltIn]; ok && got[0] == 25 { // BuiltIn WorkgroupSize
				t.Errorf("override %v: id %d is decorated BuiltIn WorkgroupSize", c.over, target)
			}
		}
		byID := resultIDs(insts)
		stored := 0
		for _, in := range insts {
			if in.op == opStore && byID[in.args[1]].op == opConstant {
				stored++
			}
		}
		if stored != 3 {
			t.Errorf("override %v: %d of the 3 stored workgroup sizes are constants", c.over, stored)
		}
	}
	if _, err := EmitFor(p, Target{WorkgroupSize: [3]uint32{0, 1, 1}}); err == nil {
		t.Error("a target workgroup size with a zero axis was accepted")
	}
}

func TestSpecData(t *testing.T) {
	b := ir.NewBuilder("spec.data", 64, 2, 1)
	b.Param("a", ir.F32, ir.LitF32(2))
	b.Param("flag", ir.Bool, ir.LitBool(true))
	b.Param("n", ir.U32, ir.LitU32(5))
	p := b.MustBuild()
	m := mustEmit(t, p.Name, p)
	words := func(data []byte) []uint32 {
		var out []uint32
		for i := 0; i+4 <= len(data); i += 4 {
			out = append(out, binary.LittleEndian.Uint32(data[i:]))
		}
		return out
	}

	entries, data := SpecData(p, m, ir.SpecMap{})
	want := []uint32{math.Float32bits(2), 1, 5}
	if got := words(data); !slices.Equal(got, want) {
		t.Errorf("defaults: data %v, want %v", got, want)
	}
	wantIDs := []uint32{m.ParamIDs["a"], m.ParamIDs["flag"], m.ParamIDs["n"]}
	for i, e := range entries {
		if e.ID != wantIDs[i] || e.Offset != uint32(4*i) || e.Size != 4 {
			t.Errorf("entry %d = %+v, want id %d offset %d size 4", i, e, wantIDs[i], 4*i)
		}
	}
	if len(entries) != len(wantIDs) {
		t.Fatalf("%d entries, want %d", len(entries), len(wantIDs))
	}

	var spec ir.SpecMap
	spec.Set("a", ir.SpecF32(-1))
	spec.Set("flag", ir.SpecBool(false))
	spec.Set("n", ir.SpecI32(3)) // wrong type: the default stays
	spec.Set("unknown", ir.SpecU32(1))
	_, data = SpecData(p, m, spec)
	want = []uint32{math.Float32bits(-1), 0, 5}
	if got := words(data); !slices.Equal(got, want) {
		t.Errorf("overrides: data %v, want %v", got, want)
	}
	if e, d := SpecData(nil, m, spec); e != nil || d != nil {
		t.Error("SpecData with a nil program returned data")
	}
}

// opcodes counts the opcodes of a module.
func opcodes(insts []inst) map[uint32]int {
	out := map[uint32]int{}
	for _, in := range insts {
		out[in.op]++
	}
	return out
}

func TestFloatArithmeticIsNoContraction(t *testing.T) {
	for _, np := range allPrograms(t) {
		m := mustEmit(t, np.name, np.prog)
		_, insts := decode(t, m.Words)
		decos := decorations(insts)
		for _, in := range insts {
			switch in.op {
			case opFAdd, opFSub, opFMul, opFDiv:
				if _, ok := decos[in.args[1]][decorationNoContraction]; !ok {
					t.Errorf("%s: f32 arithmetic opcode %d result %d lacks NoContraction", np.name, in.op, in.args[1])
				}
			}
		}
	}
}

func TestNoVulkanUndefinedIntegerOps(t *testing.T) {
	const opSDiv, opSRem, opSMod = 135, 138, 139
	for _, np := range allPrograms(t) {
		_, insts := decode(t, mustEmit(t, np.name, np.prog).Words)
		ops := opcodes(insts)
		for _, op := range []uint32{opSDiv, opSRem, opSMod} {
			if ops[op] > 0 {
				t.Errorf("%s: emits opcode %d, undefined or trapping on Vulkan for some operands", np.name, op)
			}
		}
	}
}

func TestBarrierAndAtomicScopes(t *testing.T) {
	for _, np := range allPrograms(t) {
		_, insts := decode(t, mustEmit(t, np.name, np.prog).Words)
		byID := resultIDs(insts)
		constant := func(id uint32) uint32 { return byID[id].args[2] }
		storage := func(ptr uint32) uint32 {
			// The pointer comes from an OpAccessChain; its type names the class.
			return byID[byID[ptr].args[0]].args[1]
		}
		for _, in := range insts {
			switch {
			case in.op == opControlBarrier:
				exec, mem, sem := constant(in.args[0]), constant(in.args[1]), constant(in.args[2])
				if exec != scopeWorkgroup || mem != scopeWorkgroup || sem != 0x148 {
					t.Errorf("%s: barrier scopes %d/%d semantics %#x, want Workgroup/Workgroup 0x148", np.name, exec, mem, sem)
				}
			case isAtomic(in.op):
				scope, sem := constant(in.args[3]), constant(in.args[4])
				want := uint32(scopeDevice)
				if storage(in.args[2]) == storageWorkgroup {
					want = scopeWorkgroup
				}
				if scope != want || sem != semanticsNone {
					t.Errorf("%s: atomic opcode %d scope %d semantics %#x, want %d and 0", np.name, in.op, scope, sem, want)
				}
			}
		}
	}
}

func TestAtomicOpcodesFollowSignedness(t *testing.T) {
	want := map[ir.AtomicOp][2]uint32{ // u32, i32
		ir.AtomicAdd: {opAtomicIAdd, opAtomicIAdd}, ir.AtomicMin: {opAtomicUMin, opAtomicSMin},
		ir.AtomicMax: {opAtomicUMax, opAtomicSMax}, ir.AtomicAnd: {opAtomicAnd, opAtomicAnd},
		ir.AtomicOr: {opAtomicOr, opAtomicOr}, ir.AtomicXor: {opAtomicXor, opAtomicXor},
		ir.AtomicExchange:        {opAtomicExchange, opAtomicExchange},
		ir.AtomicCompareExchange: {opAtomicCompareExchange, opAtomicCompareExchange},
	}
	for _, op := range ir.AtomicOps() {
		for i, t32 := range []ir.Type{ir.U32, ir.I32} {
			got, err := atomicOpcode(op, t32)
			if err != nil || got != want[op][i] {
				t.Errorf("atomic %s on %s: opcode %d (%v), want %d", op, t32, got, err, want[op][i])
			}
		}
	}
	if _, err := atomicOpcode(ir.AtomicAdd, ir.F32); err == nil {
		t.Error("atomic add on f32 has an opcode")
	}
}

// TestNoFloatSelect pins the bit blend for f32 select: NVIDIA's compiler turns an
// OpSelect of floats over their own comparison into fmin/fmax, which is wrong for NaN
// and signed zeros, so no f32-typed OpSelect may appear.
func TestNoFloatSelect(t *testing.T) {
	for _, np := range allPrograms(t) {
		_, insts := decode(t, mustEmit(t, np.name, np.prog).Words)
		floats := map[uint32]bool{}
		for _, in := range insts {
			if in.op == opTypeFloat {
				floats[in.args[0]] = true
			}
		}
		for _, in := range insts {
			if in.op == opSelect && floats[in.args[0]] {
				t.Errorf("%s: OpSelect %d has a float result type", np.name, in.args[1])
			}
		}
	}
}
