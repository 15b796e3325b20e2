package interp

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// unaryTable runs op on each input (as u32 bits of type t) and returns the results.
func unaryTable(t *testing.T, op func(ir.Expr) ir.Expr, typ ir.Type, in []uint32) []uint32 {
	t.Helper()
	b := ir.NewBuilder("test.unary", uint32(len(in)), 1, 1)
	x := b.FixedBuffer("x", typ, ir.Read, uint32(len(in)))
	out := b.FixedBuffer("out", typ, ir.Write, uint32(len(in)))
	b.Store(out, lid, op(ir.Load(x, lid)))
	return bytesU32(mustRun(t, b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(in...)}})[0])
}

func f32Bits(v ...float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

func TestTruncAndRound(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	in := f32Bits(0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, negZero, inf, -inf, 8388609, 0.49999997, 1e-40)
	nan := uint32(0x7fc00001)
	in = append(in, nan)
	wantRound := f32Bits(0, 2, 2, negZero, -2, -3, 3, negZero, inf, -inf, 8388609, 0, 0)
	wantTrunc := f32Bits(0, 1, 2, negZero, -1, -2, 2, negZero, inf, -inf, 8388609, 0, 0)
	wantRound, wantTrunc = append(wantRound, nan), append(wantTrunc, nan)
	if got := unaryTable(t, ir.Round, ir.F32, in); !slices.Equal(got, wantRound) {
		t.Errorf("round: got %x, want %x", got, wantRound)
	}
	if got := unaryTable(t, ir.Trunc, ir.F32, in); !slices.Equal(got, wantTrunc) {
		t.Errorf("trunc: got %x, want %x", got, wantTrunc)
	}
}

func TestClzPopcount(t *testing.T) {
	in := []uint32{0, 1, 2, 0x80000000, 0xffffffff, 0x00010000, 0x7fffffff}
	for _, typ := range []ir.Type{ir.U32, ir.I32} {
		if got, want := unaryTable(t, ir.Clz, typ, in), []uint32{32, 31, 30, 0, 0, 15, 1}; !slices.Equal(got, want) {
			t.Errorf("clz %s: got %v, want %v", typ, got, want)
		}
		if got, want := unaryTable(t, ir.Popcount, typ, in), []uint32{0, 1, 1, 1, 32, 1, 31}; !slices.Equal(got, want) {
			t.Errorf("popcount %s: got %v, want %v", typ, got, want)
		}
	}
}

func TestBitcastKeepsBits(t *testing.T) {
	in := []uint32{0x7fc00001, 0xffbfffff, 0x80000000, 1, 0x3f800000}
	for _, c := range []struct{ from, to ir.Type }{{ir.F32, ir.U32}, {ir.U32, ir.F32}, {ir.I32, ir.F32}, {ir.F32, ir.I32}, {ir.U32, ir.I32}} {
		b := ir.NewBuilder("test.bitcast", uint32(len(in)), 1, 1)
		x := b.FixedBuffer("x", c.from, ir.Read, uint32(len(in)))
		out := b.FixedBuffer("out", c.to, ir.Write, uint32(len(in)))
		b.Store(out, lid, ir.Bitcast(c.to, ir.Load(x, lid)))
		got := bytesU32(mustRun(t, b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(in...)}})[0])
		if !slices.Equal(got, in) {
			t.Errorf("bitcast %s to %s: got %x, want %x", c.from, c.to, got, in)
		}
	}
}

