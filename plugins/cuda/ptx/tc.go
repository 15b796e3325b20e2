package ptx

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// The tensor-core matmul (issue 27): a kernel for programs of the matmul_tc shape
// (see matchTensorCoreMatmul) on the matrix instructions of sm_80 and later, in
// two paths; the module's first line names the path, tile, warps and stages.
//
// mma.sync (sm_80+): each workgroup computes a TileM×TileN block of c; its
// WarpsM×WarpsN warps each own a (TileM/WarpsM)×(TileN/WarpsN) part of it, held
// in registers as the accumulator fragments of mma.sync (m16n8k16 for bf16 and
// f16, m16n8k8 for tf32). A and B tiles are copied from global to shared memory
// with cp.async, Stages k steps in flight (a ring of shared stages, one cp.async
// group per step), and read into fragments with ldmatrix (.trans for B's 16-bit
// rows; plain 32-bit shared loads for tf32 B, which ldmatrix cannot transpose).
//
// wgmma (sm_90a, Wgmma): a warpgroup per 64 rows computes 64×TileN with
// wgmma.mma_async m64nNk16 (bf16, f16) or m64nNk8 (tf32), both operands read
// from the shared stages through matrix descriptors, the accumulators in
// registers. A is K-major (its rows as the buffer holds them); 16-bit B is read
// N-major (imm-trans-b), stored in panels of 64 columns; tf32 wgmma reads only
// K-major operands, so tf32 B is transposed on its way to shared memory through
// registers (16-byte loads, 4-byte stores) instead of cp.async. Overlap keeps
// one wgmma group running across the next step's wait and barrier. With TMA
// (bf16, f16) the bulk tensor copy engine fills the same stages in the same
// layout (tma.go), the cp.async loop staying in the kernel for the launches
// and tiles the copy engine cannot serve with the IR's bounds.
//
// Shared rows are XOR-swizzled in 16-byte chunks (chunk ^ key(row mod 8)), which
// keeps the copies and ldmatrix free of bank conflicts and is, on 1024-byte
// aligned stages, exactly the 32-, 64- and 128-byte swizzle modes wgmma reads.
//
// Bounds follow the IR exactly (docs/design.md, "IR v1.2"): a 16-byte chunk of a
// tile is copied by cp.async only when the buffers are 16-byte aligned, the strides
// keep every row 16-byte aligned and the whole chunk lies inside the bound and the
// buffer; any other chunk is read element by element with predicated loads, 0
// outside (so any M, N, K works, at the scalar path's speed only on the edges).
// Stores are masked by the bound and the buffer's element count.
//
// A k step whose tiles lie wholly inside the bounds and the buffers (checked
// once per step, the last index in 64 bits) copies with plain cp.async; a tile
// wholly inside c's bounds and count stores its pairs without per-element tests.
// With GroupRows the workgroups take their tiles in groups of tile rows, column
// by column, so the ones running at once share operand rows and columns in L2.
//
// Measured on an H200 (scripts/gpu-tc-run.sh, 4096³ unless said, TFLOP/s,
// medians of 3 rounds alternating with torch.matmul in the same process, SM
// clock 1980 MHz where not throttled): the modules the backend builds for the
// corpus matmul_tc: bf16 128×256×64 (two warpgroups, 256 invocations, 192 KiB
// of dynamic shared memory) 577 (83% of torch's 699; the identical kernel
// measured 541-579 across rounds), f16 520-568 (73-79% of 715), tf32
// 256×128×32 (512 invocations) 212 (58% of 366), 8192³ bf16 656 (85% of 776);
// the untuned 64×128×32 tile bf16 400 (57%). Four warpgroups on 256×128×64
// reach 509 bf16 (73%): each warpgroup's wgmma reads all of B's tile from shared
// memory, so two warpgroups of n256 read less per product. Before the copy and
// store fast paths, the grouped order and the 16×8-block tf32 transpose (same
// run): 256×128×64 bf16 454, tf32 171. Through kiln run --repeat, next to
// torch.matmul timed the same way on the same inputs: bf16 498 (70%), f16 487
// (71%), tf32 209 (54%), 8192³ bf16 547 (75%), default tile 399 (59%).
// TMA staging against cp.async, same modules otherwise, in rounds with
// torch.matmul in one process (scripts/gpu-tc-run.sh tma): 4096³ bf16 630 vs
// 548 (torch 650), f16 681 vs 605 (torch 702), 8192³ bf16 663 vs 571 (torch
// 652), default tile bf16 434 vs 402 (torch 570); kiln run --repeat bf16 621,
// f16 625 at 1980 MHz (torch 705-754 around them). Release (below) measured
// no faster: bf16 607 against TMA's 620 in the same rounds, 8192³ 637
// against 674.

// TCConfig selects a tensor-core matmul kernel and its interface.
type TCConfig struct {
	// Operand is the element type of a and b: ir.BF16, ir.F16, or ir.F32 (run as
	// tf32: the tensor cores use the top 19 bits of each value).
	Operand ir.Type
	// TileM×TileN is the workgroup's block of c, TileK the k step (the matrices'
	// shapes in the program: acc TileM×TileN, A TileM×TileK, B TileK×TileN).
	TileM, TileN, TileK uint32
	// WarpsM×WarpsN warps share the block; the workgroup has 32·WarpsM·WarpsN
	// invocations.
	WarpsM, WarpsN uint32
	// Stages is the depth of the copy pipeline (shared tiles in the ring), ≥ 2.
	Stages uint32
	// Target is the module's target (sm_80 or later).
	Target Target
	// Buffers and Uniforms are the program's counts of buffer bindings and
	// uniforms: the kernel takes Emit's parameters (a pointer per binding, an
	// element count per binding, a value per uniform).
	Buffers, Uniforms uint32
	// A, B, C are the bindings of a (M×K, row-major, stride K), b (K×N, stride N)
	// and c (M×N f32, stride N).
	A, B, C uint32
	// M, N, K are the indices of the uniforms holding the sizes.
	M, N, K uint32
	// Wgmma selects Hopper's warpgroup path (target sm_90a, bf16 and f16): each
	// warpgroup (4 warps) computes a 64×TileN block with wgmma.mma_async, its
	// operands read from the swizzled shared stages through matrix descriptors;
	// WarpsM is then 4·TileM/64 and WarpsN 1.
	Wgmma bool
	// Overlap (wgmma only, Stages ≥ 3) keeps one k step's wgmma running while
	// the next step waits for its copies: the ring then prefetches Stages-2 steps
	// ahead, since the stage of step kt-1 is still being read when step kt
	// refills one.
	Overlap bool
	// GroupRows, when over 1, orders the workgroups for the L2 cache: the grid's
	// linear order runs down groups of GroupRows tile rows, a column of the
	// group at a time, so the workgroups running at once share a's rows and b's
	// columns (the grid stays ceil(N/TileN) × ceil(M/TileM): workgroup (x, y)
	// computes another tile, each tile once).
	GroupRows uint32
	// TMA (wgmma with bf16 or f16 operands) stages A and B with the bulk
	// tensor copy engine (see tma.go) where the launch's values allow it, the
	// cp.async loop otherwise: the module then has the parameters of
	// tmaParams after Emit's and the tensor maps of tensorMaps.
	TMA bool
	// Release (TMA with Overlap) drops the k loop's workgroup barrier: every
	// warp releases a stage on its mbarrier of "empty" once its wgmma group
	// reading it retired, and the copying invocation waits for all of them
	// before refilling it, so the ring prefetches Stages-1 steps ahead.
	Release bool
	// DynamicShared declares the shared stages as dynamic shared memory (extern),
	// for rings over the 48 KiB a kernel may declare statically: the launch must
	// pass SharedBytes() as its dynamic shared memory, after raising the
	// function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to it.
	DynamicShared bool
}

// tcMaxStaticShared is the most static shared memory a kernel may declare;
// more needs dynamic shared memory (Options.DynamicShared).
const tcMaxStaticShared = 48 << 10

// tcMaxDynamicShared is the most shared memory a workgroup may have on sm_90
// (227 KiB); sm_80 allows 163 KiB.
const tcMaxDynamicShared = 227 << 10

// Threads is the workgroup's invocation count.
func (c TCConfig) Threads() uint32 { return 32 * c.WarpsM * c.WarpsN }

func (c TCConfig) elemBytes() uint32 { return uint32(c.Operand.Size()) }

// rowBytesA and rowBytesB are the shared tiles' row lengths in bytes.
func (c TCConfig) rowBytesA() uint32 { return c.TileK * c.elemBytes() }
func (c TCConfig) rowBytesB() uint32 { return c.TileN * c.elemBytes() }

