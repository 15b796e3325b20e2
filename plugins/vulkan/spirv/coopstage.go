package spirv

import (
	"fmt"
	"maps"

	"github.com/kiln-dev/kiln/ir"
)

// Staging of the cooperative path's fused operands (coopFused) and stores
// through bands: the forms that make a matmul's K loop fast on NVIDIA's
// driver.
//
//   - A fused operand (fuseLoads) has no workgroup array of its own: it has a
//     stage, its tile laid out as its matrix_load lays it out in the buffer
//     (lines of inner elements, row or column), in 16-byte words (uvec4) with
//     a line pitch of inner/8 + 1 words. The pitch is odd, so the eight lines
//     a 16×16 cooperative load reads at once start in distinct 16-byte bank
//     groups (no bank conflicts).
//   - The fused statement fills each operand's stage with every invocation of
//     the workgroup taking 16-byte chunks in turn (invocation i the chunks i,
//     i+W, …; consecutive invocations read consecutive 16 bytes of a line):
//     when the load's run-time test (coopFast) passes, one uvec4 load each
//     from the buffer through a second, uvec4 view of its binding; otherwise
//     each of the chunk's 8 elements through the scalar path's element rule
//     (0 outside the bound or past the buffer's end), packed into the chunk.
//     After a barrier each subgroup loads its A and B tiles from the stages
//     (OpCooperativeMatrixLoadKHR on Workgroup uvec4 pointers, the stride in
//     words) and multiplies them into its block of the accumulator.
//   - Double buffering: where two K slabs of every stage fit the device's
//     workgroup memory, each stage holds two, and a Function variable (the
//     parity, flipped after every fused statement) picks the slab. One
//     barrier per statement then suffices: a slab is written again only two
//     fused statements later, after the barrier of the one between, which
//     every invocation reaches after its reads of the slab. With one slab,
//     a barrier also comes before the fill.
//   - A matrix held in registers keeps no workgroup array unless a statement
//     needs all its elements in one (a load into it, a convert, an mma on the
//     scalar path, a use as an operand): its matrix_store, when its tiles
//     cannot go straight to the target, goes through a band array of 16 rows:
//     for each tile row in order the subgroups holding it store it to the
//     band, and the scalar path's store writes the band as the 16 rows of the
//     matrix at that row (its offset moved by 16 rows, its row bound by 16
//     less), so the last element written to an index is the last in
//     row-major order, as the reference has it.

// coopStage is a fused operand's stage: matrix m laid out as layout, outer
// lines of inner elements, pitch 16-byte words from line to line, slab words
// per K slab, in the Workgroup variable varID.
type coopStage struct {
	m            ir.MatrixDecl
	layout       ir.MatrixLayout
	outer, inner uint32
	pitch, slab  uint32
	varID        uint32
}

// coopBand is the key of the band array among the emitter's arrays (a name
// with a dot, which no IR identifier has).
const coopBand = "kiln.band"

// quadBytes is the size of the stages' words, a uvec4.
const quadBytes = 16

// newStage is the stage of matrix m loaded with layout.
func newStage(m ir.MatrixDecl, layout ir.MatrixLayout) *coopStage {
	outer, inner := m.Rows, m.Cols
	if layout == ir.ColMajor {
		outer, inner = m.Cols, m.Rows
	}
	s := &coopStage{m: m, layout: layout, outer: outer, inner: inner, pitch: inner*m.Type.Size()/quadBytes + 1}
	s.slab = s.outer * s.pitch
	return s
}

// coopArrays are the matrices that keep a workgroup array of all their
// elements on the cooperative path c: every matrix but the fused operands
// and the register matrices no statement needs that way.
func coopArrays(p *ir.Program, t Target, c *coopPlan) map[string]bool {
	need := map[string]bool{}
	ir.Inspect(p.Body, func(n any) bool {
		switch s := n.(type) {
		case ir.MatrixLoadStmt:
			need[s.Matrix] = true
		case ir.MatrixConvertStmt:
			need[s.Matrix], need[s.From] = true, true
		case ir.MatrixMMAStmt:
			if c.regs[s.Acc] == nil || !coopMMA(p, t, s) {
				need[s.Acc] = true
			}
			need[s.A], need[s.B] = true, true
		}
		return true
	})
	out := map[string]bool{}
	for _, m := range p.Matrices {
		if _, fused := c.fused[m.Name]; fused {
			continue
		}
		if c.regs[m.Name] == nil || need[m.Name] {
			out[m.Name] = true
		}
	}
	return out
}

