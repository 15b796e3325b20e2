package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir/half"
)

// The SPIR-V interpreter's cooperative matrices (interp_test.go runs the
// rest). Every invocation holds the whole 16×16 matrix: the path's operands
// are uniform in the subgroup, so each lane computing the subgroup's result
// is the same as the subgroup computing it together, and a store writes the
// same values once per lane. Loads and stores of elements outside the memory
// bound are errors, as for the scalar accesses. MulAdd accumulates in f32 in
// k order with exact products, as the reference does.

// interpSubgroupSize is the interpreter's subgroup size (SubgroupId).
const interpSubgroupSize = 32

// The component kinds of cooperative matrices.
const (
	coopKindF32 = iota + 1
	coopKindF16
	coopKindBF16
)

// coopTypes are the module's cooperative matrix types (by id, their
// component kind), bf16 float types, and pointers to cooperative matrices.
type coopTypes struct {
	kinds map[uint32]uint32
	bf16  map[uint32]bool
	ptrs  map[uint32]bool
	f16   map[uint32]bool
}

// declare records what in declares.
func (c *coopTypes) declare(in inst) {
	if c.kinds == nil {
		c.kinds, c.bf16, c.ptrs, c.f16 = map[uint32]uint32{}, map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
	}
	a := in.args
	switch in.op {
	case opTypeFloat:
		c.bf16[a[0]] = a[1] == 16 && len(a) > 2 && a[2] == fpEncodingBFloat16KHR
		c.f16[a[0]] = a[1] == 16 && len(a) == 2
	case opTypeCooperativeMatrixKHR:
		switch {
		case c.bf16[a[1]]:
			c.kinds[a[0]] = coopKindBF16
		case c.f16[a[1]]:
			c.kinds[a[0]] = coopKindF16
		default:
			c.kinds[a[0]] = coopKindF32
		}
	case opTypePointer:
		c.ptrs[a[0]] = c.kinds[a[2]] != 0
	}
}

// coopElement is a matrix element as a float32.
func coopElement(kind, bits uint32) float32 {
	switch kind {
	case coopKindF16:
		return half.Float16(bits).Float32()
	case coopKindBF16:
		return half.BFloat16(bits).Float32()
	}
	return f32(bits)
}

// coopStep interprets in when it belongs to the cooperative-matrix path.
func (mc *machine) coopStep(inv *invocation, in inst) (bool, error) {
	v, a, c := inv.vals, in.args, &mc.coop
	switch in.op {
	case opVariable:
		if !c.ptrs[a[0]] {
			return false, nil
		}
		v[a[1]] = cell{mem: make([]uint32, coopTile*coopTile)}
	case opLoad:
		if mc.storage[a[2]] == storageInput && mc.builtin[a[2]] == builtInSubgroupID {
			v[a[1]] = cell{bits: inv.ids[builtInSubgroupID][0]}
			return true, nil
		}
		kind := c.kinds[a[0]]
		if kind == 0 {
			return false, nil
		}
		p := v[a[2]]
		v[a[1]] = cell{mat: append([]uint32(nil), p.mem[:coopTile*coopTile]...), bits: kind}
	case opStore:
		x := v[a[1]]
		if x.mat == nil {
			return false, nil
		}
		copy(v[a[0]].mem, x.mat)
	case opCompositeConstruct:
		kind := c.kinds[a[0]]
		if kind == 0 {
			return false, nil
		}
		m := make([]uint32, coopTile*coopTile)
		for i := range m {
			m[i] = v[a[2]].bits
		}
		v[a[1]] = cell{mat: m, bits: kind}
	case opCooperativeMatrixLoadKHR, opCooperativeMatrixStoreKHR:
		load := in.op == opCooperativeMatrixLoadKHR
		ops := a[2:] // pointer, layout, stride
		if !load {
			ops = []uint32{a[0], a[2], a[3]}
		}
		p, layout, stride := v[ops[0]], v[ops[1]].bits, v[ops[2]].bits
		m := make([]uint32, coopTile*coopTile)
		if !load {
			m = v[a[1]].mat
		}
		for r := range uint32(coopTile) {
			for col := range uint32(coopTile) {
				i := uint32(p.idx) + r*stride + col
				if layout == coopCol {
					i = uint32(p.idx) + col*stride + r
				}
				if uint64(i) >= uint64(len(p.mem)) || i < uint32(p.idx) {
					return true, fmt.Errorf("cooperative matrix access at element %d (base %d, stride %d) outside the %d elements bound", i, p.idx, stride, len(p.mem))
				}
				if load {
					m[r*coopTile+col] = p.mem[i]
				} else {
					p.mem[i] = m[r*coopTile+col]
				}
			}
		}
		if load {
			v[a[1]] = cell{mat: m, bits: c.kinds[a[0]]}
		}
	case opCooperativeMatrixMulAddKHR:
		x, y, acc := v[a[2]], v[a[3]], v[a[4]]
		m := make([]uint32, coopTile*coopTile)
		for r := range coopTile {
			for col := range coopTile {
				s := f32(acc.mat[r*coopTile+col])
				for k := range coopTile {
					s += float32(coopElement(x.bits, x.mat[r*coopTile+k]) * coopElement(y.bits, y.mat[k*coopTile+col]))
				}
				m[r*coopTile+col] = fbits(s)
			}
		}
		v[a[1]] = cell{mat: m, bits: coopKindF32}
	default:
		return false, nil
	}
	return true, nil
}
