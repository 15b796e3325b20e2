package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// atomicCases is the atomic table: every atomic operation on u32 and i32, on a
// buffer (device scope) and on a shared array (workgroup scope). Each case has
// every invocation apply the operation to one of four contended slots (the final
// values do not depend on the order, so they are compared exactly; exchange has
// its own cases), twice to a private slot with the old values kept, and once out
// of bounds, whose result is 0. The "contended" cases compare the old values of a
// contended exchange and of a contended add of 1 as multisets, which do not depend
// on the order either.
func atomicCases() []semantic {
	var out []semantic
	for _, shared := range []bool{false, true} {
		for _, op := range ir.AtomicOps() {
			if op == ir.AtomicCompareExchange {
				continue // casCases
			}
			for _, t := range []ir.Type{ir.U32, ir.I32} {
				out = append(out, atomicCase(op, t, shared))
			}
		}
		out = append(out, contended(ir.AtomicExchange, shared), contended(ir.AtomicAdd, shared))
	}
	return append(out, casCases()...)
}

func space(shared bool) string {
	if shared {
		return "shared"
	}
	return "buffer"
}

// atomicValues returns n operands of type t: the type's edge values, then a
// multiplicative hash of the index.
func atomicValues(t ir.Type, n int, salt uint32) []uint32 {
	edges := edgesOf(t)
	return u32s(n, func(k int) uint32 {
		if k < len(edges) {
			return edges[(k+int(salt))%len(edges)]
		}
		return (uint32(k) + salt) * 2654435761
	})
}

const (
	atomicWG      = 64
	atomicGroups  = 2
	atomicLanes   = atomicWG * atomicGroups
	contendedSlot = 4 // slots 0..3 are contended, private slots follow
)

func atomicCase(op ir.AtomicOp, t ir.Type, shared bool) semantic {
	name := fmt.Sprintf("%s.%s.%s", op, t, space(shared))
	f := newAtomicFrame(name, t, shared, contendedSlot)
	b := f.b
	w := b.Let("w", ir.Load(f.vals, ir.Rem(ir.Add(f.g, ir.LitU32(37)), ir.LitU32(atomicLanes))))
	if op != ir.AtomicExchange {
		b.Atomic(op, f.target, ir.Rem(f.g, ir.LitU32(contendedSlot)), f.v)
	}
	o1 := b.AtomicResult(op, f.target, f.private, f.v, "old1")
	o2 := b.AtomicResult(op, f.target, f.private, w, "old2")
	o3 := b.AtomicResult(op, f.target, ir.Add(ir.LitU32(f.slots), f.l), f.v, "old3")
	return f.finish(name, o1, o2, o3, words(atomicValues(t, int(f.slots), 5)), words(atomicValues(t, atomicLanes, 0)))
}

// atomicFrame is what atomicCase and casCase share: the buffers init (shared
// arrays only), acc, vals and olds; the locals g, l and v (the invocation's
// value); and the target, acc or a shared array that each workgroup copies
// init into, whose first contended slots every invocation uses and whose
// private slot follows.
type atomicFrame struct {
	b                             *ir.Builder
	shared                        bool
	contended, slots              uint32
	init, acc, vals, olds, target string
	g, l, v, private              ir.Expr
}

func newAtomicFrame(name string, t ir.Type, shared bool, contended uint32) *atomicFrame {
	b := ir.NewBuilder("kiln.semantics.atomic."+name, atomicWG, 1, 1)
	f := &atomicFrame{b: b, shared: shared, contended: contended, slots: contended + atomicLanes}
	if shared {
		f.slots = contended + atomicWG
		f.init = b.Buffer("init", t, ir.Read)
		f.acc = b.Buffer("acc", t, ir.Write)
	} else {
		f.acc = b.Buffer("acc", t, ir.ReadWrite)
	}
	f.vals = b.Buffer("vals", t, ir.Read)
	f.olds = b.Buffer("olds", t, ir.Write)
	f.g = b.Let("g", ir.GlobalID(0))
	f.l = b.Let("l", ir.LocalID(0))
	f.v = b.Let("v", ir.Load(f.vals, f.g))
	f.target, f.private = f.acc, ir.Add(ir.LitU32(contended), f.g)
	if shared {
		// Each workgroup copies init into its shared array, works on it and
		// writes it out to its own part of acc.
		f.target = b.Shared("sh", t, f.slots)
		f.private = ir.Add(ir.LitU32(contended), f.l)
		b.Store(f.target, f.private, ir.Load(f.init, f.private))
		b.If(ir.Lt(f.l, ir.LitU32(contended)), func(then *ir.Block) { then.Store(f.target, f.l, ir.Load(f.init, f.l)) })
		b.Barrier()
	}
	return f
}