// stageBytes is one pipeline stage: an A tile and a B tile.
func (c TCConfig) stageBytes() uint32 {
	return c.TileM*c.rowBytesA() + c.TileK*c.rowBytesB()
}

// ringBytes is the shared memory of the stages.
func (c TCConfig) ringBytes() uint32 { return c.Stages * c.stageBytes() }

// SharedBytes is the kernel's shared memory: the stages, then the TMA path's
// mbarriers.
func (c TCConfig) SharedBytes() uint32 { return c.ringBytes() + c.barrierBytes() }

// prefetch is how many k steps the ring holds ahead of the one computed.
func (c TCConfig) prefetch() uint32 {
	if c.Overlap {
		return c.Stages - 2
	}
	return c.Stages - 1
}

// kStep is the k extent of one mma instruction.
func (c TCConfig) kStep() uint32 {
	if c.Operand == ir.F32 {
		return 8
	}
	return 16
}

// mmaInst is the mma instruction for the operand type.
func (c TCConfig) mmaInst() string {
	switch c.Operand {
	case ir.BF16:
		return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
	case ir.F16:
		return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
	}
	return "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
}

// check says why the configuration cannot be emitted ("" when it can).
func (c TCConfig) check() string {
	pow2 := func(v uint32) bool { return v != 0 && v&(v-1) == 0 }
	if c.Wgmma {
		switch {
		case c.Operand != ir.BF16 && c.Operand != ir.F16 && c.Operand != ir.F32:
			return fmt.Sprintf("operand type %s has no wgmma (bf16, f16 and f32 as tf32 do)", c.Operand)
		case c.Target.SM < 90:
			return fmt.Sprintf("target %s has no wgmma (sm_90a does)", c.Target)
		case c.TileM == 0 || c.TileM%64 != 0 || c.WarpsM != 4*c.TileM/64 || c.WarpsN != 1:
			return fmt.Sprintf("wgmma tile %d rows over %d×%d warps is not one warpgroup per 64 rows", c.TileM, c.WarpsM, c.WarpsN)
		case c.TileN == 0 || c.TileN%64 != 0 || c.TileN > 256:
			return fmt.Sprintf("wgmma tile %d columns is not a multiple of 64 up to 256", c.TileN)
		case c.rowBytesA() != 32 && c.rowBytesA() != 64 && c.rowBytesA() != 128:
			return fmt.Sprintf("wgmma k step %d does not make a 32-, 64- or 128-byte swizzled row", c.TileK)
		case c.Operand == ir.F32 && (c.TileK%16 != 0 || (c.TileN/4)%c.transposeStep() != 0):
			return fmt.Sprintf("tf32 wgmma: %d warps do not transpose b's %d×%d tiles in whole 16×8 blocks", c.WarpsM, c.TileK, c.TileN)
		}
	}
	switch {
	case c.Operand != ir.BF16 && c.Operand != ir.F16 && c.Operand != ir.F32:
		return fmt.Sprintf("operand type %s has no tensor-core mma (bf16, f16 and f32 as tf32 do)", c.Operand)
	case c.Target.SM < 80:
		return fmt.Sprintf("target %s has no cp.async or bf16 mma (sm_80 and later do)", c.Target)
	case c.WarpsM == 0 || c.WarpsN == 0 || c.Threads() > 1024:
		return fmt.Sprintf("%d×%d warps is not a workgroup of 1 to 32 warps", c.WarpsM, c.WarpsN)
	case c.TileM == 0 || c.TileN == 0 || c.TileM%(16*c.WarpsM) != 0 || c.TileN%(16*c.WarpsN) != 0:
		return fmt.Sprintf("tile %d×%d does not split into 16×16 multiples over %d×%d warps", c.TileM, c.TileN, c.WarpsM, c.WarpsN)
	case c.TileK == 0 || c.TileK%16 != 0:
		return fmt.Sprintf("k step %d is not a multiple of 16", c.TileK)
	case c.Stages < 2 || c.Stages > 8:
		return fmt.Sprintf("%d pipeline stages is outside 2..8", c.Stages)
	case c.A >= c.Buffers || c.B >= c.Buffers || c.C >= c.Buffers:
		return "a binding of a, b or c is not among the program's buffers"
	case c.M >= c.Uniforms || c.N >= c.Uniforms || c.K >= c.Uniforms:
		return "a size uniform index is not among the program's uniforms"
	}
	for _, r := range []uint32{c.rowBytesA(), c.rowBytesB()} {
		if ch := r / 16; !(pow2(ch) && ch < 8) && ch%8 != 0 {
			return fmt.Sprintf("a shared row of %d bytes does not swizzle (16·2^i below 128 bytes or a multiple of 128)", r)
		}
	}
	t := c.Threads()
	for _, l := range []struct{ rows, chunks uint32 }{
		{c.TileM, c.rowBytesA() / 16}, {c.TileK, c.rowBytesB() / 16},
	} {
		if (l.rows*l.chunks)%t != 0 || t%l.chunks != 0 {
			return fmt.Sprintf("a %d×%d-chunk tile does not split evenly over %d invocations", l.rows, l.chunks, t)
		}
	}
	if c.TMA && (!c.Wgmma || c.Operand == ir.F32) {
		return "the TMA path needs the wgmma path and 16-bit operands (tf32 b is transposed through registers)"
	}
	if c.Release && (!c.TMA || !c.Overlap) {
		return "releasing stages on mbarriers needs the TMA path with overlap"
	}
	if c.Overlap && (!c.Wgmma || c.Stages < 3) {
		return "overlap needs the wgmma path and at least 3 stages"
	}
	if s := c.SharedBytes(); s > tcMaxStaticShared && !c.DynamicShared {
		return fmt.Sprintf("%d stages need %d bytes of shared memory, over the %d a kernel may declare statically (dynamic shared memory allows more)", c.Stages, s, tcMaxStaticShared)
	}
	if s := c.SharedBytes(); s > tcMaxDynamicShared {
		return fmt.Sprintf("%d stages need %d bytes of shared memory, over the %d a workgroup may have", c.Stages, s, tcMaxDynamicShared)
	}
	return ""
}

// emitTensorCoreMatmul writes the tensor-core kernel for cfg as a complete PTX
// module with Emit's interface (kernel EntryPoint, parameters as Emit orders
// them, .reqntid cfg.Threads()). The grid is ceil(N/TileN) × ceil(M/TileM)
// workgroups. ok is false, with the reason, when cfg cannot be emitted.
func emitTensorCoreMatmul(cfg TCConfig) (ptxText string, ok bool, reason string) {
	if r := cfg.check(); r != "" {
		return "", false, r
	}
	w := &tcWriter{cfg: cfg}
	w.kernel()
	return w.assemble(), true, ""
}

// tcWriter accumulates one kernel's instructions and numbers its registers and
// labels in emission order.
type tcWriter struct {
	cfg                   TCConfig
	body                  strings.Builder
	nr, nrd, np, nf, nlab int

	// registers set up once
	tid, lane, wm, wn   string
	aBase, bBase, cBase string
	lenA, lenB, lenC    string
	m, n, k             string
	smem                string
	aligned             string
	row0, col0          string
	// scaleD is the wgmma scale-d predicate (always true)
	scaleD string
	// the tf32 wgmma B loader (transposeOffsets)
	tKRow, tChunk, tIdx   string
	tOff                  []string
	tVals                 [][4]string
	boundM, boundN        string
	ktiles                string
	acc                   []string
	offA                  []string // per k step: A's ldmatrix lane offset within a stage
	offB                  []string // B's lane offsets within a stage (see fragmentOffsets)
	ldA, ldB              tcLoader
	aFrag, bFrag          []string
	stage, wstage, ldTile string
}

// tcLoader is one invocation's share of copying a tile from global to shared.
type tcLoader struct {
	iters, rowStep uint32
	// sRow is the distance in shared memory of the tile's consecutive rows.
	sRow uint32
	// row and chunk are the invocation's first row and its chunk of the tile;
	// idx the buffer index of its first element at k step 0 (u32, wrapping as
	// the IR's index).
	row, chunk, idx string
	// sOff is the swizzled offset of each of its chunks in the tile (one
	// register when rowStep is a multiple of 8 rows: the key repeats, and chunk
	// i is at sOff[0] + i·rowStep rows).
	sOff []string
}

func (w *tcWriter) r() string     { w.nr++; return fmt.Sprintf("%%r%d", w.nr) }
func (w *tcWriter) rd() string    { w.nrd++; return fmt.Sprintf("%%rd%d", w.nrd) }
func (w *tcWriter) p() string     { w.np++; return fmt.Sprintf("%%p%d", w.np) }
func (w *tcWriter) f() string     { w.nf++; return fmt.Sprintf("%%f%d", w.nf) }
func (w *tcWriter) label() string { w.nlab++; return fmt.Sprintf("TC_L%d", w.nlab) }

