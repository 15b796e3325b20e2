package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
	"github.com/kiln-dev/kiln/plugins/internal/scope"
)

// emitter builds one module. Ids are handed out in a fixed order and every table is
// written in creation order, so the same program always gives the same words.
type emitter struct {
	prog   *ir.Program
	target Target
	next   uint32 // the next free id

	// caps are the capabilities the module declares beyond Shader, in the order
	// first needed; subgroups is set when the program uses subgroups.
	caps      []uint32
	subgroups bool
	// err is the first problem found; see fail.
	err error

	// Module sections, in their logical order.
	entryIface  []uint32 // the Input variables listed by OpEntryPoint
	debug       []uint32 // OpName
	annotations []uint32 // OpDecorate, OpMemberDecorate
	globals     []uint32 // types, constants, spec constants, global variables

	// The function: OpVariables of the entry block, the loop-invariant values hoisted
	// into the entry block, and the blocks that follow it.
	vars, preamble, body []uint32

	glsl    uint32 // the GLSL.std.450 import, 0 until used
	mainID  uint32
	startID uint32 // the first block after the entry block

	// dynamic holds the values known to vary at run time: loads, phis, atomic
	// results and what is computed from them. Other values may be constants once
	// the pipeline is specialized (see sel).
	dynamic map[uint32]bool

	types   map[typeKey]uint32
	consts  map[ir.Literal]uint32
	hoisted map[hoistKey]uint32
	inputs  map[ir.BuiltinKind]uint32

	arrays   map[string]array
	params   map[string]value
	uniforms map[string]uniform
	pushVar  uint32 // the push-constant block variable
	wg       [3]uint32
	// The push-constant block: its members and their offsets, laid out by
	// layout; gridMember is the member of the grid words (see Launch), which
	// exists when gridUsed. With physicalGrid the grid builtins are the
	// physical ones and no grid words are read.
	pushMembers, pushOffsets []uint32
	gridMember               uint32
	layout                   pushLayout
	gridUsed, physicalGrid   bool

	// Control-flow state of the function being emitted.
	cur    uint32      // label of the current block
	open   bool        // the current block has no terminator yet
	loops  []loopExits // the enclosing loops, innermost last
	scopes scope.Stack[local]
	// assigned are the vars some assign sets; the others keep the range of
	// their initial value.
	assigned map[string]bool
	// folded holds every parameter's value with Target.FoldSpec, nil without.
	folded map[string]ir.Literal
	// guard is the loop guard's state (Target.LoopGuard; loopguard.go).
	guard loopGuard
	// coop is the cooperative-matrix plan, nil on the scalar matrix path;
	// matrixPath and matrixWhy name the path a program with matrices takes
	// and why (coop.go).
	coop                  *coopPlan
	matrixPath, matrixWhy string
	// wideViews are the word views of 16-bit buffers (wide.go), by binding
	// and run length.
	wideViews map[[2]uint32]uint32
}

// loopExits are where break (merge) and continue (cont) branch to, and the
// bool a break stores true in a guarded loop (left, 0 unguarded; see
// loopguard.go).
type loopExits struct{ merge, cont, left uint32 }

// uniform is a uniform's member of the push-constant block and its type.
type uniform struct {
	member uint32
	t      ir.Type
}

// typeKey identifies a type that is declared once: an opcode and up to two operands
// (component or element type, storage class, length constant).
type typeKey struct{ op, a, b uint32 }

// hoistKey identifies a value computed once in the entry block: a builtin axis, a
// buffer's element count or a uniform.
type hoistKey struct {
	kind    ir.BuiltinKind // 0 for an element count, a uniform, a grid word or an address
	axis    uint8
	binding uint32
	uniform string
	// grid is 1 + the index of a grid word; address is set for a buffer's
	// address (at binding).
	grid    uint8
	address bool
	// input is set for a physical Input builtin.
	input bool
}

