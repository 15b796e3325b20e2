package spirv

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir/half"
)

// The SPIR-V interpreter's cooperative matrices (interp_test.go runs the
// rest). Every invocation holds the whole matrix (16×16 at subgroup scope,
// the type's rows×columns at workgroup scope): the path's operands are
// uniform in the subgroup (workgroup), so each lane computing the result is
// the same as the subgroup (workgroup) computing it together, and a store
// writes the same values once per lane. SPV_NV_tensor_addressing's layouts
// and views are their state in words (tensorLayout, tensorView), and
// OpCooperativeMatrixStoreTensorNV follows the extension's addressing
// functions for two dimensions. Loads and stores of elements outside the memory
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
	dims     map[uint32][2]uint32 // matrix type and pointer to one -> rows, cols
	clamps   map[uint32]uint32    // tensor layout type -> clamp mode
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

// declare records what in declares; init holds the constants declared
// before it.
func (c *coopTypes) declare(in inst, init []cell) {
	if c.kinds == nil {
		c.kinds, c.bf16, c.ptrs, c.f16 = map[uint32]uint32{}, map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
		c.u32, c.quads, c.quadPtrs = map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}
		c.dims, c.clamps = map[uint32][2]uint32{}, map[uint32]uint32{}
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
	case opTypeTensorLayoutNV:
		c.clamps[a[0]] = init[a[2]].bits
	case opTypeCooperativeMatrixKHR:
		c.dims[a[0]] = [2]uint32{init[a[3]].bits, init[a[4]].bits}
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
		c.dims[a[0]] = c.dims[a[2]]
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
		d := c.dims[a[0]]
		v[a[1]] = cell{mem: make([]uint32, d[0]*d[1])}
	case opLoad:
		if mc.storage[a[2]] == storageInput && mc.builtin[a[2]] == builtInSubgroupID {
			v[a[1]] = cell{bits: inv.ids[builtInSubgroupID][0]}
			return true, nil
		}
		kind := c.kinds[a[0]]
		if kind == 0 {
			return false, nil
		}
		p, d := v[a[2]], c.dims[a[0]]
		v[a[1]] = cell{mat: append([]uint32(nil), p.mem[:d[0]*d[1]]...), matCols: d[1], bits: kind}
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
		d := c.dims[a[0]]
		m := make([]uint32, d[0]*d[1])
		for i := range m {
			m[i] = v[a[2]].bits
		}
		v[a[1]] = cell{mat: m, matCols: d[1], bits: kind}
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
		var rows, cols uint32
		var m []uint32
		if load {
			d := c.dims[a[0]]
			rows, cols, m = d[0], d[1], make([]uint32, d[0]*d[1])
		} else {
			x := v[a[1]]
			rows, cols, m = uint32(len(x.mat))/x.matCols, x.matCols, x.mat
		}
		for r := range rows {
			for col := range cols {
				i := uint32(p.idx) + r*stride + col
				if layout == coopCol {
					i = uint32(p.idx) + col*stride + r
				}
				if uint64(i) >= uint64(len(p.mem)) || i < uint32(p.idx) {
					return true, fmt.Errorf("cooperative matrix access at element %d (base %d, stride %d) outside the %d elements bound", i, p.idx, stride, len(p.mem))
				}
				if load {
					m[r*cols+col] = p.mem[i]
				} else {
					p.mem[i] = m[r*cols+col]
				}
			}
		}
		if load {
			v[a[1]] = cell{mat: m, matCols: cols, bits: c.kinds[a[0]]}
		}
	case opCooperativeMatrixMulAddKHR:
		x, y, acc := v[a[2]], v[a[3]], v[a[4]]
		rows, inner, cols := uint32(len(x.mat))/x.matCols, x.matCols, y.matCols
		if uint32(len(y.mat))/cols != inner || acc.matCols != cols || uint32(len(acc.mat)) != rows*cols {
			return true, fmt.Errorf("MulAdd %d: %dx%d times %dx%d plus %dx%d", a[1], rows, inner, len(y.mat)/int(cols), cols, len(acc.mat)/int(acc.matCols), acc.matCols)
		}
		m := make([]uint32, rows*cols)
		for r := range rows {
			for col := range cols {
				s := f32(acc.mat[r*cols+col])
				for k := range inner {
					s += float32(coopElement(x.bits, x.mat[r*inner+k]) * coopElement(y.bits, y.mat[k*cols+col]))
				}
				m[r*cols+col] = fbits(s)
			}
		}
		v[a[1]] = cell{mat: m, matCols: cols, bits: coopKindF32}
	case opCreateTensorLayoutNV:
		v[a[1]] = cell{words: tensorLayout{clamp: c.clamps[a[0]]}.words()}
	case opTensorLayoutSetDimensionNV:
		l := tensorLayoutOf(v[a[2]].words)
		l.dim = [2]uint32{v[a[3]].bits, v[a[4]].bits}
		l.span, l.off, l.stride = l.dim, [2]uint32{}, [2]uint32{l.dim[1], 1}
		v[a[1]] = cell{words: l.words()}
	case opTensorLayoutSetStrideNV:
		l := tensorLayoutOf(v[a[2]].words)
		l.stride = [2]uint32{v[a[3]].bits, v[a[4]].bits}
		if l.stride[0] < l.stride[1]*l.dim[1] {
			return true, fmt.Errorf("tensor layout stride %v below its rows of %d", l.stride, l.dim[1])
		}
		v[a[1]] = cell{words: l.words()}
	case opUndef:
		kind := c.kinds[a[0]]
		if kind == 0 {
			return false, nil
		}
		d := c.dims[a[0]]
		v[a[1]] = cell{mat: make([]uint32, d[0]*d[1]), matCols: d[1], bits: kind}
	case opCooperativeMatrixLoadTensorNV:
		return true, mc.loadTensor(inv, in)
	case opCreateTensorViewNV:
		v[a[1]] = cell{words: []uint32{0, 0xffffffff, 0, 0xffffffff}}
	case opTensorViewSetClipNV:
		v[a[1]] = cell{words: []uint32{v[a[3]].bits, v[a[4]].bits, v[a[5]].bits, v[a[6]].bits}}
	case opCooperativeMatrixStoreTensorNV:
		return true, mc.storeTensor(inv, in)
	default:
		return false, nil
	}
	return true, nil
}