func (w *tcWriter) i(format string, args ...any) {
	w.body.WriteString("\t")
	fmt.Fprintf(&w.body, format, args...)
	w.body.WriteString(";\n")
}

func (w *tcWriter) at(lab string) { w.body.WriteString(lab + ":\n") }

func (w *tcWriter) comment(s string) { w.body.WriteString("\t// " + s + "\n") }

func (w *tcWriter) assemble() string {
	c := w.cfg
	var s strings.Builder
	path, isa, target, align := "mma.sync", tcISA, c.Target.scalar().String(), 128
	if c.Wgmma {
		path, isa, target, align = "wgmma", tcWgmmaISA, "sm_90a", 1024
	}
	staging := "cp.async"
	if c.TMA {
		staging = "TMA"
	}
	fmt.Fprintf(&s, "// kiln tensor-core matmul (path: %s %s, tile %dx%dx%d, warps %dx%d, %d %s stages)\n",
		path, tcOperandName(c.Operand), c.TileM, c.TileN, c.TileK, c.WarpsM, c.WarpsN, c.Stages, staging)
	if c.TMA {
		s.WriteString("// staging: the bulk tensor copy engine (cp.async.bulk.tensor + mbarrier, tensor maps kiln_tmap0/1 built by the launch); cp.async where a launch's values or a tile's start do not allow it (kiln_tma 0)\n")
	}
	fmt.Fprintf(&s, ".version %s\n.target %s\n.address_size 64\n\n", isa, target)
	if c.DynamicShared {
		// module scope: the launch sizes it
		fmt.Fprintf(&s, "// dynamic shared memory %d bytes\n", c.SharedBytes())
		fmt.Fprintf(&s, ".extern .shared .align %d .b8 kiln_tc_smem[];\n\n", align)
	}
	fmt.Fprintf(&s, ".visible .entry %s(\n", EntryPoint)
	var params []string
	for b := range c.Buffers {
		params = append(params, "\t.param .u64 "+bufParam(b))
	}
	for b := range c.Buffers {
		params = append(params, "\t.param .u32 "+lenParam(b))
	}
	for u := range c.Uniforms {
		params = append(params, "\t.param .b32 "+uniformParam(u))
	}
	if c.TMA {
		for _, p := range c.tmaParams() {
			if p.Kind == TensorMapParam {
				params = append(params, "\t.param .align 64 .b8 "+p.Name+"[128]")
			} else {
				params = append(params, "\t.param .u32 "+p.Name)
			}
		}
	}
	s.WriteString(strings.Join(params, ",\n"))
	fmt.Fprintf(&s, "\n)\n.reqntid %d, 1, 1\n{\n", c.Threads())
	fmt.Fprintf(&s, "\t.reg .pred %%p<%d>;\n\t.reg .b32 %%r<%d>;\n\t.reg .b64 %%rd<%d>;\n\t.reg .f32 %%f<%d>;\n",
		w.np+1, w.nr+1, w.nrd+1, w.nf+1)
	if !c.DynamicShared {
		fmt.Fprintf(&s, "\t.shared .align %d .b8 kiln_tc_smem[%d];\n\n", align, c.SharedBytes())
	}
	s.WriteString(w.body.String())
	s.WriteString("}\n")
	return s.String()
}

// tcISA is the PTX ISA the tensor-core modules declare: 7.0 has cp.async,
// ldmatrix and the bf16 and tf32 mma shapes.
const tcISA = "7.0"

// tcWgmmaISA is the ISA of the wgmma modules: 8.0 has wgmma and sm_90a.
const tcWgmmaISA = "8.0"

func tcOperandName(t ir.Type) string {
	if t == ir.F32 {
		return "tf32"
	}
	return t.String()
}

// swizzle writes the XOR key of a shared row: rows of chunks 16-byte chunks,
// the key taken from row mod 8 so that any 8 consecutive rows' chunk c land in
// 8 different 16-byte bank groups.
func (w *tcWriter) swizzle(row string, chunks uint32) string {
	x := w.r()
	if chunks >= 8 {
		w.i("and.b32 %s, %s, 7", x, row)
		return x
	}
	if chunks == 1 {
		w.i("mov.u32 %s, 0", x)
		return x
	}
	w.i("shr.u32 %s, %s, %d", x, row, bits.TrailingZeros32(8/chunks))
	w.i("and.b32 %s, %s, %d", x, x, chunks-1)
	return x
}

// sharedOffset writes row·rowBytes + (chunk ^ swizzle(row))·16.
func (w *tcWriter) sharedOffset(row, chunk string, rowBytes uint32) string {
	x := w.swizzle(row, rowBytes/16)
	o := w.r()
	w.i("xor.b32 %s, %s, %s", x, x, chunk)
	w.i("shl.b32 %s, %s, 4", x, x)
	w.i("mad.lo.u32 %s, %s, %d, %s", o, row, rowBytes, x)
	return o
}

