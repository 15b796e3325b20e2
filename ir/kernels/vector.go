package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// vectorWG is the workgroup width of the elementwise kernels.
const vectorWG = 256

// vectorSizes are the sizes worth testing for one-dimensional kernels of vectorWG
// lanes: empty, one element, primes, exact multiples of the workgroup, a large size.
func vectorSizes() []int { return []int{0, 1, 7, 61, 256, 257, 1021, 4096, 100_000} }

// vectorEPI is vector_add's default elements per invocation, and epiCandidates
// the values a tuner may try.
const vectorEPI = 4

// vectorEPI16 is vector_add_f16's default: twice vectorEPI, one chunk of
// vectorChunk16 elements (16 bytes) of each buffer per invocation, as many
// bytes as vector_add moves per buffer at its measured best (4 × 4). With
// vector_add's layout (2-byte accesses a grid apart) the f16 add reached 86% of
// torch.add f16 through CUDA and 77% through Vulkan on the H200 at epi 4.
const vectorEPI16 = 2 * vectorEPI

// vectorChunk16 is how many contiguous elements of each buffer an invocation
// of vector_add_f16 moves at a time: 8 halves, 16 bytes, which a backend can
// move with one wide access (see vectorAddChunkedProgram).
const vectorChunk16 = 8

var epiCandidates = []uint32{1, 2, 4, 8}

// epiCandidates16 are vector_add_f16's: one chunk or two.
var epiCandidates16 = []uint32{vectorChunk16, 2 * vectorChunk16}

// epiCovered16 is how many elements an invocation of vector_add_f16 covers at
// epi: epi rounded up to whole chunks.
func epiCovered16(epi uint32) uint32 {
	return max(epi+vectorChunk16-1, vectorChunk16) / vectorChunk16 * vectorChunk16
}

func vectorAdd() Kernel {
	inv := func(c Case) [3]uint32 {
		return [3]uint32{cover(c.Size, max(specU32(c, "epi", vectorEPI), 1)), 1, 1}
	}
	return Kernel{
		Name: "vector_add",
		OpID: "kiln.vector.add.f32",
		Doc: "out[i] = a[i] + b[i] on f32; each invocation adds epi elements (parameter, default 4, tunable 1, 2, 4, 8) " +
			"a grid apart; size is the number of elements",
		Sizes:       vectorSizes(),
		Program:     vectorAddProgram,
		Invocations: inv,
		NewCase: func(rng *rand.Rand, size int) Case {
			return withInvocations(Case{
				Size:         size,
				Inputs:       [][]byte{F32Bytes(randomF32(rng, size)), F32Bytes(randomF32(rng, size)), nil},
				OutputCounts: []uint32{0, 0, uint32(size)},
			}, inv, [3]uint32{vectorWG, 1, 1})
		},
		Flops: func(c Case) float64 { return float64(c.Size) },
		Reference: func(c Case) [][]byte {
			a, b := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
			out := make([]float32, c.OutputCounts[2])
			for i := range out {
				out[i] = a[i] + b[i]
			}
			return [][]byte{F32Bytes(out)}
		},
		// One correctly rounded add per element, as in the reference.
		Check: exact(ir.F32, "out"),
	}
}

// vectorAddProgram is a grid-stride add: invocation g of T (the grid's
// invocation count on axis 0) adds elements g + j·T for j < epi, so a grid of
// ceil(ceil(n/epi)/workgroup) workgroups covers n elements; the default epi = 4
// is the measured best on the H200 (4346 GB/s, against 3489 at epi = 1).
//
// An invocation first loads all its pairs (for j < min(epi, lanes), into
// registers; an index past the end of a buffer loads 0, the IR's bounds rule)
// and only then stores the sums whose index is in range. Loads ahead of stores
// let a compiler keep every load of the invocation in flight at once even when
// it cannot prove that out does not alias a or b: a loop of load-load-store
// steps keeps one step's loads in flight (measured on the H200 through
// Vulkan at epi 4: 3697 GB/s as a loop, 4345 loads first). The guards j < epi
// are constants once a backend folds the parameter, so only the lanes in use
// remain; the lanes are the largest candidate (8). An
// epi beyond the lanes (a value outside the candidates) adds the
// remaining elements in a plain loop (behind a guard that folds away too).
func vectorAddProgram() *ir.Program { return vectorAddOf("kiln.vector.add.f32", ir.F32) }

