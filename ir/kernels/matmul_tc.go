package kernels

import (
	"fmt"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// matmul_tc's defaults: bf16 operands, a 64×128 accumulator tile per
// workgroup, a K step of 32 — the fastest tile measured on an H200's tensor
// cores (wgmma, 54% of cuBLAS at 4096³ bf16) whose operand tiles (12 KiB) also
// run on the scalar matrix paths; 256×128×64 measured faster (70%) but needs
// 192 KiB of dynamic shared memory on the tensor-core path (kiln tune tries it:
// tm=256 tn=128 tk=64).
const (
	tcType  = ir.BF16
	tcTileM = 64
	tcTileN = 128
	tcStep  = 32
)

// tcInvocations is matmul_tc's workgroup size for a tile of tm rows: a warp
// (32 invocations) per 16 rows, so one warpgroup (128) per 64 rows, the shape
// the CUDA backend's wgmma path takes (128 at the default tile, 512 for 256
// rows). Any other workgroup size runs too.
func tcInvocations(tm uint32) uint32 { return 2 * tm }

// tcTiles and tcSteps are the tile sides and K steps a tuner may try; a
// combination whose matrices exceed ir.MaxMatrixBytes does not build.
var (
	tcTiles = []uint32{32, 64, 128, 256}
	tcSteps = []uint32{16, 32, 64}
)

// tcOptions are matmul_tc's options (see Option): the operands' element type,
// tf32 precision for f32 operands, the accumulator tile's rows and columns, and
// the K step.
func tcOptions() []Option {
	u32s := func(vs []uint32) []ir.SpecValue {
		out := make([]ir.SpecValue, len(vs))
		for i, v := range vs {
			out[i] = ir.SpecU32(v)
		}
		return out
	}
	return []Option{
		{Name: "type", Doc: "element type of a and b", Default: ir.SpecDType(tcType),
			Candidates: []ir.SpecValue{ir.SpecDType(ir.BF16), ir.SpecDType(ir.F16), ir.SpecDType(ir.F32)}},
		{Name: "tf32", Doc: "f32 operands multiplied at tf32 precision", Default: ir.SpecBool(false),
			Candidates: []ir.SpecValue{ir.SpecBool(false), ir.SpecBool(true)}},
		{Name: "tm", Doc: "rows of c per workgroup", Default: ir.SpecU32(tcTileM), Candidates: u32s(tcTiles), Tune: true},
		{Name: "tn", Doc: "columns of c per workgroup", Default: ir.SpecU32(tcTileN), Candidates: u32s(tcTiles), Tune: true},
		{Name: "tk", Doc: "K step", Default: ir.SpecU32(tcStep), Candidates: u32s(tcSteps), Tune: true},
	}
}

// tcShape is one build of matmul_tc.
type tcShape struct {
	t          ir.Type
	tf32       bool
	tm, tn, tk uint32
}

// name is the program's name: "kiln.matrix.matmul_tc.bf16", with ".tf32" for
// f32 operands at tf32 precision.
func (s tcShape) name() string {
	n := "kiln.matrix.matmul_tc." + s.t.String()
	if s.tf32 {
		n += ".tf32"
	}
	return n
}

// check says why the shape does not build, nil when it does.
func (s tcShape) check() error {
	switch {
	case s.t != ir.F16 && s.t != ir.BF16 && s.t != ir.F32:
		return fmt.Errorf("matmul_tc: type %s is not a matrix operand type. Fix: use type=bf16, f16 or f32", s.t)
	case s.tf32 && s.t != ir.F32:
		return fmt.Errorf("matmul_tc: tf32 is a precision for f32 operands, not %s. Fix: use type=f32 with tf32=true", s.t)
	}
	for _, d := range []struct {
		name string
		v    uint32
	}{{"tm", s.tm}, {"tn", s.tn}, {"tk", s.tk}} {
		if d.v == 0 || d.v%ir.MatrixDimStep != 0 || d.v > ir.MaxMatrixDim {
			return fmt.Errorf("matmul_tc: %s=%d is not a matrix side. Fix: use a multiple of %d up to %d", d.name, d.v, ir.MatrixDimStep, ir.MaxMatrixDim)
		}
	}
	if b := s.tm*s.tn*4 + (s.tm+s.tn)*s.tk*s.t.Size(); b > ir.MaxMatrixBytes {
		return fmt.Errorf("matmul_tc: tm=%d tn=%d tk=%d of %s take %d bytes of matrices, over the %d a workgroup may hold. Fix: choose smaller tiles",
			s.tm, s.tn, s.tk, s.t, b, ir.MaxMatrixBytes)
	}
	return nil
}

func matmulTC() Kernel {
	k, err := tcKernel(tcShape{t: tcType, tm: tcTileM, tn: tcTileN, tk: tcStep})
	if err != nil {
		panic(err) // the defaults build
	}
	return k
}

// tcKernel is matmul_tc built for shape s.
func tcKernel(s tcShape) (Kernel, error) {
	if err := s.check(); err != nil {
		return Kernel{}, err
	}
	wg := [3]uint32{tcInvocations(s.tm), 1, 1}
	inv := func(c Case) [3]uint32 {
		u := BytesU32(c.Uniforms)
		w := workgroupSize(c, wg)
		return [3]uint32{cover(int(u[1]), s.tn) * w[0], cover(int(u[0]), s.tm) * w[1], w[2]}
	}
	return Kernel{
		Name: "matmul_tc",
		OpID: s.name(),
		Doc: "c (m×n, f32) = a (m×k) · b (k×n) with workgroup matrices (IR v1.2), a and b of option type (bf16, f16, f32; " +
			"tf32=true for f32 at tf32 precision); m, n, k are uniforms; each workgroup computes a tm×tn tile of c in " +
			"K steps of tk (options, default 64, 128, 32), 2·tm invocations by default (any workgroup size runs); inputs are small integers, so every " +
			"backend's sum is exact; size s is m = n = k = s",
		Sizes:       []int{0, 1, 17, 64, 100, 256},
		Program:     func() *ir.Program { return tcProgram(s) },
		Invocations: inv,
		Flops:       matmulFlops,
		NewCase: func(rng *rand.Rand, size int) Case {
			return withInvocations(Case{
				Size:         size,
				Inputs:       [][]byte{FloatBytes(s.t, smallInts(rng, size*size)), FloatBytes(s.t, smallInts(rng, size*size)), nil},
				OutputCounts: []uint32{0, 0, uint32(size * size)},
				Uniforms:     U32Bytes([]uint32{uint32(size), uint32(size), uint32(size)}),
			}, inv, wg)
		},
		Reference: func(c Case) [][]byte {
			u := BytesU32(c.Uniforms)
			out := make([]float32, c.OutputCounts[2])
			matmulInto(out, BytesFloat(s.t, c.Inputs[0]), BytesFloat(s.t, c.Inputs[1]), int(u[0]), int(u[1]), int(u[2]))
			return [][]byte{F32Bytes(out)}
		},
		// Small integers: every product and partial sum is exact in f32 (and in
		// tf32), so any order of the K-sum gives the reference's bits.
		Check:   exact(ir.F32, "c"),
		Options: tcOptions(),
		Build: func(opts ir.SpecMap) (Kernel, error) {
			return tcKernel(tcShape{t: optType(opts, "type"), tf32: optBool(opts, "tf32"),
				tm: optU32(opts, "tm"), tn: optU32(opts, "tn"), tk: optU32(opts, "tk")})
		},
	}, nil
}

// smallInts draws n integers from [-3, 3]: exact in f16, bf16 and tf32, with
// products of at most 9, so a K-sum stays exact in f32 up to K = 2^24/9.
func smallInts(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.IntN(7) - 3)
	}
	return out
}