func (w *tcWriter) kernel() {
	c := w.cfg
	w.comment("interface: Emit's parameters; c = a*b over uniforms m, n, k")
	load := func(op, name string) string {
		r := w.r()
		w.i("ld.param.%s %s, [%s]", op, r, name)
		return r
	}
	ptr := func(b uint32) string {
		raw, g := w.rd(), w.rd()
		w.i("ld.param.u64 %s, [%s]", raw, bufParam(b))
		w.i("cvta.to.global.u64 %s, %s", g, raw)
		return g
	}
	w.aBase, w.bBase, w.cBase = ptr(c.A), ptr(c.B), ptr(c.C)
	w.lenA, w.lenB, w.lenC = load("u32", lenParam(c.A)), load("u32", lenParam(c.B)), load("u32", lenParam(c.C))
	w.m, w.n, w.k = load("b32", uniformParam(c.M)), load("b32", uniformParam(c.N)), load("b32", uniformParam(c.K))
	w.tid, w.lane = w.r(), w.r()
	w.i("mov.u32 %s, %%tid.x", w.tid)
	w.i("and.b32 %s, %s, 31", w.lane, w.tid)
	warp := w.r()
	w.i("shr.u32 %s, %s, 5", warp, w.tid)
	w.wm, w.wn = w.r(), w.r()
	w.i("div.u32 %s, %s, %d", w.wm, warp, c.WarpsN)
	w.i("rem.u32 %s, %s, %d", w.wn, warp, c.WarpsN)
	bx, by := w.tileOrder()
	row0, col0 := w.r(), w.r()
	w.i("mul.lo.u32 %s, %s, %d", row0, by, c.TileM)
	w.i("mul.lo.u32 %s, %s, %d", col0, bx, c.TileN)
	w.row0, w.col0 = row0, col0
	w.comment("bounds as the IR states them: rows < m - row0, cols < n - col0 (u32)")
	w.boundM, w.boundN = w.r(), w.r()
	w.i("sub.u32 %s, %s, %s", w.boundM, w.m, row0)
	w.i("sub.u32 %s, %s, %s", w.boundN, w.n, col0)
	w.smem = w.r()
	w.i("mov.u32 %s, kiln_tc_smem", w.smem)
	w.alignment()
	// k steps: ceil(k / TileK) without overflow.
	w.ktiles = w.r()
	rest, pr := w.r(), w.p()
	w.i("div.u32 %s, %s, %d", w.ktiles, w.k, c.TileK)
	w.i("rem.u32 %s, %s, %d", rest, w.k, c.TileK)
	w.i("setp.ne.u32 %s, %s, 0", pr, rest)
	w.i("@%s add.u32 %s, %s, 1", pr, w.ktiles, w.ktiles)

	epc := 16 / c.elemBytes()
	w.ldA = w.loader(c.TileM, c.rowBytesA()/16, c.rowBytesA())
	// a's element (row0 + r, k0 + chunk·epc): (row0 + r)·k + chunk·epc, k0 added per step.
	w.ldA.idx = w.r()
	t := w.r()
	w.i("add.u32 %s, %s, %s", t, row0, w.ldA.row)
	w.i("mul.lo.u32 %s, %s, %s", w.ldA.idx, t, w.k)
	w.i("mad.lo.u32 %s, %s, %d, %s", w.ldA.idx, w.ldA.chunk, epc, w.ldA.idx)
	if c.Wgmma && c.Operand == ir.F32 {
		w.transposeOffsets()
	} else {
		w.ldB = w.loader(c.TileK, c.rowBytesB()/16, c.rowBytesB())
		if c.Wgmma {
			w.panelOffsets(&w.ldB)
		}
		// b's element (k0 + r, col0 + chunk·epc): r·n + col0 + chunk·epc, k0·n added per step.
		w.ldB.idx = w.r()
		w.i("mad.lo.u32 %s, %s, %s, %s", w.ldB.idx, w.ldB.row, w.n, col0)
		w.i("mad.lo.u32 %s, %s, %d, %s", w.ldB.idx, w.ldB.chunk, epc, w.ldB.idx)
	}

	if !c.Wgmma {
		w.fragmentOffsets()
	}
	w.acc = make([]string, w.mTiles()*w.nTiles()*4)
	for j := range w.acc {
		w.acc[j] = w.f()
		w.i("mov.f32 %s, 0f00000000", w.acc[j])
	}
	if c.Wgmma {
		w.scaleD = w.p()
		w.i("setp.lt.u32 %s, %s, 1024", w.scaleD, w.tid) // always: scale-d on
	} else {
		w.aFrag = make([]string, w.mTiles()*4)
		for j := range w.aFrag {
			w.aFrag[j] = w.r()
		}
		w.bFrag = make([]string, w.nTiles()*2)
		for j := range w.bFrag {
			w.bFrag[j] = w.r()
		}
	}

	if c.Wgmma && c.Operand == ir.F32 {
		w.tVals = make([][4]string, c.TileK*c.TileN/4/c.Threads())
		for it := range w.tVals {
			w.tVals[it] = [4]string{w.r(), w.r(), w.r(), w.r()}
		}
		none, z := w.label(), w.r()
		pz := w.p()
		w.i("setp.eq.u32 %s, %s, 0", pz, w.ktiles)
		w.i("@%s bra %s", pz, none)
		w.i("mov.u32 %s, 0", z)
		w.loadBT(z)
		w.at(none)
	}
	depth := c.prefetch()
	w.stage, w.wstage, w.ldTile = w.r(), w.r(), w.r()
	epilogue := w.label()
	if c.TMA {
		cpAsync := w.label()
		w.i("@!%s bra %s", w.useTMA(), cpAsync)
		w.tmaLoop()
		w.i("bra.uni %s", epilogue)
		w.at(cpAsync)
		w.comment("cp.async path: the launch could not build the tensor maps, or the tile starts past m or n")
	}
	w.comment(fmt.Sprintf("prologue: k steps 0..%d into stages 0..%d", depth-1, depth-1))
	w.i("mov.u32 %s, 0", w.ldTile)
	w.i("mov.u32 %s, 0", w.wstage)
	pro, proEnd := w.label(), w.label()
	w.at(pro)
	pp := w.p()
	w.i("setp.ge.u32 %s, %s, %d", pp, w.ldTile, depth)
	w.i("@%s bra %s", pp, proEnd)
	w.loadStep()
	w.i("add.u32 %s, %s, 1", w.ldTile, w.ldTile)
	w.i("add.u32 %s, %s, %d", w.wstage, w.wstage, c.stageBytes())
	w.i("bra.uni %s", pro)
	w.at(proEnd)

	w.comment("main loop: wait for step kt, refill the stage freed by step kt-1, compute step kt")
	kt := w.r()
	w.i("mov.u32 %s, 0", kt)
	w.i("mov.u32 %s, 0", w.stage)
	loop, done := w.label(), w.label()
	w.at(loop)
	pl := w.p()
	w.i("setp.ge.u32 %s, %s, %s", pl, kt, w.ktiles)
	w.i("@%s bra %s", pl, done)
	w.i("cp.async.wait_group %d", depth-1)
	if c.Wgmma {
		// the copies (generic proxy) are read by wgmma (async proxy)
		w.i("fence.proxy.async.shared::cta")
	}
	w.i("bar.sync 0")
	switch {
	case c.Wgmma && c.Operand == ir.F32:
		// b's copies wait for their loads: issue the wgmma first, so the
		// tensor cores run meanwhile
		w.computeWgmma()
		w.loadStep()
		w.waitWgmma()
	case c.Wgmma:
		// cp.async copies cost only their issue: start them first
		w.loadStep()
		w.computeWgmma()
		w.waitWgmma()
	default:
		w.loadStep()
		w.compute()
	}
	w.i("add.u32 %s, %s, 1", kt, kt)
	w.i("add.u32 %s, %s, 1", w.ldTile, w.ldTile)
	w.advance(w.stage)
	w.advance(w.wstage)
	w.i("bra.uni %s", loop)
	w.at(done)
	w.i("cp.async.wait_all")
	if c.Overlap {
		w.i("wgmma.wait_group.sync.aligned 0")
	}
	w.at(epilogue)
	w.store(row0, col0)
	w.i("ret")
}

// tileOrder returns the tile column and row the workgroup computes: its
// ctaid, or with GroupRows g over 1 the tile at its place in the grouped
// order: in group y/g (rows first..first+h-1, h = min(g, rows left)), at linear
// place i = (y - first)·nctaid.x + x (64 bits), row first + i mod h and column
// i / h, a bijection of the group onto itself.
func (w *tcWriter) tileOrder() (bx, by string) {
	g := w.cfg.GroupRows
	x, y := w.r(), w.r()
	w.i("mov.u32 %s, %%ctaid.x", x)
	w.i("mov.u32 %s, %%ctaid.y", y)
	if g <= 1 {
		return x, y
	}
	w.comment(fmt.Sprintf("tile order: groups of %d tile rows, column by column", g))
	nx, ny, first, h := w.r(), w.r(), w.r(), w.r()
	w.i("mov.u32 %s, %%nctaid.x", nx)
	w.i("mov.u32 %s, %%nctaid.y", ny)
	w.i("div.u32 %s, %s, %d", first, y, g)
	w.i("mul.lo.u32 %s, %s, %d", first, first, g)
	w.i("sub.u32 %s, %s, %s", h, ny, first)
	w.i("min.u32 %s, %s, %d", h, h, g)
	dy, i, h64, q := w.r(), w.rd(), w.rd(), w.rd()
	w.i("sub.u32 %s, %s, %s", dy, y, first)
	w.i("mul.wide.u32 %s, %s, %s", i, dy, nx)
	w.i("cvt.u64.u32 %s, %s", q, x)
	w.i("add.u64 %s, %s, %s", i, i, q)
	w.i("cvt.u64.u32 %s, %s", h64, h)
	w.i("rem.u64 %s, %s, %s", q, i, h64)
	w.i("div.u64 %s, %s, %s", i, i, h64)
	bx, by = w.r(), w.r()
	w.i("cvt.u32.u64 %s, %s", by, q)
	w.i("add.u32 %s, %s, %s", by, by, first)
	w.i("cvt.u32.u64 %s, %s", bx, i)
	return bx, by
}

// advance moves a stage offset to the next stage of the ring.
func (w *tcWriter) advance(reg string) {
	c := w.cfg
	p := w.p()
	w.i("add.u32 %s, %s, %d", reg, reg, c.stageBytes())
	w.i("setp.ge.u32 %s, %s, %d", p, reg, c.ringBytes())
	w.i("@%s mov.u32 %s, 0", p, reg)
}

// alignment sets w.aligned: cp.async may copy whole 16-byte chunks (a and b
// 16-byte aligned, k and n multiples of a chunk's elements).
func (w *tcWriter) alignment() {
	epc := 16 / w.cfg.elemBytes()
	w.aligned = w.p()
	x, t := w.rd(), w.r()
	w.i("or.b64 %s, %s, %s", x, w.aBase, w.bBase)
	w.i("cvt.u32.u64 %s, %s", t, x)
	w.i("and.b32 %s, %s, 15", t, t)
	u := w.r()
	w.i("or.b32 %s, %s, %s", u, w.k, w.n)
	w.i("and.b32 %s, %s, %d", u, u, epc-1)
	w.i("or.b32 %s, %s, %s", t, t, u)
	w.i("setp.eq.u32 %s, %s, 0", w.aligned, t)
}

// loader splits a rows×chunks tile over the invocations: invocation t copies
// chunk t mod chunks of rows t/chunks + i·rowStep.
func (w *tcWriter) loader(rows, chunks, rowBytes uint32) tcLoader {
	t := w.cfg.Threads()
	l := tcLoader{iters: rows * chunks / t, rowStep: t / chunks, sRow: rowBytes}
	l.row, l.chunk = w.r(), w.r()
	w.i("div.u32 %s, %s, %d", l.row, w.tid, chunks)
	w.i("rem.u32 %s, %s, %d", l.chunk, w.tid, chunks)
	l.sOff = []string{w.sharedOffset(l.row, l.chunk, rowBytes)}
	if l.rowStep%8 == 0 {
		return l
	}
	for it := uint32(1); it < l.iters; it++ {
		r := w.r()
		w.i("add.u32 %s, %s, %d", r, l.row, it*l.rowStep)
		l.sOff = append(l.sOff, w.sharedOffset(r, l.chunk, rowBytes))
	}
	return l
}

