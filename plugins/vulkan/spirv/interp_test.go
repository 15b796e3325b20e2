package spirv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// A SPIR-V interpreter for exactly the subset Emit writes, so the tests can run an
// emitted module and pin the semantics of docs/design.md on the words themselves, without a
// GPU. It follows the SPIR-V rules a driver relies on: f32 arithmetic is IEEE
// single precision with round-to-nearest-even, integer ops wrap, OpPhi picks the
// value of the block it was entered from, and the invocations of a workgroup run
// in turns between barriers. Any access outside the memory actually bound (the
// backend binds one dummy element to an empty buffer) is an error: the emitted
// bounds checks must make robustBufferAccess unnecessary.

// cell is one SSA value: scalar bits, a uvec3, or a pointer into memory (block:
// a PhysicalStorageBuffer pointer to a buffer's Block struct).
type cell struct {
	bits  uint32
	vec   [3]uint32
	mem   []uint32
	idx   int
	block bool
	// pair marks a vector of two f16 (vec[0] and vec[1] hold their bits), which
	// the emitter builds only to reinterpret an f16's bits (half.go).
	pair bool
	// mat is a cooperative matrix's elements, row-major, matCols a row
	// (16 on the KHR path, any on the NV path), with its component kind in
	// bits (coopinterp_test.go).
	mat     []uint32
	matCols uint32
	// words is a u32 vector's components (a uvec4 of the staged cooperative
	// path, a word view's element); quadPtr marks a pointer to a uvec4 in
	// memory of 16-bit elements, 8 words of it a uvec4 (coopinterp_test.go);
	// wide is the number of 16-bit elements one element of a word view of a
	// 16-bit buffer spans (interp_wide_test.go).
	words   []uint32
	quadPtr bool
	wide    int
}

type machine struct {
	code    []inst
	labels  map[uint32]int // label id -> index of its OpLabel
	start   int            // index of main's first instruction after OpFunction
	init    []cell         // constants, spec constants, global variables
	storage map[uint32]uint32
	shared  map[uint32]int // Workgroup variable -> element count
	builtin map[uint32]uint32
	steps   int
	// pushOffsets is the word offset of each member of the push-constant block.
	pushOffsets map[uint32]int
	// addressTypes are the PhysicalStorageBuffer pointer types; addresses maps
	// the device address the test gave each addressed buffer to its memory.
	addressTypes map[uint32]bool
	addresses    map[uint64][]uint32
	// loopLimit, when non-zero, ends an invocation's loops the way llvmpipe's
	// loop limiter does (see loopguard.go): after loopLimit back edges of all
	// its loops together, every back edge goes to the loop's merge block
	// instead. backEdges maps each loop's continue target to its header and
	// merge block.
	loopLimit int
	backEdges map[uint32][2]uint32
	// halfTypes, pairTypes and u16Types are the ids of the 16-bit float type,
	// the vector of two of them and the 16-bit integer type (IR v1.2). A
	// 16-bit value is held in the low bits of a cell, and a 16-bit element
	// in a word of memory of its own.
	halfTypes, pairTypes, u16Types map[uint32]bool
	// arrays is the length of each Function variable of an array type (the
	// scalar matrix path's private slices); the others hold one value.
	arrays map[uint32]int
	// coop is the cooperative-matrix path's types (coopinterp_test.go).
	coop coopTypes
}

// errLoopCut is what dispatchLimited returns when a guarded module set the
// loop guard's flag.
var errLoopCut = errors.New("the loop guard's flag is set: a loop was ended before the program ended it")

// fakeAddress is the device address dispatchCase gives the buffer at binding:
// aligned, and above 4 GiB so that both words matter.
func fakeAddress(binding uint32) uint64 { return uint64(binding+1)<<32 | 0x100 }

// maxSteps bounds one dispatch, so a miscompiled loop fails instead of hanging.
const maxSteps = 400_000_000

// invocation is one running invocation.
type invocation struct {
	vals      []cell
	pc        int
	cur, prev uint32
	done      bool
	ids       map[uint32][3]uint32 // BuiltIn number -> value
	// backEdges counts the back edges the invocation took (machine.loopLimit).
	backEdges int
}

