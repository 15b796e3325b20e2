package ptx

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The bulk tensor copy engine (TMA) path of the wgmma kernel (TCConfig.TMA):
// one invocation (the workgroup's first) copies each k step's A tile and B
// panels from global to shared memory with cp.async.bulk.tensor, through two
// tensor maps the launch builds on the host (Module.TensorMaps) and passes as
// 128-byte kernel parameters. The copies complete on the stage's mbarrier
// (arrive.expect_tx of the stage's bytes, then the copies' complete_tx), which
// every invocation waits on (try_wait.parity, the parity flipping each time the
// ring wraps) before the barrier that also frees the stage refilled next, as
// on the cp.async path. The maps' boxes land exactly in the swizzled layout the
// wgmma descriptors read (A: a TileM×TileK box swizzled in rows of 2·TileK
// bytes; B: TileN/64 panels of TileK rows of 64 columns, 128-byte swizzle).
//
// The copy engine fills elements outside the map's dimensions with zeros,
// which is the IR's bound semantics exactly when the buffer holds the whole
// matrix (rows·row length ≤ its element count, so no index wraps or leaves the
// buffer) and the workgroup's tile starts inside it (row0 < m, col0 < n, so
// the u32 bounds m - row0 and n - col0 do not wrap). The launch checks the
// first (TensorMap.Encoding) with the copy engine's own preconditions (a
// 16-byte aligned base, rows of a multiple of 16 bytes) and passes the
// kiln_tma flag; the kernel checks the second; a launch or a workgroup that
// fails either runs the cp.async loop of the same kernel instead.

// TensorMap says how a launch builds one tensor-map parameter of a module: a
// 2-D row-major view of a buffer for cuTensorMapEncodeTiled.
type TensorMap struct {
	// Param is the index in Module.Params of the map's TensorMapParam.
	Param int
	// Binding is the buffer the map views; Elem its element type.
	Binding uint32
	Elem    ir.Type
	// RowLength and Rows are the indices of the uniforms giving the length of
	// a row in elements (also the distance between rows) and the row count.
	RowLength, Rows uint32
	// BoxCols×BoxRows elements is the box one copy moves.
	BoxCols, BoxRows uint32
	// SwizzleBytes is the shared-memory swizzle span: 32, 64 or 128.
	SwizzleBytes uint32
}

// TensorMapEncoding is what cuTensorMapEncodeTiled takes for one map of one
// launch (rank 2, element strides 1, no interleave, zero fill out of bounds).
type TensorMapEncoding struct {
	Elem ir.Type
	// Base is the buffer's device address.
	Base uint64
	// Dims are the row length and the row count, in elements.
	Dims [2]uint64
	// RowStride is the distance between rows in bytes.
	RowStride uint64
	// Box is the box's columns and rows.
	Box          [2]uint32
	SwizzleBytes uint32
}

// tmaMaxDim bounds both dimensions of a map: the copies' coordinates are
// signed 32-bit, and a tile's coordinates run up to a dimension plus a box.
const tmaMaxDim = 1 << 30

// Encoding returns the map's encoding for a launch whose buffer is at base
// with count elements and whose uniforms hold uniforms (their 32 bits, by
// index). ok is false when the copy engine cannot take the launch (an
// unaligned base, rows not a multiple of 16 bytes, an empty or too large
// matrix) or its zero fill would differ from the IR's bounds (the buffer holds
// fewer than rows·row length elements): the kernel then runs its cp.async loop.
func (t TensorMap) Encoding(base uint64, count uint32, uniforms []uint32) (enc TensorMapEncoding, ok bool) {
	if int(max(t.RowLength, t.Rows)) >= len(uniforms) {
		return enc, false
	}
	cols, rows := uint64(uniforms[t.RowLength]), uint64(uniforms[t.Rows])
	es := uint64(t.Elem.Size())
	switch {
	case base%16 != 0, cols == 0, rows == 0, cols > tmaMaxDim, rows > tmaMaxDim,
		cols*es%16 != 0, cols*rows > uint64(count):
		return enc, false
	}
	return TensorMapEncoding{Elem: t.Elem, Base: base, Dims: [2]uint64{cols, rows}, RowStride: cols * es,
		Box: [2]uint32{t.BoxCols, t.BoxRows}, SwizzleBytes: t.SwizzleBytes}, true
}

// tmaParam and tmaFlagParam name the TMA path's kernel parameters.
func tmaParam(i int) string { return fmt.Sprintf("kiln_tmap%d", i) }

const tmaFlagParam = "kiln_tma"