// value is an SSA value and its IR type. rng is the range of an integer or bool
// value (see docs/design.md, "Value ranges and bounds-check elision"), Unknown
// unless set; a value whose range is one number is that constant.
type value struct {
	id  uint32
	t   ir.Type
	rng ranges.Range
}

// local is a name in scope: an SSA value (let, for, atomic result) or a Function
// variable (var).
type local struct {
	value
	variable bool
}

// array is a buffer or a shared array.
type array struct {
	varID   uint32
	elem    ir.Type
	shared  bool
	binding uint32 // buffers: the binding and push-constant slot
	count   uint32 // shared arrays: the fixed element count
	// addressed buffers are reached through the PhysicalStorageBuffer pointer in
	// push-constant member; block is the pointee Block struct.
	addressed bool
	member    uint32
	block     uint32
	// private arrays (shared is also set: a fixed count) are Function
	// variables: the slices of workgroup matrices each invocation holds
	// (matrix.go).
	private bool
}

func newEmitter(p *ir.Program, t Target) *emitter {
	wg := t.WorkgroupSize
	if wg == ([3]uint32{}) {
		wg = p.WorkgroupSize
	}
	return &emitter{
		prog:     p,
		target:   t,
		wg:       wg,
		layout:   layoutOf(p, t.BufferAddresses),
		uniforms: map[string]uniform{},
		next:     1,
		types:    map[typeKey]uint32{},
		dynamic:  map[uint32]bool{},
		consts:   map[ir.Literal]uint32{},
		hoisted:  map[hoistKey]uint32{},
		inputs:   map[ir.BuiltinKind]uint32{},
		arrays:   map[string]array{},
		params:   map[string]value{},
		assigned: ranges.Assigned(p.Body),
	}
}

// hasCapability reports whether the module needs capability c.
func (e *emitter) hasCapability(c uint32) bool {
	for _, have := range e.caps {
		if have == c {
			return true
		}
	}
	return false
}

// capability records that the module needs capability c.
func (e *emitter) capability(c uint32) {
	for _, have := range e.caps {
		if have == c {
			return
		}
	}
	e.caps = append(e.caps, c)
}

func (e *emitter) id() uint32 {
	n := e.next
	e.next++
	return n
}

func (e *emitter) name(id uint32, s string) {
	e.debug = appendInst(e.debug, opName, append([]uint32{id}, stringWords(s)...)...)
}

func (e *emitter) decorate(id uint32, operands ...uint32) {
	e.annotations = appendInst(e.annotations, opDecorate, append([]uint32{id}, operands...)...)
}

func (e *emitter) memberDecorate(id, member uint32, operands ...uint32) {
	e.annotations = appendInst(e.annotations, opMemberDecorate, append([]uint32{id, member}, operands...)...)
}

// global declares a type, constant or variable with a fresh result id. typed says
// whether the instruction has a result type (operands[0]) before its result id.
func (e *emitter) global(op uint32, typed bool, operands ...uint32) uint32 {
	id := e.id()
	if typed {
		e.globals = appendInst(e.globals, op, append([]uint32{operands[0], id}, operands[1:]...)...)
	} else {
		e.globals = appendInst(e.globals, op, append([]uint32{id}, operands...)...)
	}
	return id
}

// typ returns the id of a deduplicated type, declaring it on first use.
func (e *emitter) typ(k typeKey, operands ...uint32) uint32 {
	if id, ok := e.types[k]; ok {
		return id
	}
	id := e.global(k.op, false, operands...)
	e.types[k] = id
	return id
}

func (e *emitter) voidType() uint32 { return e.typ(typeKey{op: opTypeVoid}) }