// tcProgram is the matrix pattern of docs/design.md, "IR v1.2": workgroup
// (x, y) owns the tm×tn tile of c at row y·tm, column x·tn; it fills its
// accumulator with 0, then for each K step loads the tm×tk block of a and the
// tk×tn block of b (bounded: 0 past the matrices' edges) and accumulates their
// product, and stores the tile bounded to c's edges. Every operand is uniform
// (uniforms, workgroup ids, literals), so the statements are collective.
func tcProgram(s tcShape) *ir.Program {
	b := ir.NewBuilder(s.name(), tcInvocations(s.tm), 1, 1)
	m, n, k, a, bm, c := matmulOperands(b, s.t)
	acc := b.Matrix("acc", ir.F32, s.tm, s.tn)
	at := b.Matrix("a_tile", s.t, s.tm, s.tk)
	bt := b.Matrix("b_tile", s.t, s.tk, s.tn)
	row0 := b.Let("row0", ir.Mul(ir.WorkgroupID(1), ir.LitU32(s.tm)))
	col0 := b.Let("col0", ir.Mul(ir.WorkgroupID(0), ir.LitU32(s.tn)))
	rows := b.Let("rows", ir.Sub(m, row0))
	cols := b.Let("cols", ir.Sub(n, col0))
	b.MatrixFill(acc, ir.LitF32(0))
	b.For("k0", ir.U32, ir.LitU32(0), k, ir.LitU32(s.tk), func(loop *ir.Block, k0 ir.Expr) {
		depth := loop.Let("depth", ir.Sub(k, k0))
		loop.MatrixLoadBounded(at, a, ir.Add(ir.Mul(row0, k), k0), k, ir.RowMajor, rows, depth)
		loop.MatrixLoadBounded(bt, bm, ir.Add(ir.Mul(k0, n), col0), n, ir.RowMajor, depth, cols)
		if s.tf32 {
			loop.MatrixMMATF32(acc, at, bt)
		} else {
			loop.MatrixMMA(acc, at, bt)
		}
	})
	b.MatrixStoreBounded(acc, c, ir.Add(ir.Mul(row0, n), col0), n, ir.RowMajor, rows, cols)
	return b.MustBuild()
}
