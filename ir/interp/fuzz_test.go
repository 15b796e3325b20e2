package interp

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/ir"
)

// gen builds a random well-typed program from fuzz bytes: every byte is a decision,
// and running out of bytes picks the simplest choice, so every input gives a
// finite program.
type gen struct {
	data   []byte
	pos    int
	names  int
	locals []genLocal
	loops  int
}

type genLocal struct {
	name    string
	typ     ir.Type
	mutable bool
}

func (g *gen) byte() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	g.pos++
	return g.data[g.pos-1]
}

func (g *gen) n(k int) int { return int(g.byte()) % k }

func (g *gen) word() uint32 {
	return uint32(g.byte()) | uint32(g.byte())<<8 | uint32(g.byte())<<16 | uint32(g.byte())<<24
}

func (g *gen) name() string {
	g.names++
	return fmt.Sprintf("v%d", g.names)
}

var genTypes = []ir.Type{ir.U32, ir.I32, ir.F32, ir.Bool}

// readable and writable arrays of each element type, as declared by genProgram.
var (
	genLoads  = map[ir.Type][]string{ir.U32: {"iu", "ou", "su"}, ir.I32: {"ii", "si"}, ir.F32: {"if", "sf"}, ir.Bool: {"sb"}}
	genStores = map[ir.Type][]string{ir.U32: {"ou", "su"}, ir.I32: {"oi", "si"}, ir.F32: {"of", "sf"}, ir.Bool: {"sb"}}
	genAtoms  = map[ir.Type][]string{ir.U32: {"ou", "su"}, ir.I32: {"oi", "si"}}
)

func genProgram(data []byte) *ir.Program {
	g := &gen{data: data}
	b := ir.NewBuilder("fuzz.gen", []uint32{1, 2, 3, 4, 8, 32, 64}[g.n(7)], uint32(1+g.n(2)), 1)
	b.Param("pu", ir.U32, ir.LitU32(uint32(g.byte())))
	b.Param("pf", ir.F32, ir.Literal{Type: ir.F32, Bits: g.word()})
	b.Uniform("uu", ir.U32)
	b.Uniform("uf", ir.F32)
	b.Buffer("iu", ir.U32, ir.Read)
	b.Buffer("if", ir.F32, ir.Read)
	b.Buffer("ii", ir.I32, ir.Read)
	b.Buffer("ou", ir.U32, ir.ReadWrite)
	b.Buffer("of", ir.F32, ir.Write)
	b.FixedBuffer("oi", ir.I32, ir.Write, 8)
	b.Shared("su", ir.U32, 16)
	b.Shared("sb", ir.Bool, 8)
	b.Shared("si", ir.I32, 8)
	b.Shared("sf", ir.F32, 4)
	g.block(&b.Block, 0)
	return b.Program()
}

func (g *gen) block(k *ir.Block, depth int) {
	mark := len(g.locals)
	for range g.n(6) {
		g.stmt(k, depth)
	}
	g.locals = g.locals[:mark]
}