// loadStep copies k step ldTile into the stage at wstage when ldTile < ktiles,
// and commits a cp.async group either way (so the group count stays the step
// count).
func (w *tcWriter) loadStep() {
	c := w.cfg
	skip := w.label()
	p := w.p()
	w.i("setp.ge.u32 %s, %s, %s", p, w.ldTile, w.ktiles)
	w.i("@%s bra %s", p, skip)
	k0 := w.r()
	w.i("mul.lo.u32 %s, %s, %d", k0, w.ldTile, c.TileK)
	sA := w.r()
	w.i("add.u32 %s, %s, %s", sA, w.smem, w.wstage)
	sB := w.r()
	w.i("add.u32 %s, %s, %d", sB, sA, c.TileM*c.rowBytesA())
	// a: rows bounded by m - row0, columns by k - k0; b: rows by k - k0, columns by n - col0.
	kLeft := w.r()
	w.i("sub.u32 %s, %s, %s", kLeft, w.k, k0)
	idxA := w.r()
	w.i("add.u32 %s, %s, %s", idxA, w.ldA.idx, k0)
	tf32B := c.Wgmma && c.Operand == ir.F32
	var idxB string
	if !tf32B {
		idxB = w.r()
		w.i("mad.lo.u32 %s, %s, %s, %s", idxB, k0, w.n, w.ldB.idx)
	}
	// the whole step inside the bounds and the buffers: plain copies
	fast := w.p()
	w.i("mov.pred %s, %s", fast, w.aligned)
	w.tileInside(fast, w.row0, k0, w.k, w.boundM, kLeft, w.lenA, c.TileM, c.TileK)
	if !tf32B {
		w.tileInside(fast, k0, w.col0, w.n, kLeft, w.boundN, w.lenB, c.TileK, c.TileN)
	}
	slow, copied := w.label(), w.label()
	w.i("@!%s bra %s", fast, slow)
	w.copyTileFast(w.ldA, sA, idxA, w.aBase, w.k)
	if !tf32B {
		w.copyTileFast(w.ldB, sB, idxB, w.bBase, w.n)
	}
	w.i("bra.uni %s", copied)
	w.at(slow)
	w.copyTile(w.ldA, sA, idxA, w.aBase, w.lenA, w.boundM, kLeft, w.k, c.rowBytesA())
	if !tf32B {
		w.copyTile(w.ldB, sB, idxB, w.bBase, w.lenB, kLeft, w.boundN, w.n, c.rowBytesB())
	}
	w.at(copied)
	if tf32B {
		// this step's b, loaded one step ago; then the next step's
		w.storeBT(sB)
		last, nk0 := w.p(), w.r()
		w.i("add.u32 %s, %s, 1", nk0, w.ldTile)
		w.i("setp.ge.u32 %s, %s, %s", last, nk0, w.ktiles)
		noLoad := w.label()
		w.i("@%s bra %s", last, noLoad)
		w.i("add.u32 %s, %s, %d", nk0, k0, c.TileK)
		w.loadBT(nk0)
		w.at(noLoad)
	}
	w.at(skip)
	w.i("cp.async.commit_group")
}

// tileInside clears fast unless the rows×cols tile whose element (0, 0) is at
// buffer index r0·stride + c0 lies inside the bound (rows ≤ rowBound, cols ≤
// colBound) and its last index (r0 + rows - 1)·stride + c0 + cols - 1, computed
// in 64 bits, is below count: then no index of the tile wraps in u32 and every
// one is in range.
func (w *tcWriter) tileInside(fast, r0, c0, stride, rowBound, colBound, count string, rows, cols uint32) {
	p := w.p()
	w.i("setp.ge.u32 %s, %s, %d", p, rowBound, rows)
	w.i("and.pred %s, %s, %s", fast, fast, p)
	w.i("setp.ge.u32 %s, %s, %d", p, colBound, cols)
	w.i("and.pred %s, %s, %s", fast, fast, p)
	last, t, u := w.rd(), w.rd(), w.rd()
	w.i("cvt.u64.u32 %s, %s", t, r0)
	w.i("add.u64 %s, %s, %d", t, t, rows-1)
	w.i("cvt.u64.u32 %s, %s", u, stride)
	w.i("mul.lo.u64 %s, %s, %s", last, t, u)
	w.i("cvt.u64.u32 %s, %s", t, c0)
	w.i("add.u64 %s, %s, %s", last, last, t)
	w.i("add.u64 %s, %s, %d", last, last, cols-1)
	w.i("cvt.u64.u32 %s, %s", u, count)
	w.i("setp.lt.u64 %s, %s, %s", p, last, u)
	w.i("and.pred %s, %s, %s", fast, fast, p)
}

// copyTileFast is copyTile for a tile that tileInside found inside (and
// aligned): every chunk by cp.async, its address stepping in 64 bits.
func (w *tcWriter) copyTileFast(l tcLoader, sBase, idx, base, stride string) {
	es := w.cfg.elemBytes()
	src, step := w.rd(), w.rd()
	w.i("mul.wide.u32 %s, %s, %d", src, idx, es)
	w.i("add.u64 %s, %s, %s", src, src, base)
	w.i("mul.wide.u32 %s, %s, %d", step, stride, l.rowStep*es)
	dst := w.r()
	w.i("add.u32 %s, %s, %s", dst, sBase, l.sOff[0])
	for it := range l.iters {
		if it > 0 {
			w.i("add.u64 %s, %s, %s", src, src, step)
		}
		switch {
		case len(l.sOff) > 1 && it > 0:
			d := w.r()
			w.i("add.u32 %s, %s, %s", d, sBase, l.sOff[it])
			w.i("cp.async.cg.shared.global [%s], [%s], 16", d, src)
		default:
			w.i("cp.async.cg.shared.global [%s+%d], [%s], 16", dst, it*l.rowStep*l.sRow, src)
		}
	}
}

// copyTile copies an invocation's chunks of one tile: chunk i is row
// l.row + i·rowStep, elements l.chunk·epc.. of it, at buffer index idx +
// i·rowStep·stride; rows are bounded by rowBound, columns by colBound.
func (w *tcWriter) copyTile(l tcLoader, sBase, idx, base, count, rowBound, colBound, stride string, rowBytes uint32) {
	c := w.cfg
	es := c.elemBytes()
	epc := 16 / es
	col := w.r()
	w.i("mul.lo.u32 %s, %s, %d", col, l.chunk, epc)
	step := w.r()
	w.i("mul.lo.u32 %s, %s, %d", step, stride, l.rowStep)
	// colFull: the whole chunk is inside the column bound.
	colFull, ce := w.p(), w.r()
	w.i("add.u32 %s, %s, %d", ce, col, epc)
	w.i("setp.le.u32 %s, %s, %s", colFull, ce, colBound)
	cur := w.r()
	w.i("mov.u32 %s, %s", cur, idx)
	dst := w.r()
	w.i("add.u32 %s, %s, %s", dst, sBase, l.sOff[0])
	for it := range l.iters {
		if it > 0 {
			w.i("add.u32 %s, %s, %s", cur, cur, step)
			if len(l.sOff) > 1 {
				w.i("add.u32 %s, %s, %s", dst, sBase, l.sOff[it])
			} else {
				w.i("add.u32 %s, %s, %d", dst, dst, l.rowStep*l.sRow)
			}
		}
		slow, next := w.label(), w.label()
		rowIn, fast, last := w.p(), w.p(), w.r()
		rr := w.r()
		w.i("add.u32 %s, %s, %d", rr, l.row, it*l.rowStep)
		w.i("setp.lt.u32 %s, %s, %s", rowIn, rr, rowBound)
		// fast: aligned, row in, whole chunk in the columns, idx + epc ≤ count.
		w.i("sub.u32 %s, %s, %d", last, count, epc)
		w.i("setp.le.u32 %s, %s, %s", fast, cur, last)
		w.i("@%s setp.ge.u32 %s, %s, %d", fast, fast, count, epc)
		w.i("and.pred %s, %s, %s", fast, fast, rowIn)
		w.i("and.pred %s, %s, %s", fast, fast, colFull)
		w.i("and.pred %s, %s, %s", fast, fast, w.aligned)
		w.i("@!%s bra %s", fast, slow)
		src := w.rd()
		w.i("mul.wide.u32 %s, %s, %d", src, cur, es)
		w.i("add.u64 %s, %s, %s", src, src, base)
		w.i("cp.async.cg.shared.global [%s], [%s], 16", dst, src)
		w.i("bra.uni %s", next)
		w.at(slow)
		// element by element: 0 outside the bound or the buffer.
		words := make([]string, 4)
		for j := range words {
			words[j] = w.r()
			w.i("mov.b32 %s, 0", words[j])
		}
		for e := range epc {
			v, ie, ce2 := w.r(), w.r(), w.r()
			pe, pc := w.p(), w.p()
			w.i("add.u32 %s, %s, %d", ie, cur, e)
			w.i("add.u32 %s, %s, %d", ce2, col, e)
			w.i("setp.lt.u32 %s, %s, %s", pe, ie, count)
			w.i("setp.lt.u32 %s, %s, %s", pc, ce2, colBound)
			w.i("and.pred %s, %s, %s", pe, pe, pc)
			w.i("and.pred %s, %s, %s", pe, pe, rowIn)
			a := w.rd()
			w.i("mul.wide.u32 %s, %s, %d", a, ie, es)
			w.i("add.u64 %s, %s, %s", a, a, base)
			word := words[e*es/4]
			if es == 4 {
				w.i("@%s ld.global.b32 %s, [%s]", pe, word, a)
				continue
			}
			w.i("mov.b32 %s, 0", v)
			w.i("@%s ld.global.u16 %s, [%s]", pe, v, a)
			if e%2 == 1 {
				w.i("shl.b32 %s, %s, 16", v, v)
			}
			w.i("or.b32 %s, %s, %s", word, word, v)
		}
		w.i("st.shared.v4.b32 [%s], {%s, %s, %s, %s}", dst, words[0], words[1], words[2], words[3])
		w.at(next)
	}
}

