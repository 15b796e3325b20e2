package spirv

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// The semantic test programs: every IR construct, every operator on every type
// ir.Validate accepts for it, every cast, every atomic, and control flow shaped to
// stress structured SPIR-V (breaks and returns in nested loops, arms that all
// leave, dead code after a return).

type namedProgram struct {
	name string
	prog *ir.Program
}

// numericTypes are the buffer element types of the IR v1 tables.
var numericTypes = []ir.Type{ir.I32, ir.U32, ir.F32}

// v1Types are the types of IR v1 and v1.1, which the harness's tables cover;
// IR v1.2's f16 and bf16 take no parameters and few operators, so they have
// tables of their own (v12Programs).
var v1Types = []ir.Type{ir.Bool, ir.I32, ir.U32, ir.F32}

// harness is a program skeleton with a source and a sink of every type: a read
// buffer in_T and a write buffer out_T for each numeric type, a shared array s_T
// of every type, a parameter p_T of every type, and the locals gid and lid.
type harness struct {
	*ir.Builder
	gid, lid ir.Expr
}

func newHarness(name string) *harness {
	b := ir.NewBuilder(name, 64, 1, 1)
	for _, t := range numericTypes {
		b.Buffer("in_"+t.String(), t, ir.Read)
		b.Buffer("out_"+t.String(), t, ir.Write)
	}
	for _, t := range v1Types {
		b.Shared("s_"+t.String(), t, 64)
		b.Param("p_"+t.String(), t, edgeLiteral(t, 1))
	}
	h := &harness{Builder: b}
	h.gid = b.Let("gid", ir.GlobalID(0))
	h.lid = b.Let("lid", ir.LocalID(0))
	return h
}

// edgeLiteral returns the k-th interesting value of type t (k taken modulo the
// number of values): zeros of both signs, extremes, NaN, infinities, -1.
func edgeLiteral(t ir.Type, k int) ir.Literal {
	var values []uint32
	switch t {
	case ir.Bool:
		values = []uint32{0, 1}
	case ir.I32:
		values = []uint32{0, 1, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 33}
	case ir.U32:
		values = []uint32{0, 1, 0x80000000, 0xFFFFFFFF, 33}
	case ir.F32:
		values = []uint32{0, 0x80000000, math.Float32bits(1.5), 0x7FC00000, 0x7F800000, 0xFF800000,
			math.Float32bits(4294967296), math.Float32bits(-2147483648), 0x7F7FFFFF, 1}
	}
	return ir.Literal{Type: t, Bits: values[k%len(values)]}
}

// source returns operand k of type t: a load (buffer or shared), the parameter, or
// a literal.
func (h *harness) source(t ir.Type, k int) ir.Expr {
	switch k % 3 {
	case 0:
		if t == ir.Bool {
			return ir.Load("s_bool", h.lid)
		}
		return ir.Load("in_"+t.String(), h.gid)
	case 1:
		return ir.Param("p_" + t.String())
	}
	return edgeLiteral(t, k)
}

// sink stores x of type t: to out_T for numeric types, to s_bool for bool.
func (h *harness) sink(blk *ir.Block, t ir.Type, x ir.Expr) {
	if t == ir.Bool {
		blk.Store("s_bool", h.lid, x)
		return
	}
	blk.Store("out_"+t.String(), h.gid, x)
}

// accepted returns the program when ir.Validate accepts it. A program rejected
// for anything but its body (a type the operator does not take) is a broken
// harness and fails the test, so no case is skipped by accident.
func accepted(tb testing.TB, b *ir.Builder) (*ir.Program, bool) {
	tb.Helper()
	p, err := b.Build()
	var verr *ir.ValidationError
	switch {
	case err == nil:
		return p, true
	case errors.As(err, &verr) && strings.HasPrefix(verr.Path, "body"):
		return nil, false
	}
	tb.Fatalf("harness program %q is rejected outside its body: %v", b.Program().Name, err)
	return nil, false
}

// keep appends h's program to out when Validate accepts it, and counts it in
// seen[key].
func keep(tb testing.TB, h *harness, out *[]namedProgram, seen map[string]int, key string) {
	tb.Helper()
	if p, ok := accepted(tb, h.Builder); ok {
		*out = append(*out, namedProgram{p.Name, p})
		seen[key]++
	}
}