// scalar returns the SPIR-V type of an IR type: bool, a 32-bit signed (i32) or
// unsigned (u32) integer, or a 32-bit float. Any other type (which ir.Validate
// rules out) records an error that EmitFor returns, and stands in as u32.
func (e *emitter) scalar(t ir.Type) uint32 {
	switch t {
	case ir.Bool:
		return e.typ(typeKey{op: opTypeBool})
	case ir.I32:
		return e.typ(typeKey{op: opTypeInt, a: 32, b: 1}, 32, 1)
	case ir.F32:
		return e.typ(typeKey{op: opTypeFloat, a: 32}, 32)
	case ir.F16:
		return e.f16()
	case ir.U32, ir.BF16: // a bf16 value is a u32 holding its bits (half.go)
	default:
		e.fail(fmt.Errorf("type %d has no SPIR-V form. Fix: use bool, i32, u32, f32, f16 or bf16", t))
	}
	return e.typ(typeKey{op: opTypeInt, a: 32}, 32, 0)
}

// fail records err, the first problem found; EmitFor returns it.
func (e *emitter) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// The scalar types the emitter itself introduces.
func (e *emitter) u32() uint32  { return e.scalar(ir.U32) }
func (e *emitter) i32() uint32  { return e.scalar(ir.I32) }
func (e *emitter) f32() uint32  { return e.scalar(ir.F32) }
func (e *emitter) bool() uint32 { return e.scalar(ir.Bool) }

func (e *emitter) uvec3() uint32 {
	u := e.u32()
	return e.typ(typeKey{op: opTypeVector, a: u, b: 3}, u, 3)
}

func (e *emitter) pointer(storage, pointee uint32) uint32 {
	return e.typ(typeKey{op: opTypePointer, a: storage, b: pointee}, storage, pointee)
}

// constant returns the id of a deduplicated constant of l's type and bits.
func (e *emitter) constant(l ir.Literal) uint32 {
	if l.Type == ir.BF16 {
		l = ir.LitU32(l.Bits) // a bf16 value is a u32 holding its bits
	}
	if id, ok := e.consts[l]; ok {
		return id
	}
	t := e.scalar(l.Type)
	var id uint32
	switch {
	case l.Type == ir.Bool && l.Bits != 0:
		id = e.global(opConstantTrue, true, t)
	case l.Type == ir.Bool:
		id = e.global(opConstantFalse, true, t)
	default:
		id = e.global(opConstant, true, t, l.Bits)
	}
	e.consts[l] = id
	return id
}

// literal is the value of constant l.
func (e *emitter) literal(l ir.Literal) value {
	return value{id: e.constant(l), t: l.Type, rng: ranges.Exact(l.Bits)}
}

// ranged gives v the range r, and makes it the constant when r holds one value
// (an integer or bool v only).
func (e *emitter) ranged(v value, r ranges.Range) value {
	if v.t.IsFloat() {
		return v
	}
	if c, ok := r.Const(); ok {
		return e.literal(ir.Literal{Type: v.t, Bits: c})
	}
	v.rng = r
	return v
}

// The constants the emitter itself introduces.
func (e *emitter) cu32(v uint32) uint32  { return e.constant(ir.LitU32(v)) }
func (e *emitter) ci32(v int32) uint32   { return e.constant(ir.LitI32(v)) }
func (e *emitter) cf32(v float32) uint32 { return e.constant(ir.LitF32(v)) }

// zero is the constant 0 (false for bool) of type t.
func (e *emitter) zero(t ir.Type) uint32 { return e.constant(ir.Literal{Type: t}) }

func (e *emitter) glslSet() uint32 {
	if e.glsl == 0 {
		e.glsl = e.id()
	}
	return e.glsl
}

// emitModule declares everything global, then emits main's body.
func (e *emitter) emitModule() error {
	e.declareParams()
	e.declareBuffers()
	if err := e.declarePushConstants(); err != nil {
		return err
	}
	e.declareShared()
	if err := e.declareMatrices(); err != nil {
		return err
	}
	e.mainID = e.id()
	e.name(e.mainID, EntryPoint)
	e.startID = e.id()
	e.label(e.startID)
	if err := e.zeroMatrices(); err != nil {
		return err
	}
	if err := e.block(e.prog.Body); err != nil {
		return err
	}
	if e.open {
		e.terminate(opReturn)
	}
	e.finishPushConstants()
	return nil
}

