package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The NV path: the cooperative path's register matrices as workgroup-scope
// matrices of VK_NV_cooperative_matrix2 (see docs/design.md, "Vulkan",
// "Cooperative matrices").
//
//   - It is taken where the device lists workgroup scope, flexible dimensions
//     and tensor addressing (SelectCoopNV) and every cooperative matrix_mma of
//     the program fits a combination it lists for the workgroup's invocation
//     count and the operand type: the accumulator's rows a multiple of M, its
//     columns of N, the inner dimension of K, none above the device's maximum
//     dimension; and the workgroup memory the path needs plus what the driver
//     reserves for workgroup-scope matrices fits the device. Otherwise the KHR
//     path (subgroup tiles), and the module says why not NV.
//   - A register matrix is one workgroup-scope accumulator of its whole size
//     in a Function variable; an mma loads its whole operands as one
//     workgroup-scope A and B each and multiplies once (OpCooperativeMatrix*KHR
//     with Scope Workgroup). Everything else is the KHR path's: the fused
//     operands' stages (filled with 16-byte loads or by the scalar rule at the
//     edges, coopstage.go), the array matrices' subgroup tiles, spills and
//     reloads of whole matrices, the run-time test for direct loads and
//     stores.
//   - With NVDirect loads, a fused operand whose load passes the run-time
//     test is loaded straight from the buffer as a workgroup-scope matrix (the
//     driver stages it); one that does not fills its stage by the scalar rule
//     between two barriers and is loaded from the stage. No prefetch then.
//     NVTensor loads a row-major operand through a tensor layout instead
//     (its rows×cols at the load's stride: OpCooperativeMatrixLoadTensorNV),
//     where the test passes and the stride is at least the row.
//   - An edge store (the run-time test fails) goes through a band of
//     nvBandRows rows: for each band, the accumulator is stored with
//     OpCooperativeMatrixStoreTensorNV through a tensor view whose clip keeps
//     only the band's rows (SPV_NV_tensor_addressing: clipped elements are not
//     stored, the rest land at their row less the clip's offset), then the
//     scalar path's store writes the band, exactly as the KHR path's band
//     store does.

// SPIR-V numbers of the NV path (SPV_NV_cooperative_matrix2,
// SPV_NV_tensor_addressing).
const (
	opTypeTensorLayoutNV                        = 5370
	opTypeTensorViewNV                          = 5371
	opCreateTensorLayoutNV                      = 5372
	opTensorLayoutSetDimensionNV                = 5373
	opTensorLayoutSetStrideNV                   = 5374
	opCooperativeMatrixLoadTensorNV             = 5367
	opUndef                                     = 1
	opCreateTensorViewNV                        = 5377
	opTensorViewSetClipNV                       = 5382
	opCooperativeMatrixStoreTensorNV            = 5368
	capabilityCooperativeMatrixTensorAddressing = 5433
	capabilityTensorAddressingNV                = 5439
	tensorClampConstant                         = 1
	tensorAddressingView                        = 0x1
	extCooperativeMatrix2                       = "SPV_NV_cooperative_matrix2"
	extTensorAddressing                         = "SPV_NV_tensor_addressing"
)

// nvBandRows is the NV path's band height: 8 rows keep the band of a 256-column
// accumulator at 8 KiB next to the stages and the driver's reserve.
const nvBandRows = 8

// maxCoopFlex bounds CoopNV's list of combinations.
const maxCoopFlex = 16

// NVLoads says how the NV path's fused operands reach their matrices.
type NVLoads uint8

const (
	// NVStaged: through the stages, as on the KHR path, with the prefetch.
	NVStaged NVLoads = iota
	// NVDirect: straight from the buffer where the run-time test passes.
	NVDirect
	// NVTensor: as NVDirect, row-major loads through a tensor layout
	// (OpCooperativeMatrixLoadTensorNV) where the stride is at least the
	// row.
	NVTensor
)

// String names the mode as KILN_VK_MATRIX_PATH spells it.
func (l NVLoads) String() string {
	switch l {
	case NVDirect:
		return "nv-direct"
	case NVTensor:
		return "nv-tensor"
	}
	return "nv"
}