// vectorAddOf is vectorAddProgram named name on elements of float type t.
func vectorAddOf(name string, t ir.Type) *ir.Program {
	b := ir.NewBuilder(name, vectorWG, 1, 1)
	lanes := int(epiCandidates[len(epiCandidates)-1])
	epi := b.Tunable("epi", ir.U32, ir.LitU32(vectorEPI), u32Literals(epiCandidates)...)
	x := b.Buffer("a", t, ir.Read)
	y := b.Buffer("b", t, ir.Read)
	out := b.Buffer("out", t, ir.Write)
	zero := ir.Literal{Type: t} // +0 in every float type
	g := b.Let("g", ir.GlobalID(0))
	total := b.Let("total", ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0)))
	index := func(blk *ir.Block, name string, j ir.Expr) ir.Expr {
		return blk.Let(name, ir.Add(g, ir.Mul(j, total)))
	}
	xv, yv := func(j int) string { return fmt.Sprintf("x_%d", j) }, func(j int) string { return fmt.Sprintf("y_%d", j) }
	for j := range lanes {
		b.Var(xv(j), t, zero)
		b.Var(yv(j), t, zero)
	}
	for j := range lanes {
		b.If(ir.Lt(ir.LitU32(uint32(j)), epi), func(then *ir.Block) {
			i := index(then, fmt.Sprintf("load_%d", j), ir.LitU32(uint32(j)))
			then.Assign(xv(j), ir.Load(x, i))
			then.Assign(yv(j), ir.Load(y, i))
		})
	}
	for j := range lanes {
		b.If(ir.Lt(ir.LitU32(uint32(j)), epi), func(then *ir.Block) {
			i := index(then, fmt.Sprintf("store_%d", j), ir.LitU32(uint32(j)))
			then.If(ir.Lt(i, ir.Len(out)), func(in *ir.Block) {
				in.Store(out, i, ir.Add(ir.Local(xv(j)), ir.Local(yv(j))))
			})
		})
	}
	b.If(ir.Lt(ir.LitU32(uint32(lanes)), epi), func(more *ir.Block) {
		more.For("j", ir.U32, ir.LitU32(uint32(lanes)), epi, ir.LitU32(1), func(loop *ir.Block, j ir.Expr) {
			i := index(loop, "i", j)
			loop.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) {
				then.Store(out, i, ir.Add(ir.Load(x, i), ir.Load(y, i)))
			})
		})
	})
	return b.MustBuild()
}

