package spirv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Emission of the cooperative-matrix path (coop.go says when it is taken):
//
//   - A matrix has a workgroup array of all its elements, as the scalar
//     path's mma operands do (bf16 in 16-bit words: the bf16 path needs
//     shaderInt16, so cooperative loads and stores can reach them), except a
//     fused operand (a stage instead, coopstage.go) and a register matrix no
//     statement needs that way (coopArrays). A matrix that is the
//     accumulator of a cooperative matmul lives in registers: each subgroup
//     holds its block of 16×16 tiles (OpTypeCooperativeMatrixKHR, Subgroup
//     scope, MatrixAccumulatorKHR) in Function variables, zeroed when the
//     shader starts (OpCompositeConstruct). Its array, where it has one,
//     holds a copy only around a statement that needs one: its tiles are
//     stored there (spill) before the statement and loaded back (reload)
//     after it.
//   - matrix_mma on cooperative operands: each subgroup loads the 16×16 tiles
//     of a and b its block needs from their workgroup arrays
//     (OpCooperativeMatrixLoadKHR, RowMajorKHR) and accumulates with
//     OpCooperativeMatrixMulAddKHR, k tile by k tile.
//   - matrix_load and matrix_store between a register matrix and a buffer (or
//     a shared array the tiles can reach) move each tile directly
//     (OpCooperativeMatrixLoadKHR/StoreKHR with the statement's layout and
//     stride) when the whole matrix lies inside the bound and in range, with
//     no index wrapping, offset and stride aligned to 16 bytes and, for a
//     store, a stride of at least the contiguous side (so no two elements
//     share an index). A matrix_load into a workgroup array does the same,
//     each subgroup copying tiles in turn through registers into the array.
//     Otherwise (a tile crosses the bound or the buffer's end, misaligned,
//     overlapping, or a buffer reached through a device address) a load
//     takes the scalar path's lowering through the array, which fills 0
//     exactly as the reference does, and a store from registers goes through
//     the band (bandStore), which skips writes as the reference does: the
//     test is a run-time branch on uniform values.
//   - A matrix_mma fused with the loads of its operands (fuseLoads) stages
//     them through workgroup memory and may prefetch (coopstage.go).
//   - Every other statement (convert, fill of an array, an mma on other
//     types) is the scalar path's lowering, with spills and reloads of the
//     register matrices it reads and writes.
//   - Barriers: a statement is preceded by a barrier when it reads or writes
//     an array or buffer that a matrix statement since the last barrier wrote,
//     or writes one such a statement read, or when other code ran since the
//     last matrix statement (a loop's back edge, the program's own code). The
//     module uses the Vulkan memory model (which SPV_KHR_cooperative_matrix
//     requires in shaders): barriers add MakeAvailable and MakeVisible, and no
//     buffer is Coherent.

// SPIR-V numbers of the path (SPV_KHR_cooperative_matrix,
// SPV_KHR_vulkan_memory_model, SPV_KHR_bfloat16).
const (
	opSourceExtension                      = 4
	opTypeCooperativeMatrixKHR             = 4456
	opCooperativeMatrixLoadKHR             = 4457
	opCooperativeMatrixStoreKHR            = 4458
	opCooperativeMatrixMulAddKHR           = 4459
	capabilityCooperativeMatrixKHR         = 6022
	capabilityVulkanMemoryModel            = 5345
	capabilityVulkanMemoryModelDeviceScope = 5346
	capabilityBFloat16TypeKHR              = 5116
	capabilityBFloat16CooperativeMatrixKHR = 5118
	memoryModelVulkan                      = 3
	semanticsMakeAvailable                 = 0x2000
	semanticsMakeVisible                   = 0x4000
	builtInSubgroupID                      = 40
	fpEncodingBFloat16KHR                  = 0
	memoryAccessNonPrivatePointer          = 0x20
	extCooperativeMatrix                   = "SPV_KHR_cooperative_matrix"
	extVulkanMemoryModel                   = "SPV_KHR_vulkan_memory_model"
	extBFloat16                            = "SPV_KHR_bfloat16"
)

// Cooperative matrix uses and memory layouts.
const (
	coopUseA   = 0
	coopUseB   = 1
	coopUseAcc = 2
	coopRow    = 0
	coopCol    = 1
)

// matrixPathPrefix starts the OpSourceExtension that names the matrix path.
const matrixPathPrefix = "kiln matrix path: "