// bandCols is the widest register matrix a matrix_store reads (0: none), the
// band array's row length.
func bandCols(p *ir.Program, c *coopPlan) uint32 {
	var cols uint32
	ir.Inspect(p.Body, func(n any) bool {
		if s, ok := n.(ir.MatrixStoreStmt); ok && c.regs[s.Matrix] != nil {
			cols = max(cols, c.regs[s.Matrix].m.Cols)
		}
		return true
	})
	return cols
}

// planStaging sizes the stages, the band and the matrices' arrays of the
// cooperative path c and returns the workgroup memory they and the shared
// arrays take: with two slabs a stage when they fit limit (0: no limit),
// else one.
func (e *emitter) planStaging(c *coopPlan) uint64 {
	c.arrays = coopArrays(e.prog, e.target, c)
	c.stages = map[string]*coopStage{}
	var bytes, stages uint64
	for _, s := range e.prog.Shared {
		bytes += uint64(s.Count) * uint64(e.workgroupElemBytes(s.Type))
	}
	for _, m := range e.prog.Matrices {
		if ld, ok := c.fused[m.Name]; ok {
			st := newStage(m, ld.Layout)
			c.stages[m.Name] = st
			stages += uint64(st.slab) * quadBytes
		}
		if c.arrays[m.Name] {
			bytes += uint64(m.Rows) * uint64(m.Cols) * uint64(e.workgroupElemBytes(m.Type))
		}
	}
	bytes += uint64(c.bandRows()) * uint64(bandCols(e.prog, c)) * 4
	e.planPrefetch(c)
	limit := uint64(e.target.MaxSharedBytes)
	if c.nv && limit != 0 {
		limit -= min(limit, uint64(e.target.Coop.NV.Reserved))
	}
	c.double = len(c.stages) > 0 && (limit == 0 || bytes+2*stages <= limit)
	if c.double {
		return bytes + 2*stages
	}
	return bytes + stages
}

// declareStaging declares the stages, the band array and the parity
// variable planStaging planned.
func (e *emitter) declareStaging(c *coopPlan) {
	slabs := uint32(1)
	if c.double {
		slabs = 2
		c.parity = e.id()
		e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, e.u32()), c.parity, storageFunction)
		e.name(c.parity, "kiln_coop_parity")
	}
	q := e.uvec4()
	for _, m := range e.prog.Matrices {
		st := c.stages[m.Name]
		if st == nil {
			continue
		}
		n := e.cu32(st.slab * slabs)
		at := e.typ(typeKey{op: opTypeArray, a: q, b: n}, q, n)
		st.varID = e.global(opVariable, true, e.pointer(storageWorkgroup, at), storageWorkgroup)
		e.name(st.varID, "kiln_stage_"+m.Name)
	}
	e.declarePrefetch(c)
	if cols := bandCols(e.prog, c); cols > 0 {
		e.declareWorkgroupArray("kiln_band", coopBand, ir.F32, c.bandRows()*cols)
	}
}

// bandRows is the band array's height: a tile's on the KHR path, nvBandRows
// on the NV path.
func (c *coopPlan) bandRows() uint32 {
	if c.nv {
		return nvBandRows
	}
	return coopTile
}

// uvec4 is the vector of four u32, a stage's word.
func (e *emitter) uvec4() uint32 {
	u := e.u32()
	return e.typ(typeKey{op: opTypeVector, a: u, b: 4}, u, 4)
}

// quadView is a read-only view of buffer a's binding as an array of uvec4
// (a second variable on the binding), declared on first use.
func (e *emitter) quadView(a array, name string) uint32 {
	k := typeKey{op: opVariable, a: storageStorageBuffer, b: a.binding}
	if id, ok := e.types[k]; ok {
		return id
	}
	st := e.global(opTypeStruct, false, e.runtimeArray(e.uvec4(), quadBytes))
	e.decorate(st, decorationBlock)
	e.memberDecorate(st, 0, decorationOffset, 0)
	e.memberDecorate(st, 0, decorationNonWritable)
	v := e.global(opVariable, true, e.pointer(storageStorageBuffer, st), storageStorageBuffer)
	e.decorate(v, decorationDescriptorSet, 0)
	e.decorate(v, decorationBinding, a.binding)
	e.name(v, "kiln_quads_"+name)
	e.types[k] = v
	return v
}