// declareParams declares each parameter as a specialization constant with its
// default, spec id firstParamSpecID+i; with Target.FoldSpec each is the constant
// of its value instead.
func (e *emitter) declareParams() {
	if e.folded != nil {
		for _, d := range e.prog.Params {
			e.params[d.Name] = e.literal(e.folded[d.Name])
		}
		return
	}
	for i, d := range e.prog.Params {
		t := e.scalar(d.Type)
		var id uint32
		switch {
		case d.Type == ir.Bool && d.Default.Bits != 0:
			id = e.global(opSpecConstantTrue, true, t)
		case d.Type == ir.Bool:
			id = e.global(opSpecConstantFalse, true, t)
		default:
			id = e.global(opSpecConstant, true, t, d.Default.Bits)
		}
		e.decorate(id, decorationSpecID, firstParamSpecID+uint32(i))
		e.name(id, d.Name)
		e.params[d.Name] = value{id: id, t: d.Type}
	}
}

// declareBuffers declares each buffer: a Block struct holding a runtime array of
// 4-byte elements, reached through a StorageBuffer variable at set 0 and its
// binding or, for the bindings of Target.BufferAddresses, through a
// PhysicalStorageBuffer pointer in the push constants. Read buffers are
// NonWritable, and write buffers without atomics NonReadable. When the program has a barrier,
// read_write buffers are Coherent, so that a plain store before the barrier is
// visible to the other invocations of the workgroup after it (write buffers are
// never loaded, and atomics are coherent by themselves). With
// Target.DisjointBindings the variables are Restrict.
func (e *emitter) declareBuffers() {
	coherent := hasBarrier(e.prog.Body)
	wide := wideTargets(e.prog)
	atomics := map[string]bool{}
	atomicTargets(e.prog.Body, atomics)
	for _, b := range e.prog.Buffers {
		elem := e.scalar(b.Type)
		if b.Type.Is16Bit() {
			e.storage16(b.Type)
			elem = e.memType(array{elem: b.Type})
		}
		st := e.global(opTypeStruct, false, e.runtimeArray(elem, b.Type.Size()))
		e.decorate(st, decorationBlock)
		e.memberDecorate(st, 0, decorationOffset, 0)
		switch b.Access {
		case ir.Read:
			e.memberDecorate(st, 0, decorationNonWritable)
		case ir.Write:
			if !atomics[b.Name] {
				e.memberDecorate(st, 0, decorationNonReadable)
			}
		}
		a := array{elem: b.Type, binding: b.Binding}
		if _, ok := e.layout.addresses[b.Binding]; ok {
			if b.Type == ir.BF16 {
				e.int16(b.Name)
			}
			if coherent && b.Access == ir.ReadWrite {
				e.memberDecorate(st, 0, decorationCoherent)
			}
			a.addressed, a.block = true, st
			e.name(st, b.Name)
			e.arrays[b.Name] = a
			continue
		}
		v := e.global(opVariable, true, e.pointer(storageStorageBuffer, st), storageStorageBuffer)
		e.decorate(v, decorationDescriptorSet, 0)
		e.decorate(v, decorationBinding, b.Binding)
		if coherent && b.Access == ir.ReadWrite {
			e.decorate(v, decorationCoherent)
		}
		switch {
		case wide[b.Name] && b.Access != ir.Read:
			// Accessed through a word view as well (wide.go).
			e.decorate(v, decorationAliased)
		case e.target.DisjointBindings:
			e.decorate(v, decorationRestrict)
		}
		e.name(v, b.Name)
		a.varID = v
		e.arrays[b.Name] = a
	}
}