// finish stores each invocation's three old values o1..o3 to olds and, on a
// shared array, writes the workgroup's target out to its part of acc; initial
// holds the slots' initial values and values the invocations' values.
func (f *atomicFrame) finish(name string, o1, o2, o3 ir.Expr, initial, values []byte) semantic {
	b := f.b
	base := b.Let("base", ir.Mul(f.g, ir.LitU32(3)))
	b.Store(f.olds, base, o1)
	b.Store(f.olds, ir.Add(base, ir.LitU32(1)), o2)
	b.Store(f.olds, ir.Add(base, ir.LitU32(2)), o3)
	if !f.shared {
		return semantic{name: name, prog: b.Program(),
			c: launch1(atomicGroups, [][]byte{initial, values, nil}, []uint32{0, 0, 3 * atomicLanes})}
	}
	b.Barrier()
	offset := b.Let("offset", ir.Mul(ir.WorkgroupID(0), ir.LitU32(f.slots)))
	b.Store(f.acc, ir.Add(offset, f.private), ir.Load(f.target, f.private))
	b.If(ir.Lt(f.l, ir.LitU32(f.contended)), func(then *ir.Block) {
		then.Store(f.acc, ir.Add(offset, f.l), ir.Load(f.target, f.l))
	})
	return semantic{name: name, prog: b.Program(),
		c: sharedOOB(launch1(atomicGroups, [][]byte{initial, nil, values, nil}, []uint32{0, atomicGroups * f.slots, 0, 3 * atomicLanes}))}
}

// contended has every invocation of one workgroup apply op to one slot and keep
// the old value; the last one reads the final value with an atomic or of 0. For
// exchange of distinct values the olds and the final value are the initial value
// and the values exchanged in; for an add of 1 they are init, init+1, ... . Both
// are compared as multisets.
func contended(op ir.AtomicOp, shared bool) semantic {
	name := fmt.Sprintf("%s.contended.%s", op, space(shared))
	b := ir.NewBuilder("kiln.semantics.atomic."+name, atomicWG, 1, 1)
	acc := b.Buffer("acc", ir.U32, ir.ReadWrite)
	olds := b.Buffer("olds", ir.U32, ir.Write)
	l := b.Let("l", ir.LocalID(0))
	target := acc
	if shared {
		target = b.Shared("sh", ir.U32, 1)
		b.If(ir.Eq(l, ir.LitU32(0)), func(then *ir.Block) { then.Store(target, l, ir.Load(acc, l)) })
		b.Barrier()
	}
	v := ir.Expr(ir.LitU32(1))
	if op == ir.AtomicExchange {
		v = ir.Add(ir.Mul(l, ir.LitU32(2654435761)), ir.LitU32(1))
	}
	b.Store(olds, l, b.AtomicResult(op, target, ir.LitU32(0), v, "old"))
	b.Barrier()
	b.If(ir.Eq(l, ir.LitU32(0)), func(then *ir.Block) {
		then.Store(olds, ir.LitU32(atomicWG), then.AtomicResult(ir.AtomicOr, target, ir.LitU32(0), ir.LitU32(0), "final"))
	})
	return semantic{name: name, prog: b.Program(), unordered: true,
		c: launch1(1, [][]byte{words([]uint32{0xFFFFFFF0}), nil}, []uint32{0, atomicWG + 1})}
}

// casCases (IR v1.1): compare-exchange on u32 and i32 buffers and shared arrays.
// Each invocation swaps its private slot from the initial value (success: the
// old value equals compare) and then fails to swap it with a stale compare (the
// old value is the current one, nothing is stored), and swaps out of bounds
// (result 0); every invocation also increments a contended slot with a retry
// loop, so it ends at its initial value plus the number of invocations. The
// float-add cases accumulate f32 values by the classic loop of bitcast, add and
// compare-exchange, on values whose sum is exact in any order.
func casCases() []semantic {
	var out []semantic
	for _, shared := range []bool{false, true} {
		for _, t := range []ir.Type{ir.U32, ir.I32} {
			out = append(out, casCase(t, shared))
		}
		out = append(out, casFloatAdd(shared))
	}
	return out
}