func (g *gen) pick(t ir.Type, mutable bool) (string, bool) {
	var found []string
	for _, l := range g.locals {
		if l.typ == t && (!mutable || l.mutable) {
			found = append(found, l.name)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	return found[g.n(len(found))], true
}

func (g *gen) stmt(k *ir.Block, depth int) {
	choice := g.n(13)
	if depth >= 4 && choice >= 4 && choice <= 7 {
		choice = 0 // no deeper nesting
	}
	t := genTypes[g.n(len(genTypes))]
	switch choice {
	case 0:
		name := g.name()
		k.Let(name, g.expr(t, 0))
		g.locals = append(g.locals, genLocal{name, t, false})
	case 1:
		name := g.name()
		k.Var(name, t, g.expr(t, 0))
		g.locals = append(g.locals, genLocal{name, t, true})
	case 2:
		if name, ok := g.pick(t, true); ok {
			k.Assign(name, g.expr(t, 0))
		}
	case 3:
		targets := genStores[t]
		k.Store(targets[g.n(len(targets))], g.index(), g.expr(t, 0))
	case 4:
		cond := g.expr(ir.Bool, 0)
		then := func(b *ir.Block) { g.block(b, depth+1) }
		if g.n(2) == 0 {
			k.If(cond, then)
		} else {
			k.IfElse(cond, then, func(b *ir.Block) { g.block(b, depth+1) })
		}
	case 5:
		lt := []ir.Type{ir.U32, ir.I32}[g.n(2)]
		lit := func(v int32) ir.Expr {
			if lt == ir.I32 {
				return ir.LitI32(v)
			}
			return ir.LitU32(uint32(v))
		}
		to := g.expr(lt, 2)
		if g.n(3) != 0 {
			to = lit(int32(g.n(9)))
		}
		name := g.name()
		k.For(name, lt, lit(int32(g.n(4))-1), to, lit(int32(1+g.n(3))), func(b *ir.Block, _ ir.Expr) {
			g.locals = append(g.locals, genLocal{name, lt, false})
			g.loops++
			g.block(b, depth+1)
			g.loops--
		})
		g.locals = g.locals[:len(g.locals)-1]
	case 6:
		counter := g.name()
		cnt := k.Var(counter, ir.U32, ir.LitU32(0))
		cond := ir.LAnd(ir.Lt(cnt, ir.LitU32(uint32(g.n(6)))), g.expr(ir.Bool, 1))
		k.While(cond, func(b *ir.Block) {
			b.Assign(counter, ir.Add(cnt, ir.LitU32(1)))
			g.loops++
			g.block(b, depth+1)
			g.loops--
		})
		g.locals = append(g.locals, genLocal{counter, ir.U32, true})
	case 7:
		if g.loops > 0 {
			k.Break()
		}
	case 8:
		k.Barrier()
	case 9:
		at := []ir.Type{ir.U32, ir.I32}[g.n(2)]
		targets := genAtoms[at]
		op := ir.AtomicOps()[g.n(len(ir.AtomicOps()))]
		target := targets[g.n(len(targets))]
		if op == ir.AtomicCompareExchange {
			name := g.name()
			k.AtomicCAS(target, g.index(), g.expr(at, 0), g.expr(at, 0), name)
			g.locals = append(g.locals, genLocal{name, at, false})
		} else if g.n(2) == 0 {
			name := g.name()
			k.AtomicResult(op, target, g.index(), g.expr(at, 0), name)
			g.locals = append(g.locals, genLocal{name, at, false})
		} else {
			k.Atomic(op, target, g.index(), g.expr(at, 0))
		}
	case 10:
		if g.n(4) == 0 {
			k.Return()
		}
	case 11:
		if g.loops > 0 {
			k.Continue()
		}
	}
}

// index is a u32 index, mostly small enough to land in bounds.
func (g *gen) index() ir.Expr {
	e := g.expr(ir.U32, 1)
	if g.n(4) != 0 {
		return ir.Rem(e, ir.LitU32(20))
	}
	return e
}

func (g *gen) literal(t ir.Type) ir.Expr {
	switch t {
	case ir.Bool:
		return ir.LitBool(g.n(2) == 1)
	case ir.F32:
		specials := []float32{0, 1, -1, 0.5, float32(math.Inf(1)), float32(math.NaN()), float32(math.Copysign(0, -1)), 3e38, 1e-45}
		if i := g.n(len(specials) + 1); i < len(specials) {
			return ir.LitF32(specials[i])
		}
		return ir.Literal{Type: ir.F32, Bits: g.word()}
	}
	v := uint32(g.n(8))
	if g.n(4) == 0 {
		v = g.word()
	}
	return ir.Literal{Type: t, Bits: v}
}

func (g *gen) leaf(t ir.Type) ir.Expr {
	switch g.n(4) {
	case 1:
		if name, ok := g.pick(t, false); ok {
			return ir.Local(name)
		}
	case 2:
		switch t {
		case ir.U32:
			kinds := []func(uint8) ir.Expr{ir.GlobalID, ir.LocalID, ir.WorkgroupID, ir.NumWorkgroups, ir.WorkgroupSize}
			return kinds[g.n(len(kinds))](uint8(g.n(3)))
		case ir.F32:
			return ir.Param("pf")
		}
	case 3:
		switch t {
		case ir.U32:
			switch g.n(4) {
			case 0:
				return ir.Param("pu")
			case 1:
				return ir.Uniform("uu")
			case 2:
				return []ir.Expr{ir.SubgroupSize(), ir.SubgroupInvocationID()}[g.n(2)]
			}
			return ir.Len([]string{"iu", "if", "ii", "ou", "of", "oi"}[g.n(6)])
		case ir.F32:
			return ir.Uniform("uf")
		}
	}
	return g.literal(t)
}

func (g *gen) expr(t ir.Type, depth int) ir.Expr {
	if depth >= 4 {
		return g.leaf(t)
	}
	d := depth + 1
	switch g.n(10) {
	case 1:
		return g.unary(t, d)
	case 2, 3:
		return g.binary(t, d)
	case 4:
		return ir.Select(g.expr(ir.Bool, d), g.expr(t, d), g.expr(t, d))
	case 5:
		var from []ir.Type
		switch t {
		case ir.Bool:
			from = []ir.Type{ir.U32, ir.I32}
		case ir.F32:
			from = []ir.Type{ir.U32, ir.I32, ir.F32}
		default:
			from = genTypes
		}
		return ir.Cast(t, g.expr(from[g.n(len(from))], d))
	case 6:
		targets := genLoads[t]
		return ir.Load(targets[g.n(len(targets))], g.index())
	case 7:
		if t == ir.F32 {
			return ir.Fma(g.expr(t, d), g.expr(t, d), g.expr(t, d))
		}
	case 8:
		if t != ir.Bool {
			from := []ir.Type{ir.U32, ir.I32, ir.F32}[g.n(3)]
			if from != t {
				return ir.Bitcast(t, g.expr(from, d))
			}
		}
	case 9:
		ops := ir.SubgroupOps()
		op := ops[g.n(len(ops))]
		if op.HasLane() {
			return ir.SubgroupExpr{Op: op, X: g.expr(t, d), Lane: g.expr(ir.U32, d)}
		}
		if t != ir.Bool {
			return ir.SubgroupExpr{Op: op, X: g.expr(t, d)}
		}
	}
	return g.leaf(t)
}

func (g *gen) unary(t ir.Type, d int) ir.Expr {
	var ops []ir.UnaryOp
	switch t {
	case ir.Bool:
		ops = []ir.UnaryOp{ir.OpNot}
	case ir.U32:
		ops = []ir.UnaryOp{ir.OpNeg, ir.OpNot, ir.OpClz, ir.OpPopcount}
	case ir.I32:
		ops = []ir.UnaryOp{ir.OpNeg, ir.OpNot, ir.OpAbs, ir.OpClz, ir.OpPopcount}
	default:
		ops = []ir.UnaryOp{ir.OpNeg, ir.OpAbs, ir.OpSqrt, ir.OpExp, ir.OpLog, ir.OpSin, ir.OpCos, ir.OpFloor, ir.OpCeil,
			ir.OpTrunc, ir.OpRound}
	}
	return ir.UnaryExpr{Op: ops[g.n(len(ops))], X: g.expr(t, d)}
}

func (g *gen) binary(t ir.Type, d int) ir.Expr {
	var ops []ir.BinaryOp
	x := t
	switch t {
	case ir.Bool:
		x = genTypes[g.n(len(genTypes))]
		switch x {
		case ir.Bool:
			ops = []ir.BinaryOp{ir.OpLAnd, ir.OpLOr, ir.OpEq, ir.OpNe}
		default:
			ops = []ir.BinaryOp{ir.OpEq, ir.OpNe, ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe}
		}
	case ir.F32:
		ops = []ir.BinaryOp{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpMin, ir.OpMax}
	default:
		ops = []ir.BinaryOp{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpRem, ir.OpMin, ir.OpMax,
			ir.OpAnd, ir.OpOr, ir.OpXor, ir.OpShl, ir.OpShr}
	}
	return ir.BinaryExpr{Op: ops[g.n(len(ops))], X: g.expr(x, d), Y: g.expr(x, d)}
}

// fuzzLaunch gives every buffer of p a small input or output; ok is false when a
// fixed count is too large to bother with.
func fuzzLaunch(p *ir.Program, grid byte) (Launch, bool) {
	l := Launch{
		Grid:         [3]uint32{1 + uint32(grid%3), 1 + uint32(grid/3%2), 1 + uint32(grid/6%2)},
		Inputs:       make([][]byte, len(p.Buffers)),
		OutputCounts: make([]uint32, len(p.Buffers)),
		Uniforms:     make([]byte, p.UniformBytes()),
	}
	for i := range l.Uniforms {
		l.Uniforms[i] = grid + byte(i)
	}
	for i, d := range p.Buffers {
		n := d.Count
		if n == 0 {
			n = 16
		}
		if n > 1<<12 {
			return l, false
		}
		if d.Access == ir.Write {
			l.OutputCounts[i] = n
			continue
		}
		words := make([]uint32, n)
		for j := range words {
			words[j] = uint32(j)*0x9E3779B9 ^ uint32(grid)
		}
		l.Inputs[i] = u32Bytes(words...)
	}
	return l, true
}

// fuzzRun runs k twice on one worker (so racy programs stay deterministic and the
// race detector quiet) under a short deadline: it must never panic or hang, and
// two complete runs must agree.
func fuzzRun(t *testing.T, k *Kernel, grid byte) {
	l, ok := fuzzLaunch(k.Program(), grid)
	if !ok {
		return
	}
	k.workers = 1
	var results [2][][]byte
	for i := range results {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		outs, err := k.Run(ctx, l)
		cancel()
		if err != nil {
			return
		}
		if want := len(k.Program().Outputs()); len(outs) != want {
			t.Fatalf("%d outputs, want %d", len(outs), want)
		}
		results[i] = outs
	}
	for i := range results[0] {
		if !bytes.Equal(results[0][i], results[1][i]) {
			t.Fatalf("output %d differs between two runs of the same program", i)
		}
	}
}

func FuzzGeneratedPrograms(f *testing.F) {
	for i := range 64 {
		seed := make([]byte, 48)
		for j := range seed {
			seed[j] = byte(i*131 + j*j*17 + j)
		}
		f.Add(seed, byte(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, grid byte) {
		p := genProgram(data)
		k, err := Compile(p, Options{Strict: grid%2 == 1})
		if err != nil {
			t.Fatalf("generated program rejected: %v", err)
		}
		fuzzRun(t, k, grid)
	})
}

func FuzzDecodedPrograms(f *testing.F) {
	seeds := []*ir.Program{vectorAddProgram(), matmulProgram(), infiniteLoop(), specProgram(), copyProgram(),
		recordLoop(ir.I32, ir.LitI32(-5), ir.LitI32(5), ir.LitI32(3), 6),
		casAddProgram(true), subgroupProgram(64, 0), uniformsProgram(), reduction(false), neighbour(true)}
	for i := range 16 {
		seed := make([]byte, 64)
		for j := range seed {
			seed[j] = byte(i*37 + j*11)
		}
		seeds = append(seeds, genProgram(seed))
	}
	for i, p := range seeds {
		data, err := ir.Encode(p)
		if err != nil {
			f.Fatalf("encode seed %s: %v", p.Name, err)
		}
		f.Add(data, byte(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, grid byte) {
		p, err := ir.Decode(data)
		if err != nil {
			return
		}
		k, err := Compile(p, Options{})
		if err != nil {
			return
		}
		fuzzRun(t, k, grid)
	})
}
