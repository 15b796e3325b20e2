package ranges_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/ir/ranges"
)

// The soundness tests run each operator through the CPU reference interpreter
// (the oracle of docs/design.md, "The program (IR)") on values drawn from random
// ranges and check that every result lies in the range the package computes.

// lanes is the number of (range, value) samples one interpreter run checks.
const lanes = 8192

// encode packs words little-endian, as interp takes buffers.
func encode(words []uint32) []byte { return kernels.U32Bytes(words) }

func decode(b []byte) []uint32 { return kernels.BytesU32(b) }

// run evaluates f on the elements of inputs (one buffer each, of type in; a bool
// input is read as u32 != 0) in the interpreter and returns f's results as
// 32-bit patterns (a bool as 0 or 1). ok is false when ir.Validate rejects f for
// these types.
func run(t *testing.T, in, out ir.Type, inputs [][]uint32, f func(args []ir.Expr) ir.Expr) ([]uint32, bool) {
	t.Helper()
	n := uint32(len(inputs[0]))
	bufType := func(t ir.Type) ir.Type {
		if t == ir.Bool {
			return ir.U32
		}
		return t
	}
	b := ir.NewBuilder("ranges.test", 64, 1, 1)
	var names []string
	for i := range inputs {
		names = append(names, b.Buffer(fmt.Sprintf("in%d", i), bufType(in), ir.Read))
	}
	res := b.Buffer("out", bufType(out), ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	var args []ir.Expr
	for _, name := range names {
		x := ir.Load(name, i)
		if in == ir.Bool {
			x = ir.Ne(x, ir.LitU32(0))
		}
		args = append(args, x)
	}
	v := f(args)
	if out == ir.Bool {
		v = ir.Cast(ir.U32, v)
	}
	b.If(ir.Lt(i, ir.Len(res)), func(k *ir.Block) { k.Store(res, i, v) })
	p, err := b.Build()
	if err != nil {
		return nil, false
	}
	var data [][]byte
	for _, in := range inputs {
		data = append(data, encode(in))
	}
	counts := make([]uint32, len(inputs)+1)
	counts[len(inputs)] = n
	outs, err := interp.Run(context.Background(), p, interp.Options{},
		interp.Launch{Grid: [3]uint32{(n + 63) / 64, 1, 1}, Inputs: append(data, nil), OutputCounts: counts})
	if err != nil {
		t.Fatalf("interpreter: %v", err)
	}
	return decode(outs[0]), true
}

// randomRange draws a range of type t's values: exact values, small intervals,
// intervals around 2^31 and 2^32, wide ones and Unknown.
func randomRange(rng *rand.Rand, t ir.Type) ranges.Range {
	if t == ir.Bool {
		switch rng.IntN(3) {
		case 0:
			return ranges.Exact(0)
		case 1:
			return ranges.Exact(1)
		}
		return ranges.Bool()
	}
	pick := func() uint32 {
		switch rng.IntN(6) {
		case 0:
			return rng.Uint32N(40)
		case 1:
			return 0x80000000 - 20 + rng.Uint32N(40)
		case 2:
			return math.MaxUint32 - rng.Uint32N(40)
		case 3:
			return 1 << rng.IntN(32)
		case 4:
			return rng.Uint32N(5000)
		}
		return rng.Uint32()
	}
	switch rng.IntN(8) {
	case 0:
		return ranges.Unknown()
	case 1, 2:
		return ranges.Exact(pick())
	}
	a, b := pick(), pick()
	return ranges.Between(min(a, b), max(a, b))
}

// sample draws a value of r, its ends half of the time.
func sample(rng *rand.Rand, r ranges.Range) uint32 {
	switch rng.IntN(4) {
	case 0:
		return r.Lo()
	case 1:
		return r.Hi()
	}
	return r.Lo() + uint32(rng.Uint64N(uint64(r.Hi())-uint64(r.Lo())+1))
}

func TestBinarySound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for _, typ := range []ir.Type{ir.U32, ir.I32, ir.Bool} {
		for _, op := range ir.BinaryOps() {
			out := typ
			if op.IsComparison() || op == ir.OpLAnd || op == ir.OpLOr {
				out = ir.Bool
			}
			ra, rb := make([]ranges.Range, lanes), make([]ranges.Range, lanes)
			xs, ys := make([]uint32, lanes), make([]uint32, lanes)
			for i := range lanes {
				ra[i], rb[i] = randomRange(rng, typ), randomRange(rng, typ)
				xs[i], ys[i] = sample(rng, ra[i]), sample(rng, rb[i])
				if typ == ir.Bool {
					xs[i], ys[i] = min(xs[i], 1), min(ys[i], 1)
				}
			}
			got, ok := run(t, typ, out, [][]uint32{xs, ys}, func(a []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: a[0], Y: a[1]} })
			if !ok {
				continue
			}
			checked++
			for i, v := range got {
				r := ranges.Binary(op, typ, ra[i], rb[i])
				if !r.Contains(v) {
					t.Fatalf("%s %s: %#x in %v, %#x in %v gives %#x, outside %v", typ, op, xs[i], ra[i], ys[i], rb[i], v, r)
				}
				if ranges.Binary(op, typ, ranges.Exact(xs[i]), ranges.Exact(ys[i])) != ranges.Exact(v) {
					t.Fatalf("%s %s of constants %#x, %#x: not folded to %#x", typ, op, xs[i], ys[i], v)
				}
			}
		}
	}
	// 18 integer operators on u32 and i32, and land, lor, eq, ne on bool.
	if checked != 2*18+4 {
		t.Errorf("checked %d operator and type pairs, want %d", checked, 2*18+4)
	}
}

