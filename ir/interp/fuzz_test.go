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
	// v12 adds IR v1.2: f16 and bf16 values, arrays and matrix statements, which
	// stay at the top level and before any return so that they are reached by
	// the whole workgroup (ended: a return was generated).
	v12   bool
	ended bool
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

var (
	genTypes   = []ir.Type{ir.U32, ir.I32, ir.F32, ir.Bool}
	genTypes12 = []ir.Type{ir.U32, ir.I32, ir.F32, ir.Bool, ir.F16, ir.BF16}
)

// types is the list of value types the generator uses.
func (g *gen) types() []ir.Type {
	if g.v12 {
		return genTypes12
	}
	return genTypes
}

// readable and writable arrays of each element type, as declared by genProgram.
var (
	genLoads = map[ir.Type][]string{ir.U32: {"iu", "ou", "su"}, ir.I32: {"ii", "si"}, ir.F32: {"if", "sf"}, ir.Bool: {"sb"},
		ir.F16: {"ih", "oh", "sh"}, ir.BF16: {"ib", "ob", "sbf"}}
	genStores = map[ir.Type][]string{ir.U32: {"ou", "su"}, ir.I32: {"oi", "si"}, ir.F32: {"of", "sf"}, ir.Bool: {"sb"},
		ir.F16: {"oh", "sh"}, ir.BF16: {"ob", "sbf"}}
	// genMatrices are the 16×16 matrices of each element type genProgram12 declares.
	genMatrices = map[ir.Type][]string{ir.F16: {"MA", "MA2"}, ir.BF16: {"MB"}, ir.F32: {"MC", "MF"}}
	genAtoms    = map[ir.Type][]string{ir.U32: {"ou", "su"}, ir.I32: {"oi", "si"}}
)

func genProgram(data []byte) *ir.Program { return genProgramV(data, false) }

// genProgram12 builds a random IR v1.2 program: genProgram's declarations and
// statements plus 16-bit buffers, shared arrays, values and matrix statements.
func genProgram12(data []byte) *ir.Program { return genProgramV(data, true) }

func genProgramV(data []byte, v12 bool) *ir.Program {
	g := &gen{data: data, v12: v12}
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
	if v12 {
		b.Buffer("ih", ir.F16, ir.Read)
		b.Buffer("oh", ir.F16, ir.ReadWrite)
		b.Buffer("ib", ir.BF16, ir.Read)
		b.FixedBuffer("ob", ir.BF16, ir.ReadWrite, 7)
		b.Shared("sh", ir.F16, 17)
		b.Shared("sbf", ir.BF16, 5)
		for _, t := range []ir.Type{ir.F16, ir.BF16, ir.F32} {
			for _, m := range genMatrices[t] {
				b.Matrix(m, t, 16, 16)
			}
		}
	}
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
	choices := 13
	if g.v12 {
		choices = 17
	}
	choice := g.n(choices)
	if depth >= 4 && choice >= 4 && choice <= 7 {
		choice = 0 // no deeper nesting
	}
	t := g.types()[g.n(len(g.types()))]
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
		k.Store(targets[g.n(len(targets))], g.index(1), g.expr(t, 0))
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
			k.AtomicCAS(target, g.index(1), g.expr(at, 0), g.expr(at, 0), name)
			g.locals = append(g.locals, genLocal{name, at, false})
		} else if g.n(2) == 0 {
			name := g.name()
			k.AtomicResult(op, target, g.index(1), g.expr(at, 0), name)
			g.locals = append(g.locals, genLocal{name, at, false})
		} else {
			k.Atomic(op, target, g.index(1), g.expr(at, 0))
		}
	case 10:
		if g.n(4) == 0 {
			k.Return()
			g.ended = true
		}
	case 11:
		if g.loops > 0 {
			k.Continue()
		}
	case 13, 14, 15, 16:
		if depth == 0 && !g.ended {
			g.matrixStmt(k)
		}
	}
}

// uniformU32 is a u32 expression with the same value on every invocation of a
// workgroup, as matrix statements' operands must be.
func (g *gen) uniformU32(depth int) ir.Expr {
	switch g.n(7) {
	case 0:
		return ir.WorkgroupID(uint8(g.n(3)))
	case 1:
		return ir.Param("pu")
	case 2:
		return ir.Uniform("uu")
	case 3:
		return ir.Len([]string{"iu", "ih", "ib", "oh"}[g.n(4)])
	case 4:
		if depth < 2 {
			ops := []ir.BinaryOp{ir.OpAdd, ir.OpMul, ir.OpSub, ir.OpRem}
			return ir.BinaryExpr{Op: ops[g.n(len(ops))], X: g.uniformU32(depth + 1), Y: g.uniformU32(depth + 1)}
		}
	case 5:
		return ir.LitU32(g.word())
	}
	return ir.LitU32(uint32(g.n(40)))
}

