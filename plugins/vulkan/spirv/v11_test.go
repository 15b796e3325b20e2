package spirv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// v11Programs are the table's IR v1.1 programs (trunc, round, clz, popcount and
// cas are in the unary and atomic programs): bitcast between every pair of types
// Validate accepts, every subgroup operation on every type it takes (with
// literal and computed lanes), the subgroup builtins, uniforms of every type,
// continue in every kind of loop, and a compare-exchange loop.
func v11Programs(tb testing.TB, seen map[string]int) []namedProgram {
	out := conversionPrograms(tb, seen, "bitcast", 6, ir.Bitcast)
	for _, op := range ir.SubgroupOps() {
		for _, t := range v1Types {
			for _, size := range []uint32{0, 32} {
				name := fmt.Sprintf("subgroup.%s.%s.size%d", op, t, size)
				h := newHarness(name)
				h.RequireSubgroupSize(size)
				for k := 0; k < 6; k++ {
					var lane ir.Expr
					switch {
					case op.HasLane() && k%2 == 0:
						lane = ir.LitU32(uint32(k * 7))
					case op.HasLane():
						lane = ir.Rem(ir.Add(ir.SubgroupInvocationID(), ir.LitU32(uint32(k))), ir.SubgroupSize())
					}
					if op == ir.SubgroupOpBroadcast && lane != nil && k%2 == 1 {
						lane = ir.Rem(ir.Param("p_u32"), ir.LitU32(64))
					}
					h.sink(&h.Block, t, ir.SubgroupExpr{Op: op, X: h.source(t, k), Lane: lane})
				}
				keep(tb, h, &out, seen, "subgroup "+op.String())
			}
		}
	}
	add := func(name string, build func(h *harness)) {
		h := newHarness(name)
		build(h)
		out = append(out, namedProgram{name, h.MustBuild()})
	}
	add("subgroup_builtins", func(h *harness) {
		h.sink(&h.Block, ir.U32, ir.SubgroupSize())
		h.sink(&h.Block, ir.U32, ir.SubgroupInvocationID())
	})
	add("uniforms_every_type", func(h *harness) {
		for _, t := range numericTypes {
			u := h.Uniform("u_"+t.String(), t)
			h.sink(&h.Block, t, u)
			h.sink(&h.Block, t, ir.BinaryExpr{Op: ir.OpAdd, X: u, Y: h.source(t, 0)})
		}
		h.For("i", ir.U32, ir.LitU32(0), ir.Uniform("u_u32"), ir.LitU32(1), func(body *ir.Block, i ir.Expr) {
			body.Store("out_u32", i, i)
		})
	})
	add("continue_in_loops", func(h *harness) {
		acc := h.Var("acc", ir.U32, ir.LitU32(0))
		h.For("i", ir.U32, ir.LitU32(0), ir.LitU32(10), ir.LitU32(1), func(outer *ir.Block, i ir.Expr) {
			outer.If(ir.Eq(ir.Rem(i, ir.LitU32(3)), ir.LitU32(0)), func(then *ir.Block) { then.Continue() })
			n := outer.Var("n", ir.U32, i)
			outer.While(ir.Gt(n, ir.LitU32(0)), func(inner *ir.Block) {
				inner.Assign("n", ir.Sub(n, ir.LitU32(1)))
				inner.If(ir.Eq(ir.And(n, ir.LitU32(1)), ir.LitU32(1)), func(then *ir.Block) { then.Continue() })
				inner.Assign("acc", ir.Add(acc, n))
				inner.If(ir.Gt(acc, ir.LitU32(50)), func(then *ir.Block) { then.Break() })
			})
			outer.IfElse(ir.Gt(acc, ir.LitU32(20)), func(then *ir.Block) { then.Continue() },
				func(els *ir.Block) { els.Assign("acc", ir.Add(acc, ir.LitU32(1))) })
		})
		h.For("j", ir.I32, ir.LitI32(-4), ir.LitI32(4), ir.LitI32(1), func(body *ir.Block, _ ir.Expr) {
			body.Continue()
		})
		h.sink(&h.Block, ir.U32, acc)
	})
	add("cas_float_add_loop", func(h *harness) {
		h.Buffer("acc", ir.U32, ir.ReadWrite)
		x := h.Let("x", ir.Load("in_f32", h.gid))
		old := h.Var("old", ir.U32, ir.Load("acc", ir.LitU32(0)))
		h.While(ir.LitBool(true), func(loop *ir.Block) {
			next := loop.Let("next", ir.Bitcast(ir.U32, ir.Add(ir.Bitcast(ir.F32, old), x)))
			seen := loop.AtomicCAS("acc", ir.LitU32(0), old, next, "seen")
			loop.If(ir.Eq(seen, old), func(then *ir.Block) { then.Break() })
			loop.Assign("old", seen)
		})
		got := h.AtomicCAS("s_u32", h.lid, ir.LitU32(0), h.lid, "got")
		h.sink(&h.Block, ir.U32, got)
	})
	return out
}

