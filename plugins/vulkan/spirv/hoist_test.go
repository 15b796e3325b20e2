package spirv

import (
	"math/rand/v2"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// The tests of speculated ifs (hoist.go): vector_add's loads leave the
// selection construct, ifs with a side effect or an order to keep stay as they
// were, and every module equals the oracle on the interpreter, which fails on
// any access outside a buffer or shared array.

// bufferAccesses counts the loads and stores through StorageBuffer and
// PhysicalStorageBuffer pointers inside a selection construct (between an
// OpSelectionMerge and the label of its merge block, which the emitter places
// after both arms) and outside one.
type bufferAccesses struct{ loadsIn, loadsOut, storesIn, storesOut int }

func countBufferAccesses(t *testing.T, m *Module) bufferAccesses {
	_, insts := decode(t, m.Words)
	defs := resultIDs(insts)
	buffer := func(ptr uint32) bool {
		pt, ok := defs[defs[ptr].args[0]]
		return ok && pt.op == opTypePointer && (pt.args[1] == storageStorageBuffer || pt.args[1] == storagePhysicalStorageBuffer)
	}
	var open []uint32 // the merge blocks of the enclosing selection constructs
	var n bufferAccesses
	for _, in := range insts {
		inside := len(open) > 0
		switch {
		case in.op == opSelectionMerge:
			open = append(open, in.args[0])
		case in.op == opLabel && inside && open[len(open)-1] == in.args[0]:
			open = open[:len(open)-1]
		case in.op == opLoad && buffer(in.args[2]) && inside:
			n.loadsIn++
		case in.op == opLoad && buffer(in.args[2]):
			n.loadsOut++
		case in.op == opStore && buffer(in.args[0]) && inside:
			n.storesIn++
		case in.op == opStore && buffer(in.args[0]):
			n.storesOut++
		}
	}
	if len(open) != 0 {
		t.Fatalf("selection constructs merging at %v never close", open)
	}
	return n
}

// TestVectorAddLoadsSpeculated: vector_add at epi = 4, folded, loads its four
// pairs of a and b outside any selection construct (the lanes' guards fold
// away), and each if on i < len(out) holds only its store, on descriptors and
// on buffer device addresses; at every size the results equal the oracle's.
func TestVectorAddLoadsSpeculated(t *testing.T) {
	val := spirvVal(t)
	k, _ := kernels.Lookup("vector_add")
	p := k.Program()
	var spec ir.SpecMap
	spec.Set("epi", ir.SpecU32(4))
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name      string
		addresses uint64
		disjoint  bool
	}{{"descriptors", 0, false}, {"addressed", 0b111, false}, {"disjoint", 0, true}} {
		target := fullTarget
		target.FoldSpec = &spec
		target.BufferAddresses = tc.addresses
		target.DisjointBindings = tc.disjoint
		m, err := EmitFor(p, target)
		if err != nil {
			t.Fatal(err)
		}
		validate(t, val, "vector_add "+tc.name, m)
		want := bufferAccesses{loadsOut: 8, storesIn: 4}
		if got := countBufferAccesses(t, m); got != want {
			t.Errorf("%s: buffer accesses %+v, want %+v (loads before the branch, the store behind it)", tc.name, got, want)
		}
		for _, size := range []int{0, 1, 7, 257, 1021, 4099} {
			c := k.NewCase(rng, size)
			c.Spec = spec
			c.Grid = ir.GridFor(k.Invocations(c), p.WorkgroupSize)
			runBoth(t, "vector_add "+tc.name, p, m, c)
		}
	}
}

// speculationWG and speculationN are the workgroup width and the element count
// of the programs below: two workgroups, the second partly out of bounds.
const (
	speculationWG = 64
	speculationN  = 100
)