// runtimeArray returns the runtime array type of elements elem of size bytes
// (4, or 2 for 16-bit types), declaring it (ArrayStride size) on first use.
func (e *emitter) runtimeArray(elem, size uint32) uint32 {
	k := typeKey{op: opTypeRuntimeArray, a: elem}
	if rt, ok := e.types[k]; ok {
		return rt
	}
	rt := e.typ(k, elem)
	e.decorate(rt, decorationArrayStride, size)
	return rt
}

// declarePushConstants declares the members of the push-constant block that
// come before the grid words, laid out by layoutOf: the element counts, an array
// of one u32 per buffer at offset 0 (member 0, when there are buffers), each
// uniform as a scalar member after them (the layout of ir.EncodeUniforms), and
// the device address of each addressed buffer, a PhysicalStorageBuffer pointer
// to its Block. finishPushConstants adds the grid words when the body read them
// and declares the block. See docs/design.md, "Vulkan".
func (e *emitter) declarePushConstants() error {
	if n := uint32(len(e.prog.Buffers)); n > 0 {
		counts := e.global(opTypeArray, false, e.u32(), e.cu32(n))
		e.decorate(counts, decorationArrayStride, 4)
		e.pushMembers, e.pushOffsets = append(e.pushMembers, counts), append(e.pushOffsets, 0)
	}
	for i, u := range e.prog.Uniforms {
		if u.Type != ir.I32 && u.Type != ir.U32 && u.Type != ir.F32 {
			return fmt.Errorf("uniform %q has type %s. Fix: declare uniforms as i32, u32 or f32", u.Name, u.Type)
		}
		e.uniforms[u.Name] = uniform{member: uint32(len(e.pushMembers)), t: u.Type}
		e.pushMembers = append(e.pushMembers, e.scalar(u.Type))
		e.pushOffsets = append(e.pushOffsets, e.layout.uniforms+4*uint32(i))
	}
	for _, b := range e.prog.Buffers {
		a := e.arrays[b.Name]
		if !a.addressed {
			continue
		}
		a.member = uint32(len(e.pushMembers))
		e.arrays[b.Name] = a
		e.pushMembers = append(e.pushMembers, e.pointer(storagePhysicalStorageBuffer, a.block))
		e.pushOffsets = append(e.pushOffsets, e.layout.addresses[b.Binding])
	}
	e.gridMember = uint32(len(e.pushMembers))
	e.pushVar = e.id()
	return nil
}

// finishPushConstants declares the push-constant block and its variable, with
// the grid words (an array of GridWordCount u32, the last member) when the body
// read them; nothing when the block would be empty.
func (e *emitter) finishPushConstants() {
	if e.gridUsed {
		words := e.global(opTypeArray, false, e.u32(), e.cu32(GridWordCount))
		e.decorate(words, decorationArrayStride, 4)
		e.pushMembers, e.pushOffsets = append(e.pushMembers, words), append(e.pushOffsets, e.layout.grid)
	}
	if len(e.pushMembers) == 0 {
		return
	}
	block := e.global(opTypeStruct, false, e.pushMembers...)
	e.decorate(block, decorationBlock)
	for m, off := range e.pushOffsets {
		e.memberDecorate(block, uint32(m), decorationOffset, off)
	}
	ptr := e.pointer(storagePushConstant, block)
	e.globals = appendInst(e.globals, opVariable, ptr, e.pushVar, storagePushConstant)
	e.name(e.pushVar, "kiln_push_constants")
}

// declareShared declares each shared array as a Workgroup variable of its fixed
// length.
func (e *emitter) declareShared() {
	for _, s := range e.prog.Shared {
		e.declareWorkgroupArray(s.Name, s.Name, s.Type, s.Count)
	}
}