// declareCoop plans the matrix path of the program and, for the cooperative
// path, declares the matrices' arrays, the register tiles and what the module
// needs; done is false for the scalar path, which declareMatrices then
// declares.
func (e *emitter) declareCoop() (done bool, err error) {
	if len(e.prog.Matrices) == 0 {
		return false, nil
	}
	c, why := planCoop(e.prog, e.target, e.wg)
	if c != nil && c.nv {
		if bytes := e.planStaging(c) + uint64(e.target.Coop.NV.Reserved); e.target.MaxSharedBytes != 0 && bytes > uint64(e.target.MaxSharedBytes) {
			khr := e.target
			khr.Coop.NV = CoopNV{}
			c, why = planCoop(e.prog, khr, e.wg)
			if c != nil {
				c.nvWhy = fmt.Sprintf("its workgroup memory with the driver's reserve, %d bytes, is more than the device's %d", bytes, e.target.MaxSharedBytes)
			}
		}
	}
	if c != nil {
		bytes := e.planStaging(c)
		if limit := e.target.MaxSharedBytes; limit != 0 && bytes > uint64(limit) {
			c, why = nil, fmt.Sprintf("the shared arrays, the matrices' arrays and the staged operands need %d bytes of workgroup memory on the cooperative path, more than the device's %d", bytes, limit)
		}
	}
	if c == nil {
		e.matrixPath, e.matrixWhy = MatrixPathScalar, why
		return false, nil
	}
	e.coop = c
	var parts []string
	for _, name := range c.order {
		r := c.regs[name]
		parts = append(parts, fmt.Sprintf("%s %dx%d as %dx%d subgroups of %dx%d tiles", name, r.m.Rows, r.m.Cols, r.gr, r.gc, r.rr, r.rc))
	}
	e.matrixPath = MatrixPathCooperative
	e.matrixWhy = fmt.Sprintf("VK_KHR_cooperative_matrix 16x16x16, %d subgroups of %d; %s", c.groups, c.sg, strings.Join(parts, ", "))
	if c.nv {
		parts = parts[:0]
		for _, name := range c.order {
			r := c.regs[name]
			parts = append(parts, fmt.Sprintf("%s %dx%d", name, r.m.Rows, r.m.Cols))
		}
		e.matrixWhy = fmt.Sprintf("VK_NV_cooperative_matrix2 workgroup scope (%s loads), %d invocations; %s one workgroup matrix each", e.target.Coop.NV.Loads, e.invocations(), strings.Join(parts, ", "))
	} else if e.target.Coop.NV.Usable() && c.nvWhy != "" {
		e.matrixWhy += "; not VK_NV_cooperative_matrix2: " + c.nvWhy
	}
	var fused []string
	for _, m := range e.prog.Matrices {
		if _, ok := c.fused[m.Name]; ok {
			fused = append(fused, m.Name)
		}
	}
	if len(fused) > 0 {
		slabs := "one K slab"
		if c.double {
			slabs = "two K slabs"
		}
		e.matrixWhy += "; " + strings.Join(fused, ", ") + " staged through workgroup memory (16-byte loads, padded lines, " + slabs + ")"
		if len(c.prefetch) > 0 {
			e.matrixWhy += ", the next K slab prefetched into registers"
		}
	}
	for _, m := range e.prog.Matrices {
		if c.arrays[m.Name] {
			e.declareWorkgroupArray(matrixArrayPrefix+m.Name, m.Name, m.Type, m.Rows*m.Cols)
		}
	}
	e.declareStaging(c)
	if err := e.needSubgroups(SubgroupBasic, "the cooperative matrix path"); err != nil {
		return true, err
	}
	e.capability(capabilityCooperativeMatrixKHR)
	e.capability(capabilityVulkanMemoryModel)
	if e.target.Coop.DeviceScope {
		e.capability(capabilityVulkanMemoryModelDeviceScope)
	}
	if c.bf16 {
		e.capability(capabilityBFloat16TypeKHR)
		e.capability(capabilityBFloat16CooperativeMatrixKHR)
	}
	if c.nv {
		e.declareNV()
	}
	c.semantics = e.cu32(semanticsAcquireRelease | semanticsWorkgroupMemory | semanticsUniformMemory | semanticsMakeAvailable | semanticsMakeVisible)
	in := e.global(opVariable, true, e.pointer(storageInput, e.u32()), storageInput)
	e.decorate(in, decorationBuiltIn, builtInSubgroupID)
	e.name(in, "kiln_subgroup_id")
	e.entryIface = append(e.entryIface, in)
	c.sgid = e.id()
	e.preamble = appendInst(e.preamble, opLoad, e.u32(), c.sgid, in)
	e.dynamic[c.sgid] = true
	for _, name := range c.order {
		r := c.regs[name]
		acc := e.regType(r)
		for i := range r.rr * r.rc {
			id := e.id()
			e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, acc), id, storageFunction)
			e.name(id, fmt.Sprintf("kiln_coop_%s_%d_%d", name, i/r.rc, i%r.rc))
			r.vars = append(r.vars, id)
		}
	}
	return true, nil
}