// unaryPrograms applies every unary operator to every type Validate accepts for it,
// with each kind of operand. seen counts the accepted types per operator.
func unaryPrograms(tb testing.TB, seen map[string]int) []namedProgram {
	var out []namedProgram
	for _, op := range ir.UnaryOps() {
		for _, t := range v1Types {
			name := fmt.Sprintf("unary.%s.%s", op, t)
			h := newHarness(name)
			for k := 0; k < 6; k++ {
				h.sink(&h.Block, t, ir.UnaryExpr{Op: op, X: h.source(t, k)})
			}
			keep(tb, h, &out, seen, "unary "+op.String())
		}
	}
	return out
}

// binaryPrograms applies every binary operator to every type Validate accepts for
// it, with every pairing of operand kinds.
func binaryPrograms(tb testing.TB, seen map[string]int) []namedProgram {
	var out []namedProgram
	for _, op := range ir.BinaryOps() {
		for _, t := range v1Types {
			name := fmt.Sprintf("binary.%s.%s", op, t)
			h := newHarness(name)
			rt := t
			if op.IsComparison() {
				rt = ir.Bool
			}
			for k := 0; k < 9; k++ {
				h.sink(&h.Block, rt, ir.BinaryExpr{Op: op, X: h.source(t, k), Y: h.source(t, k/3+k)})
			}
			keep(tb, h, &out, seen, "binary "+op.String())
		}
	}
	return out
}

// castPrograms casts every type to every type Validate accepts for the pair.
func castPrograms(tb testing.TB, seen map[string]int) []namedProgram {
	return conversionPrograms(tb, seen, "cast", 12, ir.Cast)
}

// conversionPrograms converts (conv) every type to every type Validate accepts
// for the pair, from n operands of each kind; seen[kind] counts the accepted
// pairs.
func conversionPrograms(tb testing.TB, seen map[string]int, kind string, n int, conv func(ir.Type, ir.Expr) ir.Expr) []namedProgram {
	var out []namedProgram
	for _, from := range v1Types {
		for _, to := range v1Types {
			name := fmt.Sprintf("%s.%s.%s", kind, from, to)
			h := newHarness(name)
			for k := 0; k < n; k++ {
				h.sink(&h.Block, to, conv(to, h.source(from, k)))
			}
			keep(tb, h, &out, seen, kind)
		}
	}
	return out
}

// atomicPrograms applies every atomic operation to u32 and i32 buffers (write and
// read_write) and shared arrays, with and without a result.
func atomicPrograms(tb testing.TB, seen map[string]int) []namedProgram {
	var out []namedProgram
	for _, op := range ir.AtomicOps() {
		for _, t := range []ir.Type{ir.U32, ir.I32} {
			for _, result := range []string{"", "old"} {
				name := fmt.Sprintf("atomic.%s.%s.with_result_%t", op, t, result != "")
				h := newHarness(name)
				h.Buffer("acc_w", t, ir.Write)
				h.Buffer("acc_rw", t, ir.ReadWrite)
				for i, target := range []string{"acc_w", "acc_rw", "s_" + t.String()} {
					res := ""
					if result != "" {
						res = fmt.Sprintf("%s%d", result, i)
					}
					st := ir.AtomicStmt{Op: op, Target: target, Index: h.source(ir.U32, i), Value: h.source(t, i+1), Result: res}
					if op == ir.AtomicCompareExchange {
						st.Compare = h.source(t, i+2)
					}
					h.Append(st)
					if res != "" {
						h.sink(&h.Block, t, ir.Local(res))
					}
				}
				keep(tb, h, &out, seen, "atomic "+op.String())
			}
		}
	}
	return out
}