// declareWorkgroupArray declares a Workgroup variable of count elements of
// type t (in memType's form), named debug in the module and key among the
// arrays.
func (e *emitter) declareWorkgroupArray(debug, key string, t ir.Type, count uint32) {
	a := array{elem: t, shared: true, count: count}
	elem := e.memType(a)
	if e.narrowBF16(a) {
		e.capability(capabilityInt16)
	}
	n := e.cu32(count)
	at := e.typ(typeKey{op: opTypeArray, a: elem, b: n}, elem, n)
	v := e.global(opVariable, true, e.pointer(storageWorkgroup, at), storageWorkgroup)
	e.name(v, debug)
	e.arrays[key] = array{varID: v, elem: t, shared: true, count: count}
}

// atomicTargets adds the name of every array an atomic in stmts applies to.
func atomicTargets(stmts []ir.Stmt, names map[string]bool) {
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.AtomicStmt:
			names[s.Target] = true
		case ir.IfStmt:
			atomicTargets(s.Then, names)
			atomicTargets(s.Else, names)
		case ir.ForStmt:
			atomicTargets(s.Body, names)
		case ir.WhileStmt:
			atomicTargets(s.Body, names)
		}
	}
}

// hasBarrier reports whether stmts hold a barrier, or a matrix statement (which
// has barriers inside, matrix.go).
func hasBarrier(stmts []ir.Stmt) bool {
	for _, s := range stmts {
		switch s := s.(type) {
		case ir.BarrierStmt, ir.MatrixFillStmt, ir.MatrixLoadStmt, ir.MatrixStoreStmt, ir.MatrixMMAStmt, ir.MatrixConvertStmt:
			return true
		case ir.IfStmt:
			if hasBarrier(s.Then) || hasBarrier(s.Else) {
				return true
			}
		case ir.ForStmt:
			if hasBarrier(s.Body) {
				return true
			}
		case ir.WhileStmt:
			if hasBarrier(s.Body) {
				return true
			}
		}
	}
	return false
}

// builtin returns builtin kind on axis. workgroup_size is a constant;
// workgroup_id, num_workgroups and global_id are logical (see grid.go); local_id
// and the subgroup builtins (IR v1.1, scalars that need subgroup support) are
// the Input builtins.
func (e *emitter) builtin(kind ir.BuiltinKind, axis uint8) (uint32, error) {
	if axis > 2 || !kind.HasAxis() && axis != 0 {
		return 0, fmt.Errorf("builtin %s has axis %d. Fix: use axis 0, 1 or 2 (0 for the subgroup builtins)", kind, axis)
	}
	switch kind {
	case ir.WorkgroupSizeBuiltin:
		return e.cu32(e.wg[axis]), nil
	case ir.GlobalIDBuiltin, ir.WorkgroupIDBuiltin, ir.NumWorkgroupsBuiltin:
		if !e.physicalGrid {
			return e.logicalBuiltin(kind, axis)
		}
	}
	if !kind.HasAxis() {
		if err := e.needSubgroups(SubgroupBasic, kind.String()); err != nil {
			return 0, err
		}
	}
	return e.physical(kind, axis)
}

// builtinRange is the range of builtin kind on axis: workgroup_size is its
// constant, local_id on axis a lies below the workgroup size's a, num_workgroups
// is at least 1; the others are unknown.
func (e *emitter) builtinRange(kind ir.BuiltinKind, axis uint8) ranges.Range {
	switch {
	case axis > 2:
	case kind == ir.WorkgroupSizeBuiltin:
		return ranges.Exact(e.wg[axis])
	case kind == ir.LocalIDBuiltin:
		return ranges.Between(0, e.wg[axis]-1)
	case kind == ir.NumWorkgroupsBuiltin:
		return ranges.Between(1, ^uint32(0))
	}
	return ranges.Unknown()
}

