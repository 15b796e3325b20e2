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
	// WorkgroupSize is the workgroup size the module runs with (its LocalSize
	// execution mode): Target.WorkgroupSize, or the program's.
	WorkgroupSize [3]uint32
	// ParamIDs maps each ir parameter's name to its specialization constant id.
	ParamIDs map[string]uint32
	// PushConstantBytes is the size of the push-constant block: one u32 element count
	// per buffer, at offset 4*binding, then the program's uniform block (IR v1.1),
	// at UniformOffset, then the 8-byte buffer device addresses at
	// AddressOffsets, then, with GridLogical, the GridWordCount grid words at
	// GridOffset. It is 0 for a block with nothing in it.
	PushConstantBytes uint32
	// UniformOffset is the offset of the uniform block in the push constants:
	// 4*len(buffers). Uniform i is at UniformOffset + 4*i, as ir.EncodeUniforms
	// packs it.
	UniformOffset uint32
	// Grid says how the module may be launched; with GridLogical the grid words
	// (see [Launch.Words]) are at GridOffset, the end of the block.
	Grid       GridMode
	GridOffset uint32
	// AddressOffsets maps each binding of Target.BufferAddresses to the offset of
	// its buffer's device address (a little-endian u64, 8-byte aligned).
	AddressOffsets map[uint32]uint32
	// Subgroups reports whether the program uses subgroup builtins or operations,
	// so that its pipeline must run with full subgroups of a known size.
	Subgroups bool
	// LoopGuard reports that the module declares the loop guard's buffer (with
	// Target.LoopGuard, for a program with a loop): a storage buffer of
	// GuardBytes at binding len(buffers), which the backend zeroes before the
	// dispatch; a non-zero first word afterwards says that the driver ended a
	// loop the program had not finished, so the outputs are wrong (see
	// loopguard.go).
	LoopGuard bool
	// MatrixPath is the path a program's workgroup matrices take:
	// MatrixPathCooperative (matrix units, VK_KHR_cooperative_matrix),
	// MatrixPathScalar, or "" for a program without matrices (coop.go).
	MatrixPath string
}

// GridMode is how a module reads the grid builtins, and so how the backend may
// launch it.
type GridMode uint8

const (
	// GridFree: the module reads no grid builtin (workgroup_id, num_workgroups,
	// global_id), so a grid may run as any launches without grid words.
	GridFree GridMode = iota
	// GridLogical: the module computes the grid builtins from the grid words at
	// Module.GridOffset, so a grid runs as the launches of [Launches], each after
	// pushing its words.
	GridLogical
	// GridPhysical: the module reads the device's builtins (its grid words did
	// not fit in the push constants), so a grid must run as one launch within
	// maxComputeWorkGroupCount.
	GridPhysical
)

// SubgroupFeatures are the subgroup operation classes a device supports in
// compute shaders, with the bit values of VkSubgroupFeatureFlagBits.
type SubgroupFeatures uint32

// The subgroup operation classes IR v1.1 needs.
const (
	// SubgroupBasic: subgroup_size and subgroup_invocation_id.
	SubgroupBasic SubgroupFeatures = 1 << 0
	// SubgroupArithmetic: subgroup_add, subgroup_min and subgroup_max.
	SubgroupArithmetic SubgroupFeatures = 1 << 2
	// SubgroupBallot: subgroup_broadcast of a constant lane.
	SubgroupBallot SubgroupFeatures = 1 << 3
	// SubgroupShuffle: subgroup_shuffle, and subgroup_broadcast of a lane
	// computed at run time (SPIR-V 1.3 broadcasts only constant lanes).
	SubgroupShuffle SubgroupFeatures = 1 << 4
)