// vectorAddChunkedProgram is vector_add_f16's program on elements of the
// 16-bit type t: invocation g of T adds chunks of vectorChunk16 contiguous
// elements, chunk g + j·T (elements (g + j·T)·8 + k for k < 8) for j <
// ceil(epi/8), so a grid of ceil(n / (8·ceil(epi/8))) invocations covers n
// elements and a warp's chunk j is 32 × 16 contiguous bytes. As in
// vectorAddProgram an invocation loads all its lanes (two chunks, the largest
// candidate) before it stores, an index past the end loads 0, and chunks
// beyond the lanes (epi > 16) add in a plain loop. Each chunk's eight loads
// of a buffer are consecutive statements at base+0 … base+7 with base a let,
// and so are its eight stores: the pattern the PTX and SPIR-V emitters move as
// one 16-byte access where it is aligned and in bounds (docs/design.md,
// "Wide 16-bit accesses"); the stores need no bounds test of their own, since
// a store out of bounds writes nothing.
func vectorAddChunkedProgram(name string, t ir.Type) *ir.Program {
	b := ir.NewBuilder(name, vectorWG, 1, 1)
	chunks := int(epiCandidates16[len(epiCandidates16)-1] / vectorChunk16)
	epi := b.Tunable("epi", ir.U32, ir.LitU32(vectorEPI16), u32Literals(epiCandidates16)...)
	x := b.Buffer("a", t, ir.Read)
	y := b.Buffer("b", t, ir.Read)
	out := b.Buffer("out", t, ir.Write)
	zero := ir.Literal{Type: t} // +0 in every float type
	g := b.Let("g", ir.GlobalID(0))
	total := b.Let("total", ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0)))
	w := ir.LitU32(vectorChunk16)
	base := func(blk *ir.Block, name string, j ir.Expr) ir.Expr {
		return blk.Let(name, ir.Mul(ir.Add(g, ir.Mul(j, total)), w))
	}
	at := func(base ir.Expr, k int) ir.Expr {
		if k == 0 {
			return base
		}
		return ir.Add(base, ir.LitU32(uint32(k)))
	}
	xv := func(j, k int) string { return fmt.Sprintf("x_%d_%d", j, k) }
	yv := func(j, k int) string { return fmt.Sprintf("y_%d_%d", j, k) }
	for j := range chunks {
		for k := range vectorChunk16 {
			b.Var(xv(j, k), t, zero)
			b.Var(yv(j, k), t, zero)
		}
	}
	// Chunk j > 0 is in use when j·8 < epi (a constant once epi is folded);
	// chunk 0 always is (epi rounds up to a multiple of 8, 0 included).
	inUse := func(j int) ir.Expr { return ir.Lt(ir.LitU32(uint32(j*vectorChunk16)), epi) }
	chunk := func(j int, body func(*ir.Block)) {
		if j == 0 {
			body(&b.Block)
			return
		}
		b.If(inUse(j), body)
	}
	for j := range chunks {
		chunk(j, func(then *ir.Block) {
			at0 := base(then, fmt.Sprintf("load_%d", j), ir.LitU32(uint32(j)))
			for k := range vectorChunk16 {
				then.Assign(xv(j, k), ir.Load(x, at(at0, k)))
			}
			for k := range vectorChunk16 {
				then.Assign(yv(j, k), ir.Load(y, at(at0, k)))
			}
		})
	}
	for j := range chunks {
		chunk(j, func(then *ir.Block) {
			at0 := base(then, fmt.Sprintf("store_%d", j), ir.LitU32(uint32(j)))
			for k := range vectorChunk16 {
				then.Store(out, at(at0, k), ir.Add(ir.Local(xv(j, k)), ir.Local(yv(j, k))))
			}
		})
	}
	b.If(inUse(chunks), func(more *ir.Block) {
		last := ir.Div(ir.Add(epi, ir.LitU32(vectorChunk16-1)), w)
		more.For("j", ir.U32, ir.LitU32(uint32(chunks)), last, ir.LitU32(1), func(loop *ir.Block, j ir.Expr) {
			at0 := base(loop, "chunk", j)
			loop.For("k", ir.U32, ir.LitU32(0), w, ir.LitU32(1), func(inner *ir.Block, k ir.Expr) {
				i := inner.Let("i", ir.Add(at0, k))
				inner.Store(out, i, ir.Add(ir.Load(x, i), ir.Load(y, i)))
			})
		})
	})
	return b.MustBuild()
}

