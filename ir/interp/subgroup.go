package interp

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// Subgroups (IR v1.1) are runs of sgSize consecutive lanes of a workgroup: lane i of
// the unit is lane i mod sgSize of subgroup i / sgSize (a workgroup's invocation
// count is a multiple of the size, so subgroups never straddle workgroups). A
// subgroup operation needs every lane of each subgroup it runs on: it reads the
// statement's mask (w.active) and stops the run with an error when a subgroup has
// some lanes active and others not.

// subgroup compiles a subgroup operation into temporary t; its operand goes to t+1
// and its lane to t+2, so the result never overwrites what it reads.
func (c *compiler) subgroup(e ir.SubgroupExpr, t int) (value, error) {
	c.useTemp(t + 2)
	x, err := c.expr(e.X, t+1)
	if err != nil {
		return value{}, err
	}
	var lane value
	if e.Op.HasLane() {
		if e.Lane == nil {
			return value{}, fmt.Errorf("%s without a lane. Fix: give the lane as the second operand", e.Op)
		}
		if lane, err = c.expr(e.Lane, t+2); err != nil {
			return value{}, err
		}
		if lane.typ != ir.U32 {
			return value{}, fmt.Errorf("%s lane is %s. Fix: give a u32 lane", e.Op, lane.typ)
		}
	}
	op, err := subgroupOp(e.Op, x.typ)
	if err != nil {
		return value{}, err
	}
	size, name, path := c.k.sgSize, e.Op.String(), c.path
	broadcast := e.Op == ir.SubgroupOpBroadcast
	return value{fn: func(w *worker, lo, hi int) []uint32 {
		xs := x.fn(w, lo, hi)
		var ls []uint32
		if lane.fn != nil {
			ls = lane.fn(w, lo, hi)
		}
		d := w.temps[t]
		m := w.active
		for s0 := lo / size * size; s0 < hi; s0 += size {
			s1 := s0 + size
			switch n := m.countIn(s0, s1); {
			case n == 0:
				continue
			case n != size:
				w.fail(w.subgroupDivergence(m, name, path, s0, n))
				return d
			}
			var lsub []uint32
			if ls != nil {
				lsub = ls[s0:s1]
			}
			if broadcast {
				if i, ok := uniformLanes(lsub); !ok {
					w.fail(w.broadcastDivergence(name, path, s0, i, ls))
					return d
				}
			}
			op(d[s0:s1], xs[s0:s1], lsub)
		}
		return d
	}, typ: x.typ}, nil
}

// sgOp computes one subgroup's results d from its operands x and, for shuffle and
// broadcast, its lane operands (nil for the reductions); all three hold the
// subgroup's lanes in order.
type sgOp func(d, x, lanes []uint32)

func subgroupOp(op ir.SubgroupOp, t ir.Type) (sgOp, error) {
	bad := fmt.Errorf("%s is not defined on %s. Fix: reduce i32, u32 or f32 values", op, t)
	switch op {
	case ir.SubgroupOpAdd:
		switch {
		case t == ir.F32:
			return reduce(sumF32), nil
		case t.IsInteger():
			return reduce(func(x []uint32) uint32 {
				var s uint32
				for _, v := range x {
					s += v
				}
				return s
			}), nil
		}
		return nil, bad
	case ir.SubgroupOpMin, ir.SubgroupOpMax:
		var f func(x, y uint32) uint32
		switch {
		case t == ir.F32 && op == ir.SubgroupOpMin:
			f = minF32
		case t == ir.F32:
			f = maxF32
		case t == ir.I32 && op == ir.SubgroupOpMin:
			f = minI32
		case t == ir.I32:
			f = maxI32
		case t == ir.U32 && op == ir.SubgroupOpMin:
			f = func(x, y uint32) uint32 { return min(x, y) }
		case t == ir.U32:
			f = func(x, y uint32) uint32 { return max(x, y) }
		default:
			return nil, bad
		}
		return reduce(func(x []uint32) uint32 {
			acc := x[0]
			for _, v := range x[1:] {
				acc = f(acc, v)
			}
			return acc
		}), nil
	case ir.SubgroupOpShuffle, ir.SubgroupOpBroadcast:
		if !t.Valid() || t.Is16Bit() {
			return nil, bad
		}
		return shuffleLanes, nil
	}
	return nil, fmt.Errorf("unknown subgroup operation %d. Fix: use one of ir.SubgroupOps()", op)
}

