package kernels

import (
	"fmt"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// The register-tiled matmul's defaults: a 16×16 workgroup whose invocations
// each compute a regBlock×regBlock block of c, walking k in steps of regDepth.
const (
	regWG    = 16
	regBlock = 4
	regDepth = 16
	// regMaxBlock bounds the block's sides: the program declares
	// regMaxBlock² accumulators and uses the bm×bn the parameters select.
	regMaxBlock = 8
	// regShared is the element count of each shared tile (the two fill the
	// 32 KiB IR limit): a workgroup of X×Y invocations stages a (Y·bm)×tk block
	// of a and a tk×(X·bn) block of b, so a launch needs Y·bm·tk and tk·X·bn
	// at most regShared; larger ones give wrong results, which a tuner's
	// oracle check rejects.
	regShared = ir.MaxSharedBytes / 4 / 2
	// regPrefetch is the number of registers per matrix that hold the next
	// step's values at stages = 2: one per fill trip, so the pipelined loop
	// runs only where both fills take at most regPrefetch trips.
	regPrefetch = 8
)

// randomSixteenths draws n values from the multiples of 1/16 in [-1, 1].
func randomSixteenths(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.IntN(33)-16) / 16
	}
	return out
}

// The tunables' candidates: block rows and columns per invocation, tile depth.
var (
	regBlocks = []uint32{1, 2, 4, 8}
	regDepths = []uint32{4, 8, 16, 32}
)

func matmulReg() Kernel {
	// An invocation covers a bm×bn block of c: n/bn columns by m/bm rows of
	// invocations, rounded up.
	inv := func(c Case) [3]uint32 {
		bm, bn := max(specU32(c, "bm", regBlock), 1), max(specU32(c, "bn", regBlock), 1)
		return [3]uint32{cover(c.Size+2, bn), cover(c.Size, bm), 1}
	}
	k := matmul()
	return Kernel{
		Name: "matmul_reg",
		OpID: "kiln.matrix.matmul_reg.f32",
		Doc: "c (m×n) = a (m×k) · b (k×n), row-major f32, register-tiled: each invocation keeps a bm×bn block of c " +
			"(parameters, default 4×4, tunable 1, 2, 4, 8) in registers, fed from shared tiles of depth tk " +
			"(default 16, tunable 4, 8, 16, 32); stages (parameter, default 1, tunable 1, 2): 2 = ping-pong tiles " +
			"with register prefetch, one barrier per step; vec (parameter, default 1, tunable 1, 4): an invocation's " +
			"columns come in runs of min(bn, vec) adjacent ones, read from the b tile with one wide load where a " +
			"backend vectorizes; m, n, k are uniforms; size s is m = s, k = s+1, n = s+2",
		Sizes:       []int{0, 1, 7, 16, 17, 61, 64, 100},
		Program:     matmulRegProgram,
		Invocations: inv,
		Flops:       matmulFlops,
		NewCase: func(rng *rand.Rand, size int) Case {
			c := k.NewCase(rng, size)
			m, kk, n := size, size+1, size+2
			c.Inputs[0], c.Inputs[1] = F32Bytes(randomSixteenths(rng, m*kk)), F32Bytes(randomSixteenths(rng, kk*n))
			return withInvocations(c, inv, [3]uint32{regWG, regWG, 1})
		},
		Reference: matmulReference,
		// The kernel accumulates with fma, which a backend may fuse or not
		// (docs/design.md, "The program"), and the reference does not fuse. The
		// inputs are multiples of 1/16 in [-1, 1], so every product is a
		// multiple of 2^-8 of magnitude at most 1 and every partial sum of fewer
		// than 2^16 of them (k < 65536) is exact in f32: fused, unfused and reference
		// agree bit for bit, as does the zero padding's +0.
		Check: exact(ir.F32, "c"),
	}
}