func TestContinue(t *testing.T) {
	// Each lane sums the odd k below 10 + lid, skipping multiples of 3 by a
	// continue nested in an if, and counts iterations after the continue point.
	p := lanesProgram(8, 16, func(b *ir.Builder, out string) {
		s := b.Var("s", ir.U32, u32(0))
		n := b.Var("n", ir.U32, u32(0))
		b.For("k", ir.U32, u32(0), ir.Add(u32(10), lid), u32(1), func(body *ir.Block, k ir.Expr) {
			body.If(ir.Eq(ir.Rem(k, u32(2)), u32(0)), func(then *ir.Block) { then.Continue() })
			body.IfElse(ir.Eq(ir.Rem(k, u32(3)), u32(0)), func(then *ir.Block) { then.Continue() },
				func(els *ir.Block) { els.Assign("s", ir.Add(s, k)) })
			body.Assign("n", ir.Add(n, u32(1)))
		})
		b.Store(out, lid, s)
		// while with continue: count down, skipping odd values.
		c := b.Var("c", ir.U32, ir.Add(lid, u32(4)))
		e := b.Var("e", ir.U32, u32(0))
		b.While(ir.Gt(c, u32(0)), func(body *ir.Block) {
			body.Assign("c", ir.Sub(c, u32(1)))
			body.If(ir.Eq(ir.Rem(c, u32(2)), u32(1)), func(then *ir.Block) { then.Continue() })
			body.Assign("e", ir.Add(e, u32(1)))
		})
		b.Store(out, ir.Add(lid, u32(8)), ir.Add(ir.Mul(n, u32(1000)), e))
	})
	got := runLanes(t, p)
	for l := uint32(0); l < 8; l++ {
		var s, n uint32
		for k := uint32(0); k < 10+l; k++ {
			if k%2 == 0 || k%3 == 0 {
				continue
			}
			s += k
			n++
		}
		var e uint32
		for c := l + 4; c > 0; {
			c--
			if c%2 == 1 {
				continue
			}
			e++
		}
		if got[l] != s || got[l+8] != n*1000+e {
			t.Errorf("lane %d: got %d and %d, want %d and %d", l, got[l], got[l+8], s, n*1000+e)
		}
	}
}

func TestContinueAndBreakTogether(t *testing.T) {
	p := lanesProgram(4, 4, func(b *ir.Builder, out string) {
		s := b.Var("s", ir.U32, u32(0))
		b.For("k", ir.U32, u32(0), u32(100), u32(1), func(body *ir.Block, k ir.Expr) {
			body.If(ir.Lt(k, lid), func(then *ir.Block) { then.Continue() })
			body.If(ir.Gt(k, ir.Add(lid, u32(3))), func(then *ir.Block) { then.Break() })
			body.Assign("s", ir.Add(s, k))
		})
		b.Store(out, lid, s)
	})
	got := runLanes(t, p)
	for l := uint32(0); l < 4; l++ {
		if want := 4*l + 6; got[l] != want { // l + (l+1) + (l+2) + (l+3)
			t.Errorf("lane %d: got %d, want %d", l, got[l], want)
		}
	}
}

// casAddProgram adds 1.0 to out[0] from every invocation with a compare-exchange
// loop, the f32 atomic add IR v1.1 makes possible.
func casAddProgram(shared bool) *ir.Program {
	b := ir.NewBuilder("test.cas", 64, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.ReadWrite, 17)
	target, index := out, u32(0)
	if shared {
		target = b.Shared("acc", ir.U32, 1)
		b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Store(target, u32(0), ir.Bitcast(ir.U32, ir.LitF32(0))) })
		b.Barrier()
	}
	// The first guess: the buffer's initial contents, or the 0.0 the shared
	// accumulator was given (a plain load here would race with the others' cas).
	var first ir.Expr = ir.Load(target, index)
	if shared {
		first = ir.Bitcast(ir.U32, ir.LitF32(0))
	}
	old := b.Var("old", ir.U32, first)
	b.While(ir.LitBool(true), func(w *ir.Block) {
		want := w.Let("want", ir.Bitcast(ir.U32, ir.Add(ir.Bitcast(ir.F32, old), ir.LitF32(1))))
		got := w.AtomicCAS(target, index, old, want, "got")
		w.If(ir.Eq(got, old), func(t *ir.Block) { t.Break() })
		w.Assign("old", got)
	})
	if shared {
		b.Barrier()
		b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) {
			then.Store(out, ir.Add(ir.WorkgroupID(0), u32(1)), ir.Load(target, u32(0)))
		})
	}
	return b.MustBuild()
}