// physical returns the Input builtin kind (on axis, for a vector), loaded once in
// the entry block.
func (e *emitter) physical(kind ir.BuiltinKind, axis uint8) (uint32, error) {
	k := hoistKey{kind: kind, axis: axis, input: true}
	if id, ok := e.hoisted[k]; ok {
		return id, nil
	}
	v, err := e.input(kind)
	if err != nil {
		return 0, err
	}
	id := e.id()
	if kind.HasAxis() {
		vec := e.id()
		e.preamble = appendInst(e.preamble, opLoad, e.uvec3(), vec, v)
		e.preamble = appendInst(e.preamble, opCompositeExtract, e.u32(), id, vec, uint32(axis))
	} else {
		e.preamble = appendInst(e.preamble, opLoad, e.u32(), id, v)
	}
	e.dynamic[id] = true
	e.hoisted[k] = id
	return id, nil
}

// needSubgroups checks that the target supports the subgroup class f that what
// needs, and records the capabilities it takes.
func (e *emitter) needSubgroups(f SubgroupFeatures, what string) error {
	for _, class := range []SubgroupFeatures{SubgroupBasic, f} {
		if e.target.Subgroups&class == 0 {
			return fmt.Errorf("%s needs subgroup %s operations in compute shaders, which the device does not support (VkPhysicalDeviceSubgroupProperties). Fix: run the program on a device with them, or without subgroup operations",
				what, subgroupClassNames[class])
		}
	}
	e.subgroups = true
	e.capability(capabilityGroupNonUniform)
	if c, ok := subgroupClassCaps[f]; ok {
		e.capability(c)
	}
	return nil
}

// input returns the Input variable of a builtin, declaring it on first use: a
// uvec3, or a u32 for the subgroup builtins.
func (e *emitter) input(kind ir.BuiltinKind) (uint32, error) {
	if v, ok := e.inputs[kind]; ok {
		return v, nil
	}
	var b uint32
	switch kind {
	case ir.GlobalIDBuiltin:
		b = builtInGlobalInvocationID
	case ir.LocalIDBuiltin:
		b = builtInLocalInvocationID
	case ir.WorkgroupIDBuiltin:
		b = builtInWorkgroupID
	case ir.NumWorkgroupsBuiltin:
		b = builtInNumWorkgroups
	case ir.SubgroupSizeBuiltin:
		b = builtInSubgroupSize
	case ir.SubgroupInvocationIDBuiltin:
		b = builtInSubgroupLocalInvocationID
	default:
		return 0, fmt.Errorf("builtin %d is not defined. Fix: use one of the ir package's builtins", kind)
	}
	t := e.uvec3()
	if !kind.HasAxis() {
		t = e.u32()
	}
	v := e.global(opVariable, true, e.pointer(storageInput, t), storageInput)
	e.decorate(v, decorationBuiltIn, b)
	e.name(v, kind.String())
	e.inputs[kind] = v
	e.entryIface = append(e.entryIface, v)
	return v, nil
}

// uniformValue returns a uniform read from the push-constant block, loaded once in
// the entry block.
func (e *emitter) uniformValue(name string) (value, error) {
	u, ok := e.uniforms[name]
	if !ok {
		return value{}, fmt.Errorf("uniform %q is not declared. Fix: declare it in uniforms", name)
	}
	k := hoistKey{uniform: name}
	if id, ok := e.hoisted[k]; ok {
		return value{id: id, t: u.t}, nil
	}
	t := e.scalar(u.t)
	ptr := e.id()
	e.preamble = appendInst(e.preamble, opAccessChain, e.pointer(storagePushConstant, t), ptr, e.pushVar, e.cu32(u.member))
	id := e.id()
	e.preamble = appendInst(e.preamble, opLoad, t, id, ptr)
	e.dynamic[id] = true
	e.hoisted[k] = id
	return value{id: id, t: u.t}, nil
}