// stageChunks runs body for each 16-byte chunk of st the invocation fills:
// the round j (chunk lid + j·W, lid the invocation's linear id), its line and
// word in the line (u32 values), and whether body runs in a selection
// construct of its own (the last chunks, which not every invocation has).
func (e *emitter) stageChunks(st *coopStage, lid uint32, body func(j, line, word uint32, guarded bool) error) error {
	u := e.u32()
	per := st.inner * st.m.Type.Size() / quadBytes
	chunks, w := st.outer*per, e.invocations()
	for j := uint32(0); j*w < chunks; j++ {
		c := e.op(opIAdd, u, lid, e.cu32(j*w))
		full := (j+1)*w <= chunks
		run := func() error { return body(j, e.op(opUDiv, u, c, e.cu32(per)), e.op(opUMod, u, c, e.cu32(per)), !full) }
		if full {
			if err := run(); err != nil {
				return err
			}
			continue
		}
		var err error
		e.guarded(e.op(opULessThan, e.bool(), c, e.cu32(chunks)), func() { err = run() })
		if err != nil {
			return err
		}
	}
	return nil
}

// stagePtr is a pointer to word index of st.
func (e *emitter) stagePtr(st *coopStage, index uint32) uint32 {
	return e.op(opAccessChain, e.pointer(storageWorkgroup, e.uvec4()), st.varID, index)
}

// stageWord is the index of word (line, word) of st's slab at base.
func (e *emitter) stageWord(st *coopStage, base, line, word uint32) uint32 {
	u := e.u32()
	return e.op(opIAdd, u, base, e.op(opIAdd, u, e.op(opIMul, u, line, e.cu32(st.pitch)), word))
}

// fillFast fills st's slab at base from buffer from (named name) with one
// uvec4 load a chunk: off and stride (elements, multiples of 8 by coopFast)
// in words. The loads are issued before the stores.
func (e *emitter) fillFast(st *coopStage, base, lid uint32, from array, name string, off, stride uint32) error {
	load := e.quadSource(from, name, off, stride)
	type pending struct{ dst, x uint32 }
	var stores []pending
	err := e.stageChunks(st, lid, func(_, line, word uint32, guarded bool) error {
		x := load(line, word)
		dst := e.stagePtr(st, e.stageWord(st, base, line, word))
		if guarded {
			e.inst(opStore, dst, x)
			return nil
		}
		stores = append(stores, pending{dst, x})
		return nil
	})
	for _, s := range stores {
		e.inst(opStore, s.dst, s.x)
	}
	return err
}

// quadSource returns the load of a chunk (line, word) of a matrix in buffer
// from (named name) at offset off with stride stride (elements, multiples of
// 8 by coopFast) through the buffer's uvec4 view.
func (e *emitter) quadSource(from array, name string, off, stride uint32) func(line, word uint32) uint32 {
	u, q := e.u32(), e.uvec4()
	view := e.quadView(from, name)
	shift := e.cu32(3) // 8 16-bit elements a word
	offq, strq := e.op(opShiftRightLogical, u, off, shift), e.op(opShiftRightLogical, u, stride, shift)
	return func(line, word uint32) uint32 {
		src := e.op(opIAdd, u, offq, e.op(opIAdd, u, e.op(opIMul, u, line, strq), word))
		return e.op(opLoad, q, e.op(opAccessChain, e.pointer(storageStorageBuffer, q), view, e.cu32(0), src))
	}
}

