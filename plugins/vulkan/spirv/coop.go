package spirv

import (
	"fmt"
	"maps"
	"slices"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/ranges"
)

// The cooperative-matrix path: workgroup matrices on VK_KHR_cooperative_matrix
// (see docs/design.md, "Vulkan", "Cooperative matrices"; coopemit.go emits it).
// This file holds what the device offers (CoopTarget, SelectCoop) and the
// choice of the path for a program (planCoop).
//
// The path is taken for a program when the device lists a 16×16×16
// subgroup-scope combination of f16·f16+f32→f32 or bf16·bf16+f32→f32 (bf16
// also needs the bf16 SPIR-V type and 16-bit integers), the program has a
// matrix_mma whose operands are of such a type (tf32 and f32 operands are
// not), the workgroup's x size is a multiple of the subgroup size (so every
// subgroup is full), the program requires no other subgroup size, and the
// device has the Vulkan memory model's device scope when the program has
// atomics on buffers. Anything else takes the scalar matrix path (matrix.go),
// and the module says which path it took, and why, in an OpSourceExtension
// ("kiln matrix path: ...", shown by `kiln compile --emit spirv --dis`) and
// in Module.MatrixPath.

// CoopTarget is what the device offers for the cooperative-matrix path; the
// zero CoopTarget offers nothing (the scalar path).
type CoopTarget struct {
	// F16 and BF16 say that the device runs 16×16×16 subgroup-scope
	// cooperative matrices of that operand type with f32 accumulators (see
	// SelectCoop).
	F16, BF16 bool
	// SubgroupSize is the size the device's compute subgroups run with, which
	// the path partitions the workgroup's matrices by.
	SubgroupSize uint32
	// DeviceScope says that the device has vulkanMemoryModelDeviceScope, which
	// a module on the Vulkan memory model needs for device-scope atomics.
	DeviceScope bool
	// NV is what the device offers of VK_NV_cooperative_matrix2 (the NV
	// path, coopnv.go; SelectCoopNV); the zero value keeps the KHR path.
	NV CoopNV
}

// CoopShape is one combination a device lists
// (VkCooperativeMatrixPropertiesKHR): an M×K A times a K×N B plus an M×N C
// gives an M×N Result; Subgroup says the scope is the subgroup. A component
// type kiln has no ir.Type for is the zero Type.
type CoopShape struct {
	M, N, K         uint32
	A, B, C, Result ir.Type
	Subgroup        bool
}

// coopTile is the side of the tiles the path uses: 16×16×16.
const coopTile = 16

// SelectCoop is the CoopTarget of a device from the combinations it lists:
// F16 when it lists 16×16×16 f16·f16+f32=f32 at subgroup scope and has
// shaderFloat16 (float16), BF16 when it lists the same for bf16 and has the
// bf16 type with cooperative matrices (bf16Type) and shaderInt16 (int16, for
// the bf16 tiles held in workgroup memory). subgroupSize is the device's
// compute subgroup size; deviceScope its vulkanMemoryModelDeviceScope.
func SelectCoop(shapes []CoopShape, float16, bf16Type, int16 bool, subgroupSize uint32, deviceScope bool) CoopTarget {
	var t CoopTarget
	for _, s := range shapes {
		if !s.Subgroup || s.M != coopTile || s.N != coopTile || s.K != coopTile || s.A != s.B || s.C != ir.F32 || s.Result != ir.F32 {
			continue
		}
		switch s.A {
		case ir.F16:
			t.F16 = t.F16 || float16
		case ir.BF16:
			t.BF16 = t.BF16 || (bf16Type && int16)
		}
	}
	if (t.F16 || t.BF16) && subgroupSize > 0 {
		t.SubgroupSize = subgroupSize
		t.DeviceScope = deviceScope
		return t
	}
	return CoopTarget{}
}

// The matrix paths Module.MatrixPath names.
const (
	MatrixPathScalar      = "scalar"
	MatrixPathCooperative = "cooperative"
)