func vectorAddF16() Kernel {
	inv := func(c Case) [3]uint32 {
		return [3]uint32{cover(c.Size, epiCovered16(specU32(c, "epi", vectorEPI16))), 1, 1}
	}
	return Kernel{
		Name: "vector_add_f16",
		OpID: "kiln.vector.add.f16",
		Doc: "out[i] = a[i] + b[i] on f16 (IR v1.2), correctly rounded in f16; each invocation adds epi elements " +
			"(parameter, default 8, tunable 8, 16; rounded up to a multiple of 8) in chunks of 8 contiguous elements " +
			"a grid apart; size is the number of elements",
		Sizes:       vectorSizes(),
		Program:     func() *ir.Program { return vectorAddChunkedProgram("kiln.vector.add.f16", ir.F16) },
		Invocations: inv,
		NewCase: func(rng *rand.Rand, size int) Case {
			return withInvocations(Case{
				Size:         size,
				Inputs:       [][]byte{F16Bytes(randomF16(rng, size)), F16Bytes(randomF16(rng, size)), nil},
				OutputCounts: []uint32{0, 0, uint32(size)},
			}, inv, [3]uint32{vectorWG, 1, 1})
		},
		Flops: func(c Case) float64 { return float64(c.Size) },
		Reference: func(c Case) [][]byte {
			a, b := c.Inputs[0], c.Inputs[1]
			out := make([]byte, 2*c.OutputCounts[2])
			for i := 0; i < len(out); i += 2 {
				// The correctly rounded f16 add, as the oracle computes it.
				sum := half.Add(half.Float16(binary.LittleEndian.Uint16(a[i:])), half.Float16(binary.LittleEndian.Uint16(b[i:])))
				binary.LittleEndian.PutUint16(out[i:], uint16(sum))
			}
			return [][]byte{out}
		},
		// One correctly rounded f16 add per element, as in the reference.
		Check: exact(ir.F16, "out"),
	}
}

// randomF16 draws n values from [-1, 1) scaled by 2^e for e in [-16, 15]
// (f16's subnormals, about 2^-24 to 2^-15, through its largest values)
// and rounded to f16, so sums round, overflow and reach subnormals.
func randomF16(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := (2*rng.Float32() - 1) * float32(math.Ldexp(1, rng.IntN(32)-16))
		out[i] = half.NewFloat16(v).Float32()
	}
	return out
}

// saxpyDefaultA is the default of saxpy's parameter a.
const saxpyDefaultA = 2.0

func saxpy() Kernel {
	return Kernel{
		Name:    "saxpy",
		OpID:    "kiln.vector.saxpy.f32",
		Doc:     "y[i] = a*x[i] + y[i] on f32, a a parameter (default 2, set at random by cases); size is the number of elements",
		Sizes:   vectorSizes(),
		Program: saxpyProgram,
		NewCase: func(rng *rand.Rand, size int) Case {
			c := Case{
				Size:         size,
				Grid:         [3]uint32{cover(size, vectorWG), 1, 1},
				Inputs:       [][]byte{F32Bytes(randomF32(rng, size)), F32Bytes(randomF32(rng, size))},
				OutputCounts: []uint32{0, 0},
			}
			c.Spec.Set("a", ir.SpecF32(8*rng.Float32()-4))
			return c
		},
		Reference: func(c Case) [][]byte {
			a := specF32(c, "a", saxpyDefaultA)
			x, y := BytesF32(c.Inputs[0]), BytesF32(c.Inputs[1])
			for i := range y {
				// The conversion rounds the product, so Go never fuses it into an FMA.
				y[i] = float32(a*x[i]) + y[i]
			}
			return [][]byte{F32Bytes(y)}
		},
		// A rounded multiply then a rounded add, never contracted, as in the reference.
		Check: exact(ir.F32, "y"),
	}
}

func saxpyProgram() *ir.Program {
	b := ir.NewBuilder("kiln.vector.saxpy.f32", vectorWG, 1, 1)
	a := b.Param("a", ir.F32, ir.LitF32(saxpyDefaultA))
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
	})
	return b.MustBuild()
}

// randomF32 draws n values uniformly from [-1, 1).
func randomF32(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 2*rng.Float32() - 1
	}
	return out
}

// randomU32 draws n values uniformly from all of u32.
func randomU32(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = rng.Uint32()
	}
	return out
}
