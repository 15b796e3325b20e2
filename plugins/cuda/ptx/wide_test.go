package ptx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
)

// launchShifted is launch with every binding starting shift bytes into its
// allocation (a binding at an offset of a larger buffer), so that wide
// accesses meet addresses that are not multiples of their size.
func launchShifted(mod *pmodule, grid [3]uint32, buffers [][]byte, counts []uint32, shift uint64) error {
	mc := &machine{mod: mod, grid: grid, ncRead: map[uint64]bool{}, written: map[uint64]bool{}}
	for b, bytes := range buffers {
		mc.buffers = append(mc.buffers, memory{base: bufferBase(b) + shift, bytes: bytes})
	}
	mc.params = make([]uint64, len(mod.paramKinds))
	for b := range buffers {
		pb, okb := mod.params[bufParam(uint32(b))]
		pl, okl := mod.params[lenParam(uint32(b))]
		if !okb || !okl {
			return fmt.Errorf("the kernel has no parameters for binding %d", b)
		}
		mc.params[pb], mc.params[pl] = bufferBase(b)+shift, uint64(counts[b])
	}
	for x := uint32(0); x < grid[0]; x++ {
		if err := mc.block([3]uint32{x, 0, 0}); err != nil {
			return fmt.Errorf("block %d: %w", x, err)
		}
	}
	return nil
}

// runWide emits p for c, runs it with its bindings shifted by shift bytes and
// returns the outputs.
func runWide(t *testing.T, p *ir.Program, c kernels.Case, shift uint64) [][]byte {
	t.Helper()
	m, err := Emit(p, Options{Spec: c.Spec, WorkgroupSize: c.WorkgroupSize, NonCoherentReads: true})
	if err != nil {
		t.Fatal(err)
	}
	mod, err := parseModule(m.Text)
	if err != nil {
		t.Fatal(err)
	}
	buffers := make([][]byte, len(p.Buffers))
	counts := make([]uint32, len(p.Buffers))
	for _, b := range p.Buffers {
		var mem []byte
		if b.Access.Readable() && c.Inputs[b.Binding] != nil {
			mem = append([]byte(nil), c.Inputs[b.Binding]...)
		} else {
			mem = make([]byte, 2*c.OutputCounts[b.Binding])
		}
		counts[b.Binding] = uint32(len(mem)) / 2
		if len(mem) == 0 {
			mem = []byte{0xEF, 0xBE, 0xAD, 0xDE}
		}
		buffers[b.Binding] = mem
	}
	if err := launchShifted(mod, c.Grid, buffers, counts, shift); err != nil {
		t.Fatalf("shift %d: %v", shift, err)
	}
	var outs [][]byte
	for _, binding := range p.Outputs() {
		outs = append(outs, buffers[binding][:2*counts[binding]])
	}
	return outs
}

// TestWideVectorAddF16 pins vector_add_f16 on the wide path: the module moves
// each chunk of 8 halves with one ld.global.nc.v4.b32 per input and one
// st.global.v4.b32, and gives the reference's bits for odd sizes, tails and
// epi values beyond the lanes, with the bindings at every offset a binding may
// have (multiples of 4 bytes: 16-byte aligned or not) and at 2 bytes (no
// 4-byte access aligned), where the scalar path runs.
func TestWideVectorAddF16(t *testing.T) {
	k, _ := kernels.Lookup("vector_add_f16")
	p := k.Program()
	m, err := Emit(p, Options{NonCoherentReads: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(m.Text, "ld.global.nc.v4.b32"); got != 2 {
		t.Errorf("%d ld.global.nc.v4.b32 at the default epi, want 2:\n%s", got, m.Text)
	}
	if got := strings.Count(m.Text, "st.global.v4.b32"); got != 1 {
		t.Errorf("%d st.global.v4.b32 at the default epi, want 1", got)
	}
	for _, size := range []int{0, 1, 7, 8, 9, 15, 17, 61, 257, 1021, 4096} {
		for _, epi := range []uint32{8, 16, 24} {
			base := k.NewCase(rand.New(rand.NewPCG(uint64(size), uint64(epi))), size)
			var spec ir.SpecMap
			spec.Set("epi", ir.SpecU32(epi))
			c, _ := k.Retune(base, [3]uint32{64, 1, 1}, spec)
			want := k.Reference(base)
			for _, shift := range []uint64{0, 2, 4, 8, 12} {
				if err := k.Check(runWide(t, p, c, shift), want); err != nil {
					t.Errorf("size %d epi %d shift %d: %v", size, epi, shift, err)
				}
			}
		}
	}
}

// TestWideBF16Copy pins runs of 2, 4 and 8 bf16 and f16 elements (b32, v2 and
// v4 accesses) through lets, in a read_write buffer (ld.global, not .nc), with
// destinations offset by 0 to 3 elements, odd counts, both buffers shifted:
// bit-exact against the oracle, and the wide access in the module.
func TestWideBF16Copy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ty := range []ir.Type{ir.BF16, ir.F16} {
		for _, n := range []int{2, 4, 8} {
			for off := range 4 {
				p := gputest.WideCopy(ty, n, off)
				m, err := Emit(p, Options{NonCoherentReads: true})
				if err != nil {
					t.Fatal(err)
				}
				suffix := wideSuffix(n)
				if !strings.Contains(m.Text, "ld.global.nc"+suffix+" ") || !strings.Contains(m.Text, "st.global"+suffix+" ") {
					t.Errorf("%s n %d: no %s access:\n%s", ty, n, suffix, m.Text)
				}
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
					for _, shift := range []uint64{0, 2, 4, 12} {
						got := runWide(t, p, c, shift)
						if !bytes.Equal(got[0], want[0]) {
							t.Errorf("%s n %d off %d count %d shift %d:\n got % x\nwant % x", ty, n, off, count, shift, got[0], want[0])
						}
					}
				}
			}
		}
	}
}

