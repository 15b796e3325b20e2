package kernels_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// specs returns every combination of the program's tunables' candidates.
func specs(p *ir.Program) []ir.SpecMap {
	out := []ir.SpecMap{{}}
	for _, d := range p.Tunables() {
		var next []ir.SpecMap
		for _, s := range out {
			for _, c := range d.Candidates {
				var m ir.SpecMap
				for _, name := range s.Names() {
					v, _ := s.Get(name)
					m.Set(name, v)
				}
				m.Set(d.Name, ir.SpecU32(c.Bits))
				next = append(next, m)
			}
		}
		out = next
	}
	return out
}

// regShape is a register-tiled matmul launch's shape: the elements of its a
// and b tiles, Y·bm·tk and tk·X·bn, its workgroup's invocations and its
// stages.
func regShape(c kernels.Case) (aCount, bCount, threads, stages uint32) {
	get := func(name string, def uint32) uint32 {
		if v, ok := c.Spec.Get(name); ok {
			return v.Bits()
		}
		return def
	}
	wg := c.WorkgroupSize
	bm, bn, tk := get("bm", 4), get("bn", 4), get("tk", 16)
	return wg[1] * bm * tk, tk * wg[0] * bn, wg[0] * wg[1], get("stages", 1)
}

// fits reports whether the register-tiled matmul's shared tiles hold a launch
// of c: Y·bm·tk and tk·X·bn at most 4096 elements.
func fits(c kernels.Case) bool {
	aCount, bCount, _, _ := regShape(c)
	return aCount <= 4096 && bCount <= 4096
}

// pipelines reports whether a register-tiled matmul launch of c runs the
// pipelined loop: stages 2, each tile in half of its array (2048 elements)
// and each fill in at most 8 trips (the prefetch registers).
func pipelines(c kernels.Case) bool {
	aCount, bCount, threads, stages := regShape(c)
	trips := func(n uint32) uint32 { return (n + threads - 1) / threads }
	return stages == 2 && aCount <= 2048 && bCount <= 2048 && trips(aCount) <= 8 && trips(bCount) <= 8
}

// diagonal keeps the specs whose tunables all take the same position in their
// candidate lists (bm=1 bn=1 tk=4, bm=2 bn=2 tk=8, …): every candidate value
// once, for the workgroup sizes that do not get the full product.
func diagonal(p *ir.Program, all []ir.SpecMap) []ir.SpecMap {
	var out []ir.SpecMap
	for _, s := range all {
		pos := -1
		same := true
		for _, d := range p.Tunables() {
			v, _ := s.Get(d.Name)
			for i, c := range d.Candidates {
				if c.Bits == v.Bits() {
					same = same && (pos < 0 || pos == i)
					pos = i
				}
			}
		}
		if same {
			out = append(out, s)
		}
	}
	return out
}

// square keeps the specs with bm = bn: a quarter of matmul_reg's
// combinations, still with every bm, tk, stages and vec (column groups of 1, 2
// and 4), launches that overflow the tiles and ones that pipeline.
func square(all []ir.SpecMap) []ir.SpecMap {
	var out []ir.SpecMap
	for _, s := range all {
		bm, _ := s.Get("bm")
		bn, _ := s.Get("bn")
		if bm == bn {
			out = append(out, s)
		}
	}
	return out
}