// dispatchCase runs m (emitted from p) on the case's buffers and grid, with the
// uniform block uniforms, and returns the output buffers in binding order, as the
// backend would: the grid runs as the launches of Launches(c.Grid, limit), each
// with its grid words, and addressed buffers get fake device addresses.
func dispatchCase(p *ir.Program, m *Module, c kernels.Case, uniforms []byte, limit [3]uint32) ([][]byte, error) {
	return dispatchLimited(p, m, c, uniforms, limit, 0)
}

// dispatchLimited is dispatchCase on a device that ends each invocation's
// loops after loopLimit back edges in all (0: never). A guarded module
// (Module.LoopGuard) gets its zeroed guard buffer, and a set flag is
// errLoopCut.
func dispatchLimited(p *ir.Program, m *Module, c kernels.Case, uniforms []byte, limit [3]uint32, loopLimit int) ([][]byte, error) {
	wg := m.WorkgroupSize
	entries, data := SpecData(p, m, c.Spec)
	spec := map[uint32]uint32{}
	for _, e := range entries {
		spec[e.ID] = binary.LittleEndian.Uint32(data[e.Offset:])
	}
	buffers := make([][]uint32, len(p.Buffers))
	counts := make([]uint32, len(p.Buffers))
	for _, b := range p.Buffers {
		var mem []uint32
		switch {
		case b.Access.Readable() && int(b.Binding) < len(c.Inputs) && c.Inputs[b.Binding] != nil && b.Type.Is16Bit():
			in := c.Inputs[b.Binding]
			mem = make([]uint32, len(in)/2)
			for i := range mem {
				mem[i] = uint32(binary.LittleEndian.Uint16(in[2*i:]))
			}
		case b.Access.Readable() && int(b.Binding) < len(c.Inputs) && c.Inputs[b.Binding] != nil:
			in := c.Inputs[b.Binding]
			mem = make([]uint32, len(in)/4)
			for i := range mem {
				mem[i] = binary.LittleEndian.Uint32(in[4*i:])
			}
		case b.Count > 0:
			mem = make([]uint32, b.Count)
		case int(b.Binding) < len(c.OutputCounts):
			mem = make([]uint32, c.OutputCounts[b.Binding])
		}
		counts[b.Binding] = uint32(len(mem))
		if len(mem) == 0 {
			mem = []uint32{0xDEADBEEF} // the dummy element the backend binds
		}
		buffers[b.Binding] = mem
	}
	var guard []uint32
	if m.LoopGuard {
		guard = make([]uint32, GuardBytes/4)
		buffers = append(buffers, guard)
	}
	push := make([]uint32, m.PushConstantBytes/4)
	copy(push, counts)
	for i := 0; i+4 <= len(uniforms); i += 4 {
		push[int(m.UniformOffset)/4+i/4] = binary.LittleEndian.Uint32(uniforms[i:])
	}
	addresses := map[uint64][]uint32{}
	for binding, off := range m.AddressOffsets {
		a := fakeAddress(binding)
		push[off/4], push[off/4+1] = uint32(a), uint32(a>>32)
		addresses[a] = buffers[binding]
	}
	mc, err := load(m.Words, spec, buffers, push)
	if err != nil {
		return nil, err
	}
	mc.addresses = addresses
	mc.loopLimit = loopLimit
	if m.Grid == GridPhysical {
		limit = c.Grid // one launch, as the backend runs it
	}
	for l := range Launches(c.Grid, limit) {
		if m.Grid == GridLogical {
			words := l.Words(c.Grid)
			copy(push[m.GridOffset/4:], words[:])
		}
		for z := uint32(0); z < l.Count[2]; z++ {
			for y := uint32(0); y < l.Count[1]; y++ {
				for x := uint32(0); x < l.Count[0]; x++ {
					if err := mc.workgroup([3]uint32{x, y, z}, l.Count, wg, m.Grid == GridPhysical); err != nil {
						return nil, fmt.Errorf("launch %v, workgroup %v: %w", l, [3]uint32{x, y, z}, err)
					}
				}
			}
		}
	}
	if guard != nil && guard[guardFlagWord] != 0 {
		return nil, errLoopCut
	}
	var outs [][]byte
	for _, binding := range p.Outputs() {
		size := p.Buffers[binding].Type.Size()
		out := make([]byte, size*counts[binding])
		for i := range counts[binding] {
			if size == 2 {
				binary.LittleEndian.PutUint16(out[2*i:], uint16(buffers[binding][i]))
				continue
			}
			binary.LittleEndian.PutUint32(out[4*i:], buffers[binding][i])
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// load prepares the module's global values. push holds the push-constant block's
// words (the element counts, then the uniforms).
func load(words []uint32, spec map[uint32]uint32, buffers [][]uint32, push []uint32) (*machine, error) {
	if len(words) < headerSize || words[0] != magic {
		return nil, fmt.Errorf("not a SPIR-V module")
	}
	mc := &machine{labels: map[uint32]int{}, storage: map[uint32]uint32{}, shared: map[uint32]int{}, builtin: map[uint32]uint32{},
		pushOffsets: map[uint32]int{}, addressTypes: map[uint32]bool{}, backEdges: map[uint32][2]uint32{},
		halfTypes: map[uint32]bool{}, pairTypes: map[uint32]bool{}, u16Types: map[uint32]bool{}, arrays: map[uint32]int{}}
	for i := headerSize; i < len(words); {
		n := int(words[i] >> 16)
		if n == 0 || i+n > len(words) {
			return nil, fmt.Errorf("bad word count at %d", i)
		}
		mc.code = append(mc.code, inst{op: words[i] & 0xffff, args: words[i+1 : i+n]})
		i += n
	}
	mc.init = make([]cell, words[3])
	decos := decorations(mc.code)
	byID := resultIDs(mc.code)
	specOr := func(id, def uint32) uint32 {
		if s, ok := decos[id][decorationSpecID]; ok {
			if v, set := spec[s[0]]; set {
				return v
			}
		}
		return def
	}
	var block uint32
	for i, in := range mc.code {
		a := in.args
		mc.coop.declare(in, mc.init)
		switch in.op {
		case opLoopMerge:
			mc.backEdges[a[1]] = [2]uint32{block, a[0]}
		case opConstant:
			mc.init[a[1]].bits = a[2]
		case opConstantTrue:
			mc.init[a[1]].bits = 1
		case opSpecConstant:
			mc.init[a[1]].bits = specOr(a[1], a[2])
		case opSpecConstantTrue, opSpecConstantFalse:
			def := uint32(0)
			if in.op == opSpecConstantTrue {
				def = 1
			}
			if specOr(a[1], def) != 0 {
				mc.init[a[1]].bits = 1
			}
		case opSpecConstantComposite:
			for k := range 3 {
				mc.init[a[1]].vec[k] = mc.init[a[2+k]].bits
			}
		case opTypeFloat:
			mc.halfTypes[a[0]] = a[1] == 16
		case opTypeInt:
			mc.u16Types[a[0]] = a[1] == 16
		case opTypeVector:
			mc.pairTypes[a[0]] = mc.halfTypes[a[1]]
		case opTypePointer:
			if a[1] == storagePhysicalStorageBuffer {
				mc.addressTypes[a[0]] = true
			}
		case opLabel:
			mc.labels[a[0]] = i
			block = a[0]
		case opFunction:
			mc.start = i + 1
		case opVariable:
			class := a[2]
			if class == storageFunction {
				if arr := byID[byID[a[0]].args[2]]; arr.op == opTypeArray {
					mc.arrays[a[1]] = int(mc.init[arr.args[2]].bits)
				}
				continue
			}
			mc.storage[a[1]] = class
			switch class {
			case storageStorageBuffer:
				b := decos[a[1]][decorationBinding][0]
				mc.init[a[1]].mem = buffers[b]
			case storagePushConstant:
				mc.init[a[1]].mem = push
				block := byID[a[0]].args[2] // pointer -> struct type
				for _, d := range mc.code {
					if d.op == opMemberDecorate && d.args[0] == block && d.args[2] == decorationOffset {
						mc.pushOffsets[d.args[1]] = int(d.args[3] / 4)
					}
				}
			case storageWorkgroup:
				arr := byID[byID[a[0]].args[2]] // pointer -> array type
				mc.shared[a[1]] = int(mc.init[arr.args[2]].bits) * mc.coop.wordsOf(arr.args[1])
			case storageInput:
				mc.builtin[a[1]] = decos[a[1]][decorationBuiltIn][0]
			}
		}
	}
	markWideViews(mc, byID, decos)
	return mc, nil
}

// workgroup runs one workgroup (id is its physical WorkgroupId in a launch of
// count workgroups): every invocation until it returns or reaches a barrier, in
// turns, until all have returned. Only the builtins the emitter may read exist:
// GlobalInvocationId and NumWorkgroups only for a GridPhysical module.
func (mc *machine) workgroup(id, count, wg [3]uint32, physical bool) error {
	base := append([]cell(nil), mc.init...)
	for v, n := range mc.shared {
		mem := make([]uint32, n)
		for i := range mem {
			mem[i] = 0xDEADBEEF // shared arrays start undefined
		}
		base[v].mem = mem
	}
	var invs []*invocation
	for lz := uint32(0); lz < wg[2]; lz++ {
		for ly := uint32(0); ly < wg[1]; ly++ {
			for lx := uint32(0); lx < wg[0]; lx++ {
				inv := &invocation{
					vals: append([]cell(nil), base...),
					pc:   mc.start,
					ids: map[uint32][3]uint32{
						builtInLocalInvocationID: {lx, ly, lz}, builtInWorkgroupID: id,
						builtInSubgroupID: {(lx + wg[0]*(ly+wg[1]*lz)) / interpSubgroupSize},
					},
				}
				if physical {
					local := [3]uint32{lx, ly, lz}
					var global [3]uint32
					for k := range 3 {
						global[k] = id[k]*wg[k] + local[k]
					}
					inv.ids[builtInGlobalInvocationID], inv.ids[builtInNumWorkgroups] = global, count
				}
				invs = append(invs, inv)
			}
		}
	}
	for {
		waiting, done := 0, 0
		for _, inv := range invs {
			if inv.done {
				done++
				continue
			}
			barrier, err := mc.run(inv)
			if err != nil {
				return err
			}
			if barrier {
				waiting++
			} else {
				done++
			}
		}
		switch {
		case waiting == 0:
			return nil
		case done > 0:
			return fmt.Errorf("%d invocations wait at a barrier that %d others never reach", waiting, done)
		}
	}
}

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

func fbits(v float32) uint32 { return math.Float32bits(v) }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// limited returns where a branch from inv's block to target goes: to target,
// or, for a back edge once the invocation has taken loopLimit of them, to the
// loop's merge block.
func (mc *machine) limited(inv *invocation, target uint32) uint32 {
	loop, ok := mc.backEdges[inv.cur]
	if mc.loopLimit == 0 || !ok || target != loop[0] {
		return target
	}
	inv.backEdges++
	if inv.backEdges >= mc.loopLimit {
		return loop[1]
	}
	return target
}

// run executes inv until it returns (barrier false) or reaches a barrier.
func (mc *machine) run(inv *invocation) (barrier bool, err error) {
	v := inv.vals
	for {
		mc.steps++
		if mc.steps > maxSteps {
			return false, fmt.Errorf("more than %d steps: a loop does not end", maxSteps)
		}
		if inv.pc >= len(mc.code) {
			return false, fmt.Errorf("ran past the end of the module")
		}
		in := mc.code[inv.pc]
		inv.pc++
		a := in.args
		bin := func(f func(x, y uint32) uint32) { v[a[1]].bits = f(v[a[2]].bits, v[a[3]].bits) }
		fbin := func(f func(x, y float32) float32) {
			v[a[1]].bits = fbits(f(f32(v[a[2]].bits), f32(v[a[3]].bits)))
		}
		fcmp := func(f func(x, y float32) bool) { v[a[1]].bits = b2u(f(f32(v[a[2]].bits), f32(v[a[3]].bits))) }
		if handled, err := mc.coopStep(inv, in); handled || err != nil {
			if err != nil {
				return false, err
			}
			continue
		}
		switch in.op {
		case opLabel:
			inv.cur = a[0]
		case opSelectionMerge, opLoopMerge:
		case opBranch:
			inv.prev, inv.pc = inv.cur, mc.labels[mc.limited(inv, a[0])]
		case opBranchConditional:
			target := a[2]
			if v[a[0]].bits != 0 {
				target = a[1]
			}
			inv.prev, inv.pc = inv.cur, mc.labels[mc.limited(inv, target)]
		case opReturn:
			inv.done = true
			return false, nil
		case opUnreachable:
			return false, fmt.Errorf("executed OpUnreachable in block %d", inv.cur)
		case opFunctionEnd:
			return false, fmt.Errorf("fell off the end of main")
		case opControlBarrier:
			return true, nil
		case opVariable:
			v[a[1]] = cell{mem: make([]uint32, max(1, mc.arrays[a[1]]))}
		case opPhi:
			found := false
			for k := 2; k+1 < len(a); k += 2 {
				if a[k+1] == inv.prev {
					v[a[1]] = v[a[k]]
					found = true
				}
			}
			if !found {
				return false, fmt.Errorf("OpPhi %d has no operand for predecessor %d", a[1], inv.prev)
			}
		case opLoad:
			p := v[a[2]]
			if mc.storage[a[2]] == storageInput {
				ids, ok := inv.ids[mc.builtin[a[2]]]
				if !ok {
					return false, fmt.Errorf("load of BuiltIn %d, which the emitter must not read", mc.builtin[a[2]])
				}
				v[a[1]] = cell{vec: ids}
				continue
			}
			if mc.addressTypes[a[0]] {
				addr := uint64(p.mem[p.idx]) | uint64(p.mem[p.idx+1])<<32
				mem, ok := mc.addresses[addr]
				if !ok {
					return false, fmt.Errorf("load %d: %#x is no buffer's device address", a[1], addr)
				}
				v[a[1]] = cell{mem: mem, block: true}
				continue
			}
			if p.wide > 0 {
				v[a[1]] = wideLoad(p)
				continue
			}
			v[a[1]] = cell{bits: p.mem[p.idx]}
		case opStore:
			p := v[a[0]]
			if p.wide > 0 {
				wideStore(p, v[a[1]])
				continue
			}
			p.mem[p.idx] = v[a[1]].bits
		case opAccessChain:
			base := v[a[2]]
			idx := a[3:]
			i := 0
			switch mc.storage[a[2]] {
			case storageStorageBuffer:
				if v[idx[0]].bits != 0 {
					return false, fmt.Errorf("access chain into member %d", v[idx[0]].bits)
				}
				idx = idx[1:]
			case storagePushConstant:
				// A member (a uniform or an address), or an element of an array
				// member (the counts, the grid words).
				i = mc.pushOffsets[v[idx[0]].bits]
				idx = idx[1:]
			default:
				if base.block {
					if v[idx[0]].bits != 0 {
						return false, fmt.Errorf("access chain into member %d", v[idx[0]].bits)
					}
					idx = idx[1:]
				}
			}
			if len(idx) > 0 {
				i += int(v[idx[0]].bits) * max(base.wide, 1)
			}
			if i+max(base.wide, 1) > len(base.mem) {
				return false, fmt.Errorf("access chain %d: index %d outside the %d elements bound", a[1], i, len(base.mem))
			}
			v[a[1]] = cell{mem: base.mem, idx: i, wide: base.wide}
		case opCompositeExtract:
			if w := v[a[2]].words; w != nil {
				v[a[1]] = cell{bits: w[a[3]]}
				continue
			}
			v[a[1]] = cell{bits: v[a[2]].vec[a[3]]}
		case opSelect:
			if v[a[2]].bits != 0 {
				v[a[1]] = v[a[3]]
			} else {
				v[a[1]] = v[a[4]]
			}
		case opBitcast:
			x := v[a[2]]
			if x.pair {
				x = cell{bits: x.vec[0]&0xffff | x.vec[1]<<16}
			}
			if mc.pairTypes[a[0]] {
				x = cell{vec: [3]uint32{x.bits & 0xffff, x.bits >> 16}, pair: true}
			}
			v[a[1]] = cell{bits: x.bits, vec: x.vec, pair: x.pair}
		case opCompositeConstruct:
			if !mc.pairTypes[a[0]] {
				v[a[1]] = wideConstruct(v, a[2:])
				continue
			}
			v[a[1]] = cell{vec: [3]uint32{v[a[2]].bits, v[a[3]].bits}, pair: true}
		case opFConvert:
			if mc.halfTypes[a[0]] {
				v[a[1]].bits = uint32(half.NewFloat16(f32(v[a[2]].bits)))
			} else {
				v[a[1]].bits = fbits(half.Float16(v[a[2]].bits).Float32())
			}
		case opUConvert:
			v[a[1]].bits = v[a[2]].bits
			if mc.u16Types[a[0]] {
				v[a[1]].bits &= 0xffff
			}
		case opSNegate:
			v[a[1]].bits = -v[a[2]].bits
		case opNot:
			v[a[1]].bits = ^v[a[2]].bits
		case opLogicalNot:
			v[a[1]].bits = b2u(v[a[2]].bits == 0)
		case opIAdd:
			bin(func(x, y uint32) uint32 { return x + y })
		case opISub:
			bin(func(x, y uint32) uint32 { return x - y })
		case opIMul:
			bin(func(x, y uint32) uint32 { return x * y })
		case opUDiv:
			if v[a[3]].bits == 0 {
				return false, fmt.Errorf("OpUDiv %d by zero", a[1])
			}
			bin(func(x, y uint32) uint32 { return x / y })
		case opUMod:
			if v[a[3]].bits == 0 {
				return false, fmt.Errorf("OpUMod %d by zero", a[1])
			}
			bin(func(x, y uint32) uint32 { return x % y })
		case opBitwiseAnd:
			bin(func(x, y uint32) uint32 { return x & y })
		case opBitwiseOr:
			bin(func(x, y uint32) uint32 { return x | y })
		case opBitwiseXor:
			bin(func(x, y uint32) uint32 { return x ^ y })
		case opShiftLeftLogical, opShiftRightLogical, opShiftRightArithmetic:
			if v[a[3]].bits >= 32 {
				return false, fmt.Errorf("shift %d by %d: undefined in SPIR-V", a[1], v[a[3]].bits)
			}
			switch in.op {
			case opShiftLeftLogical:
				bin(func(x, y uint32) uint32 { return x << y })
			case opShiftRightLogical:
				bin(func(x, y uint32) uint32 { return x >> y })
			default:
				bin(func(x, y uint32) uint32 { return uint32(int32(x) >> y) })
			}
		case opIEqual, opLogicalEqual:
			bin(func(x, y uint32) uint32 { return b2u(x == y) })
		case opINotEqual, opLogicalNotEqual:
			bin(func(x, y uint32) uint32 { return b2u(x != y) })
		case opLogicalAnd:
			bin(func(x, y uint32) uint32 { return b2u(x != 0 && y != 0) })
		case opLogicalOr:
			bin(func(x, y uint32) uint32 { return b2u(x != 0 || y != 0) })
		case opULessThan:
			bin(func(x, y uint32) uint32 { return b2u(x < y) })
		case opULessThanEqual:
			bin(func(x, y uint32) uint32 { return b2u(x <= y) })
		case opUGreaterThan:
			bin(func(x, y uint32) uint32 { return b2u(x > y) })
		case opUGreaterThanEqual:
			bin(func(x, y uint32) uint32 { return b2u(x >= y) })
		case opSLessThan:
			bin(func(x, y uint32) uint32 { return b2u(int32(x) < int32(y)) })
		case opSLessThanEqual:
			bin(func(x, y uint32) uint32 { return b2u(int32(x) <= int32(y)) })
		case opSGreaterThan:
			bin(func(x, y uint32) uint32 { return b2u(int32(x) > int32(y)) })
		case opSGreaterThanEqual:
			bin(func(x, y uint32) uint32 { return b2u(int32(x) >= int32(y)) })
		case opFAdd, opFSub, opFMul:
			if mc.halfTypes[a[0]] {
				op := map[uint32]func(x, y half.Float16) half.Float16{opFAdd: half.Add, opFSub: half.Sub, opFMul: half.Mul}[in.op]
				bin(func(x, y uint32) uint32 { return uint32(op(half.Float16(x), half.Float16(y))) })
				continue
			}
			fbin(map[uint32]func(x, y float32) float32{
				opFAdd: func(x, y float32) float32 { return x + y },
				opFSub: func(x, y float32) float32 { return x - y },
				opFMul: func(x, y float32) float32 { return x * y },
			}[in.op])
		case opFDiv:
			fbin(vulkanDiv)
		case opFOrdEqual:
			fcmp(func(x, y float32) bool { return x == y })
		case opFUnordNotEqual:
			fcmp(func(x, y float32) bool { return x != y })
		case opFOrdLessThan:
			fcmp(func(x, y float32) bool { return x < y })
		case opFOrdLessThanEqual:
			fcmp(func(x, y float32) bool { return x <= y })
		case opFOrdGreaterThan:
			fcmp(func(x, y float32) bool { return x > y })
		case opFOrdGreaterThanEqual:
			fcmp(func(x, y float32) bool { return x >= y })
		case opConvertSToF:
			v[a[1]].bits = fbits(float32(int32(v[a[2]].bits)))
		case opConvertUToF:
			v[a[1]].bits = fbits(float32(v[a[2]].bits))
		case opConvertFToS:
			x := f32(v[a[2]].bits)
			if x != x || x >= 1<<31 || x < -(1<<31) {
				return false, fmt.Errorf("OpConvertFToS %d of %v: undefined", a[1], x)
			}
			v[a[1]].bits = uint32(int32(x))
		case opConvertFToU:
			x := f32(v[a[2]].bits)
			if x != x || x >= 1<<32 || x <= -1 {
				return false, fmt.Errorf("OpConvertFToU %d of %v: undefined", a[1], x)
			}
			v[a[1]].bits = uint32(x)
		case opExtInst:
			if err := extInst(v, a); err != nil {
				return false, err
			}
		case opAtomicIAdd, opAtomicSMin, opAtomicUMin, opAtomicSMax, opAtomicUMax,
			opAtomicAnd, opAtomicOr, opAtomicXor, opAtomicExchange:
			p, x := v[a[2]], v[a[5]].bits
			old := p.mem[p.idx]
			p.mem[p.idx] = atomicApply(in.op, old, x)
			v[a[1]].bits = old
		case opAtomicCompareExchange:
			// Result type, result, pointer, scope, equal and unequal semantics,
			// value, comparator.
			p, x, cmp := v[a[2]], v[a[6]].bits, v[a[7]].bits
			old := p.mem[p.idx]
			if old == cmp {
				p.mem[p.idx] = x
			}
			v[a[1]].bits = old
		case opBitCount:
			v[a[1]].bits = uint32(bits.OnesCount32(v[a[2]].bits))
		default:
			return false, fmt.Errorf("opcode %d is not interpreted", in.op)
		}
	}
}

// vulkanDiv is x / y as loosely as Vulkan allows: exact (well within 2.5 ULP) for
// a divisor in [2^-126, 2^126], and outside that range the reciprocal-multiply a
// fast GPU divide does, whose reciprocal flushes to zero as a denormal.
func vulkanDiv(x, y float32) float32 {
	if ay := math.Abs(float64(y)); ay > 0x1p126 && ay <= math.MaxFloat32 {
		r := 1 / y
		if math.Abs(float64(r)) < 0x1p-126 {
			r = 0
		}
		return x * r
	}
	return x / y
}

func atomicApply(op, old, x uint32) uint32 {
	switch op {
	case opAtomicIAdd:
		return old + x
	case opAtomicSMin:
		return uint32(min(int32(old), int32(x)))
	case opAtomicUMin:
		return min(old, x)
	case opAtomicSMax:
		return uint32(max(int32(old), int32(x)))
	case opAtomicUMax:
		return max(old, x)
	case opAtomicAnd:
		return old & x
	case opAtomicOr:
		return old | x
	case opAtomicXor:
		return old ^ x
	}
	return x
}

// extInst runs a GLSL.std.450 instruction: result type, result, set, number, args.
func extInst(v []cell, a []uint32) error {
	arg := func(k int) uint32 { return v[a[4+k]].bits }
	farg := func(k int) float64 { return float64(f32(arg(k))) }
	var r uint32
	switch a[3] {
	case glslFloor:
		r = fbits(float32(math.Floor(farg(0))))
	case glslCeil:
		r = fbits(float32(math.Ceil(farg(0))))
	case glslSin:
		r = fbits(float32(math.Sin(farg(0))))
	case glslCos:
		r = fbits(float32(math.Cos(farg(0))))
	case glslExp:
		r = fbits(float32(math.Exp(farg(0))))
	case glslLog:
		r = fbits(float32(math.Log(farg(0))))
	case glslSqrt:
		r = fbits(float32(math.Sqrt(farg(0))))
	case glslFma:
		r = fbits(float32(math.FMA(farg(0), farg(1), farg(2))))
	case glslUMin:
		r = min(arg(0), arg(1))
	case glslUMax:
		r = max(arg(0), arg(1))
	case glslSMin:
		r = uint32(min(int32(arg(0)), int32(arg(1))))
	case glslSMax:
		r = uint32(max(int32(arg(0)), int32(arg(1))))
	case glslTrunc:
		r = fbits(float32(math.Trunc(farg(0))))
	case glslRoundEven:
		r = fbits(float32(math.RoundToEven(farg(0))))
	case glslFindUMsb:
		r = uint32(31 - bits.LeadingZeros32(arg(0))) // -1 (all ones) for 0
	default:
		return fmt.Errorf("GLSL.std.450 instruction %d is not interpreted", a[3])
	}
	v[a[1]].bits = r
	return nil
}