// matmulRegProgram is the register-tiled matmul. A workgroup of X×Y
// invocations owns a (Y·bm)×(X·bn) tile of c; invocation (tx, ty) owns the
// elements at rows row0 + i·Y + ty and columns col0 + j·X + tx for i < bm,
// j < bn (strided, so neighbouring invocations read neighbouring words of the
// shared b tile and one word of the a tile). For each step of tk along k the
// workgroup stages the (Y·bm)×tk block of a and the tk×(X·bn) block of b in
// shared memory (0 outside the matrices), each invocation filling every
// (X·Y)-th element in a loop whose trip count depends only on the launch shape
// and the tunables (a constant once a backend folds them, so the loop unrolls
// and an invocation's loads are in flight together). After a barrier each
// invocation, for e = 0..tk-1, loads its bn values of b into registers, then for each of
// its bm rows one value of a, and accumulates the bm·bn products with fma (one
// instruction each where the backend fuses, twice the rate of a multiply and an
// add); a second barrier frees the tiles. The program declares regMaxBlock²
// accumulators and regMaxBlock b registers; conditions on bm and bn, which are
// specialization constants, select the ones in use, so a backend that folds
// constants keeps only those.
//
// At stages = 2, when each tile takes at most half its array and each fill at
// most regPrefetch trips, the k loop is software-pipelined instead: the halves
// of each array are ping-pong buffers (step t reads half t&1). Step 0 is
// filled before the loop; then each step loads the next step's values from
// global memory into regPrefetch registers per matrix, computes from its own
// half as above, stores the registers into the other half and ends with one
// barrier, so the global loads overlap the arithmetic and a step costs one
// barrier instead of two. The condition is a constant once a backend folds the
// specialization; a launch that does not meet it runs the loop above, so
// every candidate is correct. Both loops add the products in the same order
// (e ascending within a step, steps ascending).
//
// vec regroups an invocation's columns: with g = min(bn, vec), its column j
// is col0 + (j/g)·(X·g) + tx·g + j%g, so each run of g columns is adjacent and
// 16-byte aligned for g = 4 (X·g and tx·g are multiples of g): a backend may
// read it from the b tile in one wide load, and the X invocations of a row
// still read one contiguous stretch of the tile per run (no bank conflicts).
// At vec = 1 (g = 1) it is the strided layout above.
func matmulRegProgram() *ir.Program {
	b := ir.NewBuilder("kiln.matrix.matmul_reg.f32", regWG, regWG, 1)
	bm := b.Tunable("bm", ir.U32, ir.LitU32(regBlock), u32Literals(regBlocks)...)
	bn := b.Tunable("bn", ir.U32, ir.LitU32(regBlock), u32Literals(regBlocks)...)
	tk := b.Tunable("tk", ir.U32, ir.LitU32(regDepth), u32Literals(regDepths)...)
	stages := b.Tunable("stages", ir.U32, ir.LitU32(1), ir.LitU32(1), ir.LitU32(2))
	vec := b.Tunable("vec", ir.U32, ir.LitU32(1), ir.LitU32(1), ir.LitU32(4))
	m, n, k, a, bb, c := matmulOperands(b, ir.F32)
	aTile := b.Shared("a_tile", ir.F32, regShared)
	bTile := b.Shared("b_tile", ir.F32, regShared)
	zero, one := ir.LitU32(0), ir.LitU32(1)
	u := func(v int) ir.Expr { return ir.LitU32(uint32(v)) }

	wx := b.Let("wx", ir.WorkgroupSize(0))
	wy := b.Let("wy", ir.WorkgroupSize(1))
	tx := b.Let("tx", ir.LocalID(0))
	ty := b.Let("ty", ir.LocalID(1))
	lane := b.Let("lane", ir.Add(ir.Mul(ty, wx), tx))
	threads := b.Let("threads", ir.Mul(wx, wy))
	rows := b.Let("rows", ir.Mul(wy, bm))
	cols := b.Let("cols", ir.Mul(wx, bn))
	row0 := b.Let("row0", ir.Mul(ir.WorkgroupID(1), rows))
	col0 := b.Let("col0", ir.Mul(ir.WorkgroupID(0), cols))
	group := b.Let("group", ir.Select(ir.Lt(bn, vec), bn, vec))
	span := b.Let("span", ir.Mul(wx, group))
	first := b.Let("first", ir.Mul(tx, group))
	// colOf is the offset of the invocation's column j in the workgroup's tile.
	colOf := func(j int) ir.Expr {
		return ir.Add(ir.Add(ir.Mul(ir.Div(u(j), group), span), first), ir.Rem(u(j), group))
	}
	acc := func(i, j int) string { return fmt.Sprintf("acc_%d_%d", i, j) }
	bv := func(j int) string { return fmt.Sprintf("b_%d", j) }
	for i := range regMaxBlock {
		for j := range regMaxBlock {
			b.Var(acc(i, j), ir.F32, ir.LitF32(0))
		}
	}
	for j := range regMaxBlock {
		b.Var(bv(j), ir.F32, ir.LitF32(0))
	}
	steps := b.Let("steps", ir.Div(ir.Add(k, ir.Sub(tk, one)), tk))
	aCount := b.Let("a_count", ir.Mul(rows, tk))
	bCount := b.Let("b_count", ir.Mul(tk, cols))
	// aValue and bValue are the elements at tile index s of the step starting
	// at k index base: 0 outside the matrices.
	aValue := func(in *ir.Block, base, s ir.Expr) ir.Expr {
		r := in.Let("ar", ir.Add(row0, ir.Div(s, tk)))
		e := in.Let("ae", ir.Add(base, ir.Rem(s, tk)))
		return ir.Select(ir.LAnd(ir.Lt(r, m), ir.Lt(e, k)), ir.Load(a, ir.Add(ir.Mul(r, k), e)), ir.LitF32(0))
	}
	bValue := func(in *ir.Block, base, s ir.Expr) ir.Expr {
		e := in.Let("be", ir.Add(base, ir.Div(s, cols)))
		cc := in.Let("bc", ir.Add(col0, ir.Rem(s, cols)))
		return ir.Select(ir.LAnd(ir.Lt(e, k), ir.Lt(cc, n)), ir.Load(bb, ir.Add(ir.Mul(e, n), cc)), ir.LitF32(0))
	}
	trips := func(name string, count ir.Expr) ir.Expr {
		return b.Let(name, ir.Div(ir.Add(count, ir.Sub(threads, one)), threads))
	}
	aTrips, bTrips := trips("a_trips", aCount), trips("b_trips", bCount)
	// fillTiles stores step base/tk's blocks of a and b in the tiles, every
	// (X·Y)-th element per invocation, 0 outside the matrices.
	fillTiles := func(blk *ir.Block, base ir.Expr) {
		blk.For("fa", ir.U32, zero, aTrips, one, func(fill *ir.Block, f ir.Expr) {
			s := fill.Let("sa", ir.Add(lane, ir.Mul(f, threads)))
			fill.If(ir.Lt(s, aCount), func(in *ir.Block) {
				in.Store(aTile, s, aValue(in, base, s))
			})
		})
		blk.For("fb", ir.U32, zero, bTrips, one, func(fill *ir.Block, f ir.Expr) {
			s := fill.Let("sb", ir.Add(lane, ir.Mul(f, threads)))
			fill.If(ir.Lt(s, bCount), func(in *ir.Block) {
				in.Store(bTile, s, bValue(in, base, s))
			})
		})
	}
	// compute accumulates the products of the step whose tiles start at off
	// (nil: at 0) in each tile.
	compute := func(blk *ir.Block, off ir.Expr) {
		at := func(i ir.Expr) ir.Expr {
			if off == nil {
				return i
			}
			return ir.Add(off, i)
		}
		blk.For("e", ir.U32, zero, tk, one, func(inner *ir.Block, e ir.Expr) {
			for j := range regMaxBlock {
				inner.If(ir.Lt(u(j), bn), func(then *ir.Block) {
					then.Assign(bv(j), ir.Load(bTile, at(ir.Add(ir.Mul(e, cols), colOf(j)))))
				})
			}
			for i := range regMaxBlock {
				inner.If(ir.Lt(u(i), bm), func(then *ir.Block) {
					av := then.Let(fmt.Sprintf("a_%d", i), ir.Load(aTile, at(ir.Add(ir.Mul(ir.Add(ir.Mul(u(i), wy), ty), tk), e))))
					for j := range regMaxBlock {
						then.If(ir.Lt(u(j), bn), func(use *ir.Block) {
							use.Assign(acc(i, j), ir.Fma(av, ir.Local(bv(j)), ir.Local(acc(i, j))))
						})
					}
				})
			}
		})
	}
	half := u(regShared / 2)
	pipelined := b.Let("pipelined", ir.LAnd(ir.Eq(stages, u(2)),
		ir.LAnd(ir.LAnd(ir.Le(aCount, half), ir.Le(bCount, half)),
			ir.LAnd(ir.Le(aTrips, u(regPrefetch)), ir.Le(bTrips, u(regPrefetch))))))
	b.IfElse(pipelined, func(pipe *ir.Block) {
		pa := func(f int) string { return fmt.Sprintf("pa_%d", f) }
		pb := func(f int) string { return fmt.Sprintf("pb_%d", f) }
		for f := range regPrefetch {
			pipe.Var(pa(f), ir.F32, ir.LitF32(0))
			pipe.Var(pb(f), ir.F32, ir.LitF32(0))
		}
		// prefetched are the two tiles' fills: tile, trips, elements, the
		// registers holding the next step's values, how one is read, and the
		// name of the tile index.
		prefetched := []struct {
			tile         string
			trips, count ir.Expr
			reg          func(int) string
			value        func(*ir.Block, ir.Expr, ir.Expr) ir.Expr
			index        string
		}{{aTile, aTrips, aCount, pa, aValue, "sa"}, {bTile, bTrips, bCount, pb, bValue, "sb"}}
		fillTiles(pipe, zero)
		pipe.Barrier()
		// Step t computes from half t&1 while its next step's values wait in
		// registers, then stores them in the other half, (t+1)&1, and ends
		// with one barrier. That half was last read by step t-1's compute,
		// which the barrier ending step t-1 separates from these stores; the
		// barrier ending step t makes them visible before step t+1 reads
		// them. The barrier stays outside the conditions on t, so every
		// invocation reaches it.
		pipe.For("t", ir.U32, zero, steps, one, func(loop *ir.Block, t ir.Expr) {
			cur := loop.Let("cur", ir.Mul(ir.And(t, one), half))
			more := loop.Let("more", ir.Lt(ir.Add(t, one), steps))
			prefetch := func(write bool) {
				loop.If(more, func(next *ir.Block) {
					var nextBase, nextOff ir.Expr
					if write {
						nextOff = next.Let("next_off", ir.Sub(half, cur))
					} else {
						nextBase = next.Let("next_base", ir.Mul(ir.Add(t, one), tk))
					}
					for f := range regPrefetch {
						for _, m := range prefetched {
							next.If(ir.Lt(u(f), m.trips), func(fill *ir.Block) {
								s := fill.Let(m.index, ir.Add(lane, ir.Mul(u(f), threads)))
								fill.If(ir.Lt(s, m.count), func(in *ir.Block) {
									if write {
										in.Store(m.tile, ir.Add(nextOff, s), ir.Local(m.reg(f)))
									} else {
										in.Assign(m.reg(f), m.value(in, nextBase, s))
									}
								})
							})
						}
					}
				})
			}
			prefetch(false)
			compute(loop, cur)
			prefetch(true)
			loop.Barrier()
		})
	}, func(plain *ir.Block) {
		plain.For("t", ir.U32, zero, steps, one, func(loop *ir.Block, t ir.Expr) {
			fillTiles(loop, loop.Let("base", ir.Mul(t, tk)))
			loop.Barrier()
			compute(loop, nil)
			loop.Barrier()
		})
	})
	for i := range regMaxBlock {
		b.If(ir.Lt(u(i), bm), func(then *ir.Block) {
			row := then.Let(fmt.Sprintf("row_%d", i), ir.Add(row0, ir.Add(ir.Mul(u(i), wy), ty)))
			for j := range regMaxBlock {
				then.If(ir.Lt(u(j), bn), func(use *ir.Block) {
					col := use.Let(fmt.Sprintf("col_%d_%d", i, j), ir.Add(col0, colOf(j)))
					use.If(ir.LAnd(ir.Lt(row, m), ir.Lt(col, n)), func(st *ir.Block) {
						st.Store(c, ir.Add(ir.Mul(row, n), col), ir.Local(acc(i, j)))
					})
				})
			}
		})
	}
	return b.MustBuild()
}