// Target is what the device offers that the emitted code depends on, and how the
// pipeline will be run. The zero Target is any Vulkan 1.1 device, the program's
// workgroup size and every buffer through a descriptor.
type Target struct {
	// WorkgroupSize is the workgroup size to emit for (the module's LocalSize);
	// the zero size is the program's.
	WorkgroupSize [3]uint32
	// BufferAddresses has bit b set for each binding b that the module reaches
	// through a buffer device address in the push constants
	// (PhysicalStorageBuffer64), for a buffer larger than the device's
	// maxStorageBufferRange; the device must have the bufferDeviceAddress
	// feature enabled. The other bindings are storage-buffer descriptors. (64
	// bits hold ir.MaxBuffers bindings.)
	BufferAddresses uint64
	// DisjointBindings promises that no two bindings of a dispatch overlap in
	// memory, so that buffers are decorated Restrict.
	DisjointBindings bool
	// MaxPushConstantBytes is the device's maxPushConstantsSize; 0 means 128,
	// what every device has. A module whose grid words do not fit after the
	// counts, uniforms and addresses reads the physical grid builtins instead
	// (GridPhysical).
	MaxPushConstantBytes uint32
	// SignedZeroInfNanPreserve makes modules declare the SPV_KHR_float_controls
	// execution mode SignedZeroInfNanPreserve for 32-bit floats, for a device
	// whose shaderSignedZeroInfNanPreserveFloat32 is true. Without it Vulkan lets a
	// compiler assume that -0, infinities and NaN do not occur, and llvmpipe then
	// folds -0 * 5 to +0 and 1 / -0 to +inf.
	SignedZeroInfNanPreserve bool
	// DenormPreserve makes modules declare the execution mode DenormPreserve for
	// 32-bit floats, for a device whose shaderDenormPreserveFloat32 is true:
	// denormal operands and results are kept, not flushed to zero.
	DenormPreserve bool
	// Float16 says that the device has shaderFloat16, so f16 values and
	// arithmetic (SPIR-V Float16) can be emitted; Storage16 that it has
	// storageBuffer16BitAccess, so buffers of f16 and bf16 can. A program that
	// needs one the target lacks is an error that names it (IR v1.2; see
	// half.go).
	Float16, Storage16 bool
	// Int16 says that the device has shaderInt16: a bf16 buffer reached
	// through a device address (BufferAddresses) needs it, since its 16-bit
	// integer elements then appear in the push constants' pointer type.
	Int16 bool
	// SignedZeroInfNanPreserve16 makes modules with f16 arithmetic declare
	// SignedZeroInfNanPreserve for 16-bit floats, for a device whose
	// shaderSignedZeroInfNanPreserveFloat16 is true.
	SignedZeroInfNanPreserve16 bool
	// MaxSharedBytes is the device's maxComputeSharedMemorySize: a program
	// whose shared arrays and workgroup matrices (held in workgroup memory on
	// the scalar matrix path, matrix.go) need more is an error. 0 checks
	// nothing.
	MaxSharedBytes uint32
	// Subgroups are the subgroup operation classes the device supports in
	// compute shaders; a program that needs another is rejected.
	Subgroups SubgroupFeatures
	// LoopGuard makes every loop report, in the guard buffer (Module.LoopGuard),
	// an invocation that left it other than as the program says: for a driver
	// that ends long loops by itself, Mesa's llvmpipe (see loopguard.go).
	LoopGuard bool
	// FoldSpec, when set, folds the parameter values it holds (the defaults
	// for those it leaves out) into the module as constants instead of
	// declaring specialization constants: the module serves that
	// specialization only (Module.ParamIDs is empty and SpecData returns no
	// entries), and the emitter folds arithmetic on the parameters and can
	// prove more shared-array indices in bounds (see docs/design.md, "Value
	// ranges and bounds-check elision"). A value whose type is not its
	// parameter's, or that names no parameter, is an error. (A pointer keeps
	// Target comparable.)
	FoldSpec *ir.SpecMap
	// Coop is what the device offers for the cooperative-matrix path (see
	// SelectCoop); the zero value puts every matrix on the scalar path.
	Coop CoopTarget
}

// SpecEntry is one VkSpecializationMapEntry: constant id, offset into the data blob
// and size in bytes.
type SpecEntry struct{ ID, Offset, Size uint32 }