// panelOffsets replaces a B loader's shared offsets by the wgmma panel layout:
// chunk c of row k at (c/8)·TileK·128 + k·128 + ((c mod 8) ^ (k mod 8))·16.
func (w *tcWriter) panelOffsets(l *tcLoader) {
	c := w.cfg
	l.sRow = 128
	rows := []string{l.row}
	if l.rowStep%8 != 0 {
		for it := uint32(1); it < l.iters; it++ {
			r := w.r()
			w.i("add.u32 %s, %s, %d", r, l.row, it*l.rowStep)
			rows = append(rows, r)
		}
	}
	panel, within := w.r(), w.r()
	w.i("shr.u32 %s, %s, 3", panel, l.chunk)
	w.i("and.b32 %s, %s, 7", within, l.chunk)
	l.sOff = l.sOff[:0]
	for _, r := range rows {
		o := w.sharedOffset(r, within, 128)
		w.i("mad.lo.u32 %s, %s, %d, %s", o, panel, c.TileK*128, o)
		l.sOff = append(l.sOff, o)
	}
}

func (w *tcWriter) warpTileM() uint32 {
	if w.cfg.Wgmma {
		return 16
	}
	return w.cfg.TileM / w.cfg.WarpsM
}
func (w *tcWriter) warpTileN() uint32 { return w.cfg.TileN / w.cfg.WarpsN }

// tcDescriptor is a wgmma shared-memory matrix descriptor's constant bits:
// leading and stride byte offsets (in 16-byte units) and the swizzle mode for
// rows of rowBytes (1: 128 bytes, 2: 64, 3: 32).
func tcDescriptor(lbo, sbo, rowBytes uint32) uint64 {
	mode := map[uint32]uint64{128: 1, 64: 2, 32: 3}[rowBytes]
	return uint64(lbo>>4)<<16 | uint64(sbo>>4)<<32 | mode<<62
}

// computeWgmma runs the stage at w.stage on the warpgroup's wgmma: A (64 rows of
// the warpgroup, K-major, rows of TileK elements swizzled as the stage holds
// them) and B (N-major panels) by descriptor, k steps of 16 advancing A's start
// by 32 bytes within its rows and B's by 16 rows; then waits for them, so the
// stage may be refilled after the next barrier.
func (w *tcWriter) computeWgmma() {
	c := w.cfg
	sA, sB := w.r(), w.r()
	w.i("add.u32 %s, %s, %s", sA, w.smem, w.stage)
	w.i("add.u32 %s, %s, %d", sB, sA, c.TileM*c.rowBytesA())
	wg := w.r()
	w.i("shr.u32 %s, %s, 7", wg, w.tid)
	w.i("mad.lo.u32 %s, %s, %d, %s", sA, wg, 64*c.rowBytesA(), sA)
	descA, descB := w.rd(), w.rd()
	desc := func(d, addr string, bits uint64) {
		t := w.rd()
		w.i("cvt.u64.u32 %s, %s", t, addr)
		w.i("shr.u64 %s, %s, 4", t, t)
		w.i("and.b64 %s, %s, 16383", t, t)
		w.i("or.b64 %s, %s, %d", d, t, bits)
	}
	desc(descA, sA, tcDescriptor(16, 8*c.rowBytesA(), c.rowBytesA()))
	// B: N-major panels (16-bit), or K-major like A (tf32, transposed when copied)
	inst := fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", c.TileN, c.Operand, c.Operand)
	tail, bStep := "1, 1, 0, 1", uint32(16*128)
	if c.Operand == ir.F32 {
		desc(descB, sB, tcDescriptor(16, 8*c.rowBytesA(), c.rowBytesA()))
		inst = fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk8.f32.tf32.tf32", c.TileN)
		tail, bStep = "1, 1", 32
	} else {
		desc(descB, sB, tcDescriptor(c.TileK*128, 1024, 128))
	}
	w.i("wgmma.fence.sync.aligned")
	acc := "{" + strings.Join(w.acc, ", ") + "}"
	for kk := range c.TileK / c.kStep() {
		da, db := descA, descB
		if kk > 0 {
			da, db = w.rd(), w.rd()
			w.i("add.s64 %s, %s, %d", da, descA, kk*32>>4)
			w.i("add.s64 %s, %s, %d", db, descB, kk*bStep>>4)
		}
		w.i("%s %s, %s, %s, %s, %s", inst, acc, da, db, w.scaleD, tail)
	}
	w.i("wgmma.commit_group.sync.aligned")
}

// waitWgmma waits for the wgmma groups that read the stage the next step
// refills: all of them, or with Overlap all but the one just issued.
func (w *tcWriter) waitWgmma() {
	if w.cfg.Overlap {
		w.i("wgmma.wait_group.sync.aligned 1")
	} else {
		w.i("wgmma.wait_group.sync.aligned 0")
	}
}

// transposeOffsets sets up the tf32 wgmma B loader: b's tile (TileK rows of
// TileN f32) is stored transposed, K-major like A (TileN rows of TileK
// values, swizzled), since tf32 wgmma reads only K-major operands. A warp
// copies 16×8 blocks: lane l takes k row 16·(warp mod TileK/16) + l/2 and the
// 4-column chunk 2·(warp / (TileK/16)) + l mod 2, then every transposeStep()
// chunks further (so a warp's 16-byte loads fill whole 32-byte sectors of 16
// rows, and its 4-byte stores, column j of its chunks into rows n = 4·chunk + j
// at column k, land in 32 different banks for 128-byte rows). The offsets repeat
// every 8 rows (one register per j).
func (w *tcWriter) transposeOffsets() {
	c := w.cfg
	rb := c.rowBytesA()
	kb := c.TileK / 16
	warp := w.r()
	w.i("shr.u32 %s, %s, 5", warp, w.tid)
	w.tKRow, w.tChunk = w.r(), w.r()
	half, odd := w.r(), w.r()
	w.i("shr.u32 %s, %s, 1", half, w.lane)
	w.i("and.b32 %s, %s, 1", odd, w.lane)
	w.i("rem.u32 %s, %s, %d", w.tKRow, warp, kb)
	w.i("mad.lo.u32 %s, %s, 16, %s", w.tKRow, w.tKRow, half)
	w.i("div.u32 %s, %s, %d", w.tChunk, warp, kb)
	w.i("mad.lo.u32 %s, %s, 2, %s", w.tChunk, w.tChunk, odd)
	kc, kw := w.r(), w.r()
	w.i("shr.u32 %s, %s, 2", kc, w.tKRow)
	w.i("and.b32 %s, %s, 3", kw, w.tKRow)
	w.i("shl.b32 %s, %s, 2", kw, kw)
	w.tOff = nil
	for j := range uint32(4) {
		n := w.r()
		w.i("mad.lo.u32 %s, %s, 4, %d", n, w.tChunk, j)
		o := w.sharedOffset(n, kc, rb)
		w.i("add.u32 %s, %s, %s", o, o, kw)
		w.tOff = append(w.tOff, o)
	}
	// b's element (k0 + k row, col0 + 4·chunk): k row·n + col0 + 4·chunk, k0·n added per step.
	w.tIdx = w.r()
	w.i("mad.lo.u32 %s, %s, %s, %s", w.tIdx, w.tKRow, w.n, w.col0)
	w.i("mad.lo.u32 %s, %s, 4, %s", w.tIdx, w.tChunk, w.tIdx)
}