// matrixStmt adds a matrix statement with uniform operands.
func (g *gen) matrixStmt(k *ir.Block) {
	types := []ir.Type{ir.F16, ir.BF16, ir.F32}
	t := types[g.n(len(types))]
	ms := genMatrices[t]
	m := ms[g.n(len(ms))]
	layout := []ir.MatrixLayout{ir.RowMajor, ir.ColMajor}[g.n(2)]
	switch g.n(5) {
	case 0:
		var v ir.Expr
		switch {
		case t != ir.F32 || g.n(3) == 0:
			v = g.literal(t)
		case g.n(2) == 0:
			v = ir.Param("pf")
		default:
			v = ir.Cast(ir.F32, g.uniformU32(0))
		}
		k.MatrixFill(m, v)
	case 1, 2:
		store := g.n(2) == 0
		arrays := genLoads[t]
		if store {
			arrays = genStores[t]
		}
		arr := arrays[g.n(len(arrays))]
		off, stride := g.uniformU32(0), g.uniformU32(0)
		bounded := g.n(2) == 0
		var rows, cols ir.Expr
		if bounded {
			rows, cols = g.uniformU32(0), g.uniformU32(0)
		}
		switch {
		case store && bounded:
			k.MatrixStoreBounded(m, arr, off, stride, layout, rows, cols)
		case store:
			k.MatrixStore(m, arr, off, stride, layout)
		case bounded:
			k.MatrixLoadBounded(m, arr, off, stride, layout, rows, cols)
		default:
			k.MatrixLoad(m, arr, off, stride, layout)
		}
	case 3:
		ops := genMatrices[t]
		if t == ir.F32 {
			ops = []string{"MF"}
		}
		a, b := ops[g.n(len(ops))], ops[g.n(len(ops))]
		if t == ir.F32 && g.n(2) == 0 {
			k.MatrixMMATF32("MC", a, b)
		} else {
			k.MatrixMMA("MC", a, b)
		}
	case 4:
		all := []string{"MA", "MA2", "MB", "MC", "MF"}
		src := all[g.n(len(all))]
		if src != m {
			k.MatrixConvert(m, src)
		}
	}
}

// index is a u32 index, mostly small enough to land in bounds, generated at
// depth (at least 1) so that loads nested in indices stay within the nesting
// limit.
func (g *gen) index(depth int) ir.Expr {
	e := g.expr(ir.U32, max(depth, 1))
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
	case ir.F16, ir.BF16:
		specials := []uint16{0, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x7C00, 0x7E00, 0x7BFF, 0x3555}
		if i := g.n(len(specials) + 1); i < len(specials) {
			return ir.Literal{Type: t, Bits: uint32(specials[i])}
		}
		return ir.Literal{Type: t, Bits: g.word() & 0xFFFF}
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
		switch {
		case t == ir.Bool:
			from = []ir.Type{ir.U32, ir.I32}
		case t == ir.F32 && g.v12:
			from = []ir.Type{ir.U32, ir.I32, ir.F32, ir.F16, ir.BF16}
		case t == ir.F32:
			from = []ir.Type{ir.U32, ir.I32, ir.F32}
		case t.Is16Bit():
			from = []ir.Type{ir.F32}
		default:
			from = genTypes
		}
		return ir.Cast(t, g.expr(from[g.n(len(from))], d))
	case 6:
		targets := genLoads[t]
		return ir.Load(targets[g.n(len(targets))], g.index(d))
	case 7:
		if t == ir.F32 || t == ir.F16 {
			return ir.Fma(g.expr(t, d), g.expr(t, d), g.expr(t, d))
		}
	case 8:
		if t != ir.Bool && !t.Is16Bit() {
			from := []ir.Type{ir.U32, ir.I32, ir.F32}[g.n(3)]
			if from != t {
				return ir.Bitcast(t, g.expr(from, d))
			}
		}
	case 9:
		ops := ir.SubgroupOps()
		op := ops[g.n(len(ops))]
		if t.Is16Bit() {
			break
		}
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
	case ir.F16:
		ops = []ir.UnaryOp{ir.OpNeg, ir.OpAbs, ir.OpSqrt}
	case ir.BF16:
		return g.leaf(t)
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
		x = g.types()[g.n(len(g.types()))]
		if x == ir.BF16 {
			x = ir.F16 // bf16 has no comparisons
		}
		switch x {
		case ir.Bool:
			ops = []ir.BinaryOp{ir.OpLAnd, ir.OpLOr, ir.OpEq, ir.OpNe}
		default:
			ops = []ir.BinaryOp{ir.OpEq, ir.OpNe, ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe}
		}
	case ir.F32, ir.F16:
		ops = []ir.BinaryOp{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv, ir.OpMin, ir.OpMax}
	case ir.BF16:
		return g.leaf(t)
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
		switch {
		case n == 0 && p.UsesMatrices():
			n = 300 // room for 16×16 tiles
		case n == 0:
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
		l.Inputs[i] = elemBytes(d.Type, words)
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

// FuzzGeneratedV12Programs is FuzzGeneratedPrograms with IR v1.2: 16-bit values
// and arrays and matrix statements, in and out of strict mode; where strict mode
// finds no hazard, both modes must give the same outputs.
func FuzzGeneratedV12Programs(f *testing.F) {
	for i := range 64 {
		seed := make([]byte, 96)
		for j := range seed {
			seed[j] = byte(i*131 + j*j*17 + j*3)
		}
		f.Add(seed, byte(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, grid byte) {
		p := genProgram12(data)
		var outs [2][][]byte
		for i, strict := range []bool{false, true} {
			k, err := v12Compile(p, Options{Strict: strict})
			if err != nil {
				t.Fatalf("generated program rejected: %v", err)
			}
			fuzzRun(t, k, grid)
			l, ok := fuzzLaunch(p, grid)
			if !ok {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			outs[i], err = k.Run(ctx, l)
			cancel()
			if err != nil {
				return
			}
		}
		// A program strict mode accepts has one result, which strict mode must not
		// change.
		for i := range outs[0] {
			if !bytes.Equal(outs[0][i], outs[1][i]) {
				t.Fatalf("output %d differs between a run in strict mode and one outside it", i)
			}
		}
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
		seeds = append(seeds, genProgram(seed), genProgram12(seed))
	}
	seeds = append(seeds, mmaProgram(ir.BF16, 16, 32, 16, false), mmaProgram(ir.F32, 16, 16, 16, true),
		matrixSharedProgram(true), memory16Program())
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