// tensorLayout is a two-dimensional tensor layout's state
// (SPV_NV_tensor_addressing; block sizes 1), in a cell's words.
type tensorLayout struct {
	dim, stride, off, span [2]uint32
	clamp                  uint32
}

func (l tensorLayout) words() []uint32 {
	return []uint32{l.dim[0], l.dim[1], l.stride[0], l.stride[1], l.off[0], l.off[1], l.span[0], l.span[1], l.clamp}
}

func tensorLayoutOf(w []uint32) tensorLayout {
	return tensorLayout{dim: [2]uint32{w[0], w[1]}, stride: [2]uint32{w[2], w[3]}, off: [2]uint32{w[4], w[5]}, span: [2]uint32{w[6], w[7]}, clamp: w[8]}
}

// loadTensor interprets OpCooperativeMatrixLoadTensorNV with a layout and no
// view or decode function (what the emitter uses): element (r, c) from the
// layout's coordinates (matrixCoordToTensorElement), the object's element
// where clamped to a constant, an error outside the layout with clamp mode
// Undefined or outside the memory.
func (mc *machine) loadTensor(inv *invocation, in inst) error {
	v, a := inv.vals, in.args
	p, obj, l := v[a[2]], v[a[3]], tensorLayoutOf(v[a[4]].words)
	if a[5]&^memoryAccessNonPrivatePointer != 0 || len(a) < 7 || a[6] != 0 {
		return fmt.Errorf("tensor load: memory operands %#x, tensor addressing operands %v", a[5], a[6:])
	}
	d := mc.coop.dims[a[0]]
	rows, cols := d[0], d[1]
	m := make([]uint32, rows*cols)
	for r := range rows {
		for col := range cols {
			at, out := l.element(r*cols + col)
			switch {
			case out && l.clamp == 0:
				return fmt.Errorf("tensor load of (%d, %d) outside the layout %v with clamp mode Undefined", r, col, l.dim)
			case out:
				m[r*cols+col] = obj.mat[r*cols+col]
			default:
				i := uint32(p.idx) + at
				if uint64(i) >= uint64(len(p.mem)) {
					return fmt.Errorf("tensor load at element %d outside the %d elements bound", i, len(p.mem))
				}
				m[r*cols+col] = p.mem[i]
			}
		}
	}
	v[a[1]] = cell{mat: m, matCols: cols, bits: mc.coop.kinds[a[0]]}
	return nil
}

// element is the index in the tensor of the span's element index (its
// coordinates within the span, the layout's offset added, then the strides),
// and whether it lies outside the layout's dimensions.
func (l tensorLayout) element(index uint32) (uint32, bool) {
	span := [2]uint32{index / l.span[1] % l.span[0], index % l.span[1]}
	at, out := uint32(0), false
	for d := range 2 {
		c := int64(span[d]) + int64(int32(l.off[d]))
		if c < 0 || c >= int64(l.dim[d]) {
			out = true
		}
		at += uint32(c) * l.stride[d]
	}
	return at, out
}

// storeTensor interprets OpCooperativeMatrixStoreTensorNV with a layout and,
// optionally, a view of no dimensions of its own and the identity
// permutation (what the emitter uses), element by element through the
// extension's matrixCoordToTensorElement(WithView): clipped elements are not
// stored, nor (clamp mode other than Undefined) those outside the layout's
// dimensions; Undefined there is an error.
func (mc *machine) storeTensor(inv *invocation, in inst) error {
	v, a := inv.vals, in.args
	p, x, l := v[a[0]], v[a[1]], tensorLayoutOf(v[a[2]].words)
	if a[3]&^memoryAccessNonPrivatePointer != 0 {
		return fmt.Errorf("tensor store: memory operands %#x", a[3])
	}
	clip := []uint32{0, 0xffffffff, 0, 0xffffffff}
	if len(a) > 4 && a[4]&tensorAddressingView != 0 {
		clip = v[a[5]].words
	}
	rows, cols := uint32(len(x.mat))/x.matCols, x.matCols
	for r := range rows {
		for col := range cols {
			if r < clip[0] || r-clip[0] >= clip[1] || col < clip[2] || col-clip[2] >= clip[3] {
				continue
			}
			index := (r-clip[0])*min(cols, clip[3]) + (col - clip[2])
			// the view's coordinates from the span and back to an index
			// (no dimensions of its own, the identity permutation)
			view := [2]uint32{index / l.span[1] % l.span[0], index % l.span[1]}
			at, out := l.element(view[0]*l.span[1] + view[1])
			if out {
				if l.clamp == 0 {
					return fmt.Errorf("tensor store of (%d, %d) outside the layout %v with clamp mode Undefined", r, col, l.dim)
				}
				continue
			}
			i := uint32(p.idx) + at
			if uint64(i) >= uint64(len(p.mem)) {
				return fmt.Errorf("tensor store at element %d outside the %d elements bound", i, len(p.mem))
			}
			p.mem[i] = x.mat[r*cols+col]
		}
	}
	return nil
}
