package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Subgroups (IR v1.1) are aligned segments of sg lanes of a warp: lane i of the
// block (its linear thread index, as CUDA builds warps) is lane i mod sg of
// subgroup i / sg, as the reference numbers them. Every warp-synchronous
// instruction names exactly its segment's lanes as membermask, so subgroups of one
// warp in different branches never wait for each other, and shuffles address the
// segment through shfl's segment mask.

// usesSubgroups reports whether p has a subgroup operation or reads a subgroup
// builtin.
func usesSubgroups(p *ir.Program) bool {
	found := false
	ir.Inspect(p.Body, func(n any) bool {
		switch x := n.(type) {
		case ir.SubgroupExpr:
			found = true
		case ir.BuiltinRef:
			found = found || !x.Kind.HasAxis()
		}
		return !found
	})
	return found
}

// subgroupRegs returns the registers of the lane within its subgroup and of the
// membermask of its subgroup's lanes, computed once in the preamble.
func (e *emitter) subgroupRegs() (lane, mask string) {
	if e.lane != "" {
		return e.lane, e.segMask
	}
	laneid := e.sreg("%laneid")
	start := e.r()
	e.preInst("and.b32 %s, %s, %d", start, laneid, WarpSize-e.sg)
	e.lane, e.segMask = e.r(), e.r()
	e.preInst("and.b32 %s, %s, %d", e.lane, laneid, e.sg-1)
	e.preInst("shl.b32 %s, %s, %s", e.segMask, hex(uint32(uint64(1)<<e.sg-1)), start)
	return e.lane, e.segMask
}

// shflC is shfl's c operand: the segment mask (the lane bits above a subgroup's)
// in bits 8..12 and the clamp 31 in bits 0..4.
func (e *emitter) shflC() string { return hex((WarpSize-e.sg)<<8 | 0x1F) }

// shfl reads x from another lane of the subgroup: mode idx with b the lane
// within the subgroup, or bfly with b the xor distance.
func (e *emitter) shfl(mode, x, b string) string {
	_, mask := e.subgroupRegs()
	d := e.r()
	e.inst("shfl.sync.%s.b32 %s, %s, %s, %s, %s", mode, d, x, b, e.shflC(), mask)
	return d
}

// subgroup lowers a subgroup operation. Shuffle and broadcast read lane Lane of
// the subgroup (0, false for bool, when Lane is at or above the subgroup size,
// since shfl only sees a lane number's low bits). The reductions combine the
// lanes in a butterfly, distances 1, 2, 4, ...: each level adds a lane's partial
// result to its neighbour's, which for f32 add is exactly the reference's pairwise
// tree (x0+x1, x2+x3, then sums of pairs), and every lane ends with the same bits.
// Integer add, min and max use redux.sync on sm_80.
func (e *emitter) subgroup(x ir.SubgroupExpr) (value, error) {
	if e.sg == 0 {
		return value{}, fmt.Errorf("a subgroup operation in a program the emitter saw none in. Fix: report this kiln bug")
	}
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	if x.Op.HasLane() {
		lane, err := e.typed(x.Lane, ir.U32, x.Op.String()+"'s lane")
		if err != nil {
			return value{}, err
		}
		word := v.reg
		if v.t == ir.Bool {
			word = e.sel("1", "0", v.reg)
		}
		got := e.sel("0", e.shfl("idx", word, lane), e.pred2("ge.u32", lane, fmt.Sprint(e.sg)))
		if v.t == ir.Bool {
			return value{reg: e.pred2("ne.u32", got, "0"), t: ir.Bool}, nil
		}
		return value{reg: got, t: v.t}, nil
	}
	if !v.t.IsNumeric() {
		return value{}, unsupported(x.Op.String(), v.t)
	}
	sign := "u32"
	if v.t == ir.I32 {
		sign = "s32"
	}
	name := map[ir.SubgroupOp]string{ir.SubgroupOpAdd: "add", ir.SubgroupOpMin: "min", ir.SubgroupOpMax: "max"}[x.Op]
	if name == "" {
		return value{}, fmt.Errorf("subgroup operation %d has no PTX form. Fix: use subgroup_add, subgroup_min, subgroup_max, subgroup_shuffle or subgroup_broadcast", x.Op)
	}
	if v.t != ir.F32 && e.arch.SM >= 80 {
		_, mask := e.subgroupRegs()
		d := e.r()
		e.inst("redux.sync.%s.%s %s, %s, %s", name, sign, d, v.reg, mask)
		return value{reg: d, t: v.t}, nil
	}
	acc := v.reg
	for dist := uint32(1); dist < e.sg; dist *= 2 {
		other := e.shfl("bfly", acc, fmt.Sprint(dist))
		switch {
		case v.t == ir.F32 && name == "add":
			acc = e.op2("add.rn.f32", acc, other)
		case v.t == ir.F32:
			acc = e.fminmax(name == "min", acc, other)
		case name == "add":
			acc = e.op2("add.u32", acc, other)
		default:
			acc = e.op2(name+"."+sign, acc, other)
		}
	}
	return value{reg: acc, t: v.t}, nil
}