// CoopFlex is one workgroup-scope combination a device lists
// (VkCooperativeMatrixFlexibleDimensionsPropertiesNV): Type·Type+f32=f32 with
// the accumulator's rows a multiple of M, its columns of N and the inner
// dimension of K, at Invocations invocations a workgroup.
type CoopFlex struct {
	M, N, K, Invocations uint32
	Type                 ir.Type
}

// CoopNV is what the device offers for the NV path; the zero CoopNV offers
// nothing (the KHR path).
type CoopNV struct {
	// Flex lists the usable combinations (the zero CoopFlex ends the list).
	Flex [maxCoopFlex]CoopFlex
	// MaxDim is the largest matrix dimension, Reserved the workgroup memory
	// the driver reserves for workgroup-scope matrices.
	MaxDim, Reserved uint32
	// Loads is how fused operands are loaded.
	Loads NVLoads
}

// CoopFlexShape is one combination a device lists for
// VK_NV_cooperative_matrix2, as CoopShape with Workgroup for the scope and the
// invocation count.
type CoopFlexShape struct {
	CoopShape
	Workgroup   bool
	Invocations uint32
}

// Usable reports whether n offers anything.
func (n CoopNV) Usable() bool { return n.Flex[0].M != 0 }

// SelectCoopNV is the CoopNV of a device from its VK_NV_cooperative_matrix2
// features (workgroupScope, flexible, tensor: cooperativeMatrixWorkgroupScope,
// cooperativeMatrixFlexibleDimensions, cooperativeMatrixTensorAddressing),
// limits (maxDim, reserved) and list, for the KHR target t: the workgroup-scope
// combinations of f16 or bf16 operands (those t runs) with f32 accumulators.
// Zero without all three features or any such combination.
func SelectCoopNV(shapes []CoopFlexShape, workgroupScope, flexible, tensor bool, maxDim, reserved uint32, t CoopTarget) CoopNV {
	var n CoopNV
	if !workgroupScope || !flexible || !tensor || maxDim == 0 {
		return n
	}
	i := 0
	for _, s := range shapes {
		ok := s.Workgroup && s.A == s.B && s.C == ir.F32 && s.Result == ir.F32 && s.M > 0 && s.N > 0 && s.K > 0 && s.Invocations > 0 &&
			((s.A == ir.F16 && t.F16) || (s.A == ir.BF16 && t.BF16))
		if ok && i < maxCoopFlex {
			n.Flex[i] = CoopFlex{M: s.M, N: s.N, K: s.K, Invocations: s.Invocations, Type: s.A}
			i++
		}
	}
	if i > 0 {
		n.MaxDim, n.Reserved = maxDim, reserved
	}
	return n
}

// nvFits reports whether a cooperative matrix_mma with accumulator acc and
// operand a (its columns the inner dimension) runs at workgroup scope with
// invocations invocations on n, or why not.
func (n CoopNV) nvFits(acc, a ir.MatrixDecl, invocations uint32) string {
	if max(acc.Rows, acc.Cols, a.Cols) > n.MaxDim {
		return fmt.Sprintf("%s is larger than the device's %d", acc.Name, n.MaxDim)
	}
	for _, f := range n.Flex {
		if f.M != 0 && f.Type == a.Type && f.Invocations == invocations && acc.Rows%f.M == 0 && acc.Cols%f.N == 0 && a.Cols%f.K == 0 {
			return ""
		}
	}
	return fmt.Sprintf("the device lists no workgroup-scope %s %dx%dx%d at %d invocations", a.Type, acc.Rows, acc.Cols, a.Cols, invocations)
}