// tensorMaps are the kernel's two maps (A, then B), their parameters after
// first parameters (Emit's): A is m rows of k elements in boxes of the A tile,
// B k rows of n in boxes of one 64-column panel of TileK rows.
func (c TCConfig) tensorMaps(first int) []TensorMap {
	return []TensorMap{
		{Param: first, Binding: c.A, Elem: c.Operand, RowLength: c.K, Rows: c.M,
			BoxCols: c.TileK, BoxRows: c.TileM, SwizzleBytes: c.rowBytesA()},
		{Param: first + 1, Binding: c.B, Elem: c.Operand, RowLength: c.N, Rows: c.K,
			BoxCols: 64, BoxRows: c.TileK, SwizzleBytes: 128},
	}
}

// tmaParams are the parameters the TMA path adds after Emit's: the two maps
// and the flag.
func (c TCConfig) tmaParams() []Param {
	return []Param{
		{Kind: TensorMapParam, Binding: 0, Name: tmaParam(0)},
		{Kind: TensorMapParam, Binding: 1, Name: tmaParam(1)},
		{Kind: TensorMapsReady, Name: tmaFlagParam},
	}
}

// barrierBytes is the shared memory of the TMA path's mbarriers (one per
// stage after the ring, with Release another per stage after them).
func (c TCConfig) barrierBytes() uint32 {
	switch {
	case c.Release:
		return 16 * c.Stages
	case c.TMA:
		return 8 * c.Stages
	}
	return 0
}

// useTMA sets a predicate: the launch built the maps (kiln_tma is not 0) and
// the workgroup's tile starts inside m and n.
func (w *tcWriter) useTMA() string {
	flag, p, q := w.r(), w.p(), w.p()
	w.i("ld.param.u32 %s, [%s]", flag, tmaFlagParam)
	w.i("setp.ne.u32 %s, %s, 0", p, flag)
	w.i("setp.lt.u32 %s, %s, %s", q, w.row0, w.m)
	w.i("and.pred %s, %s, %s", p, p, q)
	w.i("setp.lt.u32 %s, %s, %s", q, w.col0, w.n)
	w.i("and.pred %s, %s, %s", p, p, q)
	return p
}

// tmaLoop writes the TMA path's pipeline: mbarrier set-up, the prologue and
// the main loop, leaving the accumulators for the epilogue (and the wgmma
// groups retired).
func (w *tcWriter) tmaLoop() {
	c := w.cfg
	w.comment("TMA path: the bulk tensor copy engine stages A and B, completing on a stage's mbarrier")
	maps := [2]string{w.rd(), w.rd()}
	for i, m := range maps {
		t := w.rd()
		w.i("mov.b64 %s, %s", t, tmaParam(i))
		w.i("cvta.param.u64 %s, %s", m, t)
	}
	bars, leader := w.r(), w.p()
	w.i("add.u32 %s, %s, %d", bars, w.smem, c.ringBytes())
	w.i("setp.eq.u32 %s, %s, 0", leader, w.tid)
	for s := range c.Stages {
		w.i("@%s mbarrier.init.shared::cta.b64 [%s+%d], 1", leader, bars, 8*s)
	}
	if c.Release {
		for s := range c.Stages {
			w.i("@%s mbarrier.init.shared::cta.b64 [%s+%d], %d", leader, bars, 8*(c.Stages+s), c.Threads()/32)
		}
	}
	// the initialised barriers are then used by the copy engine (async proxy)
	w.i("fence.mbarrier_init.release.cluster")
	w.i("bar.sync 0")
	depth := c.prefetch()
	if c.Release {
		depth = c.Stages - 1
	}
	ld, widx := w.r(), w.r()
	w.i("mov.u32 %s, 0", ld)
	w.i("mov.u32 %s, 0", widx)
	w.comment(fmt.Sprintf("prologue: k steps 0..%d into stages 0..%d", depth-1, depth-1))
	for range depth {
		w.tmaIssue(maps, bars, leader, ld, widx)
		w.i("add.u32 %s, %s, 1", ld, ld)
		w.i("add.u32 %s, %s, 1", widx, widx)
	}
	w.comment("main loop: wait for step kt's stage, refill the stage freed by step kt-2 (or kt-1), compute step kt")
	kt, idx, phase := w.r(), w.r(), w.r()
	w.i("mov.u32 %s, 0", kt)
	w.i("mov.u32 %s, 0", idx)
	w.i("mov.u32 %s, 0", phase)
	loop, done := w.label(), w.label()
	w.at(loop)
	pl := w.p()
	w.i("setp.ge.u32 %s, %s, %s", pl, kt, w.ktiles)
	w.i("@%s bra %s", pl, done)
	bar := w.r()
	w.i("mad.lo.u32 %s, %s, 8, %s", bar, idx, bars)
	wait, ready := w.label(), w.p()
	w.at(wait)
	w.i("mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s", ready, bar, phase)
	w.i("@!%s bra %s", ready, wait)
	if c.Release {
		w.i("mul.lo.u32 %s, %s, %d", w.stage, idx, c.stageBytes())
		w.computeWgmma()
		w.waitWgmma()
		w.release(bars, kt, widx)
		w.tmaIssue(maps, bars, leader, ld, widx)
	} else {
		w.i("bar.sync 0")
		w.tmaIssue(maps, bars, leader, ld, widx)
		w.i("mul.lo.u32 %s, %s, %d", w.stage, idx, c.stageBytes())
		w.computeWgmma()
		w.waitWgmma()
	}
	w.i("add.u32 %s, %s, 1", kt, kt)
	w.i("add.u32 %s, %s, 1", ld, ld)
	w.i("add.u32 %s, %s, 1", widx, widx)
	w.wrap(widx, "")
	w.i("add.u32 %s, %s, 1", idx, idx)
	w.wrap(idx, phase)
	w.i("bra.uni %s", loop)
	w.at(done)
	if c.Overlap {
		w.i("wgmma.wait_group.sync.aligned 0")
	}
}