// count returns a buffer's element count from the push-constant block, loaded once
// in the entry block.
func (e *emitter) count(a array) uint32 {
	k := hoistKey{binding: a.binding}
	if id, ok := e.hoisted[k]; ok {
		return id
	}
	ptr := e.id()
	e.preamble = appendInst(e.preamble, opAccessChain, e.pointer(storagePushConstant, e.u32()), ptr,
		e.pushVar, e.cu32(0), e.cu32(a.binding))
	id := e.id()
	e.preamble = appendInst(e.preamble, opLoad, e.u32(), id, ptr)
	e.dynamic[id] = true
	e.hoisted[k] = id
	return id
}

// assemble lays the sections out in the order the SPIR-V specification requires.
func (e *emitter) assemble() []uint32 {
	fnType := e.typ(typeKey{op: opTypeFunction, a: e.voidType()}, e.voidType())
	var fn []uint32
	fn = appendInst(fn, opFunction, e.voidType(), e.mainID, functionControlNone, fnType)
	fn = appendInst(fn, opLabel, e.id())
	fn = append(fn, e.vars...)
	fn = append(fn, e.preamble...)
	fn = appendInst(fn, opBranch, e.startID)
	fn = append(fn, e.body...)
	fn = appendInst(fn, opFunctionEnd)

	var head []uint32
	head = appendInst(head, opCapability, capabilityShader)
	if len(e.layout.addresses) > 0 {
		head = appendInst(head, opCapability, capabilityPhysicalStorageBufferAddresses)
	}
	for _, c := range e.caps {
		head = appendInst(head, opCapability, c)
	}
	// Modules with f16 arithmetic keep 16-bit signed zeros, infinities and NaN
	// where the device can.
	preserve16 := e.target.SignedZeroInfNanPreserve16 && e.hasCapability(capabilityFloat16)
	if e.target.SignedZeroInfNanPreserve || preserve16 {
		head = appendInst(head, opCapability, capabilitySignedZeroInfNanPreserve)
	}
	if e.target.DenormPreserve {
		head = appendInst(head, opCapability, capabilityDenormPreserve)
	}
	if e.target.SignedZeroInfNanPreserve || preserve16 || e.target.DenormPreserve {
		head = appendInst(head, opExtension, stringWords("SPV_KHR_float_controls")...)
	}
	if e.hasCapability(capabilityStorageBuffer16BitAccess) {
		head = appendInst(head, opExtension, stringWords(extension16BitStorage)...)
	}
	addressing := uint32(addressingLogical)
	if len(e.layout.addresses) > 0 {
		head = appendInst(head, opExtension, stringWords("SPV_KHR_physical_storage_buffer")...)
		addressing = addressingPhysicalStorageBuffer64
	}
	if e.glsl != 0 {
		head = appendInst(head, opExtInstImport, append([]uint32{e.glsl}, stringWords("GLSL.std.450")...)...)
	}
	head = appendInst(head, opMemoryModel, addressing, memoryModelGLSL450)
	entry := append([]uint32{executionModelGLCompute, e.mainID}, stringWords(EntryPoint)...)
	head = appendInst(head, opEntryPoint, append(entry, e.entryIface...)...)
	head = appendInst(head, opExecutionMode, e.mainID, executionModeLocalSize, e.wg[0], e.wg[1], e.wg[2])
	if e.target.SignedZeroInfNanPreserve {
		head = appendInst(head, opExecutionMode, e.mainID, executionModeSignedZeroInfNanPreserve, 32)
	}
	if preserve16 {
		head = appendInst(head, opExecutionMode, e.mainID, executionModeSignedZeroInfNanPreserve, 16)
	}
	if e.target.DenormPreserve {
		head = appendInst(head, opExecutionMode, e.mainID, executionModeDenormPreserve, 32)
	}

	words := make([]uint32, 0, headerSize+len(head)+len(e.debug)+len(e.annotations)+len(e.globals)+len(fn))
	words = append(words, magic, version13, generator, e.next, 0)
	words = append(words, head...)
	words = append(words, e.debug...)
	words = append(words, e.annotations...)
	words = append(words, e.globals...)
	return append(words, fn...)
}
