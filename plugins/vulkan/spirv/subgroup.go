package spirv

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
)

// Subgroup operations (IR v1.1) are the GroupNonUniform instructions at Subgroup
// scope. The IR's rules that SPIR-V leaves open are done in code:
//
//   - f32 subgroup_min and subgroup_max reduce integer keys (orderedBits, NaN
//     mapped to the operation's identity) with OpGroupNonUniformSMin/SMax, so a
//     NaN lane is ignored, -0 orders below +0 and the result is exact whatever the
//     order; all lanes NaN gives NaN. SPIR-V leaves both NaN and signed zeros of
//     OpGroupNonUniformFMin/FMax undefined.
//   - subgroup_add is OpGroupNonUniformIAdd (wrapping) or FAdd (in the device's
//     order, which docs/design.md bounds).
//   - shuffle and broadcast read lane 0 when the lane is at or above the
//     subgroup size and then select 0 (false), since SPIR-V leaves such a read
//     undefined. A broadcast whose lane is a literal is OpGroupNonUniformBroadcast
//     where the device has ballot operations; any other is
//     OpGroupNonUniformShuffle, because SPIR-V 1.3 broadcasts only constant lanes.
func (e *emitter) subgroup(x ir.SubgroupExpr) (value, error) {
	v, err := e.expr(x.X)
	if err != nil {
		return value{}, err
	}
	t := e.scalar(v.t)
	scope := e.cu32(scopeSubgroup)
	if !x.Op.HasLane() {
		if err := e.needSubgroups(SubgroupArithmetic, x.Op.String()); err != nil {
			return value{}, err
		}
		var id uint32
		switch {
		case v.t == ir.F32 && x.Op == ir.SubgroupOpAdd:
			id = e.op(opGroupNonUniformFAdd, t, scope, groupOperationReduce, v.id)
		case v.t == ir.F32:
			id = e.subgroupMinMaxF32(x.Op == ir.SubgroupOpMin, v.id)
		case v.t.IsInteger():
			signed := v.t == ir.I32
			opcode := subgroupIntReduce[x.Op]
			pick := opcode[0]
			if signed {
				pick = opcode[1]
			}
			id = e.op(pick, t, scope, groupOperationReduce, v.id)
		default:
			return value{}, unsupported(x.Op.String(), v.t)
		}
		return value{id: id, t: v.t}, nil
	}
	if x.Lane == nil {
		return value{}, unsupportedLane(x.Op)
	}
	lit, constant := x.Lane.(ir.Literal)
	class := SubgroupShuffle
	if x.Op == ir.SubgroupOpBroadcast && constant && e.target.Subgroups&SubgroupBallot != 0 {
		class = SubgroupBallot
	}
	if err := e.needSubgroups(class, x.Op.String()); err != nil {
		return value{}, err
	}
	lane, err := e.typed(x.Lane, ir.U32, "the lane of "+x.Op.String())
	if err != nil {
		return value{}, err
	}
	size, err := e.builtin(ir.SubgroupSizeBuiltin, 0)
	if err != nil {
		return value{}, err
	}
	ok := e.op(opULessThan, e.bool(), lane, size)
	var read uint32
	if class == SubgroupBallot {
		read = e.op(opGroupNonUniformBroadcast, t, scope, v.id, e.cu32(min(lit.Bits, ir.MaxSubgroupSize-1)))
	} else {
		read = e.op(opGroupNonUniformShuffle, t, scope, v.id, e.sel(e.u32(), ok, lane, e.cu32(0)))
	}
	zero := e.zero(v.t)
	return value{id: e.sel(t, ok, read, zero), t: v.t}, nil
}

// subgroupMinMaxF32 reduces f32 values to their minimum or maximum with IR v1's
// min and max rules, on integer keys.
func (e *emitter) subgroupMinMaxF32(isMin bool, v uint32) uint32 {
	i, u := e.i32(), e.u32()
	bits := e.bitsOf(v)
	// The identity of the reduction stands for a NaN lane; no other value has it
	// as a key (it would be a NaN's bits).
	identity, opcode := int32(math.MinInt32), uint32(opGroupNonUniformSMax)
	if isMin {
		identity, opcode = math.MaxInt32, opGroupNonUniformSMin
	}
	key := e.sel(i, e.isNaN(bits), e.ci32(identity), e.orderedBits(bits))
	r := e.op(opcode, i, e.cu32(scopeSubgroup), groupOperationReduce, key)
	allNaN := e.op(opIEqual, e.bool(), r, e.ci32(identity))
	back := e.op(opBitcast, u, e.orderedI32(r)) // orderedBits is its own inverse
	return e.floatOf(e.sel(u, allNaN, e.cu32(0x7FC00000), back))
}

// unsupportedLane is the error for a subgroup operation without a lane operand
// where one is needed.
func unsupportedLane(op ir.SubgroupOp) error {
	return fmt.Errorf("%s has no lane. Fix: give it a u32 lane", op)
}