// TestV11Coverage fails when an IR v1.1 operation got no accepted program.
func TestV11Coverage(t *testing.T) {
	seen := map[string]int{}
	v11Programs(t, seen)
	// i32, u32 and f32 to each other (not to themselves).
	if seen["bitcast"] != 6 {
		t.Errorf("%d bitcast pairs accepted, want 6", seen["bitcast"])
	}
	for _, op := range ir.SubgroupOps() {
		if seen["subgroup "+op.String()] == 0 {
			t.Errorf("%s: no type was accepted, so it is untested", op)
		}
	}
}

// TestSubgroupsNeedTheDevice pins that a program using subgroups is rejected with
// a reason naming the missing class on a device without it, and that a program
// without subgroups needs none.
func TestSubgroupsNeedTheDevice(t *testing.T) {
	for _, c := range []struct {
		expr    ir.Expr
		have    SubgroupFeatures
		missing string
	}{
		{ir.SubgroupSize(), 0, "basic"},
		{ir.SubgroupAdd(ir.LitU32(1)), SubgroupBasic | SubgroupShuffle | SubgroupBallot, "arithmetic"},
		{ir.SubgroupShuffle(ir.LitU32(1), ir.SubgroupInvocationID()), SubgroupBasic | SubgroupArithmetic | SubgroupBallot, "shuffle"},
		{ir.SubgroupBroadcast(ir.LitU32(1), ir.LitU32(3)), SubgroupBasic | SubgroupArithmetic, "shuffle"},
		{ir.SubgroupBroadcast(ir.LitU32(1), ir.Uniform("lane")), SubgroupBasic | SubgroupBallot, "shuffle"},
	} {
		b := ir.NewBuilder("t.subgroups", 32, 1, 1)
		b.Uniform("lane", ir.U32)
		out := b.Buffer("out", ir.U32, ir.Write)
		b.Store(out, ir.LocalID(0), c.expr)
		p := b.MustBuild()
		_, err := EmitFor(p, Target{Subgroups: c.have})
		if err == nil || !strings.Contains(err.Error(), "subgroup "+c.missing) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%v without %s: error %v, want one naming subgroup %s with a Fix", c.expr, c.missing, err, c.missing)
		}
		m, err := EmitFor(p, fullTarget)
		if err != nil || !m.Subgroups {
			t.Errorf("%v on a full target: %v, Subgroups %v", c.expr, err, m != nil && m.Subgroups)
		}
	}
	// A literal broadcast uses a shuffle where the device has no ballot.
	b := ir.NewBuilder("t.broadcast", 32, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	b.Store(out, ir.LocalID(0), ir.SubgroupBroadcast(ir.LocalID(0), ir.LitU32(3)))
	for _, c := range []struct {
		have SubgroupFeatures
		op   uint32
	}{{SubgroupBasic | SubgroupBallot | SubgroupShuffle, opGroupNonUniformBroadcast}, {SubgroupBasic | SubgroupShuffle, opGroupNonUniformShuffle}} {
		m, err := EmitFor(b.MustBuild(), Target{Subgroups: c.have})
		if err != nil {
			t.Fatalf("broadcast with %b: %v", c.have, err)
		}
		_, insts := decode(t, m.Words)
		found := false
		for _, in := range insts {
			found = found || in.op == c.op
		}
		if !found {
			t.Errorf("broadcast with classes %b does not use opcode %d", c.have, c.op)
		}
	}
	m, err := Emit(bare("plain", 2))
	if err != nil || m.Subgroups {
		t.Errorf("a program without subgroups: %v, Subgroups %v", err, m != nil && m.Subgroups)
	}
}

