package spirv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// noLimit is a dispatch limit no test grid reaches.
var noLimit = [3]uint32{1 << 16, 1 << 16, 1 << 16}

// wideStrides returns the ArrayStride of every runtime array of m's
// StorageBuffer variables, and how many variables each binding has.
func wideStrides(t *testing.T, m *Module) (strides []uint32, perBinding map[uint32]int) {
	t.Helper()
	_, code := decode(t, m.Words)
	byID, decos := resultIDs(code), decorations(code)
	perBinding = map[uint32]int{}
	for _, in := range code {
		if in.op != opVariable || in.args[2] != storageStorageBuffer {
			continue
		}
		perBinding[decos[in.args[1]][decorationBinding][0]]++
		st := byID[byID[in.args[0]].args[2]]
		strides = append(strides, decos[st.args[1]][decorationArrayStride][0])
	}
	return strides, perBinding
}

// has reports whether xs holds x.
func has(xs []uint32, x uint32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestWideVectorAddF16SPIRV pins vector_add_f16 on the wide path: each input
// and the output get a uvec4 view (a second variable at the binding, stride
// 16) that spirv-val accepts, and the module gives the reference's bits for
// odd sizes, tails and epi values beyond the lanes, with and without folding
// the parameters.
func TestWideVectorAddF16SPIRV(t *testing.T) {
	val := spirvVal(t)
	k, _ := kernels.Lookup("vector_add_f16")
	p := k.Program()
	for _, size := range []int{0, 1, 7, 8, 9, 17, 61, 257, 1021, 4096} {
		for _, epi := range []uint32{8, 16, 24} {
			base := k.NewCase(rand.New(rand.NewPCG(uint64(size), uint64(epi))), size)
			var spec ir.SpecMap
			spec.Set("epi", ir.SpecU32(epi))
			c, _ := k.Retune(base, [3]uint32{64, 1, 1}, spec)
			want := k.Reference(base)
			for _, fold := range []bool{false, true} {
				target := fullTarget
				target.WorkgroupSize = c.WorkgroupSize
				if fold {
					target.FoldSpec = &c.Spec
				}
				m, err := EmitFor(p, target)
				if err != nil {
					t.Fatal(err)
				}
				if size == 0 {
					strides, per := wideStrides(t, m)
					if !has(strides, 16) || per[0] != 2 || per[1] != 2 || per[2] != 2 {
						t.Fatalf("epi %d fold %v: strides %v, variables per binding %v: want a uvec4 view of every buffer", epi, fold, strides, per)
					}
					validate(t, val, fmt.Sprintf("vector_add_f16.epi%d.fold%v", epi, fold), m)
				}
				got, err := dispatchCase(p, m, c, nil, noLimit)
				if err != nil {
					t.Fatalf("size %d epi %d fold %v: %v", size, epi, fold, err)
				}
				if err := k.Check(got, want); err != nil {
					t.Errorf("size %d epi %d fold %v: %v", size, epi, fold, err)
				}
			}
		}
	}
}

// TestWideCopySPIRV pins runs of 2, 4 and 8 bf16 and f16 elements (u32, uvec2
// and uvec4 views) through lets, into a read_write buffer (its variables
// Aliased, not Restrict), with destinations 0 to 3 elements off the view's
// alignment and odd counts: bit-exact against the oracle, valid to spirv-val,
// with the view in the module.
func TestWideCopySPIRV(t *testing.T) {
	val := spirvVal(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ty := range []ir.Type{ir.BF16, ir.F16} {
		for _, n := range []int{2, 4, 8} {
			for off := range 4 {
				p := gputest.WideCopy(ty, n, off)
				target := fullTarget
				target.DisjointBindings = true
				if ty == ir.BF16 {
					target.Float16, target.Int16 = false, false
				}
				m, err := EmitFor(p, target)
				if err != nil {
					t.Fatal(err)
				}
				strides, per := wideStrides(t, m)
				if !has(strides, uint32(2*n)) || per[0] != 2 || per[1] != 2 {
					t.Fatalf("%s n %d: strides %v, variables per binding %v", ty, n, strides, per)
				}
				validate(t, val, fmt.Sprintf("wide_copy.%s.%d.%d", ty, n, off), m)
				for _, count := range []uint32{0, 1, 5, 31, 64, 97} {
					in := make([]byte, 2*count)
					for i := range in {
						in[i] = byte(rng.Uint32())
					}
					old := make([]byte, 2*(count+3))
					for i := range old {
						old[i] = byte(rng.Uint32())
					}
					c := kernels.Case{Grid: [3]uint32{(count + 31) / 32, 1, 1}, Inputs: [][]byte{in, old}, OutputCounts: []uint32{0, count + 3}}
					want := gputest.Oracle(t, p, c)
					got, err := dispatchCase(p, m, c, nil, noLimit)
					if err != nil {
						t.Fatalf("%s n %d off %d count %d: %v", ty, n, off, count, err)
					}
					if !bytes.Equal(got[0], want[0]) {
						t.Errorf("%s n %d off %d count %d:\n got % x\nwant % x", ty, n, off, count, got[0], want[0])
					}
				}
			}
		}
	}
}

// TestWideNotMatchedSPIRV: no view where the statements are not a run — a
// store between the loads, bases that differ, indices out of order, a stored
// value that loads, a var base assigned by the run — and the programs still
// give the oracle's results.
func TestWideNotMatchedSPIRV(t *testing.T) {
	mk := func(name string, body func(b *ir.Builder, src, dst string, at ir.Expr)) *ir.Program {
		b := ir.NewBuilder(name, 32, 1, 1)
		src := b.Buffer("src", ir.F16, ir.ReadWrite)
		dst := b.Buffer("dst", ir.F16, ir.ReadWrite)
		at := b.Let("at", ir.Mul(ir.GlobalID(0), ir.LitU32(2)))
		body(b, src, dst, at)
		return b.MustBuild()
	}
	plus := func(x ir.Expr, k uint32) ir.Expr { return ir.Add(x, ir.LitU32(k)) }
	progs := []*ir.Program{
		mk("store_between", func(b *ir.Builder, src, dst string, at ir.Expr) {
			b.Let("v0", ir.Load(src, at))
			b.Store(src, plus(at, 1), ir.Local("v0"))
			b.Let("v1", ir.Load(src, plus(at, 1)))
			b.Store(dst, at, ir.Local("v1"))
		}),
		mk("bases_differ", func(b *ir.Builder, src, dst string, at ir.Expr) {
			other := b.Let("other", ir.Add(at, ir.LitU32(0)))
			b.Let("v0", ir.Load(src, at))
			b.Let("v1", ir.Load(src, plus(other, 1)))
			b.Store(dst, at, ir.Local("v0"))
			b.Store(dst, plus(other, 1), ir.Local("v1"))
		}),
		mk("out_of_order", func(b *ir.Builder, src, dst string, at ir.Expr) {
			b.Let("v1", ir.Load(src, plus(at, 1)))
			b.Let("v0", ir.Load(src, at))
			b.Store(dst, plus(at, 1), ir.Local("v0"))
			b.Store(dst, at, ir.Local("v1"))
		}),
		mk("value_loads", func(b *ir.Builder, src, _ string, at ir.Expr) {
			b.Store(src, at, ir.Load(src, plus(at, 1)))
			b.Store(src, plus(at, 1), ir.Load(src, at))
		}),
		mk("load_in_cast", func(b *ir.Builder, src, dst string, at ir.Expr) {
			b.Var("base", ir.U32, at)
			b.Let("v0", ir.Load(src, ir.Local("base")))
			b.Assign("base", ir.Cast(ir.U32, ir.Cast(ir.F32, ir.Load(src, plus(ir.Local("base"), 1)))))
			b.Store(dst, plus(at, 1), ir.Cast(ir.F16, ir.Cast(ir.F32, ir.Local("base"))))
			b.Store(dst, at, ir.Local("v0"))
		}),
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, p := range progs {
		m := mustEmit(t, p.Name, p)
		if _, per := wideStrides(t, m); per[0] != 1 || per[1] != 1 {
			t.Errorf("%s: variables per binding %v, want one each (no view)", p.Name, per)
		}
		var inputs [][]byte
		for range p.Buffers {
			in := make([]byte, 2*64)
			for i := range in {
				in[i] = byte(rng.Uint32() % 64)
			}
			inputs = append(inputs, in)
		}
		c := kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: inputs, OutputCounts: make([]uint32, len(p.Buffers))}
		want := gputest.Oracle(t, p, c)
		got, err := dispatchCase(p, m, c, nil, noLimit)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: output %d differs from the oracle", p.Name, i)
			}
		}
	}
}