// TestWideNotMatched: no wide access where the statements are not a run — a
// store between the loads, bases that differ, indices not base+k in order, a
// 32-bit buffer, a stored value that loads, a load inside a cast — and
// the programs still give the oracle's results.
func TestWideNotMatched(t *testing.T) {
	mk := func(name string, body func(b *ir.Builder, src, dst, wide string, at ir.Expr)) *ir.Program {
		b := ir.NewBuilder(name, 32, 1, 1)
		src := b.Buffer("src", ir.F16, ir.ReadWrite)
		dst := b.Buffer("dst", ir.F16, ir.ReadWrite)
		w := b.Buffer("w", ir.U32, ir.ReadWrite)
		at := b.Let("at", ir.Mul(ir.GlobalID(0), ir.LitU32(2)))
		body(b, src, dst, w, at)
		return b.MustBuild()
	}
	plus := func(x ir.Expr, k uint32) ir.Expr { return ir.Add(x, ir.LitU32(k)) }
	progs := []*ir.Program{
		mk("store_between", func(b *ir.Builder, src, dst, _ string, at ir.Expr) {
			b.Let("v0", ir.Load(src, at))
			b.Store(src, plus(at, 1), ir.Local("v0"))
			b.Let("v1", ir.Load(src, plus(at, 1)))
			b.Store(dst, at, ir.Local("v1"))
		}),
		mk("bases_differ", func(b *ir.Builder, src, dst, _ string, at ir.Expr) {
			other := b.Let("other", ir.Add(at, ir.LitU32(0)))
			b.Let("v0", ir.Load(src, at))
			b.Let("v1", ir.Load(src, plus(other, 1)))
			b.Store(dst, at, ir.Local("v0"))
			b.Store(dst, plus(other, 1), ir.Local("v1"))
		}),
		mk("out_of_order", func(b *ir.Builder, src, dst, _ string, at ir.Expr) {
			b.Let("v1", ir.Load(src, plus(at, 1)))
			b.Let("v0", ir.Load(src, at))
			b.Store(dst, plus(at, 1), ir.Local("v0"))
			b.Store(dst, at, ir.Local("v1"))
		}),
		mk("words", func(b *ir.Builder, _, _, w string, at ir.Expr) {
			b.Let("v0", ir.Load(w, at))
			b.Let("v1", ir.Load(w, plus(at, 1)))
			b.Store(w, at, ir.Local("v1"))
			b.Store(w, plus(at, 1), ir.Local("v0"))
		}),
		mk("value_loads", func(b *ir.Builder, src, _, _ string, at ir.Expr) {
			b.Store(src, at, ir.Load(src, plus(at, 1)))
			b.Store(src, plus(at, 1), ir.Load(src, at))
		}),
		mk("load_in_cast", func(b *ir.Builder, src, dst, _ string, at ir.Expr) {
			b.Var("base", ir.U32, at)
			b.Let("v0", ir.Load(src, ir.Local("base")))
			b.Assign("base", ir.Cast(ir.U32, ir.Cast(ir.F32, ir.Load(src, plus(ir.Local("base"), 1)))))
			b.Store(dst, plus(at, 1), ir.Cast(ir.F16, ir.Cast(ir.F32, ir.Local("base"))))
			b.Store(dst, at, ir.Local("v0"))
		}),
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, p := range progs {
		m, err := Emit(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.Text, ".v2.b32") || strings.Contains(m.Text, ".v4.b32") || strings.Contains(m.Text, "ld.global.b32 ") && p.Name != "words" {
			t.Errorf("%s: a wide access:\n%s", p.Name, m.Text)
		}
		var inputs [][]byte
		for range p.Buffers {
			in := make([]byte, 4*64)
			for i := range in {
				in[i] = byte(rng.Uint32() % 64)
			}
			inputs = append(inputs, in)
		}
		c := kernels.Case{Grid: [3]uint32{1, 1, 1}, Inputs: inputs, OutputCounts: make([]uint32, len(p.Buffers))}
		want := gputest.Oracle(t, p, c)
		got, err := dispatchCase(p, c, nil)
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