// coopPlan is how a program runs on the cooperative-matrix path: the
// workgroup's subgroups and the matrices held in cooperative-matrix registers.
type coopPlan struct {
	sg, groups uint32
	// regs are the matrices held in registers, by name; order lists them in
	// declaration order.
	regs  map[string]*coopReg
	order []string
	// bf16 is set when a bf16 matrix takes part and the target runs bf16
	// cooperative matrices.
	bf16 bool
	// sgid is the SubgroupId value (loaded in the entry block), semantics the
	// barrier semantics constant with the memory model's MakeAvailable and
	// MakeVisible (finishCoop puts it in every OpControlBarrier).
	sgid, semantics uint32
	// Barrier tracking (coopFence): the names of the arrays and buffers the
	// matrix statements since the last barrier read and wrote, and the body's
	// length after the last matrix statement (-1 before the first).
	read, written map[string]bool
	mark          int
	// fused are the mma operand matrices whose matrix_load is emitted with
	// the matrix_mma right after it (fuseLoads), with that load; pending
	// holds the loads deferred so far and pendingAt the body's length when
	// the first was.
	fused     map[string]ir.MatrixLoadStmt
	pending   map[string]ir.MatrixLoadStmt
	pendingAt int
	// Staging (coopstage.go): stages are the fused operands' workgroup
	// tiles, by matrix name; double says they hold two K slabs each, with
	// parity the Function variable that picks the slab; band is the array a
	// register matrix's store goes through a band of 16 rows at a time when
	// it cannot go straight to its target; arrays are the matrices that keep
	// a workgroup array of all their elements (the others: fused operands
	// and register matrices that need none).
	stages map[string]*coopStage
	double bool
	parity uint32
	arrays map[string]bool
	// prefetch holds, by operand name, the fused statements whose next K
	// slab is loaded into registers while the current one is multiplied
	// (coopstage.go).
	prefetch map[string]*coopPrefetch
	// nv is set on the NV path (coopnv.go): the register matrices are whole
	// workgroup-scope matrices, of the types in nvTypes (by type, use, rows
	// and columns); nvWhy says why the NV path was not taken otherwise.
	nv      bool
	nvTypes map[[4]uint32]uint32
	nvWhy   string
}

// coopReg is a matrix held in registers: an f32 accumulator of a cooperative
// matmul. Its rows/16 × cols/16 tiles are split among a gr × gc grid of the
// workgroup's subgroups (subgroups from gr·gc on hold none), each holding an
// rr × rc block of tiles in Function variables (vars, row-major). Its
// workgroup array (as on the scalar path) holds a copy only around the
// statements that need one (spill, reload).
type coopReg struct {
	m      ir.MatrixDecl
	gr, gc uint32
	rr, rc uint32
	vars   []uint32
}

// coopOperand reports whether t is an mma operand type the target runs on
// cooperative matrices.
func coopOperand(t Target, typ ir.Type) bool {
	switch typ {
	case ir.F16:
		return t.Coop.F16 && t.Float16
	case ir.BF16:
		return t.Coop.BF16 && t.Int16
	}
	return false
}

// coopMMA reports whether s runs on cooperative matrices for t.
func coopMMA(p *ir.Program, t Target, s ir.MatrixMMAStmt) bool {
	a, ok := p.Matrix(s.A)
	acc, okAcc := p.Matrix(s.Acc)
	return ok && okAcc && s.Precision == ir.PrecisionDefault && acc.Type == ir.F32 && coopOperand(t, a.Type)
}