// reduce gives every lane of a subgroup the reduction of all its lanes.
func reduce(f func(x []uint32) uint32) sgOp {
	return func(d, x, _ []uint32) {
		v := f(x)
		for i := range d {
			d[i] = v
		}
	}
}

// shuffleLanes gives lane i the value of lane lanes[i]; a lane at or above the
// subgroup size gives 0.
func shuffleLanes(d, x, lanes []uint32) {
	n := uint32(len(x))
	d = d[:len(lanes)]
	for i, l := range lanes {
		if l < n {
			d[i] = x[l]
		} else {
			d[i] = 0
		}
	}
}

// sumF32 adds f32 values in a pairwise tree: x0+x1, x2+x3, ... then the sums of
// neighbouring pairs, and so on (docs/design.md, "IR v1.1"). len(x) is a power of
// two.
func sumF32(x []uint32) uint32 {
	var buf [ir.MaxSubgroupSize]float32
	v := buf[:len(x)]
	for i, b := range x {
		v[i] = f32(b)
	}
	for width := 1; width < len(v); width *= 2 {
		for i := 0; i+width < len(v); i += 2 * width {
			v[i] = float32(v[i] + v[i+width])
		}
	}
	return bitsOf(v[0])
}

// uniformLanes reports whether every entry of ls is the same; if not, i is the
// first that differs from ls[0].
func uniformLanes(ls []uint32) (i int, ok bool) {
	for i, l := range ls {
		if l != ls[0] {
			return i, false
		}
	}
	return 0, true
}

// countIn is the number of active lanes of m in [lo, hi).
func (m *mask) countIn(lo, hi int) int {
	lo, hi = max(lo, m.lo), min(hi, m.hi)
	if lo >= hi {
		return 0
	}
	if m.dense {
		return hi - lo
	}
	n := 0
	for _, b := range m.on[lo:hi] {
		if b {
			n++
		}
	}
	return n
}

// has reports whether lane i is active in m.
func (m *mask) has(i int) bool { return i >= m.lo && i < m.hi && (m.dense || m.on[i]) }

func (w *worker) subgroupDivergence(m *mask, op, path string, s0, n int) error {
	k := w.run.k
	missing := s0
	for i := s0; i < s0+k.sgSize; i++ {
		if !m.has(i) {
			missing = i
			break
		}
	}
	wg, first := w.laneWorkgroup(s0)
	_, lid := w.laneWorkgroup(missing)
	return fmt.Errorf("interp: program %q: %s at %s reached by only %d of the %d lanes of the subgroup of workgroup (%d,%d,%d) that starts at local id (%d,%d,%d); the invocation with local id (%d,%d,%d) did not reach it (it returned, left a loop or took another branch). Fix: keep subgroup operations in subgroup-uniform control flow, so every lane of a subgroup reaches each one together (guard loads and stores instead of returning early)",
		k.prog.Name, op, path, n, k.sgSize, wg[0], wg[1], wg[2], first[0], first[1], first[2], lid[0], lid[1], lid[2])
}

func (w *worker) broadcastDivergence(op, path string, s0, i int, ls []uint32) error {
	k := w.run.k
	wg, a := w.laneWorkgroup(s0)
	_, b := w.laneWorkgroup(s0 + i)
	return fmt.Errorf("interp: program %q: %s at %s: the invocations with local ids (%d,%d,%d) and (%d,%d,%d) of workgroup (%d,%d,%d), in one subgroup, name lanes %d and %d. Fix: give subgroup_broadcast the same lane on every lane of the subgroup, or use subgroup_shuffle",
		k.prog.Name, op, path, a[0], a[1], a[2], b[0], b[1], b[2], wg[0], wg[1], wg[2], ls[s0], ls[s0+i])
}
