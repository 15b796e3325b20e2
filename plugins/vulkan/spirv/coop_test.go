package spirv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// coopTarget is an NVIDIA-like device: fullTarget with 16×16×16 f16 and bf16
// cooperative matrices, subgroups of 32 and the memory model's device scope.
var coopTarget = func() Target {
	t := fullTarget
	t.Coop = CoopTarget{F16: true, BF16: true, SubgroupSize: 32, DeviceScope: true}
	return t
}()

// halfInputs is count random values of typ (f16 or bf16) as 2-byte elements:
// integers in [-3, 3] when small, else values with fractions across a few
// binades, so sums round.
func halfInputs(rng *rand.Rand, typ ir.Type, count int, small bool) []byte {
	out := make([]byte, 2*count)
	for i := range count {
		x := float32(rng.IntN(7) - 3)
		if !small {
			x = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(6)-3)))
		}
		bits := uint16(half.NewBFloat16(x))
		if typ == ir.F16 {
			bits = uint16(half.NewFloat16(x))
		}
		binary.LittleEndian.PutUint16(out[2*i:], bits)
	}
	return out
}

// coopRun emits p for target with workgroup size wg, checks that it took
// the path want, runs it on the interpreter and compares every output, bit
// for bit, with the scalar path's (fullTarget) on the interpreter (the
// reference interpreter, ir/interp, has no matrices yet; the scalar path is
// checked against Go references by the IR v1.2 checks).
func coopRun(t *testing.T, p *ir.Program, target Target, want string, c kernels.Case) {
	t.Helper()
	emit := func(target Target, want string) [][]byte {
		t.Helper()
		target.WorkgroupSize = c.WorkgroupSize
		m, err := EmitFor(p, target)
		if err != nil {
			t.Fatalf("EmitFor: %v", err)
		}
		if m.MatrixPath != want {
			t.Fatalf("matrix path %q, want %q", m.MatrixPath, want)
		}
		out, err := dispatchCase(p, m, c, c.Uniforms, [3]uint32{1 << 16, 1 << 16, 1 << 16})
		if err != nil {
			t.Fatalf("interpreter, %s path: %v", want, err)
		}
		return out
	}
	got := emit(target, want)
	ref := emit(fullTarget, MatrixPathScalar)
	for i := range ref {
		if !bytes.Equal(got[i], ref[i]) {
			for j := 0; j+4 <= len(ref[i]); j += 4 {
				if !bytes.Equal(got[i][j:j+4], ref[i][j:j+4]) {
					t.Fatalf("output %d differs first at byte %d: % x, want % x", i, j, got[i][j:j+4], ref[i][j:j+4])
				}
			}
			t.Fatalf("output %d differs", i)
		}
	}
}

// TestCoopMatmulOnTheInterpreter runs matmul_tc on the cooperative path,
// interpreted, bit for bit against the reference interpreter (whose sums run
// in k order, as the interpreter's MulAdd does): whole tiles moved directly,
// ragged edges and misaligned strides through the scalar lowering, several
// workgroup sizes (subgroups holding 2×2, 1×2, 1×1 tiles, and idle ones).
// Every access of the emitted module stays inside the buffers (the
// interpreter fails on one outside).
func TestCoopMatmulOnTheInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		typ        ir.Type
		tm, tn, tk uint32
		inv        uint32
		m, n, k    int
		small      bool
	}{
		{ir.BF16, 64, 64, 32, 128, 64, 64, 64, true},
		{ir.F16, 64, 64, 32, 128, 128, 64, 32, false},
		{ir.BF16, 64, 64, 32, 128, 100, 72, 40, false},
		{ir.F16, 32, 32, 16, 64, 33, 17, 24, false},
		{ir.F16, 32, 64, 32, 256, 64, 64, 48, true},
		{ir.BF16, 16, 16, 16, 128, 20, 16, 16, false},
		{ir.BF16, 32, 32, 32, 32, 32, 32, 64, false},
	} {
		name := fmt.Sprintf("%s/tile%dx%dx%d/wg%d/%dx%dx%d", tc.typ, tc.tm, tc.tn, tc.tk, tc.inv, tc.m, tc.n, tc.k)
		t.Run(name, func(t *testing.T) {
			c := kernels.Case{
				WorkgroupSize: [3]uint32{tc.inv, 1, 1},
				Grid:          [3]uint32{(uint32(tc.n) + tc.tn - 1) / tc.tn, (uint32(tc.m) + tc.tm - 1) / tc.tm, 1},
				Inputs:        [][]byte{halfInputs(rng, tc.typ, tc.m*tc.k, tc.small), halfInputs(rng, tc.typ, tc.k*tc.n, tc.small), nil},
				OutputCounts:  []uint32{0, 0, uint32(tc.m * tc.n)},
				Uniforms:      kernels.U32Bytes([]uint32{uint32(tc.m), uint32(tc.n), uint32(tc.k)}),
			}
			coopRun(t, gputest.TCProgram(tc.typ, false, tc.tm, tc.tn, tc.tk, tc.inv), coopTarget, MatrixPathCooperative, c)
		})
	}
}