// fillScalar fills st's slab at base element by element with the scalar
// path's rule for ld (whose offset, stride and bound are bound to the
// lowering's names): element (r, c) is 0 outside the bound or out of range,
// else the buffer's element at offset + r·stride + c ("row") or
// offset + c·stride + r ("col").
func (e *emitter) fillScalar(st *coopStage, base, lid uint32, ld ir.MatrixLoadStmt) error {
	u := e.u32()
	m := st.m
	index := ir.Add(ir.Add(loc(mxOffset), ir.Mul(loc(mxRow), loc(mxStride))), loc(mxCol))
	if st.layout == ir.ColMajor {
		index = ir.Add(ir.Add(loc(mxOffset), ir.Mul(loc(mxCol), loc(mxStride))), loc(mxRow))
	}
	elem := ir.Expr(ir.Load(ld.From, index))
	if ld.Bound != nil {
		elem = ir.Select(ir.LAnd(lt(loc(mxRow), loc(mxRows)), lt(loc(mxCol), loc(mxCols))), elem, ir.Literal{Type: m.Type})
	}
	per := quadBytes / m.Type.Size()
	return e.stageChunks(st, lid, func(_, line, word uint32, _ bool) error {
		var words [4]uint32
		for k := range per {
			at := e.op(opIAdd, u, e.op(opIMul, u, word, e.cu32(per)), e.cu32(k))
			r, c := line, at
			if st.layout == ir.ColMajor {
				r, c = at, line
			}
			e.scopes.Push(nil)
			e.scopes.Bind(mxRow, local{value: value{id: r, t: ir.U32}})
			e.scopes.Bind(mxCol, local{value: value{id: c, t: ir.U32}})
			x, err := e.typed(elem, m.Type, "the matrix element")
			e.scopes.Pop()
			if err != nil {
				return err
			}
			if m.Type == ir.F16 {
				x = e.bits16(x)
			}
			if k%2 == 0 {
				words[k/2] = x
				continue
			}
			hi := e.op(opShiftLeftLogical, u, x, e.cu32(16))
			words[k/2] = e.op(opBitwiseOr, u, words[k/2], hi)
		}
		x := e.op(opCompositeConstruct, e.uvec4(), words[:]...)
		e.inst(opStore, e.stagePtr(st, e.stageWord(st, base, line, word)), x)
		return nil
	})
}

// stageTile is the 16×16 tile (tr, tc) of st's slab at base as a cooperative
// matrix of type typ.
func (e *emitter) stageTile(st *coopStage, typ, base, tr, tc uint32) uint32 {
	outer, inner := tr, tc
	if st.layout == ir.ColMajor {
		outer, inner = tc, tr
	}
	u := e.u32()
	words := coopTile * st.m.Type.Size() / quadBytes // of a tile's line
	line := e.op(opIMul, u, outer, e.cu32(coopTile))
	word := e.op(opIMul, u, inner, e.cu32(words))
	ptr := e.stagePtr(st, e.stageWord(st, base, line, word))
	return e.op(opCooperativeMatrixLoadKHR, typ, ptr, e.cu32(coopLayout(st.layout)), e.cu32(st.pitch))
}

// coopFused emits a matrix_mma with the matrix_loads into its operands
// deferred to it (fuseLoads): each operand's stage filled (fillFast when its
// load's run-time test passes, fillScalar otherwise), a barrier, and the
// product from the stages (see the top of this file).
func (e *emitter) coopFused(s ir.MatrixMMAStmt) error {
	c := e.coop
	ops := []string{s.A}
	if s.B != s.A {
		ops = append(ops, s.B)
	}
	var loads []ir.MatrixLoadStmt
	for _, o := range ops {
		ld, ok := c.pending[o]
		if !ok || c.pendingAt != len(e.body) {
			return fmt.Errorf("the cooperative path deferred the matrix_load into %q to the matrix_mma after it, which did not follow it. Fix: report this as a kiln bug", o)
		}
		loads = append(loads, ld)
	}
	clear(c.pending)
	a, b, err := e.mmaShapes(s)
	if err != nil {
		return err
	}
	if c.nv && e.target.Coop.NV.Loads != NVStaged {
		return e.nvFusedDirect(s, loads, a, b)
	}
	u := e.u32()
	parity := e.cu32(0)
	if c.double {
		parity = e.op(opLoad, u, c.parity)
	} else {
		e.barrier()
	}
	lid, err := e.typed(e.linearID(), ir.U32, "the invocation's index")
	if err != nil {
		return err
	}
	pf := c.prefetch[s.A]
	var k value
	use := e.literal(ir.LitBool(false))
	if pf != nil {
		if k, err = e.typedValue(loc(pf.loop.Var), pf.loop.Type, "the loop variable"); err != nil {
			return err
		}
		flag := e.op(opLoad, e.bool(), pf.flag)
		same := e.op(opIEqual, e.bool(), e.op(opLoad, e.scalar(pf.loop.Type), pf.key), k.id)
		use = value{id: e.op(opLogicalAnd, e.bool(), flag, same), t: ir.Bool}
	}
	bases := map[string]uint32{}
	for _, ld := range loads {
		st := c.stages[ld.Matrix]
		if st == nil {
			return fmt.Errorf("the cooperative path has no stage for %q. Fix: report this as a kiln bug", ld.Matrix)
		}
		base := e.op(opIMul, u, parity, e.cu32(st.slab))
		bases[ld.Matrix] = base
		from, err := e.lookupArray(ld.From, "matrix_load")
		if err != nil {
			return err
		}
		e.scopes.Push(nil)
		off, stride, err := e.coopAddressing(ld.Offset, ld.Stride, ld.Bound)
		var fast value
		if err == nil {
			fast, err = e.coopFast(st.m, from, ld.From, ld.Layout, ld.Bound != nil, false)
		}
		if err == nil {
			fill := func() error {
				return e.coopBranch(fast,
					func() error { return e.fillFast(st, base, lid, from, ld.From, off, stride) },
					func() error { return e.fillScalar(st, base, lid, ld) })
			}
			err = e.coopBranch(use, func() error { return e.fillRegs(st, base, lid, pf.regs[ld.Matrix]) }, fill)
		}
		e.scopes.Pop()
		if err != nil {
			return err
		}
	}
	e.barrier()
	if pf != nil {
		if err := e.prefetchNext(pf, loads, lid, k); err != nil {
			return err
		}
	}
	sa, sb := c.stages[s.A], c.stages[s.B]
	err = e.coopMulAdd(c.regs[s.Acc], a, b,
		func(typ, tr, kt uint32) uint32 { return e.stageTile(sa, typ, bases[s.A], tr, kt) },
		func(typ, kt, tc uint32) uint32 { return e.stageTile(sb, typ, bases[s.B], kt, tc) })
	if err != nil {
		return err
	}
	if c.double {
		e.inst(opStore, c.parity, e.op(opBitwiseXor, u, parity, e.cu32(1)))
	}
	for _, ld := range loads {
		c.read[ld.From] = true
	}
	c.read[s.Acc], c.written[s.Acc] = true, true
	return nil
}