// planCoop decides the path of p on t with workgroup size wg: a plan, or nil
// and why the scalar path is taken.
func planCoop(p *ir.Program, t Target, wg [3]uint32) (*coopPlan, string) {
	var mmas []ir.MatrixMMAStmt
	atomics := false
	ir.Inspect(p.Body, func(n any) bool {
		switch s := n.(type) {
		case ir.MatrixMMAStmt:
			mmas = append(mmas, s)
		case ir.AtomicStmt:
			atomics = atomics || !isShared(p, s.Target)
		}
		return true
	})
	sg := t.Coop.SubgroupSize
	switch {
	case len(mmas) == 0:
		return nil, "the program has no matrix_mma"
	case sg == 0:
		return nil, "the device lists no 16x16x16 f16 or bf16 cooperative matrix with f32 accumulators (VK_KHR_cooperative_matrix)"
	case wg[0]%sg != 0:
		return nil, fmt.Sprintf("the workgroup's x size %d is not a multiple of the subgroup size %d", wg[0], sg)
	case p.SubgroupSize != 0 && p.SubgroupSize != sg:
		return nil, fmt.Sprintf("the program requires subgroups of %d, the path runs with %d", p.SubgroupSize, sg)
	case atomics && !t.Coop.DeviceScope:
		return nil, "the program has atomics on buffers, and the device lacks vulkanMemoryModelDeviceScope"
	case t.Subgroups&SubgroupBasic == 0:
		return nil, "the device has no basic subgroup operations in compute shaders"
	}
	c := &coopPlan{sg: sg, groups: wg[0] * wg[1] * wg[2] / sg, regs: map[string]*coopReg{},
		read: map[string]bool{}, written: map[string]bool{}, mark: -1,
		fused: map[string]ir.MatrixLoadStmt{}, pending: map[string]ir.MatrixLoadStmt{}, prefetch: map[string]*coopPrefetch{},
		nvTypes: map[[4]uint32]uint32{}}
	var why string
	for _, s := range mmas {
		if !coopMMA(p, t, s) {
			a, _ := p.Matrix(s.A)
			why = fmt.Sprintf("matrix_mma %s += %s·%s has %s operands", s.Acc, s.A, s.B, a.Type)
			if s.Precision == ir.PrecisionTF32 {
				why += " at tf32 precision"
			}
			continue
		}
		acc, _ := p.Matrix(s.Acc)
		if _, ok := c.regs[acc.Name]; !ok {
			c.regs[acc.Name] = partition(acc, c.groups)
		}
	}
	if len(c.regs) == 0 {
		return nil, why + ", which the device has no cooperative matrix for"
	}
	for _, m := range p.Matrices {
		if _, ok := c.regs[m.Name]; ok {
			c.order = append(c.order, m.Name)
		}
		c.bf16 = c.bf16 || (m.Type == ir.BF16 && coopOperand(t, ir.BF16))
	}
	fuseLoads(p, t, c)
	c.nvWhy = planNV(p, t, wg, c, mmas)
	return c, ""
}

// fuseLoads finds the matrix_loads that are emitted with the matrix_mma after
// them (coopFused): a cooperative matrix_mma into a register matrix directly
// preceded, in the same statement list, by one matrix_load into each of its
// operands from a read-only buffer, where no other matrix statement of the
// program names those operands. Those operands are read by nothing else, so
// they need no workgroup array of their own, only the fused statement's
// stages; and where the statement sits in a for loop that allows it
// (prefetchable), it prefetches the next K slab.
func fuseLoads(p *ir.Program, t Target, c *coopPlan) {
	refs, loads := map[string]int{}, map[string]int{}
	ir.Inspect(p.Body, func(n any) bool {
		switch s := n.(type) {
		case ir.MatrixFillStmt:
			refs[s.Matrix]++
		case ir.MatrixLoadStmt:
			refs[s.Matrix]++
			loads[s.Matrix]++
		case ir.MatrixStoreStmt:
			refs[s.Matrix]++
		case ir.MatrixConvertStmt:
			refs[s.Matrix]++
			refs[s.From]++
		case ir.MatrixMMAStmt:
			refs[s.Acc]++
			refs[s.A]++
			if s.B != s.A {
				refs[s.B]++
			}
		}
		return true
	})
	assigned := ranges.Assigned(p.Body)
	var visit func([]ir.Stmt, *ir.ForStmt)
	visit = func(stmts []ir.Stmt, loop *ir.ForStmt) {
		for i, s := range stmts {
			switch s := s.(type) {
			case ir.IfStmt:
				visit(s.Then, nil)
				visit(s.Else, nil)
			case ir.ForStmt:
				visit(s.Body, &s)
			case ir.WhileStmt:
				visit(s.Body, nil)
			}
			mma, ok := s.(ir.MatrixMMAStmt)
			if !ok || c.regs[mma.Acc] == nil || !coopMMA(p, t, mma) {
				continue
			}
			ops := []string{mma.A}
			if mma.B != mma.A {
				ops = append(ops, mma.B)
			}
			if i < len(ops) {
				continue
			}
			found := map[string]ir.MatrixLoadStmt{}
			for _, prev := range stmts[i-len(ops) : i] {
				ld, isLoad := prev.(ir.MatrixLoadStmt)
				buf, isBuf := p.Buffer(ld.From)
				ok = ok && isLoad && isBuf && buf.Access == ir.Read && slices.Contains(ops, ld.Matrix) &&
					refs[ld.Matrix] == 2 && loads[ld.Matrix] == 1
				found[ld.Matrix] = ld
			}
			if !ok {
				continue
			}
			maps.Copy(c.fused, found)
			if pf := prefetchable(loop, stmts[:i-len(ops)], found, assigned); pf != nil {
				for _, o := range ops {
					c.prefetch[o] = pf
				}
			}
		}
	}
	visit(p.Body, nil)
}