// coopVariety exercises every matrix statement on the cooperative path:
// a register accumulator loaded column-major from a buffer (bounded), an
// operand loaded from a buffer and stored to a shared array, an operand
// loaded column-major from that shared array, a fill, two cooperative mmas,
// converts out of and into the register matrix (spill, reload), an f32 mma
// on the scalar lowering with the register matrix as its accumulator, and
// bounded stores of the register matrix and a converted one. Uniforms u0..u7:
// acc's offset, stride and bound rows, cols; the store's offset, stride and
// bound rows, cols.
func coopVariety(inv uint32) *ir.Program {
	b := ir.NewBuilder("coop_variety", inv, 1, 1)
	var u [8]ir.Expr
	for i := range u {
		u[i] = b.Uniform(fmt.Sprintf("u%d", i), ir.U32)
	}
	x := b.Buffer("x", ir.F16, ir.Read)
	y := b.Buffer("y", ir.F32, ir.Read)
	o := b.Buffer("o", ir.F32, ir.Write)
	o16 := b.Buffer("o16", ir.F16, ir.Write)
	s := b.Shared("s", ir.F16, 32*16)
	acc := b.Matrix("acc", ir.F32, 32, 32)
	a := b.Matrix("a", ir.F16, 32, 16)
	bt := b.Matrix("b", ir.F16, 16, 32)
	h := b.Matrix("h", ir.F16, 32, 32)
	f := b.Matrix("f", ir.F32, 32, 16)
	g := b.Matrix("g", ir.F32, 16, 32)
	b.MatrixLoadBounded(acc, y, u[0], u[1], ir.ColMajor, u[2], u[3])
	b.MatrixLoad(a, x, ir.LitU32(8), ir.LitU32(24), ir.RowMajor)
	b.MatrixStore(a, s, ir.LitU32(0), ir.LitU32(16), ir.RowMajor)
	b.MatrixLoad(bt, s, ir.LitU32(0), ir.LitU32(16), ir.ColMajor)
	b.MatrixMMA(acc, a, bt)
	b.MatrixConvert(h, acc)
	b.MatrixFill(bt, ir.LitF16(0.5))
	b.MatrixMMA(acc, a, bt)
	b.MatrixConvert(f, a)
	b.MatrixFill(g, ir.LitF32(0.25))
	b.MatrixMMA(acc, f, g)
	b.MatrixStoreBounded(acc, o, u[4], u[5], ir.RowMajor, u[6], u[7])
	b.MatrixStore(h, o16, ir.LitU32(0), ir.LitU32(32), ir.RowMajor)
	b.MatrixConvert(acc, h)
	b.MatrixStoreBounded(acc, o, ir.Add(u[4], ir.LitU32(2048)), u[5], ir.ColMajor, u[6], u[7])
	return b.MustBuild()
}