// The specialization constant ids: the parameters in declaration order.
const (
	firstParamSpecID = 0
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
// for a dispatch of p: every parameter, taken from spec when it holds a value of
// the parameter's type and from the parameter's default otherwise. Every entry is
// 4 bytes.
func SpecData(p *ir.Program, m *Module, spec ir.SpecMap) (entries []SpecEntry, data []byte) {
	if p == nil || m == nil {
		return nil, nil
	}
	add := func(id, bits uint32) {
		entries = append(entries, SpecEntry{ID: id, Offset: uint32(len(data)), Size: specEntrySize})
		data = binary.LittleEndian.AppendUint32(data, bits)
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

// Emit is EmitFor with the zero Target (any Vulkan 1.1 device).
func Emit(p *ir.Program) (*Module, error) { return EmitFor(p, Target{}) }

// EmitFor compiles p to a SPIR-V compute module with the IR semantics of docs/design.md done
// in code: every buffer and shared access is bounds-checked against the element
// counts in the push-constant block (or the shared array's fixed count), integer
// division and remainder never trap, shifts are masked, float-to-int casts
// saturate, and f32 add/sub/mul/div are decorated NoContraction. Emit runs
// ir.Validate first and returns its error, wrapped, for an ill-formed program; a
// program that needs what t lacks (a subgroup operation class) is an error that
// names it.
func EmitFor(p *ir.Program, t Target) (*Module, error) {
	if p == nil {
		return nil, fmt.Errorf("spirv: no program to emit. Fix: pass a program built with ir.NewBuilder or ir.ParseJSON")
	}
	if err := ir.Validate(p); err != nil {
		return nil, fmt.Errorf("spirv: program %q is not valid IR v1, so no shader was emitted: %w", p.Name, err)
	}
	if t.WorkgroupSize != ([3]uint32{}) {
		if err := ir.CheckWorkgroupSize(t.WorkgroupSize); err != nil {
			return nil, fmt.Errorf("spirv: program %q: bad target workgroup size: %w", p.Name, err)
		}
	}
	if len(p.Buffers) < 64 && t.BufferAddresses>>len(p.Buffers) != 0 {
		return nil, fmt.Errorf("spirv: program %q has %d buffers, so Target.BufferAddresses %#x names bindings it lacks. Fix: set only the bits of the program's bindings", p.Name, len(p.Buffers), t.BufferAddresses)
	}
	var folded map[string]ir.Literal
	if t.FoldSpec != nil {
		var err error
		if folded, err = p.ParamValues(*t.FoldSpec); err != nil {
			return nil, fmt.Errorf("spirv: program %q: %w", p.Name, err)
		}
	}
	e, err := emit(p, t, folded, false)
	if err != nil {
		return nil, err
	}
	limit := t.MaxPushConstantBytes
	if limit == 0 {
		limit = minPushConstantBytes
	}
	mode, size := GridFree, e.layout.grid
	if e.gridUsed {
		mode, size = GridLogical, e.layout.grid+4*GridWordCount
		if size > limit {
			if e, err = emit(p, t, folded, true); err != nil {
				return nil, err
			}
			mode, size = GridPhysical, e.layout.grid
		}
	}
	m := &Module{
		Words:             e.finishMatrices(e.assemble()),
		EntryPoint:        EntryPoint,
		WorkgroupSize:     e.wg,
		ParamIDs:          make(map[string]uint32, len(p.Params)),
		PushConstantBytes: size,
		UniformOffset:     e.layout.uniforms,
		Grid:              mode,
		GridOffset:        e.layout.grid,
		AddressOffsets:    e.layout.addresses,
		Subgroups:         e.subgroups,
		LoopGuard:         e.guard.buffer != 0,
		MatrixPath:        e.matrixPath,
	}
	for i, d := range p.Params {
		if folded == nil {
			m.ParamIDs[d.Name] = firstParamSpecID + uint32(i)
		}
	}
	return m, nil
}

// minPushConstantBytes is the maxPushConstantsSize every Vulkan device has.
const minPushConstantBytes = 128

// emit runs the emitter on p for t, with the parameters folded to the values of
// folded unless it is nil, and with the physical grid builtins when physicalGrid
// is set.
func emit(p *ir.Program, t Target, folded map[string]ir.Literal, physicalGrid bool) (*emitter, error) {
	e := newEmitter(p, t)
	e.folded = folded
	e.physicalGrid = physicalGrid
	err := e.emitModule()
	if err == nil {
		err = e.err
	}
	if err != nil {
		return nil, fmt.Errorf("spirv: emitting program %q: %w", p.Name, err)
	}
	return e, nil
}
