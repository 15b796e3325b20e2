package spirv

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// llvmpipeLoopLimit is llvmpipe's loop limiter: a shader's loops end after
// 65535 iterations of all of them together (Mesa,
// src/gallium/auxiliary/gallivm/lp_bld_limits.h, LP_MAX_TGSI_LOOP_ITERATIONS,
// counted down by lp_exec_endloop in lp_bld_ir_common.c).
const llvmpipeLoopLimit = 65535

// guardCase is a program of the loop-guard tests, its launch, and whether it
// loops past llvmpipe's limit.
type guardCase struct {
	name string
	prog *ir.Program
	c    kernels.Case
	long bool
}

// countLoop is the program: a u32 for loop to n that stores its count.
func countLoop(n uint32) *ir.Program {
	b := ir.NewBuilder("test.loop", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	c := b.Var("c", ir.U32, ir.LitU32(0))
	b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(n), ir.LitU32(1), func(body *ir.Block, _ ir.Expr) {
		body.Assign("c", ir.Add(c, ir.LitU32(1)))
	})
	b.Store(out, ir.LitU32(0), c)
	return b.Program()
}

// guardCases are long loops (for, while left by break, nested, one lane of
// four) and loops that stay below the limit in all, which must not be
// reported.
func guardCases() []guardCase {
	one := kernels.Case{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{4}}

	w := ir.NewBuilder("test.while_break", 1, 1, 1)
	wout := w.Buffer("out", ir.U32, ir.Write)
	c := w.Var("c", ir.U32, ir.LitU32(0))
	w.While(ir.LitBool(true), func(body *ir.Block) {
		body.Assign("c", ir.Add(c, ir.LitU32(1)))
		body.If(ir.Eq(c, ir.LitU32(100000)), func(then *ir.Block) { then.Break() })
	})
	w.Store(wout, ir.LitU32(0), c)

	nested := func(outer, inner uint32) *ir.Program {
		b := ir.NewBuilder("test.nested", 1, 1, 1)
		out := b.Buffer("out", ir.U32, ir.Write)
		n := b.Var("n", ir.U32, ir.LitU32(0))
		b.For("i", ir.U32, ir.LitU32(0), ir.LitU32(outer), ir.LitU32(1), func(o *ir.Block, _ ir.Expr) {
			o.For("j", ir.I32, ir.LitI32(0), ir.LitI32(int32(inner)), ir.LitI32(1), func(body *ir.Block, _ ir.Expr) {
				body.Assign("n", ir.Add(n, ir.LitU32(1)))
			})
		})
		b.Store(out, ir.LitU32(0), n)
		return b.Program()
	}

	d := ir.NewBuilder("test.divergent", 4, 1, 1)
	dout := d.Buffer("out", ir.U32, ir.Write)
	g := d.Let("g", ir.GlobalID(0))
	k := d.Var("k", ir.U32, ir.LitU32(0))
	d.While(ir.Lt(k, ir.Add(ir.LitU32(100), ir.Mul(g, ir.LitU32(30000)))), func(body *ir.Block) {
		body.Assign("k", ir.Add(k, ir.LitU32(1)))
	})
	d.Store(dout, g, k)

	return []guardCase{
		{"for", countLoop(100000), one, true},
		{"for_short", countLoop(60000), one, false},
		{"while_break", w.Program(), one, true},
		{"nested", nested(400, 250), one, true},
		{"nested_short", nested(200, 250), one, false},
		{"divergent", d.Program(), kernels.Case{Grid: [3]uint32{1, 1, 1}, OutputCounts: []uint32{4}}, true},
	}
}

// TestLoopGuard pins the loop guard: on a device that ends loops as llvmpipe
// does, a module without the guard returns what the cut loops computed
// without any error (the silent wrong result the guard exists for), the
// guarded module reports it (errLoopCut), and a guarded module whose loops stay
// within the limit, or that runs without a limit, gives the reference's
// outputs. Every guarded module passes spirv-val.
func TestLoopGuard(t *testing.T) {
	val, err := exec.LookPath("spirv-val")
	if err != nil {
		val = spirvVal(t)
	}
	for _, tc := range guardCases() {
		t.Run(tc.name, func(t *testing.T) {
			want, err := interp.Run(context.Background(), tc.prog, interp.Options{}, interp.Launch{Grid: tc.c.Grid, OutputCounts: tc.c.OutputCounts})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := EmitFor(tc.prog, Target{})
			if err != nil {
				t.Fatal(err)
			}
			guarded, err := EmitFor(tc.prog, Target{LoopGuard: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, val, tc.name, guarded)
			if plain.LoopGuard || !guarded.LoopGuard {
				t.Fatalf("Module.LoopGuard = %v without the guard, %v with it; want false, true", plain.LoopGuard, guarded.LoopGuard)
			}
			unlimited, err := dispatchLimited(tc.prog, guarded, tc.c, nil, [3]uint32{1, 1, 1}, 0)
			if err != nil || !equalOutputs(unlimited, want) {
				t.Errorf("guarded, without a loop limit: %v, %v; want %v", unlimited, err, want)
			}
			cut, err := dispatchLimited(tc.prog, plain, tc.c, nil, [3]uint32{1, 1, 1}, llvmpipeLoopLimit)
			if err != nil {
				t.Fatal(err)
			}
			if tc.long == equalOutputs(cut, want) {
				t.Errorf("unguarded on llvmpipe's limit: %v, reference %v; a long loop must come out wrong (the silent result), a short one right", cut, want)
			}
			got, err := dispatchLimited(tc.prog, guarded, tc.c, nil, [3]uint32{1, 1, 1}, llvmpipeLoopLimit)
			switch {
			case tc.long && !errors.Is(err, errLoopCut):
				t.Errorf("guarded on llvmpipe's limit: %v, %v; want errLoopCut", got, err)
			case !tc.long && (err != nil || !equalOutputs(got, want)):
				t.Errorf("guarded, within llvmpipe's limit: %v, %v; want %v", got, err, want)
			}
		})
	}
}

// TestLoopGuardOnlyForLoops: a program without loops declares no guard buffer
// even with Target.LoopGuard, and without Target.LoopGuard nothing of the
// guard is emitted.
func TestLoopGuardOnlyForLoops(t *testing.T) {
	b := ir.NewBuilder("test.straight", 1, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.LitU32(0), ir.LitU32(7))
	m, err := EmitFor(b.Program(), Target{LoopGuard: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.LoopGuard {
		t.Error("a program without loops has a loop guard")
	}
	plain, err := EmitFor(countLoop(10), Target{})
	if err != nil {
		t.Fatal(err)
	}
	_, insts := decode(t, plain.Words)
	if _, ok := names(insts)["kiln_loop_guard"]; ok {
		t.Error("a module emitted without Target.LoopGuard declares the guard buffer")
	}
}

func equalOutputs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