// TestCoopVarietyOnTheInterpreter runs coopVariety on the cooperative path,
// interpreted, against the scalar path: tiles moved directly (aligned, in
// range), through the lowering (misaligned offsets and strides, bounds inside
// the matrix, buffers too short, overlapping stores of a stride below the
// row), with 64 and 128 invocations.
func TestCoopVarietyOnTheInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f32s := func(n int) []byte {
		out := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(rng.IntN(9)-4)/4))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		yCount int
		oCount uint32
		u      [8]uint32
	}{
		{"direct", 4096, 4096, [8]uint32{64, 40, 32, 32, 0, 32, 32, 32}},
		{"misaligned", 4096, 4096, [8]uint32{3, 37, 32, 32, 5, 33, 32, 32}},
		{"bounded", 4096, 4096, [8]uint32{0, 32, 17, 30, 0, 32, 20, 9}},
		{"short buffers", 700, 1500, [8]uint32{4, 32, 32, 32, 8, 40, 32, 32}},
		{"overlapping store", 4096, 4096, [8]uint32{0, 32, 32, 32, 16, 8, 32, 32}},
		{"wrapping store", 4096, 4096, [8]uint32{0, 32, 32, 32, 100, 0x80000000, 32, 32}},
	} {
		for _, inv := range []uint32{64, 128} {
			t.Run(fmt.Sprintf("%s/wg%d", tc.name, inv), func(t *testing.T) {
				c := kernels.Case{
					WorkgroupSize: [3]uint32{inv, 1, 1},
					Grid:          [3]uint32{1, 1, 1},
					Inputs:        [][]byte{halfInputs(rng, ir.F16, 8+31*24+16, true), f32s(tc.yCount), nil, nil},
					OutputCounts:  []uint32{0, 0, tc.oCount, 32 * 32},
					Uniforms:      kernels.U32Bytes(tc.u[:]),
				}
				coopRun(t, coopVariety(inv), coopTarget, MatrixPathCooperative, c)
			})
		}
	}
}