// samples draws lanes random ranges of typ and a value in each (bools 0 or 1).
func samples(rng *rand.Rand, typ ir.Type) ([]ranges.Range, []uint32) {
	ra, xs := make([]ranges.Range, lanes), make([]uint32, lanes)
	for i := range lanes {
		ra[i] = randomRange(rng, typ)
		xs[i] = sample(rng, ra[i])
		if typ == ir.Bool {
			xs[i] = min(xs[i], 1)
		}
	}
	return ra, xs
}

func TestUnarySound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []ir.Type{ir.U32, ir.I32, ir.Bool} {
		for _, op := range ir.UnaryOps() {
			ra, xs := samples(rng, typ)
			got, ok := run(t, typ, typ, [][]uint32{xs}, func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} })
			if !ok {
				continue
			}
			for i, v := range got {
				if r := ranges.Unary(op, typ, ra[i]); !r.Contains(v) {
					t.Fatalf("%s %s: %#x in %v gives %#x, outside %v", typ, op, xs[i], ra[i], v, r)
				}
			}
		}
	}
}

func TestCastAndSelectSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	types := []ir.Type{ir.U32, ir.I32, ir.Bool}
	for _, from := range types {
		for _, to := range types {
			ra, xs := samples(rng, from)
			got, _ := run(t, from, to, [][]uint32{xs}, func(a []ir.Expr) ir.Expr { return ir.Cast(to, a[0]) })
			for i, v := range got {
				if r := ranges.Cast(from, to, ra[i]); !r.Contains(v) {
					t.Fatalf("cast %s to %s: %#x in %v gives %#x, outside %v", from, to, xs[i], ra[i], v, r)
				}
			}
		}
	}
	rc, ra, rb := make([]ranges.Range, lanes), make([]ranges.Range, lanes), make([]ranges.Range, lanes)
	cs, xs, ys := make([]uint32, lanes), make([]uint32, lanes), make([]uint32, lanes)
	for i := range lanes {
		rc[i], ra[i], rb[i] = randomRange(rng, ir.Bool), randomRange(rng, ir.U32), randomRange(rng, ir.U32)
		cs[i], xs[i], ys[i] = min(sample(rng, rc[i]), 1), sample(rng, ra[i]), sample(rng, rb[i])
	}
	got, _ := run(t, ir.U32, ir.U32, [][]uint32{cs, xs, ys}, func(a []ir.Expr) ir.Expr {
		return ir.Select(ir.Ne(a[0], ir.LitU32(0)), a[1], a[2])
	})
	for i, v := range got {
		if r := ranges.Select(rc[i], ra[i], rb[i]); !r.Contains(v) {
			t.Fatalf("select: %d in %v, %#x in %v, %#x in %v gives %#x, outside %v", cs[i], rc[i], xs[i], ra[i], ys[i], rb[i], v, r)
		}
	}
}

// maxTrips bounds the iterations the loop test runs per invocation.
const maxTrips = 64

func TestLoopSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []ir.Type{ir.U32, ir.I32} {
		var from, to, step, lo, hi []uint32
		var want []ranges.Range
		for range lanes {
			rf, rt, rs := randomRange(rng, typ), randomRange(rng, typ), randomRange(rng, typ)
			r := ranges.Loop(typ, rf, rt, rs)
			from, to, step = append(from, sample(rng, rf)), append(to, sample(rng, rt)), append(step, sample(rng, rs))
			lo, hi, want = append(lo, r.Lo()), append(hi, r.Hi()), append(want, r)
		}
		// Each invocation runs the loop for at most maxTrips iterations and
		// counts the values of its variable outside [lo, hi] (unsigned).
		b := ir.NewBuilder("ranges.loop", 64, 1, 1)
		var names []string
		for _, n := range []string{"from", "to", "step", "lo", "hi"} {
			names = append(names, b.Buffer(n, typ, ir.Read))
		}
		out := b.Buffer("out", ir.U32, ir.Write)
		i := b.Let("i", ir.GlobalID(0))
		bad := b.Var("bad", ir.U32, ir.LitU32(0))
		trips := b.Var("trips", ir.U32, ir.LitU32(0))
		u := func(x ir.Expr) ir.Expr { return ir.Cast(ir.U32, x) }
		b.For("v", typ, ir.Load(names[0], i), ir.Load(names[1], i), ir.Load(names[2], i), func(k *ir.Block, v ir.Expr) {
			outside := ir.BinaryExpr{Op: ir.OpLOr, X: ir.Lt(u(v), u(ir.Load(names[3], i))), Y: ir.BinaryExpr{Op: ir.OpGt, X: u(v), Y: u(ir.Load(names[4], i))}}
			k.Assign("bad", ir.BinaryExpr{Op: ir.OpAdd, X: bad, Y: ir.Cast(ir.U32, outside)})
			k.Assign("trips", ir.BinaryExpr{Op: ir.OpAdd, X: trips, Y: ir.LitU32(1)})
			k.If(ir.BinaryExpr{Op: ir.OpGe, X: trips, Y: ir.LitU32(maxTrips)}, func(k *ir.Block) { k.Break() })
		})
		b.If(ir.Lt(i, ir.Len(out)), func(k *ir.Block) { k.Store(out, i, bad) })
		p := b.MustBuild()
		var data [][]byte
		for _, in := range [][]uint32{from, to, step, lo, hi} {
			data = append(data, encode(in))
		}
		outs, err := interp.Run(context.Background(), p, interp.Options{},
			interp.Launch{Grid: [3]uint32{lanes / 64, 1, 1}, Inputs: append(data, nil), OutputCounts: []uint32{5: lanes}})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range decode(outs[0]) {
			if n != 0 {
				t.Fatalf("%s loop from %#x to %#x step %#x: %d values outside %v", typ, from[i], to[i], step[i], n, want[i])
			}
		}
	}
}

// FuzzBinary checks one operator on one pair of values in fuzzed ranges against
// the interpreter.
func FuzzBinary(f *testing.F) {
	f.Add(uint8(ir.OpAdd), false, uint32(0), uint32(15), uint32(16), uint32(16), uint32(3), uint32(0))
	f.Add(uint8(ir.OpMul), true, uint32(0x7fffff00), uint32(0x80000010), uint32(2), uint32(3), uint32(9), uint32(1))
	f.Add(uint8(ir.OpShl), false, uint32(1), uint32(1), uint32(31), uint32(33), uint32(0), uint32(2))
	ops := ir.BinaryOps()
	f.Fuzz(func(t *testing.T, opIndex uint8, signed bool, alo, ahi, blo, bhi, x, y uint32) {
		op := ops[int(opIndex)%len(ops)]
		typ := ir.U32
		if signed {
			typ = ir.I32
		}
		out := typ
		if op.IsComparison() || op == ir.OpLAnd || op == ir.OpLOr {
			out = ir.Bool
		}
		ra, rb := ranges.Between(min(alo, ahi), max(alo, ahi)), ranges.Between(min(blo, bhi), max(blo, bhi))
		within := func(r ranges.Range, v uint32) uint32 {
			return r.Lo() + uint32(uint64(v)%(uint64(r.Hi())-uint64(r.Lo())+1))
		}
		x, y = within(ra, x), within(rb, y)
		got, ok := run(t, typ, out, [][]uint32{{x}, {y}}, func(a []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: a[0], Y: a[1]} })
		if !ok {
			return
		}
		if r := ranges.Binary(op, typ, ra, rb); !r.Contains(got[0]) {
			t.Fatalf("%s %s: %#x in %v, %#x in %v gives %#x, outside %v", typ, op, x, ra, y, rb, got[0], r)
		}
	})
}

func ExampleBinary() {
	// local_id.x of a 16-wide workgroup times 4, plus 3: always below 64.
	lid := ranges.Between(0, 15)
	idx := ranges.Binary(ir.OpAdd, ir.U32, ranges.Binary(ir.OpMul, ir.U32, lid, ranges.Exact(4)), ranges.Exact(3))
	fmt.Println(idx, idx.Below(64))
	// A sum that may wrap is unknown.
	fmt.Println(ranges.Binary(ir.OpAdd, ir.U32, ranges.Between(1, 0xFFFFFFF0), ranges.Exact(16)))
	// Output:
	// [3, 63] true
	// unknown
}

func ExampleLoop() {
	// for e in 0..16 step 1: e is in [0, 15] inside the body.
	fmt.Println(ranges.Loop(ir.U32, ranges.Exact(0), ranges.Exact(16), ranges.Exact(1)))
	// Output: [0, 15]
}

func ExampleTrips() {
	// for k in -5..4 step 3 on i32: -5, -2, 1.
	fmt.Println(ranges.Trips(ir.I32, uint32(0xFFFFFFFB), 4, 3, 32))
	// A u32 loop from 0 by 0 never ends: more than any limit.
	fmt.Println(ranges.Trips(ir.U32, 0, 4, 0, 32))
	// Output:
	// 3 true
	// 0 false
}