// coopComponent is the component type of cooperative matrices of t.
func (e *emitter) coopComponent(t ir.Type) uint32 {
	switch t {
	case ir.F16:
		return e.f16()
	case ir.BF16:
		return e.typ(typeKey{op: opTypeFloat, a: 16, b: 1}, 16, fpEncodingBFloat16KHR)
	}
	return e.f32()
}

// coopType is the cooperative matrix type of 16×16 elements of t for use.
func (e *emitter) coopType(t ir.Type, use uint32) uint32 {
	comp := e.coopComponent(t)
	k := typeKey{op: opTypeCooperativeMatrixKHR, a: comp, b: use}
	if id, ok := e.types[k]; ok {
		return id
	}
	return e.typ(k, comp, e.cu32(scopeSubgroup), e.cu32(coopTile), e.cu32(coopTile), e.cu32(use))
}

// zeroCoop zeroes the register tiles when the shader starts.
func (e *emitter) zeroCoop() {
	if e.coop == nil {
		return
	}
	for _, name := range e.coop.order {
		r := e.coop.regs[name]
		zero := e.op(opCompositeConstruct, e.regType(r), e.cf32(0))
		for _, v := range r.vars {
			e.inst(opStore, v, zero)
		}
	}
	if e.coop.double {
		e.inst(opStore, e.coop.parity, e.cu32(0))
	}
	done := map[*coopPrefetch]bool{}
	for _, m := range e.prog.Matrices {
		if pf := e.coop.prefetch[m.Name]; pf != nil && !done[pf] {
			e.inst(opStore, pf.flag, e.constant(ir.LitBool(false)))
			done[pf] = true
		}
	}
}

// coopStmt emits a matrix statement on the cooperative path.
func (e *emitter) coopStmt(s ir.Stmt) error {
	c := e.coop
	e.scopes.Push(nil)
	defer e.scopes.Pop()
	var err error
	switch s := s.(type) {
	case ir.MatrixFillStmt:
		if r := c.regs[s.Matrix]; r != nil {
			return e.coopFill(r, s) // registers only: no barrier, and the mark stays
		}
		err = e.coopScalar(s, nil, []string{s.Matrix})
	case ir.MatrixLoadStmt:
		if _, ok := c.fused[s.Matrix]; ok {
			if len(c.pending) == 0 {
				c.pendingAt = len(e.body)
			}
			c.pending[s.Matrix] = s
			return nil // emitted with its matrix_mma (coopFused): no code, and the mark stays
		}
		err = e.coopLoad(s)
	case ir.MatrixStoreStmt:
		err = e.coopStore(s)
	case ir.MatrixMMAStmt:
		if _, ok := c.fused[s.A]; ok {
			err = e.coopFused(s)
		} else if c.regs[s.Acc] != nil && coopMMA(e.prog, e.target, s) {
			err = e.coopMMA(s)
		} else {
			err = e.coopScalar(s, []string{s.Acc, s.A, s.B}, []string{s.Acc})
		}
	case ir.MatrixConvertStmt:
		err = e.coopScalar(s, []string{s.From}, []string{s.Matrix})
	default:
		return fmt.Errorf("statement %T is not a matrix statement. Fix: build statements with the ir package's types", s)
	}
	c.mark = len(e.body)
	return err
}

// coopFence emits a barrier when the statement that reads rd and writes wr
// (array and buffer names) may race with a matrix statement since the last
// barrier, or when other code ran since the last matrix statement.
func (e *emitter) coopFence(rd, wr []string) {
	c := e.coop
	conflict := c.mark != len(e.body)
	for _, n := range rd {
		conflict = conflict || c.written[n]
	}
	for _, n := range wr {
		conflict = conflict || c.written[n] || c.read[n]
	}
	if conflict {
		e.barrier()
		clear(c.read)
		clear(c.written)
	}
	for _, n := range rd {
		c.read[n] = true
	}
	for _, n := range wr {
		c.written[n] = true
	}
}