// TestTunablesKeepResults runs every kernel a tuner may vary on the
// interpreter, at odd sizes: with every combination of its tunables'
// candidates at its own workgroup size (matmul_reg: at every workgroup size
// listed, under the race detector only those with bm = bn), and
// every candidate value once at other sizes. Each must give the
// reference's results, except register-tiled launches whose tiles overflow
// shared memory, which must not. matmul_reg's launches at stages 2 include
// ones that run the pipelined loop and ones too large for it, which run the
// plain one.
func TestTunablesKeepResults(t *testing.T) {
	sizes := map[string][]int{"vector_add": {1, 1021}, "matmul": {33}, "matmul_reg": {37}}
	wgs := map[string][][3]uint32{
		"vector_add": {{64, 1, 1}},
		"matmul":     {{32, 8, 1}},
		"matmul_reg": {{8, 8, 1}, {32, 16, 1}},
	}
	full := map[string]bool{"matmul_reg": true}
	tested, overflowed, pipelined, fellBack := 0, 0, 0, 0
	for _, k := range kernels.All() {
		if k.Invocations == nil {
			continue
		}
		p := k.Program()
		all := specs(p)
		for _, size := range sizes[k.Name] {
			base := k.NewCase(rand.New(rand.NewPCG(7, uint64(size))), size)
			want := k.Reference(base)
			for _, wg := range append([][3]uint32{p.WorkgroupSize}, wgs[k.Name]...) {
				tried := all
				switch {
				case wg != p.WorkgroupSize && !full[k.Name]:
					tried = diagonal(p, all)
				case full[k.Name] && raceEnabled:
					tried = square(all)
				}
				for _, spec := range tried {
					c, ok := k.Retune(base, wg, spec)
					if !ok {
						t.Fatalf("%s has Invocations but Retune refuses", k.Name)
					}
					name := fmt.Sprintf("%s/%d/wg%v/", k.Name, size, wg)
					for _, n := range spec.Names() {
						v, _ := spec.Get(n)
						name += fmt.Sprintf("%s=%d", n, v.Bits())
					}
					got, err := interp.Run(context.Background(), p, interp.Options{WorkgroupSize: c.WorkgroupSize, Spec: c.Spec},
						interp.Launch{Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					err = k.Check(got, want)
					if k.Name == "matmul_reg" {
						switch _, _, _, stages := regShape(c); {
						case pipelines(c):
							pipelined++
						case stages == 2 && fits(c):
							fellBack++
						}
					}
					switch {
					case k.Name == "matmul_reg" && !fits(c):
						overflowed++
						if err == nil {
							t.Errorf("%s: a launch that overflows the shared tiles gave the right answer; the test's model of the kernel is wrong", name)
						}
					case err != nil:
						t.Errorf("%s: %v", name, err)
					}
					tested++
				}
			}
		}
	}
	if tested == 0 || overflowed == 0 || pipelined == 0 || fellBack == 0 {
		t.Fatalf("%d launches, %d overflowing, %d pipelined, %d at stages 2 on the plain loop; want all", tested, overflowed, pipelined, fellBack)
	}
}

// TestVectorAddDefaultIsFourElementsPerInvocation: the default epi is the
// measured best on the H200 (4346 GB/s at epi 4 against 3489 at epi 1), so the grid
// covers four elements per invocation; epi 1 still covers one.
func TestVectorAddDefaultIsFourElementsPerInvocation(t *testing.T) {
	k, _ := kernels.Lookup("vector_add")
	for _, size := range []int{0, 1, 256, 257, 100_000} {
		c := k.NewCase(rand.New(rand.NewPCG(1, 2)), size)
		if want := uint32((size + 1023) / 1024); c.Grid != [3]uint32{want, 1, 1} {
			t.Errorf("size %d: grid %v, want [%d 1 1]", size, c.Grid, want)
		}
		var s ir.SpecMap
		s.Set("epi", ir.SpecU32(1))
		r, _ := k.Retune(c, [3]uint32{}, s)
		if want := uint32((size + 255) / 256); r.Grid != [3]uint32{want, 1, 1} {
			t.Errorf("size %d, epi 1: grid %v, want [%d 1 1]", size, r.Grid, want)
		}
	}
}

// A case of a kernel with Invocations carries them, and its grid is their
// ceiling division by the program's workgroup size.
func TestCaseInvocationsMatchGrid(t *testing.T) {
	for _, k := range kernels.All() {
		for _, size := range k.Sizes {
			c := k.NewCase(rand.New(rand.NewPCG(1, 2)), size)
			switch {
			case k.Invocations == nil && c.Invocations != [3]uint32{}:
				t.Errorf("%s/%d: invocations %v without Kernel.Invocations", k.Name, size, c.Invocations)
			case k.Invocations != nil && c.Grid != ir.GridFor(c.Invocations, k.Program().WorkgroupSize):
				t.Errorf("%s/%d: grid %v, invocations %v", k.Name, size, c.Grid, c.Invocations)
			}
		}
	}
}