// TestFloatControlsFollowTheTarget pins that SignedZeroInfNanPreserve is declared
// exactly when the target has it.
func TestFloatControlsFollowTheTarget(t *testing.T) {
	p := bare("plain", 1)
	for _, on := range []bool{false, true} {
		m, err := EmitFor(p, Target{SignedZeroInfNanPreserve: on})
		if err != nil {
			t.Fatal(err)
		}
		_, insts := decode(t, m.Words)
		var capability, mode, ext bool
		for _, in := range insts {
			switch {
			case in.op == opCapability && in.args[0] == capabilitySignedZeroInfNanPreserve:
				capability = true
			case in.op == opExecutionMode && in.args[1] == executionModeSignedZeroInfNanPreserve && in.args[2] == 32:
				mode = true
			case in.op == opExtension:
				ext = true
			}
		}
		if capability != on || mode != on || ext != on {
			t.Errorf("target %v: capability %v, execution mode %v, extension %v", on, capability, mode, ext)
		}
	}
}

// TestPushConstantLayout pins the push-constant block: counts at 4*binding, then
// uniform i at 4*len(buffers) + 4*i, also without buffers; no grid words in a
// program that reads no grid builtin.
func TestPushConstantLayout(t *testing.T) {
	for _, buffers := range []int{0, 3} {
		b := ir.NewBuilder("t.push", 1, 1, 1)
		for i := range buffers {
			b.Buffer(fmt.Sprintf("b%d", i), ir.U32, ir.Write)
		}
		sh := b.Shared("s", ir.F32, 1)
		b.Store(sh, ir.LitU32(0), ir.Add(ir.Cast(ir.F32, b.Uniform("a", ir.U32)), ir.Add(b.Uniform("c", ir.F32), ir.Cast(ir.F32, b.Uniform("d", ir.I32)))))
		m := mustEmit(t, "push", b.MustBuild())
		if m.UniformOffset != uint32(4*buffers) || m.GridOffset != uint32(4*buffers+12) || m.PushConstantBytes != uint32(4*buffers+12) || m.Grid != GridFree {
			t.Errorf("%d buffers: uniform offset %d, grid offset %d, push bytes %d", buffers, m.UniformOffset, m.GridOffset, m.PushConstantBytes)
		}
		_, insts := decode(t, m.Words)
		var offsets []uint32
		for _, in := range insts {
			if in.op == opMemberDecorate && in.args[2] == decorationOffset {
				offsets = append(offsets, in.args[3])
			}
		}
		want := fmt.Sprint([]uint32{uint32(4 * buffers), uint32(4*buffers + 4), uint32(4*buffers + 8)})
		if buffers > 0 {
			want = fmt.Sprint([]uint32{0, 0, 0, 0, 12, 16, 20}) // 3 buffer blocks, counts, uniforms
		}
		if fmt.Sprint(offsets) != want {
			t.Errorf("%d buffers: member offsets %v, want %s", buffers, offsets, want)
		}
	}
}

// TestNoIntegerSelectOfConstants pins the llvmpipe workaround: no i32 or u32
// OpSelect chooses between two constants (llvmpipe 22.3 folds such selects by
// float patterns, and select(c, 0x80000000, 0x3f800000) gave 0); those are
// blended on the bits. The mask select (all ones or zero) is the one exception.
func TestNoIntegerSelectOfConstants(t *testing.T) {
	for _, np := range allPrograms(t) {
		_, insts := decode(t, mustEmit(t, np.name, np.prog).Words)
		ints := map[uint32]bool{}
		constants := map[uint32]uint32{}
		for _, in := range insts {
			switch in.op {
			case opTypeInt:
				ints[in.args[0]] = true
			case opConstant, opSpecConstant:
				constants[in.args[1]] = in.args[2]
			}
		}
		for _, in := range insts {
			if in.op != opSelect || !ints[in.args[0]] {
				continue
			}
			a, aConst := constants[in.args[3]]
			b, bConst := constants[in.args[4]]
			if aConst && bConst && !(a == 0xFFFFFFFF && b == 0) {
				t.Errorf("%s: OpSelect %d chooses between the constants %#x and %#x", np.name, in.args[1], a, b)
			}
		}
	}
}