func TestCompareExchange(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, strict := range []bool{false, true} {
			outs, err := Run(context.Background(), casAddProgram(shared), Options{Strict: strict},
				Launch{Grid: [3]uint32{16, 1, 1}, Inputs: [][]byte{make([]byte, 17*4)}})
			if err != nil {
				t.Fatalf("shared %v, strict %v: %v", shared, strict, err)
			}
			got := bytesU32(outs[0])
			words, want := got[:1], float32(16*64)
			if shared {
				words, want = got[1:], 64 // each workgroup stores its own sum
			}
			for _, w := range words {
				if f := math.Float32frombits(w); f != want {
					t.Errorf("shared %v: f32 add by cas gave %v, want %v", shared, f, want)
				}
			}
		}
	}
}

// TestStrictCatchesPlainReadOfAtomicWord: reading a word with a plain load while
// other lanes update it atomically, between two barriers, is a race.
func TestStrictCatchesPlainReadOfAtomicWord(t *testing.T) {
	b := ir.NewBuilder("test.cas_race", 8, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 8)
	acc := b.Shared("acc", ir.U32, 1)
	b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Store(acc, u32(0), u32(0)) })
	b.Barrier()
	old := b.Let("old", ir.Load(acc, u32(0)))
	b.AtomicCAS(acc, u32(0), old, ir.Add(old, u32(1)), "got")
	b.Store(out, lid, ir.Local("got"))
	_, err := Run(context.Background(), b.MustBuild(), Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1}})
	var se *StrictError
	if !errors.As(err, &se) || se.Hazard != AtomicRace || se.Statement != "body[3]" || se.OtherStatement != "body[2]" {
		t.Fatalf("want an AtomicRace between body[3] and body[2], got %v", err)
	}
}

func TestCompareExchangeResult(t *testing.T) {
	p := lanesProgram(4, 8, func(b *ir.Builder, out string) {
		b.Store(out, ir.Add(lid, u32(4)), u32(7))
		// lanes 0..3 compare word 4+lid (7) with lid+6: only lane 1 matches.
		old := b.AtomicCAS(out, ir.Add(lid, u32(4)), ir.Add(lid, u32(6)), u32(100), "old")
		b.Store(out, lid, old)
		b.AtomicCAS(out, u32(99), u32(0), u32(1), "oob")
		b.If(ir.Ne(ir.Local("oob"), u32(0)), func(then *ir.Block) { then.Store(out, lid, u32(12345)) })
	})
	if got, want := runLanes(t, p), []uint32{7, 7, 7, 7, 7, 100, 7, 7}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func uniformsProgram() *ir.Program {
	b := ir.NewBuilder("test.uniforms", 4, 1, 1)
	n := b.Uniform("n", ir.U32)
	s := b.Uniform("s", ir.F32)
	bias := b.Uniform("bias", ir.I32)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 4)
	b.Store(out, u32(0), n)
	b.Store(out, u32(1), ir.Bitcast(ir.U32, ir.Mul(s, ir.LitF32(2))))
	b.Store(out, u32(2), ir.Bitcast(ir.U32, ir.Add(bias, ir.LitI32(1))))
	b.For("k", ir.U32, u32(0), n, u32(1), func(body *ir.Block, _ ir.Expr) {
		body.Atomic(ir.AtomicAdd, out, u32(3), u32(1))
	})
	return b.MustBuild()
}

func TestUniforms(t *testing.T) {
	p := uniformsProgram()
	k, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []uint32{0, 5} {
		block, err := ir.EncodeUniforms(p, map[string]ir.Literal{"n": ir.LitU32(n), "s": ir.LitF32(1.25), "bias": ir.LitI32(-3)})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := k.Run(context.Background(), Launch{Grid: [3]uint32{1, 1, 1}, Uniforms: block})
		if err != nil {
			t.Fatal(err)
		}
		got := bytesU32(outs[0])
		if want := []uint32{n, math.Float32bits(2.5), uint32(0xfffffffe), 4 * n}; !slices.Equal(got, want) {
			t.Errorf("n=%d: got %v, want %v (one compile, uniforms per run)", n, got, want)
		}
	}
	_, err = k.Run(context.Background(), Launch{Grid: [3]uint32{1, 1, 1}, Uniforms: u32Bytes(1)})
	wantErr(t, err, "12 bytes of uniforms", "got 4", "Fix:")
}

