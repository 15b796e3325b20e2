package spirv

import (
	"encoding/binary"
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// EntryPoint is the name of the compute entry point of every emitted module.
const EntryPoint = "main"

// Module is an emitted compute shader for one program.
type Module struct {
	// Words is the SPIR-V binary (version 1.3, for Vulkan 1.1 and later).
	Words []uint32
	// EntryPoint is the GLCompute entry point's name, always "main".
	EntryPoint string
	// WorkgroupSizeIDs are the specialization constant ids of the workgroup size on
	// x, y and z (the constituents of the WorkgroupSize builtin).
	WorkgroupSizeIDs [3]uint32
	// ParamIDs maps each ir parameter's name to its specialization constant id.
	ParamIDs map[string]uint32
	// PushConstantBytes is the size of the push-constant block: one u32 element count
	// per buffer, at offset 4*binding. It is 0 for a program without buffers.
	PushConstantBytes uint32
}

// SpecEntry is one VkSpecializationMapEntry: constant id, offset into the data blob
// and size in bytes.
type SpecEntry struct{ ID, Offset, Size uint32 }

// The specialization constant ids: the workgroup size first, then the parameters in
// declaration order.
const (
	firstParamSpecID = 3
	specEntrySize    = 4 // every constant is 32 bits; a bool is a VkBool32
)

// Bytes returns the module as little-endian bytes, as vkCreateShaderModule and
// files on disk take it.
func (m *Module) Bytes() []byte {
	out := make([]byte, 4*len(m.Words))
	for i, w := range m.Words {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

// SpecData returns the specialization map entries and data blob that specialize m
// for a dispatch of p: the workgroup size wg (the zero size keeps the program's),
// then every parameter, taken from spec when it holds a value of the parameter's
// type and from the parameter's default otherwise. Every entry is 4 bytes.
func SpecData(p *ir.Program, m *Module, spec ir.SpecMap, wg [3]uint32) (entries []SpecEntry, data []byte) {
	if p == nil || m == nil {
		return nil, nil
	}
	if wg == ([3]uint32{}) {
		wg = p.WorkgroupSize
	}
	add := func(id, bits uint32) {
		entries = append(entries, SpecEntry{ID: id, Offset: uint32(len(data)), Size: specEntrySize})
		data = binary.LittleEndian.AppendUint32(data, bits)
	}
	for axis, n := range wg {
		add(m.WorkgroupSizeIDs[axis], n)
	}
	for _, d := range p.Params {
		id, ok := m.ParamIDs[d.Name]
		if !ok {
			continue
		}
		bits := d.Default.Bits
		if v, set := spec.Get(d.Name); set {
			if l, scalar := v.Literal(); scalar && l.Type == d.Type {
				bits = l.Bits
			}
		}
		add(id, bits)
	}
	return entries, data
}

// Emit compiles p to a SPIR-V compute module with DESIGN.md's IR v1 semantics done
// in code: every buffer and shared access is bounds-checked against the element
// counts in the push-constant block (or the shared array's fixed count), integer
// division and remainder never trap, shifts are masked, float-to-int casts
// saturate, and f32 add/sub/mul/div are decorated NoContraction. Emit runs
// ir.Validate first and returns its error, wrapped, for an ill-formed program.
func Emit(p *ir.Program) (*Module, error) {
	if p == nil {
		return nil, fmt.Errorf("spirv: no program to emit. Fix: pass a program built with ir.NewBuilder or ir.ParseJSON")
	}
	if err := ir.Validate(p); err != nil {
		return nil, fmt.Errorf("spirv: program %q is not valid IR v1, so no shader was emitted: %w", p.Name, err)
	}
	e := newEmitter(p)
	if err := e.emitModule(); err != nil {
		return nil, fmt.Errorf("spirv: emitting program %q: %w", p.Name, err)
	}
	m := &Module{
		Words:             e.assemble(),
		EntryPoint:        EntryPoint,
		WorkgroupSizeIDs:  [3]uint32{0, 1, 2},
		ParamIDs:          make(map[string]uint32, len(p.Params)),
		PushConstantBytes: 4 * uint32(len(p.Buffers)),
	}
	for i, d := range p.Params {
		m.ParamIDs[d.Name] = firstParamSpecID + uint32(i)
	}
	return m, nil
}