// release has lane 0 of every warp arrive on the empty mbarrier of step
// kt-1's stage (widx: the stage the copies of this step refill) once kt > 0:
// the warp's wgmma group of step kt-1 has retired.
func (w *tcWriter) release(bars, kt, widx string) {
	c := w.cfg
	p, q, e, tok := w.p(), w.p(), w.r(), w.rd()
	w.i("setp.eq.u32 %s, %s, 0", p, w.lane)
	w.i("setp.ne.u32 %s, %s, 0", q, kt)
	w.i("and.pred %s, %s, %s", p, p, q)
	w.i("mad.lo.u32 %s, %s, 8, %s", e, widx, bars)
	w.i("@%s mbarrier.arrive.shared::cta.b64 %s, [%s+%d]", p, tok, e, 8*c.Stages)
}

// wrap sets a stage index past the ring back to 0, flipping phase (when
// given) as it does.
func (w *tcWriter) wrap(idx, phase string) {
	p := w.p()
	w.i("setp.ge.u32 %s, %s, %d", p, idx, w.cfg.Stages)
	w.i("@%s mov.u32 %s, 0", p, idx)
	if phase != "" {
		w.i("@%s xor.b32 %s, %s, 1", p, phase, phase)
	}
}

// tmaIssue has the leader copy k step ld (when ld < ktiles) into stage widx:
// the stage's mbarrier expects the stage's bytes (the copy engine counts a
// box's zero-filled elements too), then A's box at (k0, row0) and B's panels
// at (col0 + 64p, k0).
func (w *tcWriter) tmaIssue(maps [2]string, bars, leader, ld, widx string) {
	c := w.cfg
	skip, p := w.label(), w.p()
	w.i("setp.lt.u32 %s, %s, %s", p, ld, w.ktiles)
	w.i("and.pred %s, %s, %s", p, p, leader)
	w.i("@!%s bra %s", p, skip)
	if c.Release {
		// from the second round of the ring on, the stage's last readers
		// released it: the phase ld/Stages - 1 of its empty mbarrier
		e, q, par, free, again := w.r(), w.r(), w.r(), w.p(), w.p()
		noWait, wait := w.label(), w.label()
		w.i("setp.lt.u32 %s, %s, %d", again, ld, c.Stages)
		w.i("@%s bra %s", again, noWait)
		w.i("mad.lo.u32 %s, %s, 8, %s", e, widx, bars)
		w.i("div.u32 %s, %s, %d", q, ld, c.Stages)
		w.i("add.u32 %s, %s, 1", par, q)
		w.i("and.b32 %s, %s, 1", par, par)
		w.at(wait)
		w.i("mbarrier.try_wait.parity.shared::cta.b64 %s, [%s+%d], %s", free, e, 8*c.Stages, par)
		w.i("@!%s bra %s", free, wait)
		w.at(noWait)
	}
	k0, sA, bar, tok := w.r(), w.r(), w.r(), w.rd()
	w.i("mul.lo.u32 %s, %s, %d", k0, ld, c.TileK)
	w.i("mad.lo.u32 %s, %s, %d, %s", sA, widx, c.stageBytes(), w.smem)
	w.i("mad.lo.u32 %s, %s, 8, %s", bar, widx, bars)
	w.i("mbarrier.arrive.expect_tx.shared::cta.b64 %s, [%s], %d", tok, bar, c.stageBytes())
	const copyOp = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
	w.i("%s [%s], [%s, {%s, %s}], [%s]", copyOp, sA, maps[0], k0, w.row0, bar)
	sB := w.r()
	w.i("add.u32 %s, %s, %d", sB, sA, c.TileM*c.rowBytesA())
	col := w.r()
	w.i("mov.u32 %s, %s", col, w.col0)
	for p := range c.TileN / 64 {
		if p > 0 {
			w.i("add.u32 %s, %s, 64", col, col)
		}
		w.i("%s [%s+%d], [%s, {%s, %s}], [%s]", copyOp, sB, p*c.TileK*128, maps[1], col, k0, bar)
	}
	w.at(skip)
}
