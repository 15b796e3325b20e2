package interp

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

var lid = ir.LocalID(0)

// lanesProgram is a one-workgroup program of n lanes with a u32 write buffer "out"
// of count elements; body fills the program.
func lanesProgram(n, count uint32, body func(b *ir.Builder, out string)) *ir.Program {
	b := ir.NewBuilder("test.lanes", n, 1, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, count)
	body(b, out)
	return b.Program()
}

func runLanes(t *testing.T, p *ir.Program) []uint32 {
	t.Helper()
	return bytesU32(mustRun(t, p, Options{}, Launch{Grid: [3]uint32{1, 1, 1}})[0])
}

func u32(v uint32) ir.Expr { return ir.LitU32(v) }

func TestEarlyReturn(t *testing.T) {
	p := lanesProgram(8, 8, func(b *ir.Builder, out string) {
		b.If(ir.Ge(lid, u32(3)), func(then *ir.Block) { then.Return() })
		b.Store(out, lid, ir.Add(lid, u32(100)))
	})
	if got, want := runLanes(t, p), []uint32{100, 101, 102, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReturnInsideLoopEndsOnlyThoseLanes(t *testing.T) {
	p := lanesProgram(8, 8, func(b *ir.Builder, out string) {
		s := b.Var("s", ir.U32, u32(0))
		b.For("i", ir.U32, u32(0), u32(10), u32(1), func(body *ir.Block, i ir.Expr) {
			body.If(ir.LAnd(ir.Eq(i, lid), ir.Eq(ir.Rem(lid, u32(2)), u32(0))), func(then *ir.Block) { then.Return() })
			body.Assign("s", ir.Add(s, u32(1)))
		})
		b.Store(out, lid, s)
	})
	if got, want := runLanes(t, p), []uint32{0, 10, 0, 10, 0, 10, 0, 10}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestWhileBreakPerLane(t *testing.T) {
	p := lanesProgram(8, 8, func(b *ir.Builder, out string) {
		n := b.Var("n", ir.U32, u32(0))
		b.While(ir.LitBool(true), func(body *ir.Block) {
			body.If(ir.Ge(n, lid), func(then *ir.Block) { then.Break() })
			body.Assign("n", ir.Add(n, u32(1)))
		})
		b.Store(out, lid, ir.Mul(n, u32(10)))
	})
	if got, want := runLanes(t, p), []uint32{0, 10, 20, 30, 40, 50, 60, 70}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestWhileConditionPerLane(t *testing.T) {
	p := lanesProgram(4, 4, func(b *ir.Builder, out string) {
		n := b.Var("n", ir.U32, u32(0))
		b.While(ir.Lt(n, ir.Mul(lid, u32(3))), func(body *ir.Block) {
			body.Assign("n", ir.Add(n, u32(2)))
		})
		b.Store(out, lid, n)
	})
	if got, want := runLanes(t, p), []uint32{0, 4, 6, 10}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// recordLoop stores the loop variable of each iteration into out[k] (as u32 bits)
// and stops after limit iterations.
func recordLoop(typ ir.Type, from, to, step ir.Expr, limit uint32) *ir.Program {
	return lanesProgram(1, 8, func(b *ir.Builder, out string) {
		k := b.Var("k", ir.U32, u32(0))
		b.For("i", typ, from, to, step, func(body *ir.Block, i ir.Expr) {
			body.Store(out, k, ir.Cast(ir.U32, i))
			body.Assign("k", ir.Add(k, u32(1)))
			body.If(ir.Eq(k, u32(limit)), func(then *ir.Block) { then.Break() })
		})
		b.Store(out, u32(7), k)
	})
}

func TestForLoops(t *testing.T) {
	const maxI = math.MaxInt32
	tests := []struct {
		name string
		p    *ir.Program
		want []uint32 // recorded values, then the iteration count in out[7]
	}{
		{"i32 negative range", recordLoop(ir.I32, ir.LitI32(-5), ir.LitI32(5), ir.LitI32(3), 6),
			[]uint32{i32(-5), i32(-2), 1, 4, 0, 0, 0, 4}},
		{"i32 compares signed", recordLoop(ir.I32, ir.LitI32(-1), ir.LitI32(1), ir.LitI32(1), 6),
			[]uint32{i32(-1), 0, 0, 0, 0, 0, 0, 2}},
		{"u32 compares unsigned", recordLoop(ir.U32, u32(0xFFFFFFFF), u32(1), u32(1), 6),
			[]uint32{0, 0, 0, 0, 0, 0, 0, 0}},
		{"empty range", recordLoop(ir.U32, u32(5), u32(5), u32(1), 6),
			[]uint32{0, 0, 0, 0, 0, 0, 0, 0}},
		{"u32 step wraps", recordLoop(ir.U32, u32(0xFFFFFFF0), u32(0xFFFFFFFF), u32(8), 4),
			[]uint32{0xFFFFFFF0, 0xFFFFFFF8, 0, 8, 0, 0, 0, 4}},
		{"i32 step wraps", recordLoop(ir.I32, ir.LitI32(maxI-10), ir.LitI32(maxI), ir.LitI32(8), 3),
			[]uint32{maxI - 10, maxI - 2, i32(math.MinInt32 + 5), 0, 0, 0, 0, 3}},
		{"negative step", recordLoop(ir.I32, ir.LitI32(3), ir.LitI32(10), ir.LitI32(-2), 4),
			[]uint32{3, 1, i32(-1), i32(-3), 0, 0, 0, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runLanes(t, tc.p); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestForBoundsEvaluatedOnce(t *testing.T) {
	p := lanesProgram(1, 2, func(b *ir.Builder, out string) {
		lim := b.Var("lim", ir.U32, u32(3))
		step := b.Var("step", ir.U32, u32(1))
		c := b.Var("c", ir.U32, u32(0))
		b.For("i", ir.U32, u32(0), lim, step, func(body *ir.Block, _ ir.Expr) {
			body.Assign("lim", ir.Add(lim, u32(1)))
			body.Assign("step", u32(0))
			body.Assign("c", ir.Add(c, u32(1)))
		})
		b.Store(out, u32(0), c)
		b.Store(out, u32(1), lim)
	})
	if got, want := runLanes(t, p), []uint32{3, 6}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestNestedLoopsBreakInnermost(t *testing.T) {
	p := lanesProgram(4, 4, func(b *ir.Builder, out string) {
		c := b.Var("c", ir.U32, u32(0))
		b.For("i", ir.U32, u32(0), u32(3), u32(1), func(outer *ir.Block, _ ir.Expr) {
			outer.For("j", ir.U32, u32(0), u32(10), u32(1), func(inner *ir.Block, j ir.Expr) {
				inner.If(ir.Ge(j, lid), func(then *ir.Block) { then.Break() })
				inner.Assign("c", ir.Add(c, u32(1)))
			})
			outer.Assign("c", ir.Add(c, u32(100)))
		})
		b.Store(out, lid, c)
	})
	if got, want := runLanes(t, p), []uint32{300, 303, 306, 309}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestIfElseMasksAssignments(t *testing.T) {
	p := lanesProgram(6, 6, func(b *ir.Builder, out string) {
		v := b.Var("v", ir.U32, u32(0))
		b.IfElse(ir.Eq(ir.Rem(lid, u32(2)), u32(0)),
			func(then *ir.Block) { then.Assign("v", ir.Add(v, u32(1))) },
			func(els *ir.Block) {
				els.IfElse(ir.Lt(lid, u32(3)),
					func(then *ir.Block) { then.Assign("v", u32(20)) },
					func(els *ir.Block) { els.Assign("v", u32(30)) })
			})
		b.Store(out, lid, v)
	})
	if got, want := runLanes(t, p), []uint32{1, 20, 1, 30, 1, 30}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A let of a var keeps the value it had when the let ran.
func TestLetSnapshotsVar(t *testing.T) {
	p := lanesProgram(2, 2, func(b *ir.Builder, out string) {
		v := b.Var("v", ir.U32, ir.Add(lid, u32(1)))
		x := b.Let("x", v)
		b.Assign("v", u32(9))
		b.Store(out, lid, ir.Add(x, ir.Mul(v, u32(100))))
	})
	if got, want := runLanes(t, p), []uint32{901, 902}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestVarOfUniformValueIsIndependent(t *testing.T) {
	p := lanesProgram(4, 4, func(b *ir.Builder, out string) {
		v := b.Var("v", ir.U32, u32(5))
		b.If(ir.Lt(lid, u32(2)), func(then *ir.Block) { then.Assign("v", ir.Add(v, lid)) })
		b.Store(out, lid, ir.Add(v, u32(5)))
	})
	if got, want := runLanes(t, p), []uint32{10, 11, 10, 10}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func runErr(p *ir.Program, l Launch) error {
	_, err := Run(context.Background(), p, Options{}, l)
	return err
}

func TestBarrierDivergence(t *testing.T) {
	one := Launch{Grid: [3]uint32{1, 1, 1}}
	tests := []struct {
		name string
		body func(b *ir.Builder)
		grid [3]uint32
		want []string // substrings of the error; none means no error
	}{
		{"return before barrier", func(b *ir.Builder) {
			b.If(ir.Eq(lid, u32(1)), func(then *ir.Block) { then.Return() })
			b.Barrier()
		}, one.Grid, []string{"body[1]", "3 of 4", "workgroup (0,0,0)", "local id (1,0,0)", "Fix:"}},
		{"barrier in non-uniform if", func(b *ir.Builder) {
			b.Let("x", u32(1))
			b.If(ir.Lt(lid, u32(2)), func(then *ir.Block) { then.Let("y", u32(2)); then.Barrier() })
		}, one.Grid, []string{"body[1].then[1]", "2 of 4", "local id (2,0,0)"}},
		{"barrier in non-uniform else", func(b *ir.Builder) {
			b.IfElse(ir.Lt(lid, u32(3)), nil, func(els *ir.Block) { els.Barrier() })
		}, one.Grid, []string{"body[0].else[0]", "1 of 4"}},
		{"barrier in loop with per-lane trip counts", func(b *ir.Builder) {
			b.For("i", ir.U32, u32(0), ir.Add(lid, u32(1)), u32(1), func(body *ir.Block, _ ir.Expr) { body.Barrier() })
		}, one.Grid, []string{"body[0].body[0]", "3 of 4"}},
		{"barrier after a break in the loop", func(b *ir.Builder) {
			b.While(ir.LitBool(true), func(body *ir.Block) {
				body.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Break() })
				body.Barrier()
			})
		}, one.Grid, []string{"body[0].body[1]", "3 of 4"}},
		{"only one workgroup diverges", func(b *ir.Builder) {
			b.If(ir.LAnd(ir.Eq(ir.WorkgroupID(0), u32(2)), ir.Eq(lid, u32(3))), func(then *ir.Block) { then.Return() })
			b.Barrier()
		}, [3]uint32{3, 1, 1}, []string{"workgroup (2,0,0)", "local id (3,0,0)"}},
		{"uniform if", func(b *ir.Builder) {
			b.If(ir.Eq(ir.WorkgroupID(0), u32(1)), func(then *ir.Block) { then.Barrier() })
		}, [3]uint32{2, 1, 1}, nil},
		{"uniform loop", func(b *ir.Builder) {
			b.For("i", ir.U32, u32(0), u32(3), u32(1), func(body *ir.Block, _ ir.Expr) { body.Barrier() })
		}, one.Grid, nil},
		{"lanes reconverge after a divergent loop", func(b *ir.Builder) {
			b.For("i", ir.U32, u32(0), u32(4), u32(1), func(body *ir.Block, i ir.Expr) {
				body.If(ir.Eq(i, lid), func(then *ir.Block) { then.Break() })
			})
			b.If(ir.Lt(lid, u32(2)), func(then *ir.Block) { then.Let("z", u32(0)) })
			b.Barrier()
		}, one.Grid, nil},
		{"all lanes return before the barrier", func(b *ir.Builder) {
			b.Return()
			b.Barrier()
		}, one.Grid, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := ir.NewBuilder("test.barrier", 4, 1, 1)
			b.Buffer("out", ir.U32, ir.Write)
			tc.body(b)
			err := runErr(b.Program(), Launch{Grid: tc.grid})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("divergent barrier ran without an error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// Reversing through shared memory is only correct if every lane's store happens
// before any lane's load: the barrier orders them across the whole workgroup.
func TestBarrierOrdersSharedMemory(t *testing.T) {
	const n = 64
	b := ir.NewBuilder("test.reverse", n, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, n)
	gid := b.Let("gid", ir.GlobalID(0))
	b.Store(sh, lid, ir.Load(in, gid))
	b.Barrier()
	b.Store(out, gid, ir.Load(sh, ir.Sub(u32(n-1), lid)))
	src := make([]uint32, 3*n)
	for i := range src {
		src[i] = uint32(i * 7)
	}
	outs := mustRun(t, b.Program(), Options{}, Launch{
		Grid: [3]uint32{3, 1, 1}, Inputs: [][]byte{u32Bytes(src...)}, OutputCounts: []uint32{0, 3 * n},
	})
	got := bytesU32(outs[0])
	for g := range 3 {
		for i := range n {
			if want := src[g*n+n-1-i]; got[g*n+i] != want {
				t.Fatalf("out[%d] = %d, want %d", g*n+i, got[g*n+i], want)
			}
		}
	}
}

// A tree reduction in shared memory, with barriers inside a uniform loop.
func TestSharedTreeReduction(t *testing.T) {
	const n = 128
	b := ir.NewBuilder("test.reduce", n, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	sh := b.Shared("sh", ir.U32, n)
	b.Store(sh, lid, ir.Load(in, ir.GlobalID(0)))
	b.Barrier()
	stride := b.Var("stride", ir.U32, u32(n/2))
	b.While(ir.Gt(stride, u32(0)), func(body *ir.Block) {
		body.If(ir.Lt(lid, stride), func(then *ir.Block) {
			then.Store(sh, lid, ir.Add(ir.Load(sh, lid), ir.Load(sh, ir.Add(lid, stride))))
		})
		body.Barrier()
		body.Assign("stride", ir.Shr(stride, u32(1)))
	})
	b.If(ir.Eq(lid, u32(0)), func(then *ir.Block) { then.Store(out, ir.WorkgroupID(0), ir.Load(sh, u32(0))) })
	src := make([]uint32, 2*n)
	var sums [2]uint32
	for i := range src {
		src[i] = uint32(i*i + 1)
		sums[i/n] += src[i]
	}
	outs := mustRun(t, b.Program(), Options{}, Launch{
		Grid: [3]uint32{2, 1, 1}, Inputs: [][]byte{u32Bytes(src...)}, OutputCounts: []uint32{0, 2},
	})
	if got := bytesU32(outs[0]); !slices.Equal(got, sums[:]) {
		t.Errorf("got %v, want %v", got, sums)
	}
}