// speculationProgram is a program over idx (u32, values below 100, zeros
// included), a (f32), io (u32, read_write), cnt (u32, read_write) and the
// outputs out (f32) and out2 (u32), with the shared array s of
// speculationWG u32 holding 3·lid; body adds the statements under test, given
// the global id.
func speculationProgram(name string, body func(b *ir.Builder, g ir.Expr)) *ir.Program {
	b := ir.NewBuilder("t.speculate."+name, speculationWG, 1, 1)
	b.Buffer("idx", ir.U32, ir.Read)
	b.Buffer("a", ir.F32, ir.Read)
	b.Buffer("io", ir.U32, ir.ReadWrite)
	b.Buffer("cnt", ir.U32, ir.ReadWrite)
	b.Buffer("out", ir.F32, ir.Write)
	b.Buffer("out2", ir.U32, ir.Write)
	s := b.Shared("s", ir.U32, speculationWG)
	b.Store(s, ir.LocalID(0), ir.Mul(ir.LocalID(0), ir.LitU32(3)))
	b.Barrier()
	body(b, b.Let("g", ir.GlobalID(0)))
	return b.MustBuild()
}

// speculationCase is a launch of a speculationProgram.
func speculationCase(rng *rand.Rand) kernels.Case {
	idx := make([]uint32, speculationN)
	for i := range idx {
		idx[i] = rng.Uint32N(100)
	}
	idx[3], idx[9] = 0, 0
	a := make([]float32, speculationN)
	for i := range a {
		a[i] = rng.Float32()*8 - 4
	}
	return kernels.Case{
		Grid:         [3]uint32{2, 1, 1},
		Inputs:       [][]byte{kernels.U32Bytes(idx), kernels.F32Bytes(a), kernels.U32Bytes(idx), kernels.U32Bytes([]uint32{0}), nil, nil},
		OutputCounts: []uint32{0, 0, 0, 0, speculationN, speculationN},
	}
}

// TestSpeculatedIfs: ifs whose arms hold only lets, stores and assigns keep no
// buffer load behind their branch; loads that are out of bounds (of a buffer or
// of the shared array) or divide by a loaded zero, stores out of bounds, else
// arms, assigns and arms without a store give the oracle's results, on
// descriptors and with every buffer addressed. A buffer load after a store to
// another buffer is speculated only with Target.DisjointBindings.
func TestSpeculatedIfs(t *testing.T) {
	val := spirvVal(t)
	progs := []*ir.Program{
		speculationProgram("if_else", func(b *ir.Builder, g ir.Expr) {
			v := b.Var("v", ir.F32, ir.LitF32(-1))
			k := ir.Load("idx", g)
			b.IfElse(ir.Lt(k, ir.LitU32(50)), func(then *ir.Block) {
				x := then.Let("x", ir.Load("a", ir.Add(k, ir.LitU32(20)))) // out of bounds from k = 80 on
				d := then.Let("d", ir.Div(ir.LitU32(1000), ir.Load("idx", ir.Add(g, ir.LitU32(1)))))
				then.Store("out", g, x)
				then.Assign("v", ir.Add(x, ir.LitF32(1)))
				then.Store("out2", g, d)
			}, func(els *ir.Block) {
				y := els.Let("y", ir.Load("s", k)) // out of bounds from k = 64 on
				els.Store("out2", g, ir.Rem(y, ir.Load("idx", ir.Sub(g, ir.LitU32(1)))))
			})
			b.If(ir.Ge(k, ir.LitU32(90)), func(then *ir.Block) {
				then.Let("unused", ir.Load("a", k))
			})
			b.IfElse(ir.Lt(g, ir.LitU32(40)), nil, func(els *ir.Block) {
				els.Store("io", g, ir.Cast(ir.U32, v))
			})
		}),
		speculationProgram("stores_only", func(b *ir.Builder, g ir.Expr) {
			b.If(ir.Ne(ir.Load("idx", g), ir.LitU32(0)), func(then *ir.Block) {
				then.Store("out2", g, ir.Load("s", ir.Sub(g, ir.LitU32(10))))
				then.Store("io", ir.Add(g, ir.LitU32(30)), ir.Load("idx", g))
			})
		}),
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for i, p := range progs {
		for _, tc := range []struct {
			addresses uint64
			disjoint  bool
		}{{0, false}, {1<<len(p.Buffers) - 1, false}, {0, true}} {
			target := fullTarget
			target.BufferAddresses = tc.addresses
			target.DisjointBindings = tc.disjoint
			m, err := EmitFor(p, target)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, val, p.Name, m)
			n := countBufferAccesses(t, m)
			speculated := i == 0 || tc.disjoint // stores_only loads idx after storing out2
			if speculated != (n.loadsIn == 0) || n.loadsOut == 0 {
				t.Errorf("%s (addresses %b, disjoint %t): %d buffer loads behind a branch, %d before, want speculated %t",
					p.Name, tc.addresses, tc.disjoint, n.loadsIn, n.loadsOut, speculated)
			}
			for range 3 {
				runBoth(t, p.Name, p, m, speculationCase(rng))
			}
		}
	}
}