// bandStore is the matrix_store s of register matrix r through the band
// array, a tile row at a time (see the top of this file).
func (e *emitter) bandStore(r *coopReg, s ir.MatrixStoreStmt) error {
	c := e.coop
	band := e.arrays[coopBand]
	m := r.m
	u := e.u32()
	height := c.bandRows()
	bm := ir.MatrixDecl{Name: coopBand, Type: ir.F32, Rows: height, Cols: m.Cols}
	tAcc := e.regType(r)
	for tr := range m.Rows / height {
		e.barrier()
		if c.nv {
			e.nvBand(r, band, tr*height, height)
		} else {
			holds := e.op(opIEqual, e.bool(), e.op(opUDiv, u, c.sgid, e.cu32(r.gc)), e.cu32(tr/r.rr))
			e.guarded(holds, func() {
				sc := e.op(opUMod, u, c.sgid, e.cu32(r.gc))
				for j := range r.rc {
					tc := e.op(opIAdd, u, e.op(opIMul, u, sc, e.cu32(r.rc)), e.cu32(j))
					x := e.op(opLoad, tAcc, r.vars[(tr%r.rr)*r.rc+j])
					e.storeTile(band, e.op(opIMul, u, tc, e.cu32(coopTile)), x, e.cu32(m.Cols), ir.RowMajor)
				}
			})
		}
		e.barrier()
		t0 := lit(tr * height)
		rows := s
		rows.Matrix = coopBand
		rows.Offset = ir.Add(s.Offset, ir.Mul(t0, s.Stride))
		if s.Layout == ir.ColMajor {
			rows.Offset = ir.Add(s.Offset, t0)
		}
		if s.Bound != nil {
			rows.Bound = &ir.MatrixBound{Rows: ir.Sub(ir.Max(s.Bound.Rows, t0), t0), Cols: s.Bound.Cols}
		}
		if err := e.lowered(e.lowerStore(bm, rows)); err != nil {
			return err
		}
	}
	return nil
}

// coopPrefetch is the prefetch of a fused statement in a for loop
// (prefetchable): after the barrier that follows its fill, the statement
// evaluates its loads with the loop variable one step on (the loop's lets
// before the loads again, in a scope of their own) and, when that iteration
// runs (the loop's condition holds for it) and every load's run-time test
// passes for it, loads that K slab's chunks into registers (regs, by
// operand: a uvec4 Function variable a round), sets flag and records the
// loop variable's value it is for in key. The next statement fills its
// stages from the registers when flag is set for its loop variable's value,
// so the global loads of one slab run while the previous one is multiplied.
// Prefetch needs every round full (chunks a multiple of the invocations).
type coopPrefetch struct {
	loop      ir.ForStmt
	lets      []ir.LetStmt
	flag, key uint32
	regs      map[string][]uint32
}

