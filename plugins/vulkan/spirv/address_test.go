package spirv

import (
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// TestAddressedBuffers emits every program with every binding reached through a
// buffer device address and checks the module: valid for Vulkan 1.1 with the
// extension, PhysicalStorageBuffer64 addressing, no descriptor for an addressed
// binding, 8-aligned address slots between the uniforms and the grid words, and every load and store
// through such a pointer Aligned 4. The semantics on addressed buffers are the
// conformance kit's (TestConformanceOnTheInterpreter addresses the odd bindings).
func TestAddressedBuffers(t *testing.T) {
	val := spirvVal(t)
	for _, np := range allPrograms(t) {
		all := len(np.prog.Buffers)
		target := fullTarget
		target.BufferAddresses = 1<<all - 1
		m, err := EmitFor(np.prog, target)
		if err != nil {
			t.Fatalf("%s: %v", np.name, err)
		}
		validate(t, val, np.name+"/addressed", m)
		if len(m.AddressOffsets) != all {
			t.Errorf("%s: %d address slots, want %d", np.name, len(m.AddressOffsets), all)
		}
		start := m.UniformOffset + 4*uint32(len(np.prog.Uniforms))
		for b, off := range m.AddressOffsets {
			if off%8 != 0 || off < start || off+8 > m.GridOffset {
				t.Errorf("%s: binding %d address at %d (uniforms end at %d, grid words at %d)", np.name, b, off, start, m.GridOffset)
			}
		}
		_, insts := decode(t, m.Words)
		byID, decos := resultIDs(insts), decorations(insts)
		model, capability := false, false
		for _, in := range insts {
			switch {
			case in.op == opMemoryModel:
				model = in.args[0] == addressingPhysicalStorageBuffer64
			case in.op == opCapability && in.args[0] == capabilityPhysicalStorageBufferAddresses:
				capability = true
			case in.op == opVariable && in.args[2] == storageStorageBuffer:
				t.Errorf("%s: StorageBuffer variable %d (binding %v) with every binding addressed", np.name, in.args[1], decos[in.args[1]][decorationBinding])
			case in.op == opLoad || in.op == opStore:
				ptr, rest := in.args[0], in.args[2:]
				if in.op == opLoad {
					ptr, rest = in.args[2], in.args[3:]
				}
				pt, ok := byID[byID[ptr].args[0]]
				if !ok || pt.op != opTypePointer || pt.args[1] != storagePhysicalStorageBuffer {
					continue
				}
				// Elements are 4 bytes, or 2 for IR v1.2's 16-bit types.
				if size := byID[pt.args[2]].args[1] / 8; !slices.Equal(rest, []uint32{memoryAccessAligned, size}) {
					t.Errorf("%s: access %v through a PhysicalStorageBuffer pointer without Aligned %d", np.name, in, size)
				}
			}
		}
		if all > 0 && (!model || !capability) {
			t.Errorf("%s: addressing model PhysicalStorageBuffer64 %t, capability %t", np.name, model, capability)
		}
	}
}

// TestDescriptorBuffersKeepLogicalAddressing pins the fallback: without
// Target.BufferAddresses no module declares the capability or addressing model.
func TestDescriptorBuffersKeepLogicalAddressing(t *testing.T) {
	for _, np := range allPrograms(t) {
		m := mustEmit(t, np.name, np.prog)
		if len(m.AddressOffsets) != 0 {
			t.Errorf("%s: address slots %v", np.name, m.AddressOffsets)
		}
		_, insts := decode(t, m.Words)
		for _, in := range insts {
			if in.op == opMemoryModel && in.args[0] != addressingLogical ||
				in.op == opCapability && in.args[0] == capabilityPhysicalStorageBufferAddresses {
				t.Errorf("%s: %v without addressed buffers", np.name, in)
			}
		}
	}
}

// TestRestrictWithDisjointBindings pins Restrict: on every buffer variable when
// the target promises disjoint bindings (and never otherwise; see
// TestBufferInterface), except a written buffer that a wide access reaches
// through a word view of its binding, which is Aliased instead (wide.go).
func TestRestrictWithDisjointBindings(t *testing.T) {
	val := spirvVal(t)
	for _, np := range allPrograms(t) {
		target := fullTarget
		target.DisjointBindings = true
		m, err := EmitFor(np.prog, target)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, val, np.name+"/restrict", m)
		_, insts := decode(t, m.Words)
		decos, named := decorations(insts), names(insts)
		viewed := wideTargets(np.prog)
		for _, b := range np.prog.Buffers {
			want := uint32(decorationRestrict)
			if viewed[b.Name] && b.Access != ir.Read {
				want = decorationAliased
			}
			if _, ok := decos[named[b.Name]][want]; !ok {
				t.Errorf("%s: buffer %q lacks decoration %d", np.name, b.Name, want)
			}
		}
	}
}

func TestBufferAddressesMustNameBindings(t *testing.T) {
	b := ir.NewBuilder("t.addr", 1, 1, 1)
	b.Buffer("out", ir.U32, ir.Write)
	if _, err := EmitFor(b.MustBuild(), Target{BufferAddresses: 0b10}); err == nil {
		t.Error("an address for a binding the program lacks was accepted")
	}
}