// TestIfsThatStayBranches: an if whose arm holds an atomic, a barrier, a loop
// or a subgroup operation, loads from a buffer after storing to it, or reads a
// var after assigning it keeps its loads behind the branch, also with
// Target.DisjointBindings, and equals the oracle.
func TestIfsThatStayBranches(t *testing.T) {
	val := spirvVal(t)
	cond := func(g ir.Expr) ir.Expr { return ir.Lt(ir.Load("idx", g), ir.LitU32(60)) }
	progs := []*ir.Program{
		speculationProgram("atomic", func(b *ir.Builder, g ir.Expr) {
			b.If(cond(g), func(then *ir.Block) {
				then.Atomic(ir.AtomicAdd, "cnt", ir.LitU32(0), ir.LitU32(1))
				then.Store("out", g, ir.Load("a", g))
			})
		}),
		speculationProgram("barrier", func(b *ir.Builder, g ir.Expr) {
			b.If(ir.Lt(ir.WorkgroupID(0), ir.LitU32(1)), func(then *ir.Block) {
				then.Barrier()
				then.Store("out", g, ir.Load("a", g))
			})
		}),
		speculationProgram("loop", func(b *ir.Builder, g ir.Expr) {
			b.If(cond(g), func(then *ir.Block) {
				then.For("j", ir.U32, ir.LitU32(0), ir.LitU32(2), ir.LitU32(1), func(body *ir.Block, j ir.Expr) {
					body.Store("out2", g, ir.Add(ir.Load("idx", ir.Add(g, j)), j))
				})
			})
		}),
		speculationProgram("load_after_store", func(b *ir.Builder, g ir.Expr) {
			b.If(cond(g), func(then *ir.Block) {
				then.Store("io", g, ir.LitU32(7))
				then.Store("out2", g, ir.Load("io", g))
			})
		}),
		speculationProgram("read_after_assign", func(b *ir.Builder, g ir.Expr) {
			v := b.Var("v", ir.F32, ir.LitF32(2))
			b.If(cond(g), func(then *ir.Block) {
				then.Assign("v", ir.Load("a", g))
				then.Store("out", g, ir.Add(v, ir.Load("a", ir.Add(g, ir.LitU32(1)))))
			})
		}),
		speculationProgram("subgroup", func(b *ir.Builder, g ir.Expr) {
			b.If(cond(g), func(then *ir.Block) {
				then.Store("out", g, ir.SubgroupAdd(ir.Load("a", g)))
			})
		}),
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, p := range progs {
		for _, disjoint := range []bool{false, true} {
			target := fullTarget
			target.DisjointBindings = disjoint
			m, err := EmitFor(p, target)
			if err != nil {
				t.Fatal(err)
			}
			validate(t, val, p.Name, m)
			if n := countBufferAccesses(t, m); n.loadsIn == 0 {
				t.Errorf("%s (disjoint %t): no buffer load behind a branch (%d before), want the arm's loads behind it", p.Name, disjoint, n.loadsOut)
			}
			if m.Subgroups {
				continue // the interpreter has no subgroups
			}
			for range 2 {
				runBoth(t, p.Name, p, m, speculationCase(rng))
			}
		}
	}
}