// transposeStep is the distance in 4-column chunks between an invocation's
// chunks of b's tile on the tf32 wgmma path (see transposeOffsets).
func (c TCConfig) transposeStep() uint32 { return 2 * c.Threads() / 32 / (c.TileK / 16) }

// loadBT loads an invocation's part of b's tile for the k step starting at k0
// into the registers w.tVals (see transposeOffsets): 16 bytes from global
// memory when aligned and inside the bounds, else element by element (0
// outside). The values wait there for storeBT one step later, so the loads
// have a whole step to arrive.
func (w *tcWriter) loadBT(k0 string) {
	c := w.cfg
	step := c.transposeStep()
	kLeft, rowIn := w.r(), w.p()
	w.i("sub.u32 %s, %s, %s", kLeft, w.k, k0)
	w.i("setp.lt.u32 %s, %s, %s", rowIn, w.tKRow, kLeft)
	cur, col := w.r(), w.r()
	w.i("mad.lo.u32 %s, %s, %s, %s", cur, k0, w.n, w.tIdx)
	w.i("shl.b32 %s, %s, 2", col, w.tChunk)
	for it, vals := range w.tVals {
		if it > 0 {
			w.i("add.u32 %s, %s, %d", cur, cur, 4*step)
			w.i("add.u32 %s, %s, %d", col, col, 4*step)
		}
		slow, next := w.label(), w.label()
		fast, ce, last := w.p(), w.r(), w.r()
		w.i("add.u32 %s, %s, 4", ce, col)
		w.i("setp.le.u32 %s, %s, %s", fast, ce, w.boundN)
		w.i("sub.u32 %s, %s, 4", last, w.lenB)
		w.i("@%s setp.le.u32 %s, %s, %s", fast, fast, cur, last)
		w.i("@%s setp.ge.u32 %s, %s, 4", fast, fast, w.lenB)
		w.i("and.pred %s, %s, %s", fast, fast, rowIn)
		w.i("and.pred %s, %s, %s", fast, fast, w.aligned)
		w.i("@!%s bra %s", fast, slow)
		a := w.rd()
		w.i("mul.wide.u32 %s, %s, 4", a, cur)
		w.i("add.u64 %s, %s, %s", a, a, w.bBase)
		w.i("ld.global.v4.b32 {%s, %s, %s, %s}, [%s]", vals[0], vals[1], vals[2], vals[3], a)
		w.i("bra.uni %s", next)
		w.at(slow)
		for j := range uint32(4) {
			ie, cj, pe, pc := w.r(), w.r(), w.p(), w.p()
			w.i("mov.b32 %s, 0", vals[j])
			w.i("add.u32 %s, %s, %d", ie, cur, j)
			w.i("add.u32 %s, %s, %d", cj, col, j)
			w.i("setp.lt.u32 %s, %s, %s", pe, ie, w.lenB)
			w.i("setp.lt.u32 %s, %s, %s", pc, cj, w.boundN)
			w.i("and.pred %s, %s, %s", pe, pe, pc)
			w.i("and.pred %s, %s, %s", pe, pe, rowIn)
			ea := w.rd()
			w.i("mul.wide.u32 %s, %s, 4", ea, ie)
			w.i("add.u64 %s, %s, %s", ea, ea, w.bBase)
			w.i("@%s ld.global.b32 %s, [%s]", pe, vals[j], ea)
		}
		w.at(next)
	}
}

// storeBT stores w.tVals transposed into the B tile at sB: four 4-byte shared
// stores a chunk.
func (w *tcWriter) storeBT(sB string) {
	c := w.cfg
	step := c.transposeStep()
	for j := range 4 {
		d := w.r()
		w.i("add.u32 %s, %s, %s", d, sB, w.tOff[j])
		for it, vals := range w.tVals {
			w.i("st.shared.b32 [%s+%d], %s", d, uint32(it)*4*step*c.rowBytesA(), vals[j])
		}
	}
}
func (w *tcWriter) mTiles() uint32 { return w.warpTileM() / 16 }
func (w *tcWriter) nTiles() uint32 { return w.warpTileN() / 8 }

// fragmentOffsets computes each lane's ldmatrix and shared-load offsets within a
// stage.
//
// A (ldmatrix.x4 of a 16×16 b16 block, tf32: 16×8): lane l gives row l mod 16 of
// the warp's m tile, 16-byte chunk 2·kk + l/16 of k step kk; the key of row mod 8
// is the same for every m tile (16 rows apart), so one offset per k step serves
// them all, the m tile adding a constant.
//
// B, 16-bit (ldmatrix.x4.trans of a 16×16 block: n tiles 2j and 2j+1): lane l gives
// k row (l mod 8) + 8·((l/8) mod 2), chunk (warp's first column)/8 + 2j + l/16;
// k steps add whole rows and every 4th j adds 8 chunks, which the key leaves
// alone, so offsets for j < 4 serve all.
//
// B, tf32 (ld.shared.b32): b0 is (k = l mod 4, n = l/4), b1 k + 4, of n tile j;
// offsets for j < 4, two each.
func (w *tcWriter) fragmentOffsets() {
	c := w.cfg
	lane16, half := w.r(), w.r()
	w.i("and.b32 %s, %s, 15", lane16, w.lane)
	w.i("shr.u32 %s, %s, 4", half, w.lane)
	rowA := w.r()
	w.i("mad.lo.u32 %s, %s, %d, %s", rowA, w.wm, w.warpTileM(), lane16)
	for kk := range c.TileK / c.kStep() {
		ch := w.r()
		w.i("add.u32 %s, %s, %d", ch, half, 2*kk)
		w.offA = append(w.offA, w.sharedOffset(rowA, ch, c.rowBytesA()))
	}
	firstChunk := w.r()
	if c.Operand != ir.F32 {
		krow, t := w.r(), w.r()
		w.i("and.b32 %s, %s, 7", krow, w.lane)
		w.i("shr.u32 %s, %s, 3", t, w.lane)
		w.i("and.b32 %s, %s, 1", t, t)
		w.i("mad.lo.u32 %s, %s, 8, %s", krow, t, krow)
		w.i("mul.lo.u32 %s, %s, %d", firstChunk, w.wn, w.warpTileN()/8)
		w.i("add.u32 %s, %s, %s", firstChunk, firstChunk, half)
		for j := range min(w.nTiles()/2, 4) {
			ch := w.r()
			w.i("add.u32 %s, %s, %d", ch, firstChunk, 2*j)
			w.offB = append(w.offB, w.sharedOffset(krow, ch, c.rowBytesB()))
		}
		return
	}
	tig, g := w.r(), w.r()
	w.i("and.b32 %s, %s, 3", tig, w.lane)
	w.i("shr.u32 %s, %s, 2", g, w.lane)
	col := w.r()
	w.i("mad.lo.u32 %s, %s, %d, %s", col, w.wn, w.warpTileN(), g)
	for j := range min(w.nTiles(), 4) {
		cj, ch, within := w.r(), w.r(), w.r()
		w.i("add.u32 %s, %s, %d", cj, col, 8*j)
		w.i("shr.u32 %s, %s, 2", ch, cj)
		w.i("and.b32 %s, %s, 3", within, cj)
		w.i("shl.b32 %s, %s, 2", within, within)
		for h := range uint32(2) {
			kr := w.r()
			w.i("add.u32 %s, %s, %d", kr, tig, 4*h)
			o := w.sharedOffset(kr, ch, c.rowBytesB())
			w.i("add.u32 %s, %s, %s", o, o, within)
			w.offB = append(w.offB, o)
		}
	}
}