// coopScalar emits s as the scalar path's lowering, spilling the register
// matrices among rd before it and reloading those among wr after it.
func (e *emitter) coopScalar(s ir.Stmt, rd, wr []string) error {
	var spills []*coopReg
	for _, n := range rd {
		if r := e.coop.regs[n]; r != nil && !slices.Contains(spills, r) {
			spills = append(spills, r)
			wr = append(wr, n) // the spill writes its array
		}
	}
	e.coopFence(rd, wr)
	for _, r := range spills {
		if err := e.spill(r); err != nil {
			return err
		}
	}
	if len(spills) > 0 {
		e.barrier()
	}
	body, err := e.lowerMatrix(s)
	if err != nil {
		return err
	}
	if err := e.lowered(body); err != nil {
		return err
	}
	return e.reloadAll(wr)
}

// lowered emits a scalar-path lowering, which expects the invocation's linear
// id in kiln.i.
func (e *emitter) lowered(body []ir.Stmt) error {
	return e.block(append([]ir.Stmt{ir.LetStmt{Name: mxLinear, Value: e.linearID()}}, body...))
}

// reloadAll reloads the register matrices among names after a barrier.
func (e *emitter) reloadAll(names []string) error {
	first := true
	for _, n := range names {
		if r := e.coop.regs[n]; r != nil {
			if first {
				e.barrier()
				first = false
			}
			if err := e.reload(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// coopFill sets every tile of a register matrix to the value.
func (e *emitter) coopFill(r *coopReg, s ir.MatrixFillStmt) error {
	v, err := e.typed(s.Value, ir.F32, "the matrix_fill value")
	if err != nil {
		return err
	}
	x := e.op(opCompositeConstruct, e.regType(r), v)
	for _, id := range r.vars {
		e.inst(opStore, id, x)
	}
	return nil
}

// coopAddressing evaluates a load's or store's offset, stride and bound and
// binds them to the names the scalar lowering and the fast-path test use.
func (e *emitter) coopAddressing(offset, stride ir.Expr, bound *ir.MatrixBound) (off, str uint32, err error) {
	bind := func(name string, x ir.Expr, what string) (uint32, error) {
		v, err := e.typedValue(x, ir.U32, what)
		if err != nil {
			return 0, err
		}
		e.scopes.Bind(name, local{value: v})
		return v.id, nil
	}
	if off, err = bind(mxOffset, offset, "the matrix offset"); err != nil {
		return 0, 0, err
	}
	if str, err = bind(mxStride, stride, "the matrix stride"); err != nil {
		return 0, 0, err
	}
	if bound != nil {
		if _, err = bind(mxRows, bound.Rows, "the matrix bound's rows"); err != nil {
			return 0, 0, err
		}
		if _, err = bind(mxCols, bound.Cols, "the matrix bound's cols"); err != nil {
			return 0, 0, err
		}
	}
	return off, str, nil
}

// coopFast is the run-time test that m's tiles can move directly between
// registers and array a (named name) with the bound addressing: the whole
// matrix inside the bound and in range without wrapping, offset and stride
// aligned to 16 bytes, and for a store no two elements on one index. It is
// false, a constant, for an array the tiles cannot reach.
func (e *emitter) coopFast(m ir.MatrixDecl, a array, name string, layout ir.MatrixLayout, bounded, store bool) (value, error) {
	if a.addressed || !e.coopMovable(m.Type) || (a.elem == ir.BF16 && !e.narrowBF16(a)) {
		return e.literal(ir.LitBool(false)), nil
	}
	inner, outer := m.Cols, m.Rows
	if layout == ir.ColMajor {
		inner, outer = m.Rows, m.Cols
	}
	count := ir.Len(name)
	if a.shared {
		count = lit(a.count)
	}
	q := 16 / m.Type.Size()
	off, stride := loc(mxOffset), loc(mxStride)
	cond := ir.LAnd(ir.Ge(count, lit(inner)), ir.Le(off, ir.Sub(count, lit(inner))))
	cond = ir.LAnd(cond, ir.Le(stride, ir.Div(ir.Sub(ir.Sub(count, lit(inner)), off), lit(outer-1))))
	cond = ir.LAnd(cond, ir.Eq(ir.Rem(ir.BinaryExpr{Op: ir.OpOr, X: off, Y: stride}, lit(q)), lit(0)))
	if store {
		cond = ir.LAnd(cond, ir.Ge(stride, lit(inner)))
	}
	if bounded {
		cond = ir.LAnd(cond, ir.LAnd(ir.Ge(loc(mxRows), lit(m.Rows)), ir.Ge(loc(mxCols), lit(m.Cols))))
	}
	return e.typedValue(cond, ir.Bool, "the cooperative path's test")
}

// nonPrivate returns the operands of instruction op with NonPrivatePointer in
// the memory operands of a load or store through a pointer to buffer or
// workgroup memory (cooperative ones included), recording the storage class
// of pointer types and values on the way.
func (e *emitter) nonPrivate(op uint32, args []uint32, ptrClass, class map[uint32]uint32) []uint32 {
	mask := -1 // the index of the memory operand mask, or where it goes
	var ptr uint32
	switch op {
	case opTypePointer:
		ptrClass[args[0]] = args[1]
	case opVariable, opAccessChain:
		class[args[1]] = ptrClass[args[0]]
	case opLoad:
		class[args[1]] = ptrClass[args[0]]
		ptr, mask = args[2], 3
	case opStore:
		ptr, mask = args[0], 2
	case opCooperativeMatrixLoadKHR:
		ptr, mask = args[2], 5
	case opCooperativeMatrixStoreKHR:
		ptr, mask = args[0], 4
	case opCooperativeMatrixStoreTensorNV:
		ptr, mask = args[0], 3
	case opCooperativeMatrixLoadTensorNV:
		ptr, mask = args[2], 5
	}
	switch class[ptr] {
	case storageStorageBuffer, storageWorkgroup, storagePhysicalStorageBuffer:
	default:
		return args
	}
	out := append([]uint32(nil), args...)
	if mask < len(out) {
		out[mask] |= memoryAccessNonPrivatePointer
		return out
	}
	return append(out, memoryAccessNonPrivatePointer)
}

// coopMovable reports whether tiles of type t can be cooperative matrices in
// the module: f32 always, f16 and bf16 when the path runs them (bf16 then in
// 16-bit words in workgroup memory).
func (e *emitter) coopMovable(t ir.Type) bool {
	switch t {
	case ir.F16:
		return coopOperand(e.target, ir.F16)
	case ir.BF16:
		return e.coop.bf16
	}
	return true
}

// coopBranch emits fast when cond holds and slow otherwise, as a selection
// construct on the run-time value (uniform in the workgroup: matrix operands
// are), or only the arm a constant cond picks.
func (e *emitter) coopBranch(cond value, fast, slow func() error) error {
	if k, ok := cond.rng.Const(); ok {
		if k != 0 {
			return fast()
		}
		return slow()
	}
	then, els, merge := e.id(), e.id(), e.id()
	e.inst(opSelectionMerge, merge, selectionControlNone)
	e.terminate(opBranchConditional, cond.id, then, els)
	for _, arm := range []struct {
		label uint32
		emit  func() error
	}{{then, fast}, {els, slow}} {
		e.label(arm.label)
		if err := arm.emit(); err != nil {
			return err
		}
		e.terminate(opBranch, merge)
	}
	e.label(merge)
	return nil
}

// tileIndex is the index of the first element of tile (tr, tc) at offset off
// with stride stride in layout.
func (e *emitter) tileIndex(off, stride, tr, tc uint32, layout ir.MatrixLayout) uint32 {
	outer, inner := tr, tc
	if layout == ir.ColMajor {
		outer, inner = tc, tr
	}
	u, n := e.u32(), e.cu32(coopTile)
	x := e.op(opIMul, u, e.op(opIMul, u, outer, n), stride)
	return e.op(opIAdd, u, e.op(opIAdd, u, off, x), e.op(opIMul, u, inner, n))
}

// coopLayout is the SPIR-V memory layout of an IR layout.
func coopLayout(l ir.MatrixLayout) uint32 {
	if l == ir.ColMajor {
		return coopCol
	}
	return coopRow
}

// loadTile is an OpCooperativeMatrixLoadKHR of type typ from a[index].
func (e *emitter) loadTile(typ uint32, a array, index, stride uint32, layout ir.MatrixLayout) uint32 {
	return e.op(opCooperativeMatrixLoadKHR, typ, e.elemPtr(a, index), e.cu32(coopLayout(layout)), stride)
}

// storeTile is an OpCooperativeMatrixStoreKHR of x to a[index].
func (e *emitter) storeTile(a array, index, x, stride uint32, layout ir.MatrixLayout) {
	e.inst(opCooperativeMatrixStoreKHR, e.elemPtr(a, index), x, e.cu32(coopLayout(layout)), stride)
}

// eachRegion runs body in the subgroups that hold a block of r, with the
// block's row and column in the subgroup grid.
func (e *emitter) eachRegion(r *coopReg, body func(sr, sc uint32) error) error {
	c := e.coop
	if c.nv {
		return body(e.cu32(0), e.cu32(0)) // the whole workgroup holds the whole matrix
	}
	run := func() error {
		u := e.u32()
		return body(e.op(opUDiv, u, c.sgid, e.cu32(r.gc)), e.op(opUMod, u, c.sgid, e.cu32(r.gc)))
	}
	if r.gr*r.gc == c.groups {
		return run()
	}
	var err error
	e.guarded(e.op(opULessThan, e.bool(), c.sgid, e.cu32(r.gr*r.gc)), func() { err = run() })
	return err
}

// eachRegTile runs body for each tile the subgroup holds of r: its variable
// and its tile row and column in the matrix.
func (e *emitter) eachRegTile(r *coopReg, body func(v, tr, tc uint32) error) error {
	return e.eachRegion(r, func(sr, sc uint32) error {
		u := e.u32()
		for i := range r.rr {
			tr := e.op(opIAdd, u, e.op(opIMul, u, sr, e.cu32(r.rr)), e.cu32(i))
			for j := range r.rc {
				tc := e.op(opIAdd, u, e.op(opIMul, u, sc, e.cu32(r.rc)), e.cu32(j))
				if err := body(r.vars[i*r.rc+j], tr, tc); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// eachTile runs body for each tile of m, the subgroups taking them in turn
// (tile t to subgroup t mod the subgroup count).
func (e *emitter) eachTile(m ir.MatrixDecl, body func(tr, tc uint32) error) error {
	c := e.coop
	cols, tiles := m.Cols/coopTile, (m.Rows/coopTile)*(m.Cols/coopTile)
	u := e.u32()
	for j := uint32(0); j*c.groups < tiles; j++ {
		t := e.op(opIAdd, u, c.sgid, e.cu32(j*c.groups))
		run := func() error { return body(e.op(opUDiv, u, t, e.cu32(cols)), e.op(opUMod, u, t, e.cu32(cols))) }
		if (j+1)*c.groups <= tiles {
			if err := run(); err != nil {
				return err
			}
			continue
		}
		var err error
		e.guarded(e.op(opULessThan, e.bool(), t, e.cu32(tiles)), func() { err = run() })
		if err != nil {
			return err
		}
	}
	return nil
}

// spill stores r's tiles into its workgroup array (row-major).
func (e *emitter) spill(r *coopReg) error {
	a := e.arrays[r.m.Name]
	n := e.cu32(r.m.Cols)
	return e.eachRegTile(r, func(v, tr, tc uint32) error {
		x := e.op(opLoad, e.regType(r), v)
		e.storeTile(a, e.tileIndex(e.cu32(0), n, tr, tc, ir.RowMajor), x, n, ir.RowMajor)
		return nil
	})
}

// reload loads r's tiles from its workgroup array.
func (e *emitter) reload(r *coopReg) error {
	a := e.arrays[r.m.Name]
	n := e.cu32(r.m.Cols)
	return e.eachRegTile(r, func(v, tr, tc uint32) error {
		e.inst(opStore, v, e.loadTile(e.regType(r), a, e.tileIndex(e.cu32(0), n, tr, tc, ir.RowMajor), n, ir.RowMajor))
		return nil
	})
}

// copyUse is the use of the cooperative type that carries tiles of an array
// matrix of type t between memories.
func copyUse(t ir.Type) uint32 {
	if t == ir.F32 {
		return coopUseAcc
	}
	return coopUseA
}

// coopLoad emits a matrix_load: tile by tile when coopFast holds, else the
// scalar lowering (and a reload for a register matrix).
func (e *emitter) coopLoad(s ir.MatrixLoadStmt) error {
	m, err := e.matrixDecl(s.Matrix, "matrix_load")
	if err != nil {
		return err
	}
	from, err := e.lookupArray(s.From, "matrix_load")
	if err != nil {
		return err
	}
	e.coopFence([]string{s.From}, []string{s.Matrix})
	off, stride, err := e.coopAddressing(s.Offset, s.Stride, s.Bound)
	if err != nil {
		return err
	}
	fast, err := e.coopFast(m, from, s.From, s.Layout, s.Bound != nil, false)
	if err != nil {
		return err
	}
	r := e.coop.regs[m.Name]
	direct := func() error {
		if r != nil {
			return e.eachRegTile(r, func(v, tr, tc uint32) error {
				e.inst(opStore, v, e.loadTile(e.regType(r), from, e.tileIndex(off, stride, tr, tc, s.Layout), stride, s.Layout))
				return nil
			})
		}
		to, n := e.arrays[m.Name], e.cu32(m.Cols)
		typ := e.coopType(m.Type, copyUse(m.Type))
		return e.eachTile(m, func(tr, tc uint32) error {
			x := e.loadTile(typ, from, e.tileIndex(off, stride, tr, tc, s.Layout), stride, s.Layout)
			e.storeTile(to, e.tileIndex(e.cu32(0), n, tr, tc, ir.RowMajor), x, n, ir.RowMajor)
			return nil
		})
	}
	scalar := func() error {
		body, err := e.lowerMatrix(s)
		if err != nil {
			return err
		}
		if err := e.lowered(body); err != nil {
			return err
		}
		return e.reloadAll([]string{m.Name})
	}
	return e.coopBranch(fast, direct, scalar)
}

// coopStore emits a matrix_store: tile by tile from a register matrix when
// coopFast holds, else the scalar lowering (after a spill of a register
// matrix).
func (e *emitter) coopStore(s ir.MatrixStoreStmt) error {
	m, err := e.matrixDecl(s.Matrix, "matrix_store")
	if err != nil {
		return err
	}
	to, err := e.lookupArray(s.To, "matrix_store")
	if err != nil {
		return err
	}
	e.coopFence([]string{s.Matrix}, []string{s.To, s.Matrix}) // a spill writes the matrix's array
	r := e.coop.regs[m.Name]
	if r == nil {
		return e.lowered(e.lowerStore(m, s))
	}
	off, stride, err := e.coopAddressing(s.Offset, s.Stride, s.Bound)
	if err != nil {
		return err
	}
	fast, err := e.coopFast(m, to, s.To, s.Layout, s.Bound != nil, true)
	if err != nil {
		return err
	}
	direct := func() error {
		return e.eachRegTile(r, func(v, tr, tc uint32) error {
			x := e.op(opLoad, e.regType(r), v)
			e.storeTile(to, e.tileIndex(off, stride, tr, tc, s.Layout), x, stride, s.Layout)
			return nil
		})
	}
	return e.coopBranch(fast, direct, func() error { return e.bandStore(r, s) })
}

// coopMMA emits acc += a·b on cooperative matrices: each subgroup loads the
// tiles of a (its block's rows) and b (its block's columns) for each k tile
// from their workgroup arrays and accumulates its block.
func (e *emitter) coopMMA(s ir.MatrixMMAStmt) error {
	e.coopFence([]string{s.Acc, s.A, s.B}, []string{s.Acc})
	a, b, err := e.mmaShapes(s)
	if err != nil {
		return err
	}
	arrA, arrB := e.arrays[a.Name], e.arrays[b.Name]
	k, n := e.cu32(a.Cols), e.cu32(b.Cols)
	return e.coopMulAdd(e.coop.regs[s.Acc], a, b,
		func(typ, tr, kt uint32) uint32 {
			return e.loadTile(typ, arrA, e.tileIndex(e.cu32(0), k, tr, kt, ir.RowMajor), k, ir.RowMajor)
		},
		func(typ, kt, tc uint32) uint32 {
			return e.loadTile(typ, arrB, e.tileIndex(e.cu32(0), n, kt, tc, ir.RowMajor), n, ir.RowMajor)
		})
}

// mmaShapes are the operands of a cooperative matrix_mma, checked against its
// accumulator.
func (e *emitter) mmaShapes(s ir.MatrixMMAStmt) (a, b ir.MatrixDecl, err error) {
	r := e.coop.regs[s.Acc]
	if a, err = e.matrixDecl(s.A, "matrix_mma"); err != nil {
		return a, b, err
	}
	if b, err = e.matrixDecl(s.B, "matrix_mma"); err != nil {
		return a, b, err
	}
	if a.Rows != r.m.Rows || b.Cols != r.m.Cols || a.Cols != b.Rows {
		return a, b, fmt.Errorf("matrix_mma: %q (%d×%d) += %q (%d×%d) · %q (%d×%d) has no valid shape. Fix: run ir.Validate and correct the program",
			r.m.Name, r.m.Rows, r.m.Cols, a.Name, a.Rows, a.Cols, b.Name, b.Rows, b.Cols)
	}
	return a, b, nil
}

// coopMulAdd accumulates a·b into the register matrix r: each subgroup, for
// each k tile, loads the tiles of a its block's rows need (loadA, of the
// given type, tile row and k tile) and of b its columns need (loadB, k tile
// and tile column), then multiplies and adds them into its block.
func (e *emitter) coopMulAdd(r *coopReg, a, b ir.MatrixDecl, loadA, loadB func(typ, x, y uint32) uint32) error {
	tA, tB := e.operandTypes(a, b)
	tAcc := e.regType(r)
	kTiles := a.Cols / coopTile
	if e.coop.nv {
		kTiles = 1 // the whole K at once
	}
	return e.eachRegion(r, func(sr, sc uint32) error {
		u := e.u32()
		accs := make([]uint32, len(r.vars))
		for i, v := range r.vars {
			accs[i] = e.op(opLoad, tAcc, v)
		}
		for kt := range kTiles {
			kc := e.cu32(kt)
			as := make([]uint32, r.rr)
			for i := range r.rr {
				as[i] = loadA(tA, e.op(opIAdd, u, e.op(opIMul, u, sr, e.cu32(r.rr)), e.cu32(i)), kc)
			}
			bs := make([]uint32, r.rc)
			for j := range r.rc {
				bs[j] = loadB(tB, kc, e.op(opIAdd, u, e.op(opIMul, u, sc, e.cu32(r.rc)), e.cu32(j)))
			}
			for i := range r.rr {
				for j := range r.rc {
					accs[i*r.rc+j] = e.op(opCooperativeMatrixMulAddKHR, tAcc, as[i], bs[j], accs[i*r.rc+j])
				}
			}
		}
		for i, v := range r.vars {
			e.inst(opStore, v, accs[i])
		}
		return nil
	})
}

// and is x && y, folded when either is a constant.
func (e *emitter) and(x, y value) value {
	if k, ok := x.rng.Const(); ok {
		if k != 0 {
			return y
		}
		return x
	}
	if k, ok := y.rng.Const(); ok {
		if k != 0 {
			return x
		}
		return y
	}
	return value{id: e.op(opLogicalAnd, e.bool(), x.id, y.id), t: ir.Bool}
}

// finishMatrices completes an assembled module with matrices: an
// OpSourceExtension naming the matrix path and, on the cooperative path, the
// extensions and the Vulkan memory model: OpMemoryModel, barriers with
// MakeAvailable and MakeVisible, no Coherent buffers, and every access to
// buffer and workgroup memory NonPrivatePointer, so that the barriers order
// it for the other invocations as Coherent did.
func (e *emitter) finishMatrices(words []uint32) []uint32 {
	if e.matrixPath == "" {
		return words
	}
	out := make([]uint32, 0, len(words)+64)
	out = append(out, words[:headerSize]...)
	named := false
	// ptrClass is each pointer type's storage class, class each pointer
	// value's.
	ptrClass, class := map[uint32]uint32{}, map[uint32]uint32{}
	for i := headerSize; i < len(words); {
		n := int(words[i] >> 16)
		op, args := words[i]&0xffff, words[i+1:i+n]
		i += n
		if e.coop != nil {
			args = e.nonPrivate(op, args, ptrClass, class)
		}
		if op == opName && !named {
			out = appendInst(out, opSourceExtension, stringWords(matrixPathPrefix+e.matrixPath+": "+e.matrixWhy)...)
			named = true
		}
		if e.coop == nil {
			out = appendInst(out, op, args...)
			continue
		}
		switch {
		case op == opMemoryModel:
			out = appendInst(out, op, args[0], memoryModelVulkan)
			continue
		case op == opDecorate && len(args) == 2 && args[1] == decorationCoherent:
			continue
		case op == opControlBarrier:
			out = appendInst(out, op, args[0], args[1], e.coop.semantics)
			continue
		}
		out = appendInst(out, op, args...)
		if op == opCapability && (i >= len(words) || words[i]&0xffff != opCapability) {
			out = appendInst(out, opExtension, stringWords(extCooperativeMatrix)...)
			out = appendInst(out, opExtension, stringWords(extVulkanMemoryModel)...)
			if e.coop.bf16 {
				out = appendInst(out, opExtension, stringWords(extBFloat16)...)
			}
			if e.coop.nv {
				out = appendInst(out, opExtension, stringWords(extCooperativeMatrix2)...)
				out = appendInst(out, opExtension, stringWords(extTensorAddressing)...)
			}
		}
	}
	return out
}