// subgroupProgram stores, per lane, the results of every subgroup operation on
// x = the lane's input.
func subgroupProgram(n uint32, required uint32) *ir.Program {
	b := ir.NewBuilder("test.subgroup", n, 1, 1)
	b.RequireSubgroupSize(required)
	in := b.FixedBuffer("in", ir.F32, ir.Read, n)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 8*n)
	x := b.Let("x", ir.Load(in, lid))
	xi := b.Let("xi", ir.Cast(ir.I32, x))
	lane := b.Let("lane", ir.SubgroupInvocationID())
	put := func(slot uint32, v ir.Expr) { b.Store(out, ir.Add(ir.Mul(lid, u32(8)), u32(slot)), v) }
	put(0, ir.SubgroupSize())
	put(1, lane)
	put(2, ir.Bitcast(ir.U32, ir.SubgroupAdd(x)))
	put(3, ir.Bitcast(ir.U32, ir.SubgroupMin(xi)))
	put(4, ir.Bitcast(ir.U32, ir.SubgroupMax(x)))
	put(5, ir.Bitcast(ir.U32, ir.SubgroupShuffle(x, ir.Xor(lane, u32(1)))))
	put(6, ir.Bitcast(ir.U32, ir.SubgroupShuffle(x, ir.Add(lane, u32(3)))))
	put(7, ir.Bitcast(ir.U32, ir.SubgroupBroadcast(x, u32(2))))
	return b.MustBuild()
}

func TestSubgroupsEmulateEverySize(t *testing.T) {
	const n = 64
	in := make([]float32, n)
	for i := range in {
		in[i] = float32((i*37)%23) - 11.5
	}
	for _, size := range []uint32{1, 2, 4, 8, 16, 32, 64} {
		got := bytesU32(mustRun(t, subgroupProgram(n, 0), Options{SubgroupSize: size},
			Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{f32Bytes(in...)}})[0])
		for l := 0; l < n; l++ {
			s0 := l / int(size) * int(size)
			sub := in[s0 : s0+int(size)]
			lane := l % int(size)
			mn, mx := int32(sub[0]), sub[0]
			for _, v := range sub {
				mn, mx = min(mn, int32(v)), max(mx, v)
			}
			pick := func(j int) uint32 {
				if j < int(size) {
					return math.Float32bits(sub[j])
				}
				return 0
			}
			want := []uint32{size, uint32(lane), math.Float32bits(treeSum(sub)), uint32(mn), math.Float32bits(mx),
				pick(lane ^ 1), pick(lane + 3), pick(2)}
			if g := got[8*l : 8*l+8]; !slices.Equal(g, want) {
				t.Fatalf("size %d, lane %d: got %v, want %v", size, l, g, want)
			}
		}
	}
}

// treeSum is the reference's f32 subgroup sum: pairs of neighbours first.
func treeSum(v []float32) float32 {
	v = slices.Clone(v)
	for w := 1; w < len(v); w *= 2 {
		for i := 0; i+w < len(v); i += 2 * w {
			v[i] += v[i+w]
		}
	}
	return v[0]
}

// TestSubgroupAddF32Order pins the pairwise order: adding 1 to 2^24 in lane
// order would lose every 1; the tree keeps pairs of them.
func TestSubgroupAddF32Order(t *testing.T) {
	in := []float32{1 << 24, 1, 1, 1}
	got := bytesU32(mustRun(t, subgroupProgram(4, 4), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{f32Bytes(in...)}})[0])
	if f := math.Float32frombits(got[2]); f != 1<<24+2 {
		t.Errorf("subgroup_add gave %v, want %v ((2^24+1)+(1+1))", f, float32(1<<24+2))
	}
}