// planNV turns c, a KHR plan, into the NV path's when every cooperative mma
// fits (nvFits): one whole register matrix per accumulator. It returns why
// not otherwise, leaving c as it was.
func planNV(p *ir.Program, t Target, wg [3]uint32, c *coopPlan, mmas []ir.MatrixMMAStmt) string {
	n := t.Coop.NV
	if !n.Usable() {
		return "the device has no VK_NV_cooperative_matrix2 workgroup scope with flexible dimensions and tensor addressing"
	}
	for _, s := range mmas {
		if !coopMMA(p, t, s) {
			continue
		}
		acc, _ := p.Matrix(s.Acc)
		a, _ := p.Matrix(s.A)
		if why := n.nvFits(acc, a, wg[0]*wg[1]*wg[2]); why != "" {
			return why
		}
	}
	c.nv = true
	for name, r := range c.regs {
		c.regs[name] = &coopReg{m: r.m, gr: 1, gc: 1, rr: 1, rc: 1}
	}
	if n.Loads != NVStaged {
		clear(c.prefetch)
	}
	return ""
}

// nvType is the workgroup-scope cooperative matrix type of rows×cols elements
// of t for use.
func (e *emitter) nvType(t ir.Type, use, rows, cols uint32) uint32 {
	c := e.coop
	k := [4]uint32{uint32(t), use, rows, cols}
	if id, ok := c.nvTypes[k]; ok {
		return id
	}
	id := e.global(opTypeCooperativeMatrixKHR, false, e.coopComponent(t), e.cu32(scopeWorkgroup), e.cu32(rows), e.cu32(cols), e.cu32(use))
	c.nvTypes[k] = id
	return id
}

// regType is the type of register matrix r's variables: an f32 accumulator
// tile, 16×16 at subgroup scope, or the whole matrix at workgroup scope on the
// NV path.
func (e *emitter) regType(r *coopReg) uint32 {
	if e.coop.nv {
		return e.nvType(ir.F32, coopUseAcc, r.m.Rows, r.m.Cols)
	}
	return e.coopType(ir.F32, coopUseAcc)
}

// operandTypes are the types a cooperative mma into r loads a and b as: a
// 16×16 tile at subgroup scope each, or on the NV path the whole matrices at
// workgroup scope.
func (e *emitter) operandTypes(a, b ir.MatrixDecl) (tA, tB uint32) {
	if e.coop.nv {
		return e.nvType(a.Type, coopUseA, a.Rows, a.Cols), e.nvType(b.Type, coopUseB, b.Rows, b.Cols)
	}
	return e.coopType(a.Type, coopUseA), e.coopType(b.Type, coopUseB)
}

// declareNV declares what the NV path's module needs beyond the KHR path's.
func (e *emitter) declareNV() {
	e.capability(capabilityTensorAddressingNV)
	e.capability(capabilityCooperativeMatrixTensorAddressing)
}

// nvOperand loads a fused operand of the NV path with NVDirect loads: straight
// from buffer from (named ld.From) as a workgroup-scope matrix of type typ
// when fast holds, else its stage filled by the scalar rule between two
// barriers and the matrix loaded from there. off and stride are the load's,
// evaluated; the result is in a Function variable, whose load it returns.
func (e *emitter) nvOperand(st *coopStage, typ, lid uint32, from array, ld ir.MatrixLoadStmt, off, stride uint32, fast value) (uint32, error) {
	v := e.id()
	e.vars = appendInst(e.vars, opVariable, e.pointer(storageFunction, typ), v, storageFunction)
	e.name(v, "kiln_nv_"+ld.Matrix)
	err := e.coopBranch(fast,
		func() error {
			if e.target.Coop.NV.Loads == NVTensor && ld.Layout == ir.RowMajor {
				e.inst(opStore, v, e.loadTensor(typ, st.m, from, off, stride))
				return nil
			}
			e.inst(opStore, v, e.loadTile(typ, from, off, stride, ld.Layout))
			return nil
		},
		func() error {
			e.barrier()
			if err := e.fillScalar(st, e.cu32(0), lid, ld); err != nil {
				return err
			}
			e.barrier()
			e.inst(opStore, v, e.stageTile(st, typ, e.cu32(0), e.cu32(0), e.cu32(0)))
			return nil
		})
	if err != nil {
		return 0, err
	}
	return e.op(opLoad, typ, v), nil
}