// TestCorpusMatmulTCOnTheCooperativePath runs the corpus's matmul_tc (bf16
// and f16, default tiles) on the cooperative path, interpreted, against the
// kernel's own Go reference at its sizes up to 100.
func TestCorpusMatmulTCOnTheCooperativePath(t *testing.T) {
	base, ok := kernels.Lookup("matmul_tc")
	if !ok {
		t.Fatal("no matmul_tc in the corpus")
	}
	for _, typ := range []ir.Type{ir.BF16, ir.F16} {
		var opts ir.SpecMap
		for _, o := range base.Options {
			opts.Set(o.Name, o.Default)
		}
		opts.Set("type", ir.SpecDType(typ))
		k, err := base.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range k.Sizes {
			if size > 100 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", typ, size), func(t *testing.T) {
				c := k.NewCase(rand.New(rand.NewPCG(uint64(size), 5)), size)
				p := k.Program()
				target := coopTarget
				target.WorkgroupSize = c.WorkgroupSize
				m, err := EmitFor(p, target)
				if err != nil {
					t.Fatal(err)
				}
				if m.MatrixPath != MatrixPathCooperative {
					t.Fatalf("matrix path %q", m.MatrixPath)
				}
				got, err := dispatchCase(p, m, c, c.Uniforms, [3]uint32{1 << 16, 1 << 16, 1 << 16})
				if err != nil {
					t.Fatal(err)
				}
				if err := k.Check(got, k.Reference(c)); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestFuseLoads: the matrix_loads fused into the matrix_mma after them are
// exactly those into its operands from read-only buffers, directly before
// it, of matrices no other matrix statement names.
func TestFuseLoads(t *testing.T) {
	// square is acc += t·t with t loaded column-major from x just before;
	// change alters the program before it is built.
	square := func(access ir.Access, change func(b *ir.Builder, x, tile string)) *ir.Program {
		b := ir.NewBuilder("square", 64, 1, 1)
		x := b.Buffer("x", ir.F16, access)
		o := b.Buffer("o", ir.F32, ir.Write)
		acc := b.Matrix("acc", ir.F32, 32, 32)
		tile := b.Matrix("t", ir.F16, 32, 32)
		b.MatrixFill(acc, ir.LitF32(0))
		b.MatrixLoad(tile, x, ir.LitU32(0), ir.LitU32(32), ir.ColMajor)
		if change != nil {
			change(b, x, tile)
		}
		b.MatrixMMA(acc, tile, tile)
		b.MatrixStore(acc, o, ir.LitU32(0), ir.LitU32(32), ir.RowMajor)
		return b.MustBuild()
	}
	// looped is matmul_tc's K loop with change applied to the loop's body
	// before its loads.
	looped := func(change func(loop *ir.Block, k0 ir.Expr)) *ir.Program {
		b := ir.NewBuilder("looped", 128, 1, 1)
		k := b.Uniform("k", ir.U32)
		x := b.Buffer("x", ir.F16, ir.Read)
		o := b.Buffer("o", ir.F32, ir.Write)
		acc := b.Matrix("acc", ir.F32, 64, 64)
		at := b.Matrix("a", ir.F16, 64, 32)
		bt := b.Matrix("b", ir.F16, 32, 64)
		b.For("k0", ir.U32, ir.LitU32(0), k, ir.LitU32(32), func(loop *ir.Block, k0 ir.Expr) {
			off := loop.Let("off", ir.Mul(k0, ir.LitU32(64)))
			change(loop, k0)
			loop.MatrixLoad(at, x, off, k, ir.RowMajor)
			loop.MatrixLoad(bt, x, ir.Add(off, ir.LitU32(4096)), ir.LitU32(64), ir.RowMajor)
			loop.MatrixMMA(acc, at, bt)
		})
		b.MatrixStore(acc, o, ir.LitU32(0), ir.LitU32(64), ir.RowMajor)
		return b.MustBuild()
	}
	ab := []string{"a", "b"}
	for _, tc := range []struct {
		name           string
		p              *ir.Program
		want, prefetch []string
	}{
		{"matmul_tc", gputest.TCProgram(ir.BF16, false, 64, 64, 32, 128), []string{"a_tile", "b_tile"}, []string{"a_tile", "b_tile"}},
		{"a equals b", square(ir.Read, nil), []string{"t"}, nil},
		{"writable buffer", square(ir.ReadWrite, nil), nil, nil},
		{"a statement between", square(ir.Read, func(b *ir.Builder, _, _ string) { b.Let("z", ir.LitU32(1)) }), nil, nil},
		{"the operand loaded twice", square(ir.Read, func(b *ir.Builder, x, tile string) {
			b.MatrixLoad(tile, x, ir.LitU32(16), ir.LitU32(32), ir.ColMajor)
		}), nil, nil},
		{"the operand used elsewhere", func() *ir.Program {
			p := square(ir.Read, nil)
			p.Body = append(p.Body, ir.MatrixConvertStmt{Matrix: "acc", From: "t"})
			return p
		}(), nil, nil},
		{"a loop of lets", looped(func(loop *ir.Block, k0 ir.Expr) { loop.Let("z", ir.Add(k0, ir.LitU32(1))) }), ab, ab},
		{"a loop with a load before", looped(func(loop *ir.Block, k0 ir.Expr) { loop.Let("z", ir.Load("x", k0)) }), ab, nil},
		{"a loop with a break", looped(func(loop *ir.Block, k0 ir.Expr) {
			loop.If(ir.Gt(k0, ir.LitU32(64)), func(then *ir.Block) { then.Break() })
		}), ab, nil},
		{"a loop with a var", looped(func(loop *ir.Block, k0 ir.Expr) { loop.Var("z", ir.U32, k0) }), ab, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, why := planCoop(tc.p, coopTarget, tc.p.WorkgroupSize)
			if c == nil {
				t.Fatalf("scalar path: %s", why)
			}
			got := slices.Sorted(maps.Keys(c.fused))
			if !slices.Equal(got, tc.want) {
				t.Errorf("fused %v, want %v", got, tc.want)
			}
			if got := slices.Sorted(maps.Keys(c.prefetch)); !slices.Equal(got, tc.prefetch) {
				t.Errorf("prefetched %v, want %v", got, tc.prefetch)
			}
		})
	}
}

// TestCoopFusedOnTheInterpreter runs a fused load of both operands at once
// (a equals b), column-major, on the interpreter against the scalar path:
// in range and aligned (tiles straight from the buffer), and at an offset
// that is not a multiple of 16 bytes or that runs past the buffer's end (the
// workgroup arrays, zeros past the end).
func TestCoopFusedOnTheInterpreter(t *testing.T) {
	b := ir.NewBuilder("fused", 64, 1, 1)
	off := b.Uniform("off", ir.U32)
	x := b.Buffer("x", ir.F16, ir.Read)
	o := b.Buffer("o", ir.F32, ir.Write)
	acc := b.Matrix("acc", ir.F32, 32, 32)
	tile := b.Matrix("t", ir.F16, 32, 32)
	b.MatrixFill(acc, ir.LitF32(1))
	b.For("i", ir.U32, ir.LitU32(0), ir.LitU32(2), ir.LitU32(1), func(loop *ir.Block, i ir.Expr) {
		loop.MatrixLoad(tile, x, ir.Add(off, ir.Mul(i, ir.LitU32(32))), ir.LitU32(40), ir.ColMajor)
		loop.MatrixMMA(acc, tile, tile)
	})
	b.MatrixStore(acc, o, ir.LitU32(0), ir.LitU32(32), ir.RowMajor)
	p := b.MustBuild()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, o := range []uint32{0, 8, 3, 200} {
		t.Run(fmt.Sprint("offset ", o), func(t *testing.T) {
			c := kernels.Case{
				WorkgroupSize: [3]uint32{64, 1, 1},
				Grid:          [3]uint32{1, 1, 1},
				Inputs:        [][]byte{halfInputs(rng, ir.F16, 40*32+64, false), nil},
				OutputCounts:  []uint32{0, 32 * 32},
				Uniforms:      kernels.U32Bytes([]uint32{o}),
			}
			coopRun(t, p, coopTarget, MatrixPathCooperative, c)
		})
	}
}

// TestCoopStagingSlabs: the fused operands' stages hold two K slabs where
// they fit the device's workgroup memory, one where only that fits (a
// barrier before the fill too), and the program takes the scalar path where
// not even one does; each form runs on the interpreter bit for bit against
// the scalar path. At 64×64×32 f16 a slab of both stages takes 9728 bytes
// (a: 64 lines of 5 words, b: 32 of 9) and the band 4096.
func TestCoopStagingSlabs(t *testing.T) {
	p := gputest.TCProgram(ir.F16, false, 64, 64, 32, 128)
	rng := rand.New(rand.NewPCG(5, 6))
	m, n, k := 80, 64, 96
	c := kernels.Case{
		WorkgroupSize: [3]uint32{128, 1, 1},
		Grid:          [3]uint32{1, 2, 1},
		Inputs:        [][]byte{halfInputs(rng, ir.F16, m*k, false), halfInputs(rng, ir.F16, k*n, false), nil},
		OutputCounts:  []uint32{0, 0, uint32(m * n)},
		Uniforms:      kernels.U32Bytes([]uint32{uint32(m), uint32(n), uint32(k)}),
	}
	for _, tc := range []struct {
		limit uint32
		path  string
		why   string
	}{
		{0, MatrixPathCooperative, "two K slabs"},
		{4096 + 2*9728, MatrixPathCooperative, "two K slabs"},
		{4096 + 2*9728 - 1, MatrixPathCooperative, "one K slab"},
		{4096 + 9728, MatrixPathCooperative, "one K slab"},
		{4096 + 9728 - 1, MatrixPathScalar, "need 13824 bytes of workgroup memory on the cooperative path"},
	} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			target := coopTarget
			target.MaxSharedBytes = tc.limit
			mod, err := EmitFor(p, target)
			if err != nil {
				t.Fatal(err)
			}
			_, insts := decode(t, mod.Words)
			if got := sourceExtension(insts); mod.MatrixPath != tc.path || !strings.Contains(got, tc.why) {
				t.Fatalf("path %q (%s), want %q saying %q", mod.MatrixPath, got, tc.path, tc.why)
			}
			if tc.path == MatrixPathCooperative {
				coopRun(t, p, target, tc.path, c)
			}
		})
	}
}

// TestCoopPrefetchNeedsFullRounds: matmul_tc's K loop prefetches the next
// slab where every invocation fills as many chunks of each stage as every
// other (a 64×32 and a 32×64 tile of 16-bit elements are 256 chunks each:
// 128 or 256 invocations), and not where some fill one more (384).
func TestCoopPrefetchNeedsFullRounds(t *testing.T) {
	for _, tc := range []struct {
		inv      uint32
		prefetch bool
	}{{128, true}, {256, true}, {384, false}} {
		p := gputest.TCProgram(ir.F16, false, 64, 64, 32, tc.inv)
		m, err := EmitFor(p, coopTarget)
		if err != nil {
			t.Fatal(err)
		}
		_, insts := decode(t, m.Words)
		if got := strings.Contains(sourceExtension(insts), "prefetched"); got != tc.prefetch {
			t.Errorf("%d invocations: prefetch %v, want %v (%s)", tc.inv, got, tc.prefetch, sourceExtension(insts))
		}
	}
}