func casCase(t ir.Type, shared bool) semantic {
	name := fmt.Sprintf("cas.%s.%s", t, space(shared))
	f := newAtomicFrame(name, t, shared, 1)
	b, target := f.b, f.target
	initial := b.Let("initial", ir.Load(init0(shared, f.init, f.acc), f.private))
	o1 := b.AtomicCAS(target, f.private, initial, f.v, "old1")
	o2 := b.AtomicCAS(target, f.private, initial, ir.Not(f.v), "old2")
	o3 := b.AtomicCAS(target, ir.Add(ir.LitU32(f.slots), f.l), ir.Literal{Type: t}, f.v, "old3")
	// The contended increment: read, then retry until the swap sees what was read.
	one := ir.Literal{Type: t, Bits: 1}
	seen := b.Var("seen", t, b.AtomicResult(ir.AtomicOr, target, ir.LitU32(0), ir.Literal{Type: t}, "first"))
	b.While(ir.LitBool(true), func(loop *ir.Block) {
		got := loop.AtomicCAS(target, ir.LitU32(0), seen, ir.Add(seen, one), "got")
		loop.If(ir.Eq(got, seen), func(then *ir.Block) { then.Break() })
		loop.Assign("seen", got)
	})
	return f.finish(name, o1, o2, o3, words(atomicValues(t, int(f.slots), 3)), words(atomicValues(t, atomicLanes, 11)))
}

// init0 is the buffer that holds the initial values: init for shared arrays, the
// read_write acc itself for buffers (read before any atomic touches the slot).
func init0(shared bool, init, acc string) string {
	if shared {
		return init
	}
	return acc
}

// casFloatAdd adds every invocation's f32 value into slot 0 with a
// compare-exchange loop on the bits. The values are small integers, so the sum is
// exact in any order.
func casFloatAdd(shared bool) semantic {
	name := fmt.Sprintf("cas.float_add.%s", space(shared))
	b := ir.NewBuilder("kiln.semantics.atomic."+name, atomicWG, 1, 1)
	x := b.Buffer("x", ir.F32, ir.Read)
	acc := b.Buffer("acc", ir.U32, ir.ReadWrite)
	g := b.Let("g", ir.GlobalID(0))
	l := b.Let("l", ir.LocalID(0))
	target := acc
	if shared {
		target = b.Shared("sum", ir.U32, 1)
		b.If(ir.Eq(l, ir.LitU32(0)), func(then *ir.Block) { then.Store(target, l, ir.LitU32(0)) })
		b.Barrier()
	}
	v := b.Let("v", ir.Load(x, g))
	old := b.Var("old", ir.U32, b.AtomicResult(ir.AtomicOr, target, ir.LitU32(0), ir.LitU32(0), "first"))
	b.While(ir.LitBool(true), func(loop *ir.Block) {
		next := loop.Let("next", ir.Bitcast(ir.U32, ir.Add(ir.Bitcast(ir.F32, old), v)))
		got := loop.AtomicCAS(target, ir.LitU32(0), old, next, "got")
		loop.If(ir.Eq(got, old), func(then *ir.Block) { then.Break() })
		loop.Assign("old", got)
	})
	values := make([]float32, atomicLanes)
	var sum float32
	for k := range values {
		values[k] = float32(k%17) - 8
		sum += values[k]
	}
	if shared {
		b.Barrier()
		b.If(ir.Eq(l, ir.LitU32(0)), func(then *ir.Block) {
			then.Store(acc, ir.Add(ir.WorkgroupID(0), ir.LitU32(1)), ir.Load(target, l))
		})
		var first, second float32
		for k := range atomicWG {
			first += values[k]
			second += values[atomicWG+k]
		}
		return semantic{name: name, prog: b.Program(),
			c:      launch1(atomicGroups, [][]byte{words(f32Bits(values...)), words([]uint32{0, 0, 0})}, []uint32{0, 0}),
			pinned: [][]uint32{{0, f(first), f(second)}}}
	}
	return semantic{name: name, prog: b.Program(),
		c:      launch1(atomicGroups, [][]byte{words(f32Bits(values...)), words([]uint32{f(0.5)})}, []uint32{0, 0}),
		pinned: [][]uint32{{f(sum + 0.5)}}}
}