// nvFusedDirect emits a fused matrix_mma on the NV path with NVDirect loads
// (nvOperand for each operand, then one product).
func (e *emitter) nvFusedDirect(s ir.MatrixMMAStmt, loads []ir.MatrixLoadStmt, a, b ir.MatrixDecl) error {
	c := e.coop
	lid, err := e.typed(e.linearID(), ir.U32, "the invocation's index")
	if err != nil {
		return err
	}
	tA, tB := e.operandTypes(a, b)
	vals := map[string]uint32{}
	for _, ld := range loads {
		st := c.stages[ld.Matrix]
		if st == nil {
			return fmt.Errorf("the cooperative path has no stage for %q. Fix: report this as a kiln bug", ld.Matrix)
		}
		from, err := e.lookupArray(ld.From, "matrix_load")
		if err != nil {
			return err
		}
		typ := tA
		if ld.Matrix != s.A {
			typ = tB
		}
		e.scopes.Push(nil)
		off, stride, err := e.coopAddressing(ld.Offset, ld.Stride, ld.Bound)
		var fast value
		if err == nil {
			// a tensor layout's stride must be at least its row: the
			// store's test has that condition too
			tensor := e.target.Coop.NV.Loads == NVTensor && ld.Layout == ir.RowMajor
			fast, err = e.coopFast(st.m, from, ld.From, ld.Layout, ld.Bound != nil, tensor)
		}
		if err == nil {
			vals[ld.Matrix], err = e.nvOperand(st, typ, lid, from, ld, off, stride, fast)
		}
		e.scopes.Pop()
		if err != nil {
			return err
		}
		c.read[ld.From] = true
	}
	r := c.regs[s.Acc]
	tAcc := e.regType(r)
	acc := e.op(opLoad, tAcc, r.vars[0])
	e.inst(opStore, r.vars[0], e.op(opCooperativeMatrixMulAddKHR, tAcc, vals[s.A], vals[s.B], acc))
	c.read[s.Acc], c.written[s.Acc] = true, true
	return nil
}

// loadTensor is m (rows×cols, row-major at offset off with stride stride in
// buffer from) as a workgroup-scope matrix of type typ, loaded through a
// tensor layout of those dimensions and strides (stride at least cols).
func (e *emitter) loadTensor(typ uint32, m ir.MatrixDecl, from array, off, stride uint32) uint32 {
	layoutT := e.typ(typeKey{op: opTypeTensorLayoutNV, a: 2, b: tensorClampConstant}, e.cu32(2), e.cu32(tensorClampConstant))
	l := e.op(opCreateTensorLayoutNV, layoutT)
	l = e.op(opTensorLayoutSetDimensionNV, layoutT, l, e.cu32(m.Rows), e.cu32(m.Cols))
	l = e.op(opTensorLayoutSetStrideNV, layoutT, l, stride, e.cu32(1))
	// every element is inside the layout: the object for clamped ones is
	// never read
	undef := e.op(opUndef, typ)
	return e.op(opCooperativeMatrixLoadTensorNV, typ, e.elemPtr(from, off), undef, l, 0, 0)
}

// nvBand stores rows [row0, row0+rows) of register matrix r (one workgroup
// matrix) into the band array, rows×cols f32, through a tensor view clipped
// to those rows.
func (e *emitter) nvBand(r *coopReg, band array, row0, rows uint32) {
	layoutT := e.typ(typeKey{op: opTypeTensorLayoutNV, a: 2, b: tensorClampConstant}, e.cu32(2), e.cu32(tensorClampConstant))
	viewT := e.typ(typeKey{op: opTypeTensorViewNV, a: 2}, e.cu32(2), e.constant(ir.LitBool(false)), e.cu32(0), e.cu32(1))
	l := e.op(opCreateTensorLayoutNV, layoutT)
	l = e.op(opTensorLayoutSetDimensionNV, layoutT, l, e.cu32(rows), e.cu32(r.m.Cols))
	v := e.op(opCreateTensorViewNV, viewT)
	v = e.op(opTensorViewSetClipNV, viewT, v, e.cu32(row0), e.cu32(rows), e.cu32(0), e.cu32(r.m.Cols))
	x := e.op(opLoad, e.regType(r), r.vars[0])
	e.inst(opCooperativeMatrixStoreTensorNV, e.elemPtr(band, e.cu32(0)), x, l, 0, tensorAddressingView, v)
}
