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
// component kind), bf16 float types, pointers to cooperative matrices, the
// u32 type, uvec4 types and pointers to uvec4.
//
// The staged path's uvec4 words (coopstage.go) hold 16-bit elements in the
// interpreter's memory of one word an element: a uvec4 covers 8 of them (its
// word k is elements 2k and 2k+1, the low half first), an array of n uvec4 in
// workgroup memory has 8n elements, and a cooperative load through a pointer
// to a uvec4 counts its stride in uvec4s.
type coopTypes struct {
	kinds    map[uint32]uint32
	bf16     map[uint32]bool
	ptrs     map[uint32]bool
	f16      map[uint32]bool
	u32      map[uint32]bool
	quads    map[uint32]bool
	quadPtrs map[uint32]bool
}

// quadElems is the number of 16-bit elements of a uvec4.
const quadElems = 8

// wordsOf is the number of memory words an array element of type t takes.
func (c *coopTypes) wordsOf(t uint32) int {
	if c.quads[t] {
		return quadElems
	}
	return 1
}

// declare records what in declares.
func (c *coopTypes) declare(in inst) {
	if c.kinds == nil {
		c.kinds, c.bf16, c.ptrs, c.f16 = map[uint32]uint32{}, map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
		c.u32, c.quads, c.quadPtrs = map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
	}
	a := in.args
	switch in.op {
	case opTypeInt:
		c.u32[a[0]] = a[1] == 32
	case opTypeVector:
		c.quads[a[0]] = c.u32[a[1]] && a[2] == 4
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
		c.quadPtrs[a[0]] = c.quads[a[2]]
	}
}

// quadStep interprets in when it reads or writes uvec4 words.
func (mc *machine) quadStep(inv *invocation, in inst) (bool, error) {
	v, a, c := inv.vals, in.args, &mc.coop
	switch {
	case in.op == opVariable && c.quadPtrs[a[0]]:
		v[a[1]] = cell{mem: make([]uint32, quadElems), quadPtr: true}
	case in.op == opAccessChain && c.quadPtrs[a[0]]:
		base, idx := v[a[2]], a[3:]
		if mc.storage[a[2]] == storageStorageBuffer {
			idx = idx[1:] // the Block's member 0
		}
		i := int(v[idx[0]].bits) * quadElems
		if i+quadElems > len(base.mem) {
			return true, fmt.Errorf("access chain %d: uvec4 at element %d outside the %d elements bound", a[1], i, len(base.mem))
		}
		v[a[1]] = cell{mem: base.mem, idx: i, quadPtr: true}
	case in.op == opLoad && c.quads[a[0]]:
		p, w := v[a[2]], make([]uint32, 4)
		for k := range w {
			w[k] = p.mem[p.idx+2*k]&0xffff | p.mem[p.idx+2*k+1]<<16
		}
		v[a[1]] = cell{words: w}
	case in.op == opStore && v[a[1]].words != nil:
		p := v[a[0]]
		for k, w := range v[a[1]].words {
			p.mem[p.idx+2*k], p.mem[p.idx+2*k+1] = w&0xffff, w>>16
		}
	case in.op == opCompositeConstruct && c.quads[a[0]]:
		w := make([]uint32, 4)
		for k := range w {
			w[k] = v[a[2+k]].bits
		}
		v[a[1]] = cell{words: w}
	default:
		return false, nil
	}
	return true, nil
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
	if handled, err := mc.quadStep(inv, in); handled || err != nil {
		return handled, err
	}
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
		if p.quadPtr {
			stride *= quadElems
		}
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