func TestSubgroupSizeChoice(t *testing.T) {
	for _, c := range []struct {
		wg, required, asked, want uint32
		err                       string
	}{
		{64, 0, 0, 32, ""},
		{48, 0, 0, 16, ""},
		{24, 0, 0, 8, ""},
		{64, 16, 0, 16, ""},
		{64, 16, 16, 16, ""},
		{64, 16, 32, 0, "requires subgroups of 16 lanes"},
		{48, 0, 32, 0, "not a multiple of the subgroup size 32"},
		{64, 0, 3, 0, "not a power of two"},
	} {
		b := ir.NewBuilder("test.size", c.wg, 1, 1)
		b.RequireSubgroupSize(c.required)
		out := b.FixedBuffer("out", ir.U32, ir.Write, 1)
		b.Store(out, u32(0), ir.SubgroupSize())
		k, err := Compile(b.MustBuild(), Options{SubgroupSize: c.asked})
		if c.err != "" {
			wantErr(t, err, c.err, "Fix:")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if k.SubgroupSize() != c.want {
			t.Errorf("wg %d, required %d, asked %d: size %d, want %d", c.wg, c.required, c.asked, k.SubgroupSize(), c.want)
		}
	}
}

func TestSubgroupDivergence(t *testing.T) {
	b := ir.NewBuilder("test.diverge", 32, 1, 1)
	b.RequireSubgroupSize(8)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 32)
	b.If(ir.Lt(lid, u32(12)), func(then *ir.Block) {
		then.Store(out, lid, ir.SubgroupAdd(lid))
	})
	_, err := Run(context.Background(), b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})
	wantErr(t, err, "subgroup_add at body[0].then[0]", "only 4 of the 8 lanes", "local id (8,0,0)", "(12,0,0) did not reach it", "Fix:")

	// A subgroup wholly inside or outside the branch is fine.
	b = ir.NewBuilder("test.uniform_branch", 32, 1, 1)
	b.RequireSubgroupSize(8)
	out = b.FixedBuffer("out", ir.U32, ir.Write, 32)
	b.If(ir.Lt(lid, u32(16)), func(then *ir.Block) { then.Store(out, lid, ir.SubgroupAdd(lid)) })
	got := bytesU32(mustRun(t, b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})[0])
	if got[0] != 28 || got[9] != 92 || got[20] != 0 {
		t.Errorf("uniform branch: got %v", got)
	}

	// Lanes that returned do not reach later subgroup operations.
	b = ir.NewBuilder("test.returned", 8, 1, 1)
	out = b.FixedBuffer("out", ir.U32, ir.Write, 8)
	b.If(ir.Eq(lid, u32(5)), func(then *ir.Block) { then.Return() })
	b.Store(out, lid, ir.SubgroupMax(lid))
	_, err = Run(context.Background(), b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})
	wantErr(t, err, "subgroup_max", "7 of the 8 lanes", "(5,0,0) did not reach it")
}

func TestSubgroupBroadcastNeedsOneLane(t *testing.T) {
	b := ir.NewBuilder("test.broadcast", 8, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, 8)
	b.Store(out, lid, ir.SubgroupBroadcast(lid, ir.Div(lid, u32(4))))
	_, err := Run(context.Background(), b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}})
	wantErr(t, err, "subgroup_broadcast", "(0,0,0) and (4,0,0)", "lanes 0 and 1", "Fix:")
}