// prefetchable is the prefetch plan of fused loads directly in the body of
// loop after the statements before, or nil: the statements before are lets,
// the loop has no break, continue or return, and the loop's bound and step,
// the lets' values and the loads' offsets, strides and bounds are pure (see
// pure), so evaluated with the loop variable one step on they are the next
// iteration's.
func prefetchable(loop *ir.ForStmt, before []ir.Stmt, loads map[string]ir.MatrixLoadStmt, assigned map[string]bool) *coopPrefetch {
	if loop == nil || assigned[loop.Var] {
		return nil
	}
	exits := false
	ir.Inspect(loop.Body, func(n any) bool {
		switch n.(type) {
		case ir.BreakStmt, ir.ContinueStmt, ir.ReturnStmt:
			exits = true
		}
		return true
	})
	exprs := []ir.Expr{loop.To, loop.Step}
	pf := &coopPrefetch{loop: *loop}
	for _, s := range before {
		let, ok := s.(ir.LetStmt)
		if !ok {
			return nil
		}
		pf.lets = append(pf.lets, let)
		exprs = append(exprs, let.Value)
	}
	for _, ld := range loads {
		exprs = append(exprs, ld.Offset, ld.Stride)
		if ld.Bound != nil {
			exprs = append(exprs, ld.Bound.Rows, ld.Bound.Cols)
		}
	}
	for _, x := range exprs {
		if !pure(x, assigned) {
			return nil
		}
	}
	if exits {
		return nil
	}
	return pf
}

// pure reports whether x reads nothing that can change while the program
// runs but the locals it names: no memory (loads), no subgroup operation,
// and no local some assignment changes.
func pure(x ir.Expr, assigned map[string]bool) bool {
	ok := true
	ir.Inspect([]ir.Stmt{ir.LetStmt{Value: x}}, func(n any) bool {
		switch n := n.(type) {
		case ir.LoadExpr, ir.SubgroupExpr:
			ok = false
		case ir.LocalRef:
			ok = ok && !assigned[n.Name]
		}
		return ok
	})
	return ok
}

// isShared reports whether name is one of p's shared arrays.
func isShared(p *ir.Program, name string) bool {
	for _, s := range p.Shared {
		if s.Name == name {
			return true
		}
	}
	return false
}

// partition splits m's tiles among groups subgroups: the grid gr × gc with
// gr dividing the tile rows and gc the tile columns that puts the most
// subgroups to work, and of those the one whose blocks are closest to square
// (fewest operand tiles loaded per product).
func partition(m ir.MatrixDecl, groups uint32) *coopReg {
	tr, tc := m.Rows/coopTile, m.Cols/coopTile
	best := &coopReg{m: m, gr: 1, gc: 1, rr: tr, rc: tc}
	for gr := uint32(1); gr <= tr; gr++ {
		for gc := uint32(1); gc <= tc && gr*gc <= groups; gc++ {
			if tr%gr != 0 || tc%gc != 0 {
				continue
			}
			rr, rc := tr/gr, tc/gc
			if n, bn := gr*gc, best.gr*best.gc; n > bn || (n == bn && rr+rc < best.rr+best.rc) {
				best = &coopReg{m: m, gr: gr, gc: gc, rr: rr, rc: rc}
			}
		}
	}
	return best
}