// constructPrograms covers the remaining expressions and statements, one program
// per construct.
func constructPrograms() []namedProgram {
	var out []namedProgram
	add := func(name string, build func(h *harness)) {
		h := newHarness(name)
		build(h)
		out = append(out, namedProgram{name, h.MustBuild()})
	}
	add("builtins", func(h *harness) {
		kinds := []ir.BuiltinKind{ir.GlobalIDBuiltin, ir.LocalIDBuiltin, ir.WorkgroupIDBuiltin,
			ir.NumWorkgroupsBuiltin, ir.WorkgroupSizeBuiltin}
		for _, k := range kinds {
			for axis := uint8(0); axis < 3; axis++ {
				h.sink(&h.Block, ir.U32, ir.BuiltinRef{Kind: k, Axis: axis})
			}
		}
	})
	add("len_every_buffer", func(h *harness) {
		for _, t := range numericTypes {
			h.sink(&h.Block, ir.U32, ir.Len("in_"+t.String()))
			h.sink(&h.Block, ir.U32, ir.Len("out_"+t.String()))
		}
	})
	add("load_store_every_array", func(h *harness) {
		for _, t := range v1Types {
			s := "s_" + t.String()
			h.Store(s, h.lid, h.source(t, 1))
			h.Store(s, ir.LitU32(1000), h.source(t, 2))
			h.sink(&h.Block, t, ir.Load(s, ir.Add(h.lid, ir.LitU32(1))))
			if t != ir.Bool {
				h.Store("out_"+t.String(), ir.LitU32(0xFFFFFFFF), ir.Load("in_"+t.String(), ir.LitU32(0xFFFFFFFF)))
			}
		}
	})
	add("select_fma_every_type", func(h *harness) {
		for _, t := range v1Types {
			h.sink(&h.Block, t, ir.Select(h.source(ir.Bool, 0), h.source(t, 0), h.source(t, 1)))
			h.sink(&h.Block, t, ir.Select(h.source(ir.Bool, 1), h.source(t, 2), h.source(t, 0)))
		}
		h.sink(&h.Block, ir.F32, ir.Fma(h.source(ir.F32, 0), h.source(ir.F32, 1), h.source(ir.F32, 2)))
	})
	add("var_every_type", func(h *harness) {
		for _, t := range v1Types {
			v := h.Var("v_"+t.String(), t, h.source(t, 0))
			h.If(h.source(ir.Bool, 1), func(then *ir.Block) {
				then.Assign("v_"+t.String(), h.source(t, 2))
			})
			h.sink(&h.Block, t, v)
		}
	})
	add("for_i32_and_u32", func(h *harness) {
		h.For("i", ir.I32, ir.LitI32(-5), ir.Param("p_i32"), ir.LitI32(2), func(body *ir.Block, i ir.Expr) {
			body.Store("out_i32", ir.Cast(ir.U32, i), i)
		})
		h.For("u", ir.U32, h.gid, ir.Len("in_u32"), ir.WorkgroupSize(0), func(body *ir.Block, u ir.Expr) {
			body.Store("out_u32", u, ir.Load("in_u32", u))
		})
		h.For("empty", ir.U32, ir.LitU32(0), ir.LitU32(0), ir.LitU32(1), nil)
	})
	add("nested_loops_break_return", func(h *harness) {
		acc := h.Var("acc", ir.U32, ir.LitU32(0))
		h.For("i", ir.U32, ir.LitU32(0), ir.LitU32(10), ir.LitU32(1), func(outer *ir.Block, i ir.Expr) {
			n := outer.Var("n", ir.U32, i)
			outer.While(ir.Gt(n, ir.LitU32(0)), func(inner *ir.Block) {
				inner.If(ir.Eq(n, ir.LitU32(3)), func(then *ir.Block) { then.Break() })
				inner.If(ir.Eq(n, ir.Param("p_u32")), func(then *ir.Block) {
					then.Store("out_u32", h.gid, acc)
					then.Return()
				})
				inner.For("j", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(innermost *ir.Block, j ir.Expr) {
					innermost.If(ir.Gt(j, ir.LitU32(5)), func(then *ir.Block) { then.Break() })
					innermost.Assign("acc", ir.Add(acc, j))
				})
				inner.Assign("n", ir.Sub(n, ir.LitU32(1)))
			})
			outer.If(ir.Gt(acc, ir.LitU32(100)), func(then *ir.Block) { then.Break() })
		})
		h.sink(&h.Block, ir.U32, acc)
	})
	add("arms_that_all_leave", func(h *harness) {
		h.While(ir.LitBool(true), func(loop *ir.Block) {
			loop.IfElse(h.source(ir.Bool, 0), func(then *ir.Block) { then.Break() },
				func(els *ir.Block) { els.Break() })
			loop.Store("out_u32", h.gid, ir.LitU32(1)) // unreachable
		})
		h.For("i", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(body *ir.Block, i ir.Expr) {
			body.IfElse(h.source(ir.Bool, 1), func(then *ir.Block) { then.Break() },
				func(els *ir.Block) { els.Return() })
		})
		h.IfElse(ir.Lt(h.gid, ir.LitU32(3)), func(then *ir.Block) { then.Return() },
			func(els *ir.Block) { els.Return() })
		h.Let("dead", ir.LitU32(7))
		h.Store("out_u32", h.gid, ir.Local("dead"))
	})
	add("loop_body_always_returns", func(h *harness) {
		h.For("i", ir.U32, ir.LitU32(0), ir.LitU32(4), ir.LitU32(1), func(body *ir.Block, i ir.Expr) {
			body.Store("out_u32", i, i)
			body.Return()
		})
		h.While(h.source(ir.Bool, 1), func(loop *ir.Block) { loop.Return() })
	})
	add("return_first", func(h *harness) {
		h.Return()
		h.Store("out_u32", h.gid, ir.LitU32(1))
	})
	add("empty_arms_and_loops", func(h *harness) {
		h.IfElse(h.source(ir.Bool, 0), nil, nil)
		h.IfElse(h.source(ir.Bool, 1), nil, func(els *ir.Block) { els.Store("out_u32", h.gid, ir.LitU32(2)) })
		h.While(ir.LitBool(false), nil)
	})
	add("sibling_scopes_reuse_names", func(h *harness) {
		h.IfElse(h.source(ir.Bool, 0), func(then *ir.Block) {
			x := then.Var("x", ir.U32, ir.LitU32(1))
			then.Store("out_u32", h.gid, x)
		}, func(els *ir.Block) {
			x := els.Let("x", ir.LitF32(2))
			els.Store("out_f32", h.gid, x)
		})
		for range 2 {
			h.For("k", ir.U32, ir.LitU32(0), ir.LitU32(2), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
				y := body.Var("y", ir.U32, k)
				body.Store("out_u32", k, y)
			})
		}
	})
	add("barriers_and_shared", func(h *harness) {
		h.Store("s_f32", h.lid, ir.Load("in_f32", h.gid))
		h.Barrier()
		h.For("i", ir.U32, ir.LitU32(0), ir.LitU32(3), ir.LitU32(1), func(body *ir.Block, i ir.Expr) {
			body.Barrier()
			body.If(ir.Lt(i, ir.Param("p_u32")), func(then *ir.Block) { then.Barrier() })
		})
		h.While(ir.Lt(ir.Load("s_u32", ir.LitU32(0)), ir.LitU32(4)), func(loop *ir.Block) {
			loop.Atomic(ir.AtomicAdd, "s_u32", ir.LitU32(0), ir.LitU32(1))
			loop.Barrier()
		})
		h.sink(&h.Block, ir.F32, ir.Load("s_f32", ir.Sub(ir.LitU32(63), h.lid)))
	})
	add("atomic_result_in_loop", func(h *harness) {
		h.While(ir.LitBool(true), func(loop *ir.Block) {
			old := loop.AtomicResult(ir.AtomicAdd, "s_u32", h.lid, ir.LitU32(1), "old")
			loop.If(ir.Gt(old, ir.LitU32(10)), func(then *ir.Block) { then.Break() })
		})
	})
	add("deep_nesting", func(h *harness) {
		var nest func(blk *ir.Block, depth int)
		nest = func(blk *ir.Block, depth int) {
			if depth == 0 {
				blk.Store("out_u32", h.gid, ir.LitU32(uint32(depth)))
				return
			}
			if depth%2 == 0 {
				blk.IfElse(ir.Lt(h.gid, ir.LitU32(uint32(depth))), func(then *ir.Block) { nest(then, depth-1) },
					func(els *ir.Block) { els.Return() })
				return
			}
			blk.While(ir.Gt(h.gid, ir.LitU32(uint32(depth))), func(loop *ir.Block) { nest(loop, depth-1); loop.Break() })
		}
		nest(&h.Block, 40)
	})
	return append(out,
		namedProgram{"no_buffers", bare("no_buffers", 0)},
		namedProgram{"max_buffers", bare("max_buffers", ir.MaxBuffers)})
}

// bare is a program of n u32 write buffers (none when n is 0) and no parameters.
func bare(name string, n int) *ir.Program {
	b := ir.NewBuilder(name, 1, 1, 1)
	for i := range n {
		buf := b.Buffer(fmt.Sprintf("b%d", i), ir.U32, ir.Write)
		b.Store(buf, ir.LitU32(0), ir.Len(buf))
	}
	if n == 0 {
		b.Shared("s", ir.U32, 1)
		b.Store("s", ir.LocalID(0), ir.LitU32(1))
	}
	return b.MustBuild()
}

// semanticPrograms is the whole table; seen counts accepted types per operator.
func semanticPrograms(tb testing.TB, seen map[string]int) []namedProgram {
	var out []namedProgram
	out = append(out, unaryPrograms(tb, seen)...)
	out = append(out, binaryPrograms(tb, seen)...)
	out = append(out, castPrograms(tb, seen)...)
	out = append(out, atomicPrograms(tb, seen)...)
	out = append(out, v11Programs(tb, seen)...)
	out = append(out, v12Programs(tb)...)
	return append(out, constructPrograms()...)
}