// TestSubgroupsAcrossBatchedWorkgroups: a barrier-free kernel runs several
// workgroups per unit; subgroups must still be counted within workgroups.
func TestSubgroupsAcrossBatchedWorkgroups(t *testing.T) {
	b := ir.NewBuilder("test.batched", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	gid := b.Let("gid", ir.GlobalID(0))
	b.If(ir.Lt(gid, ir.Len(out)), func(then *ir.Block) {
		then.Store(out, gid, ir.Add(ir.Mul(ir.WorkgroupID(0), u32(1000)), ir.SubgroupAdd(ir.LocalID(0))))
	})
	const groups = 200
	k, err := Compile(b.MustBuild(), Options{SubgroupSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	if k.batch <= 1 {
		t.Fatalf("a barrier-free kernel should run batched, batch %d", k.batch)
	}
	outs, err := k.Run(context.Background(), Launch{Grid: [3]uint32{groups, 1, 1}, OutputCounts: []uint32{groups * 32}})
	if err != nil {
		t.Fatal(err)
	}
	got := bytesU32(outs[0])
	for i, v := range got {
		g, l := uint32(i/32), uint32(i%32)
		want := g*1000 + 120 // 0+...+15
		if l >= 16 {
			want = g*1000 + 376 // 16+...+31
		}
		if v != want {
			t.Fatalf("element %d: got %d, want %d", i, v, want)
		}
	}
}

// TestLinearAccessEdges covers the view fast paths: offsets, the partial tail of a
// buffer, indices that wrap around 2^32, and grids that end mid-batch.
func TestLinearAccessEdges(t *testing.T) {
	for _, off := range []uint32{0, 1, 7, 0xfffffff0} {
		b := ir.NewBuilder("test.linear", 64, 1, 1)
		in := b.Buffer("in", ir.U32, ir.Read)
		out := b.Buffer("out", ir.U32, ir.Write)
		i := b.Let("i", ir.Add(ir.GlobalID(0), u32(off)))
		b.If(ir.Lt(ir.GlobalID(0), u32(1000)), func(then *ir.Block) {
			then.Store(out, i, ir.Add(ir.Load(in, i), u32(1)))
		})
		const n = 1200
		words := make([]uint32, n)
		for j := range words {
			words[j] = uint32(j) * 3
		}
		for _, grid := range []uint32{1, 15, 16, 17, 40} {
			got := bytesU32(mustRun(t, b.MustBuild(), Options{}, Launch{Grid: [3]uint32{grid, 1, 1},
				Inputs: [][]byte{u32Bytes(words...)}, OutputCounts: []uint32{0, n}})[0])
			want := make([]uint32, n)
			for g := uint32(0); g < grid*64 && g < 1000; g++ {
				if j := g + off; j < n {
					want[j] = words[j] + 1
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("offset %#x, grid %d: outputs differ from the per-lane semantics", off, grid)
			}
		}
	}
}

func TestStrictErrorIsTyped(t *testing.T) {
	p := lanesProgram(4, 4, func(b *ir.Builder, out string) {
		s := b.Shared("s", ir.U32, 4)
		b.Store(out, lid, ir.Load(s, lid))
	})
	_, err := Run(context.Background(), p, Options{Strict: true}, Launch{Grid: [3]uint32{1, 1, 1}})
	var se *StrictError
	if !errors.As(err, &se) || se.Hazard != UninitializedRead || se.Array != "s" || se.Statement != "body[0]" {
		t.Fatalf("want an UninitializedRead StrictError, got %v", err)
	}
}

// TestFusedStoreReadsBeforeWriting: a store whose value's last operation writes
// straight into the buffer must still see every element as it was before the
// statement, as lockstep semantics say.
func TestFusedStoreReadsBeforeWriting(t *testing.T) {
	const n = 256
	words := make([]uint32, n)
	for i := range words {
		words[i] = uint32(i)
	}
	for _, c := range []struct {
		name  string
		index func(gid ir.Expr) (store, load ir.Expr)
		want  func(old []uint32, i int) (int, uint32, bool)
	}{
		{"same element", func(gid ir.Expr) (ir.Expr, ir.Expr) { return gid, gid },
			func(old []uint32, i int) (int, uint32, bool) { return i, old[i] + 1, true }},
		{"next element", func(gid ir.Expr) (ir.Expr, ir.Expr) { return ir.Add(gid, u32(1)), gid },
			func(old []uint32, i int) (int, uint32, bool) { return i + 1, old[i] + 1, i+1 < n }},
		{"previous element", func(gid ir.Expr) (ir.Expr, ir.Expr) { return gid, ir.Add(gid, u32(1)) },
			func(old []uint32, i int) (int, uint32, bool) {
				if i+1 < n {
					return i, old[i+1] + 1, true
				}
				return i, 1, true // out of bounds loads give 0
			}},
	} {
		b := ir.NewBuilder("test.fused", 256, 1, 1)
		y := b.Buffer("y", ir.U32, ir.ReadWrite)
		gid := b.Let("gid", ir.GlobalID(0))
		st, ld := c.index(gid)
		b.If(ir.Lt(gid, ir.Len(y)), func(then *ir.Block) { then.Store(y, st, ir.Add(ir.Load(y, ld), u32(1))) })
		got := bytesU32(mustRun(t, b.MustBuild(), Options{}, Launch{Grid: [3]uint32{1, 1, 1}, Inputs: [][]byte{u32Bytes(words...)}})[0])
		want := slices.Clone(words)
		for i := range n {
			if j, v, ok := c.want(words, i); ok {
				want[j] = v
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v", c.name, got[:8], want[:8])
		}
	}
}