// planPrefetch drops the prefetch of statements whose stages have a round
// that not every invocation fills.
func (e *emitter) planPrefetch(c *coopPlan) {
	partial := map[*coopPrefetch]bool{}
	for name, pf := range c.prefetch {
		st := c.stages[name]
		partial[pf] = partial[pf] || st.outer*st.inner*st.m.Type.Size()/quadBytes%e.invocations() != 0
	}
	maps.DeleteFunc(c.prefetch, func(_ string, pf *coopPrefetch) bool { return partial[pf] })
}

// declarePrefetch declares the Function variables of every prefetch.
func (e *emitter) declarePrefetch(c *coopPlan) {
	fn := func(t uint32, name string) uint32 {
		id := e.id()
		e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, t), id, storageFunction)
		e.name(id, name)
		return id
	}
	for _, m := range e.prog.Matrices {
		pf := c.prefetch[m.Name]
		if pf == nil {
			continue
		}
		if pf.regs == nil {
			pf.regs = map[string][]uint32{}
			pf.flag = fn(e.bool(), "kiln_prefetch_"+m.Name+"_flag")
			pf.key = fn(e.scalar(pf.loop.Type), "kiln_prefetch_"+m.Name+"_key")
		}
		st := c.stages[m.Name]
		rounds := st.outer * st.inner * st.m.Type.Size() / quadBytes / e.invocations()
		for j := range rounds {
			pf.regs[m.Name] = append(pf.regs[m.Name], fn(e.uvec4(), fmt.Sprintf("kiln_prefetch_%s_%d", m.Name, j)))
		}
	}
}

// fillRegs fills st's slab at base from the prefetch registers regs.
func (e *emitter) fillRegs(st *coopStage, base, lid uint32, regs []uint32) error {
	return e.stageChunks(st, lid, func(j, line, word uint32, _ bool) error {
		x := e.op(opLoad, e.uvec4(), regs[j])
		e.inst(opStore, e.stagePtr(st, e.stageWord(st, base, line, word)), x)
		return nil
	})
}

// prefetchNext loads the next iteration's K slab of loads into pf's
// registers when that iteration runs and the loads' tests pass for it, and
// records whether it did (flag) and for which loop variable's value (key);
// k is the loop variable's value now.
func (e *emitter) prefetchNext(pf *coopPrefetch, loads []ir.MatrixLoadStmt, lid uint32, k value) error {
	loop := pf.loop
	step, err := e.typedValue(loop.Step, loop.Type, "the for loop's step")
	if err != nil {
		return err
	}
	to, err := e.typedValue(loop.To, loop.Type, "the for loop's to")
	if err != nil {
		return err
	}
	t := e.scalar(loop.Type)
	next := e.op(opIAdd, t, k.id, step.id)
	less := uint32(opULessThan)
	if loop.Type == ir.I32 {
		less = opSLessThan
	}
	cond := value{id: e.op(less, e.bool(), next, to.id), t: ir.Bool}
	e.scopes.Push(nil)
	defer e.scopes.Pop()
	e.scopes.Bind(loop.Var, local{value: value{id: next, t: loop.Type}})
	for _, let := range pf.lets {
		v, err := e.expr(let.Value)
		if err != nil {
			return err
		}
		e.scopes.Bind(let.Name, local{value: v})
	}
	var sources []func(line, word uint32) uint32
	for _, ld := range loads {
		from, err := e.lookupArray(ld.From, "matrix_load")
		if err != nil {
			return err
		}
		off, stride, err := e.coopAddressing(ld.Offset, ld.Stride, ld.Bound)
		if err != nil {
			return err
		}
		fast, err := e.coopFast(e.coop.stages[ld.Matrix].m, from, ld.From, ld.Layout, ld.Bound != nil, false)
		if err != nil {
			return err
		}
		cond = e.and(cond, fast)
		sources = append(sources, e.quadSource(from, ld.From, off, stride))
	}
	e.inst(opStore, pf.flag, cond.id)
	e.inst(opStore, pf.key, next)
	load := func() error {
		for i, ld := range loads {
			regs := pf.regs[ld.Matrix]
			err := e.stageChunks(e.coop.stages[ld.Matrix], lid, func(j, line, word uint32, _ bool) error {
				e.inst(opStore, regs[j], sources[i](line, word))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	return e.coopBranch(cond, load, func() error { return nil })
}