// compute runs the mma instructions of the stage at w.stage.
func (w *tcWriter) compute() {
	c := w.cfg
	sA, sB := w.r(), w.r()
	w.i("add.u32 %s, %s, %s", sA, w.smem, w.stage)
	w.i("add.u32 %s, %s, %d", sB, sA, c.TileM*c.rowBytesA())
	mt, nt := w.mTiles(), w.nTiles()
	for kk := range c.TileK / c.kStep() {
		ad := w.r()
		w.i("add.u32 %s, %s, %s", ad, sA, w.offA[kk])
		for mi := range mt {
			f := w.aFrag[mi*4 : mi*4+4]
			w.i("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%s, %s, %s, %s}, [%s+%d]", f[0], f[1], f[2], f[3], ad, mi*16*c.rowBytesA())
		}
		if c.Operand != ir.F32 {
			for j := range nt / 2 {
				f := w.bFrag[j*4 : j*4+4]
				bd := w.r()
				w.i("add.u32 %s, %s, %s", bd, sB, w.offB[j%4])
				w.i("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%s, %s, %s, %s}, [%s+%d]", f[0], f[1], f[2], f[3], bd,
					kk*16*c.rowBytesB()+(j/4)*128)
			}
		} else {
			for j := range nt {
				for h := range uint32(2) {
					bd := w.r()
					w.i("add.u32 %s, %s, %s", bd, sB, w.offB[(j%4)*2+h])
					w.i("ld.shared.b32 %s, [%s+%d]", w.bFrag[j*2+h], bd, kk*8*c.rowBytesB()+(j/4)*128)
				}
			}
		}
		for mi := range mt {
			a := w.aFrag[mi*4 : mi*4+4]
			for nj := range nt {
				b := w.bFrag[nj*2 : nj*2+2]
				d := w.acc[(mi*nt+nj)*4 : (mi*nt+nj)*4+4]
				w.i("%s {%s, %s, %s, %s}, {%s, %s, %s, %s}, {%s, %s}, {%s, %s, %s, %s}", c.mmaInst(),
					d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b[0], b[1], d[0], d[1], d[2], d[3])
			}
		}
	}
}

// store writes the accumulators: fragment element (g + 8h, 2·tig + e) of
// (m tile mi, n tile nj) to c[(row0 + r)·n + col0 + col] where r < m - row0,
// col < n - col0 and the index < c's count; an aligned pair in one st.v2.
func (w *tcWriter) store(row0, col0 string) {
	w.comment("epilogue: masked stores of the accumulators")
	mt, nt := w.mTiles(), w.nTiles()
	tig, g := w.r(), w.r()
	w.i("and.b32 %s, %s, 3", tig, w.lane)
	w.i("shr.u32 %s, %s, 2", g, w.lane)
	// the warp's first row and column: on the wgmma path warp w holds rows
	// 16w.. of the tile (warpgroup w/4, its quarter w mod 4) and every column.
	r0, c0 := w.r(), w.r()
	if w.cfg.Wgmma {
		w.i("shr.u32 %s, %s, 5", r0, w.tid)
		w.i("mad.lo.u32 %s, %s, 16, %s", r0, r0, g)
		w.i("add.u32 %s, %s, %s", c0, tig, tig)
	} else {
		w.i("mad.lo.u32 %s, %s, %d, %s", r0, w.wm, w.warpTileM(), g)
		w.i("mad.lo.u32 %s, %s, %d, %s", c0, w.wn, w.warpTileN(), tig)
		w.i("add.u32 %s, %s, %s", c0, c0, tig)
	}
	// pairOK: c's base 8-byte aligned and n even, so every pair (even column) is.
	pairOK, t := w.p(), w.r()
	w.i("cvt.u32.u64 %s, %s", t, w.cBase)
	w.i("and.b32 %s, %s, 7", t, t)
	u := w.r()
	w.i("and.b32 %s, %s, 1", u, w.n)
	w.i("or.b32 %s, %s, %s", t, t, u)
	w.i("setp.eq.u32 %s, %s, 0", pairOK, t)
	slowTile := w.label()
	w.fastStore(row0, col0, r0, c0, pairOK, slowTile)
	w.at(slowTile)
	for mi := range mt {
		for h := range uint32(2) {
			r, prow, ri := w.r(), w.p(), w.r()
			w.i("add.u32 %s, %s, %d", r, r0, mi*16+8*h)
			w.i("setp.lt.u32 %s, %s, %s", prow, r, w.boundM)
			w.i("add.u32 %s, %s, %s", ri, row0, r)
			w.i("mad.lo.u32 %s, %s, %s, %s", ri, ri, w.n, col0)
			for nj := range nt {
				d := w.acc[(mi*nt+nj)*4+2*h : (mi*nt+nj)*4+2*h+2]
				w.storePair(d, prow, pairOK, ri, c0, nj*8)
			}
		}
	}
}

// fastStore stores the whole tile without per-element tests and returns, when
// every element is inside both bounds and c's count: the tile's rows and
// columns within m - row0 and n - col0 (u32, as the IR computes them), its last
// index (row0 + TileM - 1)·n + col0 + TileN - 1, computed in 64 bits, below c's
// count (so no index wraps and every one is in range), and pairs aligned. Else
// it branches to slow.
func (w *tcWriter) fastStore(row0, col0, r0, c0, pairOK, slow string) {
	c := w.cfg
	mt, nt := w.mTiles(), w.nTiles()
	full := w.p()
	w.i("setp.ge.u32 %s, %s, %d", full, w.boundM, c.TileM)
	w.i("@%s setp.ge.u32 %s, %s, %d", full, full, w.boundN, c.TileN)
	w.i("and.pred %s, %s, %s", full, full, pairOK)
	last, t, u := w.rd(), w.rd(), w.rd()
	w.i("cvt.u64.u32 %s, %s", t, row0)
	w.i("add.u64 %s, %s, %d", t, t, c.TileM-1)
	w.i("cvt.u64.u32 %s, %s", u, w.n)
	w.i("mul.lo.u64 %s, %s, %s", last, t, u)
	w.i("cvt.u64.u32 %s, %s", t, col0)
	w.i("add.u64 %s, %s, %s", last, last, t)
	w.i("add.u64 %s, %s, %d", last, last, c.TileN-1)
	w.i("cvt.u64.u32 %s, %s", u, w.lenC)
	inC := w.p()
	w.i("setp.lt.u64 %s, %s, %s", inC, last, u)
	w.i("and.pred %s, %s, %s", full, full, inC)
	w.i("@!%s bra %s", full, slow)
	for mi := range mt {
		for h := range uint32(2) {
			ri := w.r()
			w.i("add.u32 %s, %s, %s", ri, row0, r0)
			w.i("add.u32 %s, %s, %d", ri, ri, mi*16+8*h)
			w.i("mad.lo.u32 %s, %s, %s, %s", ri, ri, w.n, col0)
			w.i("add.u32 %s, %s, %s", ri, ri, c0)
			a := w.rd()
			w.i("mul.wide.u32 %s, %s, 4", a, ri)
			w.i("add.u64 %s, %s, %s", a, a, w.cBase)
			for nj := range nt {
				d := w.acc[(mi*nt+nj)*4+2*h : (mi*nt+nj)*4+2*h+2]
				w.i("st.global.v2.f32 [%s+%d], {%s, %s}", a, 32*nj, d[0], d[1])
			}
		}
	}
	w.i("ret")
}

// storePair stores d[0], d[1] at columns c0+off and c0+off+1 of the row whose
// index starts at ri.
func (w *tcWriter) storePair(d []string, prow, pairOK, ri, c0 string, off uint32) {
	slow, next := w.label(), w.label()
	col, idx := w.r(), w.r()
	w.i("add.u32 %s, %s, %d", col, c0, off)
	w.i("add.u32 %s, %s, %s", idx, ri, col)
	p := [2]string{w.p(), w.p()}
	idxs := [2]string{idx, w.r()}
	w.i("add.u32 %s, %s, 1", idxs[1], idx)
	for e := range 2 {
		ce, pc := w.r(), w.p()
		w.i("add.u32 %s, %s, %d", ce, col, e)
		w.i("setp.lt.u32 %s, %s, %s", p[e], idxs[e], w.lenC)
		w.i("setp.lt.u32 %s, %s, %s", pc, ce, w.boundN)
		w.i("and.pred %s, %s, %s", p[e], p[e], pc)
		w.i("and.pred %s, %s, %s", p[e], p[e], prow)
	}
	both := w.p()
	w.i("and.pred %s, %s, %s", both, p[0], p[1])
	w.i("and.pred %s, %s, %s", both, both, pairOK)
	w.i("@!%s bra %s", both, slow)
	a := w.rd()
	w.i("mul.wide.u32 %s, %s, 4", a, idx)
	w.i("add.u64 %s, %s, %s", a, a, w.cBase)
	w.i("st.global.v2.f32 [%s], {%s, %s}", a, d[0], d[1])
	w.i("bra.uni %s", next)
	w.at(slow)
	for e := range 2 {
		a := w.rd()
		w.i("mul.wide.u32 %s, %s, 4", a, idxs[e])
		w.i("add.u64 %s, %s, %s", a, a, w.cBase)
		w.i("@%s st.global.f32 [%s], %s", p[e], a, d[e])
	}
	w.at(next)
}
