package ir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// codecUpdateGolden rewrites the files under testdata instead of comparing with them.
func codecUpdateGolden() bool { return os.Getenv("KILN_UPDATE_GOLDEN") == "1" }

// codecGoldenForms compares p's binary encoding with testdata/name.kilnir and its
// JSON form with testdata/name.json.
func codecGoldenForms(t *testing.T, name string, p *Program) {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	codecGolden(t, name+".kilnir", b)
	text, err := MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	codecGolden(t, name+".json", text)
}

// codecLets returns a function that binds each expression it is given to the
// next local of v0, v1, ….
func codecLets(b *Builder) func(Expr) {
	n := 0
	return func(x Expr) {
		b.Let(fmt.Sprintf("v%d", n), x)
		n++
	}
}

// codecGolden compares got with testdata/name, or writes it when KILN_UPDATE_GOLDEN=1.
func codecGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if codecUpdateGolden() {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with KILN_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed; this changes the canonical form that hosts and plugins exchange, so it needs a "+
			"format version bump. If intended, rerun with KILN_UPDATE_GOLDEN=1.\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// codecSaxpy is the example of docs/design.md, y = a*x + y.
func codecSaxpy() *Program {
	return saxpy().Program()
}

// codecKitchenSink is a valid program that uses every expression and statement kind,
// every operator, builtin, atomic operation, type, access and every legal cast.
// TestKitchenSinkCoversEverything checks that claim.
func codecKitchenSink() *Program {
	b := NewBuilder("kiln.test.kitchen_sink", 64, 2, 1)
	scale := b.Param("scale", F32, LitF32(1.5))
	bias := b.Param("bias", I32, LitI32(-3))
	n := b.Param("n", U32, LitU32(7))
	flag := b.Param("flag", Bool, LitBool(true))
	in := b.Buffer("in", F32, Read)
	out := b.Buffer("out", F32, Write)
	hist := b.FixedBuffer("hist", U32, ReadWrite, 16)
	ints := b.Buffer("ints", I32, ReadWrite)
	tile := b.Shared("tile", F32, 64)
	seen := b.Shared("seen", Bool, 64)
	cnt := b.Shared("cnt", I32, 4)

	gid := b.Let("gid", GlobalID(0))
	lid := b.Let("lid", LocalID(0))
	var ids Expr = LitU32(0)
	for _, f := range []func(uint8) Expr{GlobalID, LocalID, WorkgroupID, NumWorkgroups, WorkgroupSize} {
		for axis := uint8(0); axis < 3; axis++ {
			ids = Add(ids, f(axis))
		}
	}
	idsum := b.Let("idsum", ids)
	x := b.Let("x", Load(in, Min(gid, Sub(Len(in), LitU32(1)))))
	b.Store(tile, lid, x)
	b.Store(seen, lid, Gt(x, LitF32(0)))
	b.Barrier()
	acc := b.Var("acc", F32, LitF32(0))
	b.For("k", U32, LitU32(0), n, LitU32(1), func(body *Block, k Expr) {
		body.Assign("acc", Fma(Load(tile, k), scale, acc))
		body.If(LAnd(Ge(k, LitU32(5)), Load(seen, k)), func(t *Block) { t.Break() })
	})
	j := b.Var("j", I32, bias)
	b.While(Lt(j, LitI32(10)), func(w *Block) {
		w.Assign("j", Add(j, LitI32(1)))
		w.IfElse(Eq(Rem(j, LitI32(3)), LitI32(0)), func(t *Block) { t.Break() },
			func(e *Block) { e.Assign("acc", Sub(acc, LitF32(0.25))) })
	})
	b.For("m", I32, LitI32(-2), LitI32(2), LitI32(1), nil)
	f := b.Let("f", Neg(Abs(Sqrt(Exp(Log(Sin(Cos(Floor(Ceil(x))))))))))
	nanPayload := Literal{Type: F32, Bits: 0x7fc00001}
	negZero := Literal{Type: F32, Bits: 0x80000000}
	inf := Literal{Type: F32, Bits: 0x7f800000}
	g := b.Let("g", Div(Max(Min(f, nanPayload), negZero), Mul(Select(Le(f, inf), f, scale), LitF32(3))))
	u := b.Let("u", Shr(Shl(Xor(Or(And(idsum, LitU32(0xff)), LitU32(1)), Not(LitU32(0))), LitU32(2)), LitU32(1)))
	i := b.Let("i", Neg(Abs(Sub(Div(Mul(bias, LitI32(-7)), LitI32(2)), Rem(LitI32(math.MinInt32), LitI32(-1))))))
	b.Let("casts", Add(
		Add(Cast(F32, i), Cast(F32, u)),
		Add(Cast(F32, Cast(I32, g)), Cast(F32, Cast(U32, g)))))
	b.Let("bools", LOr(
		LAnd(Cast(Bool, i), Cast(Bool, u)),
		Eq(Cast(I32, flag), Cast(I32, Cast(U32, Not(flag))))))
	b.Let("same", Add(Cast(U32, Cast(I32, u)), Cast(U32, Cast(U32, Cast(Bool, Cast(Bool, flag))))))
	b.Let("cmp", LAnd(Select(Ne(g, g), Gt(u, LitU32(3)), Ge(i, LitI32(0))), LitBool(true)))
	for _, op := range []AtomicOp{AtomicAdd, AtomicMin, AtomicMax, AtomicAnd, AtomicOr, AtomicXor, AtomicExchange} {
		b.AtomicResult(op, hist, Rem(u, LitU32(16)), LitU32(1), "old_"+op.String())
	}
	b.Atomic(AtomicMin, ints, LitU32(0), i)
	b.Atomic(AtomicAdd, cnt, LitU32(1), LitI32(-1))
	b.If(LOr(flag, Not(flag)), func(t *Block) { t.Return() })
	b.Store(out, gid, Add(acc, g))
	return b.Program()
}

// codecLiteral returns a literal of type t with the given bits, made valid for bool
// and the 16-bit types.
func codecLiteral(t Type, bits uint32) Literal {
	switch {
	case t == Bool:
		bits &= 1
	case t.Is16Bit():
		bits &= 0xffff
	}
	return Literal{Type: t, Bits: bits}
}

// codecTypesV1 lists the types of IR v1 and v1.1 (Types without IR v1.2's f16 and
// bf16), so the programs of those versions keep their golden digests.
func codecTypesV1() []Type {
	var out []Type
	for _, t := range Types() {
		if !t.Is16Bit() {
			out = append(out, t)
		}
	}
	return out
}

// codecBuiltins lists every defined builtin.
func codecBuiltins() []BuiltinKind {
	var out []BuiltinKind
	for k := BuiltinKind(1); k.Valid(); k++ {
		out = append(out, k)
	}
	return out
}

// codecAccesses lists every defined access mode.
func codecAccesses() []Access {
	var out []Access
	for a := Access(1); a.Valid(); a++ {
		out = append(out, a)
	}
	return out
}

// codecV1 keeps the values of all whose wire code exists in format version 1.
func codecV1[T comparable](tab wireTable[T], all []T, firstV2 byte) []T {
	var out []T
	for _, v := range all {
		if c, ok := tab.code(v); ok && c < firstV2 {
			out = append(out, v)
		}
	}
	return out
}

// codecEveryOp applies every operator of IR v1 to every type, reads every builtin on
// every axis, casts between every pair of types and runs every atomic operation. It
// is not well-typed (Validate rejects it) but the encodings must carry all of it.
// It stays within IR v1, so its digest pins format version 1; codecEveryOpV11 adds
// IR v1.1.
func codecEveryOp() *Program {
	b := NewBuilder("kiln.test.every_op", 1, 1, 1)
	for _, t := range codecTypesV1() {
		b.Param("p_"+t.String(), t, codecLiteral(t, 0xdeadbeef))
		b.Shared("s_"+t.String(), t, 3)
		for _, a := range codecAccesses() {
			b.FixedBuffer("b_"+t.String()+"_"+a.String(), t, a, uint32(t)*7)
		}
	}
	let := codecLets(b)
	for _, t := range codecTypesV1() {
		lit := codecLiteral(t, 0x80000001)
		let(lit)
		for _, op := range codecV1(wireUnaryOps, UnaryOps(), v2Unary) {
			let(UnaryExpr{Op: op, X: lit})
		}
		for _, op := range BinaryOps() {
			let(BinaryExpr{Op: op, X: lit, Y: Param("p_" + t.String())})
		}
		for _, to := range codecTypesV1() {
			let(Cast(to, lit))
		}
		b.Var("var_"+t.String(), t, lit)
		b.For("for_"+t.String(), t, lit, lit, lit, func(body *Block, _ Expr) { body.Break() })
	}
	for _, k := range codecV1(wireBuiltins, codecBuiltins(), v2Builtin) {
		for axis := uint8(0); axis < 4; axis++ {
			let(BuiltinRef{Kind: k, Axis: axis})
		}
	}
	for _, bits := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, defaultNaNBits, 0x7fc00001, 0xffc00000,
		0x7f800001, 1, 0x7f7fffff, 0x3f800000, 0xc0490fdb} {
		let(Literal{Type: F32, Bits: bits})
	}
	let(Fma(LitF32(1), LitF32(2), LitF32(3)))
	let(Select(LitBool(true), LitU32(1), LitU32(2)))
	let(Load("b_u32_read", LitU32(0)))
	let(Len("b_u32_read"))
	let(Local("v0"))
	for _, op := range codecV1(wireAtomicOps, AtomicOps(), v2Atomic) {
		b.Atomic(op, "s_u32", LitU32(0), LitU32(1))
		b.AtomicResult(op, "s_i32", LitU32(0), LitI32(1), "r_"+op.String())
	}
	b.Assign("var_u32", LitU32(3))
	b.Store("s_f32", LitU32(0), LitF32(1))
	b.IfElse(LitBool(false), func(t *Block) { t.Barrier() }, func(e *Block) { e.Return() })
	b.While(LitBool(false), func(w *Block) { w.Break() })
	return b.Program()
}

// codecNames exercise escaping and non-ASCII text; the encodings do not check names.
var codecNames = []string{"a", "b", "x_1", "acc", "Longer_Name_42", "ü", "tab\there", "quote\"back\\slash", "nl\n", "\x01"}

// codecGen makes random programs that both encodings can carry (bool literals are 0
// or 1, and every parameter's default has the parameter's type). Only with v12 set
// do they use IR v1.2 (16-bit types, matrices); without it the stream of programs is
// the one from before IR v1.2.
type codecGen struct {
	r   *rand.Rand
	v12 bool
}

func (g codecGen) name() string { return codecNames[g.r.IntN(len(codecNames))] }

func (g codecGen) typ() Type {
	types := codecTypesV1()
	if g.v12 {
		types = Types()
	}
	return types[g.r.IntN(len(types))]
}

func (g codecGen) lit() Literal {
	t := g.typ()
	bits := g.r.Uint32()
	if g.r.IntN(4) == 0 {
		bits = []uint32{0, 1, 0x80000000, 0x7fc00000, 0x7fc00001, 0xffffffff, 0x7f800000}[g.r.IntN(7)]
	}
	return codecLiteral(t, bits)
}

// leaf is the k-th kind of expression without operands.
func (g codecGen) leaf(k int) Expr {
	switch k {
	case 0:
		return g.lit()
	case 1:
		return Local(g.name())
	case 2:
		return Param(g.name())
	default:
		return Len(g.name())
	}
}

func (g codecGen) expr(depth int) Expr {
	if depth <= 0 {
		return g.leaf(g.r.IntN(4))
	}
	d := depth - 1
	switch k := g.r.IntN(14); k {
	case 0, 1, 2:
		return g.leaf(k)
	case 3:
		ks := codecBuiltins()
		k := ks[g.r.IntN(len(ks))]
		if !k.HasAxis() {
			return BuiltinRef{Kind: k}
		}
		return BuiltinRef{Kind: k, Axis: uint8(g.r.IntN(256))}
	case 4:
		return Load(g.name(), g.expr(d))
	case 5:
		return Len(g.name())
	case 6:
		ops := UnaryOps()
		return UnaryExpr{Op: ops[g.r.IntN(len(ops))], X: g.expr(d)}
	case 7:
		ops := BinaryOps()
		return BinaryExpr{Op: ops[g.r.IntN(len(ops))], X: g.expr(d), Y: g.expr(d)}
	case 8:
		return Fma(g.expr(d), g.expr(d), g.expr(d))
	case 9:
		return Select(g.expr(d), g.expr(d), g.expr(d))
	case 10:
		return Uniform(g.name())
	case 11:
		return Bitcast(g.typ(), g.expr(d))
	case 12:
		ops := SubgroupOps()
		x := SubgroupExpr{Op: ops[g.r.IntN(len(ops))], X: g.expr(d)}
		if x.Op.HasLane() {
			x.Lane = g.expr(d)
		}
		return x
	default:
		return Cast(g.typ(), g.expr(d))
	}
}

func (g codecGen) block(depth int) []Stmt {
	var out []Stmt
	for n := g.r.IntN(4); n > 0; n-- {
		out = append(out, g.stmt(depth))
	}
	return out
}

func (g codecGen) stmt(depth int) Stmt {
	if g.v12 && g.r.IntN(4) == 0 {
		return g.matrixStmt()
	}
	kind := g.r.IntN(12)
	if depth <= 0 && (kind == 4 || kind == 5 || kind == 6) {
		kind = 0
	}
	e := func() Expr { return g.expr(g.r.IntN(4)) }
	switch kind {
	case 0:
		return LetStmt{Name: g.name(), Value: e()}
	case 1:
		return VarStmt{Name: g.name(), Type: g.typ(), Value: e()}
	case 2:
		return AssignStmt{Name: g.name(), Value: e()}
	case 3:
		return StoreStmt{Target: g.name(), Index: e(), Value: e()}
	case 4:
		return IfStmt{Cond: e(), Then: g.block(depth - 1), Else: g.block(depth - 1)}
	case 5:
		return ForStmt{Var: g.name(), Type: g.typ(), From: e(), To: e(), Step: e(), Body: g.block(depth - 1)}
	case 6:
		return WhileStmt{Cond: e(), Body: g.block(depth - 1)}
	case 7:
		return BreakStmt{}
	case 8:
		return BarrierStmt{}
	case 9:
		ops := AtomicOps()
		s := AtomicStmt{Op: ops[g.r.IntN(len(ops))], Target: g.name(), Index: e(), Value: e()}
		if g.r.IntN(2) == 0 {
			s.Result = g.name()
		}
		if s.Op == AtomicCompareExchange {
			s.Compare = e()
		}
		return s
	case 10:
		return ContinueStmt{}
	default:
		return ReturnStmt{}
	}
}

func (g codecGen) program() *Program {
	p := &Program{Name: g.name(), WorkgroupSize: [3]uint32{g.r.Uint32(), uint32(g.r.IntN(3)), 1}}
	for n := g.r.IntN(4); n > 0; n-- {
		l := g.lit()
		p.Params = append(p.Params, ParamDecl{Name: g.name(), Type: l.Type, Default: l})
	}
	if g.r.IntN(4) == 0 {
		p.SubgroupSize = g.r.Uint32()
	}
	for n := g.r.IntN(3) - 1; n > 0; n-- {
		p.Uniforms = append(p.Uniforms, UniformDecl{Name: g.name(), Type: g.typ()})
	}
	for n := g.r.IntN(4); n > 0; n-- {
		acc := codecAccesses()
		d := BufferDecl{Name: g.name(), Binding: g.r.Uint32() % 5, Type: g.typ(), Access: acc[g.r.IntN(len(acc))]}
		if g.r.IntN(2) == 0 {
			d.Count = g.r.Uint32()
		}
		p.Buffers = append(p.Buffers, d)
	}
	for n := g.r.IntN(3); n > 0; n-- {
		p.Shared = append(p.Shared, SharedDecl{Name: g.name(), Type: g.typ(), Count: g.r.Uint32()})
	}
	if g.v12 {
		for n := g.r.IntN(3); n > 0; n-- {
			p.Matrices = append(p.Matrices, MatrixDecl{Name: g.name(), Type: g.typ(), Rows: g.r.Uint32(), Cols: g.r.Uint32()})
		}
	}
	p.Body = g.block(3)
	return p
}

// codecRandomPrograms returns n reproducible random programs.
func codecRandomPrograms(n int) []*Program {
	g := codecGen{r: rand.New(rand.NewPCG(1, 2))}
	out := make([]*Program, n)
	for i := range out {
		out[i] = g.program()
	}
	return out
}

// codecCorpus is every program the round-trip tests run over.
func codecCorpus() map[string]*Program {
	m := map[string]*Program{
		"saxpy":        codecSaxpy(),
		"kitchen_sink": codecKitchenSink(),
		"every_op":     codecEveryOp(),
		"kitchen_v11":  codecKitchenSinkV11(),
		"every_op_v11": codecEveryOpV11(),
		"kitchen_v12":  codecKitchenSinkV12(),
		"every_op_v12": codecEveryOpV12(),
		"empty":        {Name: "", WorkgroupSize: [3]uint32{1, 1, 1}},
	}
	for i, p := range codecRandomPrograms(300) {
		m[fmt.Sprintf("random%03d", i)] = p
	}
	for i, p := range codecRandomProgramsV12(200) {
		m[fmt.Sprintf("random_v12_%03d", i)] = p
	}
	return m
}

// codecCoverage names every node kind, operator, builtin, type and access in p,
// and the declarations of IR v1.1 (uniforms, a subgroup size).
func codecCoverage(p *Program) map[string]bool {
	seen := map[string]bool{}
	for _, d := range p.Params {
		seen["type:"+d.Type.String()] = true
	}
	for _, d := range p.Buffers {
		seen["access:"+d.Access.String()] = true
	}
	if p.SubgroupSize != 0 {
		seen["subgroup-size"] = true
	}
	uniforms := map[string]Type{}
	for _, u := range p.Uniforms {
		seen["uniform-decl"] = true
		uniforms[u.Name] = u.Type
	}
	Inspect(p.Body, func(node any) bool {
		if _, ok := node.(Stmt); ok {
			seen[fmt.Sprintf("stmt:%T", node)] = true
		} else {
			seen[fmt.Sprintf("expr:%T", node)] = true
		}
		switch n := node.(type) {
		case Literal:
			seen["literal:"+n.Type.String()] = true
		case UnaryExpr:
			seen["unary:"+n.Op.String()] = true
		case BinaryExpr:
			seen["binary:"+n.Op.String()] = true
		case BuiltinRef:
			seen[fmt.Sprintf("builtin:%s:%d", n.Kind, n.Axis)] = true
		case CastExpr:
			seen["cast:"+n.To.String()] = true
		case BitcastExpr:
			seen["bitcast:"+n.To.String()] = true
		case UniformRef:
			seen["uniform:"+uniforms[n.Name].String()] = true
		case SubgroupExpr:
			seen["subgroup:"+n.Op.String()] = true
		case AtomicStmt:
			seen["atomic-result"] = seen["atomic-result"] || n.Result != ""
			seen["atomic-compare"] = seen["atomic-compare"] || n.Compare != nil
			seen["atomic:"+n.Op.String()] = true
		case ForStmt:
			seen["for:"+n.Type.String()] = true
		}
		return true
	})
	return seen
}

// codecEverything is what a program that "uses every node kind" of IR v1 must
// contain; codecEverythingV11 adds IR v1.1.
func codecEverything() []string {
	want := []string{"atomic-result"}
	for _, x := range []Expr{Literal{}, LocalRef{}, ParamRef{}, BuiltinRef{}, LoadExpr{}, LenExpr{},
		UnaryExpr{}, BinaryExpr{}, FmaExpr{}, SelectExpr{}, CastExpr{}} {
		want = append(want, fmt.Sprintf("expr:%T", x))
	}
	for _, s := range []Stmt{LetStmt{}, VarStmt{}, AssignStmt{}, StoreStmt{}, IfStmt{}, ForStmt{},
		WhileStmt{}, BreakStmt{}, BarrierStmt{}, AtomicStmt{}, ReturnStmt{}} {
		want = append(want, fmt.Sprintf("stmt:%T", s))
	}
	for _, t := range codecTypesV1() {
		want = append(want, "type:"+t.String(), "literal:"+t.String(), "cast:"+t.String())
	}
	for _, a := range codecAccesses() {
		want = append(want, "access:"+a.String())
	}
	for _, k := range codecV1(wireBuiltins, codecBuiltins(), v2Builtin) {
		for axis := 0; axis < 3; axis++ {
			want = append(want, fmt.Sprintf("builtin:%s:%d", k, axis))
		}
	}
	for _, o := range codecV1(wireUnaryOps, UnaryOps(), v2Unary) {
		want = append(want, "unary:"+o.String())
	}
	for _, o := range BinaryOps() {
		want = append(want, "binary:"+o.String())
	}
	for _, o := range codecV1(wireAtomicOps, AtomicOps(), v2Atomic) {
		want = append(want, "atomic:"+o.String())
	}
	return append(want, "for:i32", "for:u32")
}

func TestKitchenSinkCoversEverything(t *testing.T) {
	p := codecKitchenSink()
	if err := Validate(p); err != nil {
		t.Fatalf("kitchen sink must be a valid program: %v", err)
	}
	seen := codecCoverage(p)
	for _, w := range codecEverything() {
		if !seen[w] {
			t.Errorf("kitchen sink lacks %s; extend it so the golden digest covers it", w)
		}
	}
	seen = codecCoverage(codecEveryOp())
	for _, w := range codecEverything() {
		if !seen[w] {
			t.Errorf("everyOpProgram lacks %s", w)
		}
	}
}

// codecRoundTrip encodes p and decodes the encoding, failing t (what names p) on
// either error.
func codecRoundTrip(t *testing.T, what string, p *Program) (*Program, []byte) {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatalf("%s: Encode: %v", what, err)
	}
	q, err := Decode(b)
	if err != nil {
		t.Fatalf("%s: Decode: %v", what, err)
	}
	return q, b
}

func TestEncodeRoundTrip(t *testing.T) {
	for name, p := range codecCorpus() {
		q, b := codecRoundTrip(t, name, p)
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: Decode(Encode(p)) differs from p:\n got %#v\nwant %#v", name, q, p)
		}
		again, err := Encode(q)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoding differs (err %v)", name, err)
		}
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	a, err := Encode(codecKitchenSink())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		b, err := Encode(codecKitchenSink())
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("encoding a freshly built identical program differs (err %v)", err)
		}
	}
}

// TestEveryEnumEncodes fails when an operator, type, builtin or access mode is added
// without a wire code: each one must encode alone and decode back to itself.
func TestEveryEnumEncodes(t *testing.T) {
	var progs []*Program
	add := func(stmts ...Stmt) {
		progs = append(progs, &Program{Name: "p", WorkgroupSize: [3]uint32{1, 1, 1}, Body: stmts})
	}
	for _, ty := range Types() {
		add(LetStmt{Name: "x", Value: codecLiteral(ty, 1)}, VarStmt{Name: "v", Type: ty, Value: Cast(ty, LitU32(1))})
		progs = append(progs, &Program{Name: "p", Params: []ParamDecl{{Name: "a", Type: ty, Default: codecLiteral(ty, 1)}},
			Shared: []SharedDecl{{Name: "s", Type: ty, Count: 1}}, Buffers: []BufferDecl{{Name: "b", Type: ty, Access: Read}}})
	}
	for _, a := range codecAccesses() {
		progs = append(progs, &Program{Name: "p", Buffers: []BufferDecl{{Name: "b", Type: U32, Access: a}}})
	}
	for _, k := range codecBuiltins() {
		add(LetStmt{Name: "x", Value: BuiltinRef{Kind: k, Axis: 2}})
	}
	for _, op := range UnaryOps() {
		add(LetStmt{Name: "x", Value: UnaryExpr{Op: op, X: LitF32(1)}})
	}
	for _, op := range BinaryOps() {
		add(LetStmt{Name: "x", Value: BinaryExpr{Op: op, X: LitU32(1), Y: LitU32(2)}})
	}
	for _, op := range AtomicOps() {
		s := AtomicStmt{Op: op, Target: "h", Index: LitU32(0), Value: LitU32(1), Result: "old"}
		if op == AtomicCompareExchange {
			s.Compare = LitU32(2)
		}
		add(s)
	}
	for _, op := range SubgroupOps() {
		x := SubgroupExpr{Op: op, X: LitU32(1)}
		if op.HasLane() {
			x.Lane = LitU32(3)
		}
		add(LetStmt{Name: "x", Value: x})
	}
	add(ContinueStmt{})
	add(LetStmt{Name: "x", Value: Uniform("u")})
	for _, ty := range Types() {
		add(LetStmt{Name: "x", Value: Bitcast(ty, LitU32(1))})
		progs = append(progs, &Program{Name: "p", Uniforms: []UniformDecl{{Name: "u", Type: ty}}})
	}
	progs = append(progs, &Program{Name: "p", SubgroupSize: 1 << 31})
	for _, p := range progs {
		if q, _ := codecRoundTrip(t, p.Name, p); !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed %#v into %#v", p, q)
		}
	}
}

// codecTableChecks checks that a table covers every value once, with distinct codes.
func codecTableChecks[T comparable](t *testing.T, what string, tab wireTable[T], all []T) {
	t.Helper()
	if len(tab) != len(all) {
		t.Errorf("%s: %d wire codes for %d values", what, len(tab), len(all))
	}
	codes := map[byte]bool{}
	for _, v := range all {
		c, ok := tab.code(v)
		if !ok {
			t.Errorf("%s: %v has no wire code", what, v)
		}
		if codes[c] {
			t.Errorf("%s: wire code %#02x used twice", what, c)
		}
		codes[c] = true
		if back, ok := tab.value(c); !ok || back != v {
			t.Errorf("%s: code %#02x maps back to %v", what, c, back)
		}
	}
}

func TestWireTables(t *testing.T) {
	codecTableChecks(t, "type", wireTypes, Types())
	codecTableChecks(t, "access", wireAccesses, codecAccesses())
	codecTableChecks(t, "builtin", wireBuiltins, codecBuiltins())
	codecTableChecks(t, "unary", wireUnaryOps, UnaryOps())
	codecTableChecks(t, "binary", wireBinaryOps, BinaryOps())
	codecTableChecks(t, "atomic", wireAtomicOps, AtomicOps())
	codecTableChecks(t, "subgroup", wireSubgroupOps, SubgroupOps())
	codecTableChecks(t, "layout", wireLayouts, []MatrixLayout{RowMajor, ColMajor})
	codecTableChecks(t, "precision", wirePrecisions, []MatrixPrecision{PrecisionDefault, PrecisionTF32})
	for _, ty := range Types() {
		if c, _ := wireTypes.code(ty); uint32(c) != DTypeTag(ty) {
			t.Errorf("type %s: wire code %#02x, DTypeTag %#x; the format documents them as equal", ty, c, DTypeTag(ty))
		}
	}
}

// codecFormatDoc returns the sections of the format comment at the top of encode.go,
// keyed by the word that starts each section line ("unary", "0x05", ...).
func codecFormatDoc(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("encode.go")
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(src), "\npackage ir\n")
	if !ok {
		t.Fatal("encode.go: no package clause")
	}
	sections := map[string]string{}
	key := ""
	for _, line := range strings.Split(head, "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			key = ""
			continue
		}
		if body != "" && body[0] != ' ' {
			key = strings.Fields(body)[0]
		}
		if key != "" {
			sections[key] += " " + body
		}
	}
	return sections
}

// codecDocTableChecks checks that section lists exactly the codes of tab, by name.
func codecDocTableChecks[T interface {
	comparable
	String() string
}](t *testing.T, doc map[string]string, section string, tab wireTable[T]) {
	t.Helper()
	text := doc[section]
	if n := strings.Count(text, "0x"); n != len(tab) {
		t.Errorf("format comment, %s: %d codes documented, %d in the table", section, n, len(tab))
	}
	for _, c := range tab {
		re := regexp.MustCompile(fmt.Sprintf(`0x%02X %s\b`, c.code, regexp.QuoteMeta(c.v.String())))
		if !re.MatchString(text) {
			t.Errorf("format comment, %s: want \"0x%02X %s\" in %q", section, c.code, c.v, text)
		}
	}
}

// codecPrecisionDoc names the precisions as the format comment does: the default,
// whose JSON name is empty, as "default".
type codecPrecisionDoc MatrixPrecision

func (p codecPrecisionDoc) String() string {
	if MatrixPrecision(p) == PrecisionDefault {
		return "default"
	}
	return MatrixPrecision(p).String()
}

// TestFormatCommentMatchesTables keeps the format comment, which plugin authors in
// other languages implement from, in step with the code.
func TestFormatCommentMatchesTables(t *testing.T) {
	doc := codecFormatDoc(t)
	codecDocTableChecks(t, doc, "type", wireTypes)
	codecDocTableChecks(t, doc, "access", wireAccesses)
	codecDocTableChecks(t, doc, "builtin", wireBuiltins)
	codecDocTableChecks(t, doc, "unary", wireUnaryOps)
	codecDocTableChecks(t, doc, "binary", wireBinaryOps)
	codecDocTableChecks(t, doc, "atomic", wireAtomicOps)
	codecDocTableChecks(t, doc, "subgroup", wireSubgroupOps)
	codecDocTableChecks(t, doc, "layout", wireLayouts)
	var precisions wireTable[codecPrecisionDoc]
	for _, c := range wirePrecisions {
		precisions = append(precisions, wireCode[codecPrecisionDoc]{codecPrecisionDoc(c.v), c.code})
	}
	codecDocTableChecks(t, doc, "precision", precisions)
	exprTags := map[byte]string{tagLiteral: "literal", tagLocal: "local", tagParam: "param", tagBuiltin: "builtin",
		tagLoad: "load", tagLen: "len", tagUnary: "unary", tagBinary: "binary", tagFma: "fma", tagSelect: "select",
		tagCast: "cast", tagUniform: "uniform", tagBitcast: "bitcast", tagSubgroup: "subgroup"}
	stmtTags := map[byte]string{tagLet: "let", tagVar: "var", tagAssign: "assign", tagStore: "store", tagIf: "if",
		tagFor: "for", tagWhile: "while", tagBreak: "break", tagBarrier: "barrier", tagAtomic: "atomic", tagReturn: "return",
		tagContinue: "continue", tagMatrixFill: "matrix_fill", tagMatrixLoad: "matrix_load", tagMatrixStore: "matrix_store",
		tagMatrixMMA: "matrix_mma", tagMatrixConvert: "matrix_convert"}
	if len(exprTags) != int(exprTagEnd-tagLiteral) || len(stmtTags) != int(stmtTagEnd-tagLet) {
		t.Fatal("a tag is missing from this test's tables")
	}
	src, err := os.ReadFile("encode.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tags := range []map[byte]string{exprTags, stmtTags} {
		for code, name := range tags {
			re := regexp.MustCompile(fmt.Sprintf(`(?m)^//\t0x%02X %s\b`, code, name))
			if !re.Match(src) {
				t.Errorf("format comment: no line documents tag 0x%02X as %s", code, name)
			}
		}
	}
	if !strings.Contains(doc["magic"], `"`+wireMagic+`"`) || !strings.Contains(doc["version"], fmt.Sprint(FormatVersion)) {
		t.Errorf("format comment: magic or version out of date: %q %q", doc["magic"], doc["version"])
	}
}

func TestDecodeEmptyListsAreNil(t *testing.T) {
	p := &Program{Name: "x", Params: []ParamDecl{}, Buffers: []BufferDecl{}, Shared: []SharedDecl{},
		Body: []Stmt{IfStmt{Cond: LitBool(true), Then: []Stmt{}, Else: []Stmt{}}, WhileStmt{Cond: LitBool(false), Body: []Stmt{}}}}
	q, _ := codecRoundTrip(t, "empty lists", p)
	want := &Program{Name: "x", Body: []Stmt{IfStmt{Cond: LitBool(true)}, WhileStmt{Cond: LitBool(false)}}}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("empty lists should decode as nil:\n got %#v\nwant %#v", q, want)
	}
}

func TestLiteralBitsSurvive(t *testing.T) {
	for _, bits := range []uint32{0x7fc00001, 0xffc00000, 0x7f800001, 0xffbfffff, 0x80000000, 0x00000001} {
		p := &Program{Name: "n", Body: []Stmt{LetStmt{Name: "x", Value: Literal{Type: F32, Bits: bits}}}}
		q, _ := codecRoundTrip(t, fmt.Sprintf("f32 bits %#08x", bits), p)
		if got := q.Body[0].(LetStmt).Value.(Literal).Bits; got != bits {
			t.Errorf("f32 bits %#08x came back as %#08x", bits, got)
		}
	}
}

// codecFakeExpr and codecFakeStmt are node types the encodings do not know.
type codecFakeExpr struct{}

func (codecFakeExpr) isExpr() {}

type codecFakeStmt struct{}

func (codecFakeStmt) isStmt() {}

// codecNest wraps x in n negations.
func codecNest(x Expr, n int) Expr {
	for i := 0; i < n; i++ {
		x = Neg(x)
	}
	return x
}

// codecNestBlocks puts inner at the bottom of n nested while loops.
func codecNestBlocks(inner []Stmt, n int) []Stmt {
	for i := 0; i < n; i++ {
		inner = []Stmt{WhileStmt{Cond: LitBool(false), Body: inner}}
	}
	return inner
}

func codecLetProgram(x Expr) *Program {
	return &Program{Name: "p", WorkgroupSize: [3]uint32{1, 1, 1}, Body: []Stmt{LetStmt{Name: "x", Value: x}}}
}

func TestEncodeRefuses(t *testing.T) {
	cases := []struct {
		name string
		p    *Program
		want string
	}{
		{"nil program", nil, "program is nil"},
		{"nil expression", codecLetProgram(Add(LitU32(1), nil)), "body[0].value.args[1]: expression is missing"},
		{"nil statement", &Program{Body: []Stmt{IfStmt{Cond: LitBool(true), Else: []Stmt{nil}}}}, "body[0].else[0]: statement is nil"},
		{"foreign expression", codecLetProgram(Cast(F32, codecFakeExpr{})), "body[0].value.value: unknown expression type ir.codecFakeExpr"},
		{"foreign statement", &Program{Body: []Stmt{codecFakeStmt{}}}, "body[0]: unknown statement type ir.codecFakeStmt"},
		{"bad type", codecLetProgram(Literal{Type: 0}), "body[0].value: type 0 has no wire code"},
		{"bad param type", &Program{Params: []ParamDecl{{Name: "a", Type: 9, Default: LitU32(0)}}}, "params[0]: type 9 has no wire code"},
		{"bad default type", &Program{Params: []ParamDecl{{Name: "a", Type: U32}}}, "params[0].default: type 0"},
		{"bad access", &Program{Buffers: []BufferDecl{{Name: "b", Type: U32}}}, "buffers[0]: access 0 has no wire code"},
		{"bad shared type", &Program{Shared: []SharedDecl{{Name: "s", Type: typeEnd}}}, fmt.Sprintf("shared[0]: type %d has no wire code", typeEnd)},
		{"bad builtin", codecLetProgram(BuiltinRef{Kind: builtinEnd}), "builtin 8 has no wire code"},
		{"bad unary", codecLetProgram(UnaryExpr{Op: unaryEnd, X: LitF32(1)}), "unary operator 15 has no wire code"},
		{"bad binary", codecLetProgram(BinaryExpr{Op: 0, X: LitF32(1), Y: LitF32(1)}), "binary operator 0 has no wire code"},
		{"bad atomic", &Program{Body: []Stmt{AtomicStmt{Op: atomicEnd}}}, "body[0]: atomic operation 9 has no wire code"},
		{"bad subgroup op", codecLetProgram(SubgroupExpr{Op: subgroupEnd, X: LitU32(1)}), "body[0].value: subgroup operation 6 has no wire code"},
		{"lane on a reduction", codecLetProgram(SubgroupExpr{Op: SubgroupOpAdd, X: LitU32(1), Lane: LitU32(0)}), "subgroup_add takes no lane"},
		{"missing lane", codecLetProgram(SubgroupShuffle(LitU32(1), nil)), "body[0].value.args[1]: expression is missing"},
		{"compare on add", &Program{Body: []Stmt{AtomicStmt{Op: AtomicAdd, Target: "h", Index: LitU32(0), Value: LitU32(1), Compare: LitU32(0)}}}, "body[0].compare: atomic add takes no compare value"},
		{"cas without compare", &Program{Body: []Stmt{AtomicStmt{Op: AtomicCompareExchange, Target: "h", Index: LitU32(0), Value: LitU32(1)}}}, "body[0].compare: expression is missing"},
		{"bad uniform type", &Program{Uniforms: []UniformDecl{{Name: "u"}}}, "uniforms[0]: type 0 has no wire code"},
		{"bad bitcast type", codecLetProgram(Bitcast(0, LitU32(1))), "body[0].value: type 0 has no wire code"},
		{"bad cast", codecLetProgram(Cast(0, LitU32(1))), "body[0].value: type 0"},
		{"bad var type", &Program{Body: []Stmt{VarStmt{Name: "v", Value: LitU32(1)}}}, "body[0]: type 0"},
		{"bad UTF-8 name", &Program{Name: "a\xffb"}, "name: string \"a\\xffb\" is not valid UTF-8"},
		{"bad UTF-8 local", codecLetProgram(Local("\xc3")), "body[0].value: string"},
		{"deep expression", codecLetProgram(codecNest(LitF32(1), MaxNesting)), "expressions nest deeper than 256 levels"},
		{"deep blocks", &Program{Body: codecNestBlocks(nil, MaxNesting)}, ".body[0].cond: expressions nest deeper than 256 levels"},
		{"nil in for", &Program{Body: []Stmt{ForStmt{Var: "k", Type: U32, From: LitU32(0), To: LitU32(1)}}}, "body[0].step: expression is missing"},
		{"nil in store", &Program{Body: []Stmt{StoreStmt{Target: "s", Value: LitU32(1)}}}, "body[0].index: expression is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(c.p)
			if err == nil {
				t.Fatalf("Encode accepted it: %x", b)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "ir: encode: ") || !strings.Contains(msg, ". Fix: ") {
				t.Fatalf("error %q, want it to contain %q and a Fix", msg, c.want)
			}
			if c.p != nil && c.p.Digest() != 0 {
				t.Fatal("Digest of a program Encode refuses must be 0")
			}
		})
	}
}

// TestNestingLimitMatchesValidate: every depth Validate accepts encodes, and the
// first depth it rejects is refused by Encode and Decode as well.
func TestNestingLimitMatchesValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mk   func(n int) *Program
	}{
		{"expressions", func(n int) *Program {
			return &Program{Name: "p", WorkgroupSize: [3]uint32{1, 1, 1},
				Body: []Stmt{LetStmt{Name: "x", Value: codecNest(LitF32(1), n)}}}
		}},
		{"blocks", func(n int) *Program {
			return &Program{Name: "p", WorkgroupSize: [3]uint32{1, 1, 1}, Body: codecNestBlocks(nil, n)}
		}},
	} {
		var limit int
		for n := MaxNesting - 3; n < MaxNesting+3; n++ {
			if Validate(c.mk(n)) != nil {
				limit = n
				break
			}
		}
		if limit == 0 {
			t.Fatalf("%s: Validate accepts depth up to %d", c.name, MaxNesting+3)
		}
		ok, err := Encode(c.mk(limit - 1))
		if err != nil {
			t.Fatalf("%s: Encode refuses what Validate accepts: %v", c.name, err)
		}
		if _, err := Decode(ok); err != nil {
			t.Fatalf("%s: Decode rejects what Validate accepts: %v", c.name, err)
		}
		if _, err := Encode(c.mk(limit)); err == nil {
			t.Fatalf("%s: Encode accepts what Validate rejects for depth", c.name)
		}
		// Bytes for the rejected depth, made by splicing one more level in front.
		deep := codecSpliceDeeper(t, ok, c.name)
		_, err = Decode(deep)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(de.Msg, "nested at most 256 levels") {
			t.Fatalf("%s: Decode of one level too deep: %v", c.name, err)
		}
	}
}

// codecSpliceDeeper adds one level of nesting to the encoding of a codecNest or codecNestBlocks
// program by inserting one more unary neg or while header before the first one.
func codecSpliceDeeper(t *testing.T, enc []byte, kind string) []byte {
	t.Helper()
	var marker []byte
	if kind == "expressions" {
		c, _ := wireUnaryOps.code(OpNeg)
		marker = []byte{tagUnary, c}
	} else {
		marker = []byte{tagWhile, tagLiteral, 0x06, 0, 0, 0, 0, 0x01}
	}
	i := bytes.Index(enc, marker)
	if i < 0 {
		t.Fatal("marker not found")
	}
	out := append([]byte{}, enc[:i]...)
	out = append(out, marker...)
	return append(out, enc[i:]...)
}

// codecWire builds encodings by hand for the rejection tests.
type codecWire []byte

func (w codecWire) uv(v uint64) codecWire { return binary.AppendUvarint(w, v) }
func (w codecWire) str(s string) codecWire {
	return append(w.uv(uint64(len(s))), s...)
}
func (w codecWire) raw(b ...byte) codecWire { return append(w, b...) }

// codecHeader is a program with name "p", workgroup 1x1x1, no declarations, ready for
// the body.
func codecHeader() codecWire {
	return codecWire(wireMagic).uv(FormatVersionV1).str("p").uv(1).uv(1).uv(1).uv(0).uv(0).uv(0)
}

// codecHeaderV2 is codecHeader in format version 2, with subgroup size sg and one
// u32 uniform "u" when uniform is set.
func codecHeaderV2(sg uint64, uniform bool) codecWire {
	w := codecWire(wireMagic).uv(FormatVersionV11).str("p").uv(1).uv(1).uv(1).uv(sg).uv(0)
	if uniform {
		w = w.uv(1).str("u").raw(0x01)
	} else {
		w = w.uv(0)
	}
	return w.uv(0).uv(0)
}

func TestDecodeRejects(t *testing.T) {
	letU32 := func(x ...byte) codecWire { return codecHeader().uv(1).raw(tagLet).str("x").raw(x...) }
	cases := []struct {
		name   string
		data   []byte
		offset int
		want   string
	}{
		{"empty", nil, 0, `expected the magic "KILNIR", got ""`},
		{"wrong magic", []byte("KILNIX\x01"), 0, `got "KILNIX"`},
		{"version 4", codecWire(wireMagic).uv(4), 6, "format version 4, this build reads versions 1 to 3"},
		{"v2 without v1.1", codecHeaderV2(0, false).uv(0), 6, "format version 2 for a program that uses nothing of IR v1.1"},
		{"v2 continue in v1", codecHeader().uv(1).raw(tagContinue), 16, "expected a statement tag (0x01..0x0b), got 0x0c"},
		{"v2 bad statement tag", codecHeaderV2(32, false).uv(1).raw(0x0d), 18, "expected a statement tag (0x01..0x0c), got 0x0d"},
		{"v2 bad expression tag", codecHeaderV2(0, true).uv(1).raw(tagLet).str("x").raw(0x0f), 24, "expected an expression tag (0x01..0x0e), got 0x0f"},
		{"v2 bad subgroup op", codecHeaderV2(0, true).uv(1).raw(tagLet).str("x").raw(tagSubgroup, 0x06), 25, "a subgroup operation (one of 0x01 0x02 0x03 0x04 0x05), got 0x06"},
		{"v2 bad unary", codecHeaderV2(0, true).uv(1).raw(tagLet).str("x").raw(tagUnary, 0x0f), 25, "a unary operator"},
		{"v2 bad uniform type", codecWire(wireMagic).uv(2).str("p").uv(1).uv(1).uv(1).uv(0).uv(0).uv(1).str("u").raw(0x07), 17, "expected a type"},
		{"v2 subgroup size over u32", codecWire(wireMagic).uv(2).str("p").uv(1).uv(1).uv(1).uv(1 << 32), 12, "subgroup size (at most 4294967295)"},
		{"version 0", codecWire(wireMagic).uv(0), 6, "format version 0"},
		{"no version", codecWire(wireMagic), 6, "expected format version (a uvarint), got the end of the input"},
		{"trailing byte", codecHeader().uv(0).raw(0), 16, "expected the end of the program, got 1 more bytes"},
		{"non-minimal count", codecHeader().raw(0x80, 0x00), 15, "non-minimal"},
		{"non-minimal name length", codecWire(wireMagic).uv(1).raw(0x81, 0x00, 'p'), 7, "non-minimal"},
		{"overflowing varint", codecWire(wireMagic).uv(1).uv(0).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), 8, "overflows 64 bits"},
		{"workgroup over u32", codecWire(wireMagic).uv(1).str("p").uv(1 << 32), 9, "workgroup size (at most 4294967295), got 4294967296"},
		{"huge statement count", codecHeader().uv(1 << 40), 15, "number of statements that the 0 bytes left can hold, got 1099511627776"},
		{"param count beyond bytes", codecWire(wireMagic).uv(1).str("p").uv(1).uv(1).uv(1).uv(3).raw(make([]byte, 20)...), 12, "number of params that the 20 bytes left"},
		{"string beyond bytes", codecWire(wireMagic).uv(1).uv(5).raw('a'), 7, "program name of 5 bytes, but only 1 bytes are left"},
		{"bad UTF-8", codecWire(wireMagic).uv(1).str("\xff"), 7, "program name in UTF-8"},
		{"bad statement tag", codecHeader().uv(1).raw(0x2a), 16, "expected a statement tag (0x01..0x0b), got 0x2a"},
		{"zero statement tag", codecHeader().uv(1).raw(0x00), 16, "statement tag"},
		{"bad expression tag", letU32(0x0c), 19, "expected an expression tag (0x01..0x0b), got 0x0c"},
		{"bad type", letU32(tagLiteral, 0x03, 0, 0, 0, 0), 20, "expected a type (one of 0x01 0x02 0x06 0x0b), got 0x03"},
		{"short literal", letU32(tagLiteral, 0x01, 0, 0), 21, "expected 4 bytes of literal bits, got 2"},
		{"bad unary", letU32(tagUnary, 0x0b), 20, "a unary operator"},
		{"bad binary", letU32(tagBinary, 0x15), 20, "a binary operator"},
		{"bad builtin", letU32(tagBuiltin, 0x06, 0), 20, "a builtin"},
		{"bad atomic", codecHeader().uv(1).raw(tagAtomic, 0x08), 17, "an atomic operation"},
		{"bad access", codecWire(wireMagic).uv(1).str("p").uv(1).uv(1).uv(1).uv(0).uv(1).str("b").uv(0).raw(0x01, 0x04, 0).uv(0).uv(0), 18, "a buffer access"},
		{"truncated let", letU32(), 19, "an expression tag, got the end of the input"},
		{"truncated if", codecHeader().uv(1).raw(tagIf).raw(tagLiteral, 0x06, 1, 0, 0, 0).uv(0), 24, "number of statements"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Decode(c.data)
			if err == nil {
				t.Fatalf("Decode accepted %x as %#v", c.data, p)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			if !strings.Contains(de.Msg, c.want) {
				t.Errorf("message %q, want %q", de.Msg, c.want)
			}
			if de.Offset != c.offset {
				t.Errorf("offset %d, want %d (%s)", de.Offset, c.offset, de.Msg)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, fmt.Sprintf("ir: decode: byte %d: ", c.offset)) || !strings.Contains(msg, ". Fix: ") {
				t.Errorf("error text %q lacks offset or Fix", msg)
			}
		})
	}
}

func TestDecodeRejectsEveryTruncation(t *testing.T) {
	checkEveryTruncationFails(t, codecKitchenSink())
}

// checkEveryTruncationFails checks that Decode refuses every proper prefix of
// p's encoding.
func checkEveryTruncationFails(t *testing.T, p *Program) {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n]); err == nil {
			t.Fatalf("%s: Decode accepted the first %d of %d bytes", p.Name, n, len(b))
		}
	}
}

// checkFeatureVersions checks that each feature, applied alone to a one-let
// program, makes it encode as format version and round-trip.
func checkFeatureVersions(t *testing.T, features map[string]func(p *Program), version uint64) {
	t.Helper()
	for name, change := range features {
		p := codecLetProgram(LitU32(1))
		change(p)
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v := codecVersionOf(t, b); v != version {
			t.Errorf("%s: encodes as version %d, want %d", name, v, version)
		}
		q, err := Decode(b)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Errorf("%s: round trip failed (%v)", name, err)
		}
	}
}

// digestCase is a program and its golden digest.
type digestCase struct {
	name string
	p    *Program
	want string
}

// checkDigests checks each case's digest; msg formats a change from the case's
// name and the digest found.
func checkDigests(t *testing.T, msg string, cases ...digestCase) {
	t.Helper()
	for _, c := range cases {
		if got := c.p.DigestHex(); got != c.want {
			t.Errorf(msg, c.name, got)
		}
	}
}

// TestDecodeDeepInputIsBounded: a long run of nesting bytes is rejected at the
// limit, without recursing through the rest of the input.
func TestDecodeDeepInputIsBounded(t *testing.T) {
	c, _ := wireUnaryOps.code(OpNeg)
	deepExpr := codecHeader().uv(1).raw(tagLet).str("x")
	for i := 0; i < 1_000_000; i++ {
		deepExpr = deepExpr.raw(tagUnary, c)
	}
	deepStmt := codecHeader()
	for i := 0; i < 1_000_000; i++ {
		deepStmt = deepStmt.uv(1).raw(tagWhile, tagLiteral, 0x06, 0, 0, 0, 0)
	}
	for name, data := range map[string][]byte{"expressions": deepExpr, "statements": deepStmt} {
		_, err := Decode(data)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(de.Msg, "at most 256 levels") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDigestGolden(t *testing.T) {
	const msg = "the digest of %s changed to %s: the canonical encoding changed, so bump FormatVersion " +
		"(old plugins would misread it) and update this constant and testdata"
	checkDigests(t, msg,
		digestCase{"saxpy", codecSaxpy(), "53cbb0da7c8d7aa7"},
		digestCase{"kitchen_sink", codecKitchenSink(), "093a30a7eb5daa49"},
		digestCase{"every_op", codecEveryOp(), "b235b8b88aeab504"})
	codecGoldenForms(t, "saxpy", codecSaxpy())
}

func TestDigestHex(t *testing.T) {
	p := codecSaxpy()
	h := p.DigestHex()
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(h) || h != fmt.Sprintf("%016x", p.Digest()) {
		t.Fatalf("DigestHex %q does not match Digest %#x", h, p.Digest())
	}
	if p.Digest() == 0 {
		t.Fatal("digest of a valid program is 0")
	}
}

func TestDigestSeesEveryChange(t *testing.T) {
	base := codecSaxpy()
	changes := map[string]func(p *Program){
		"name":           func(p *Program) { p.Name += "2" },
		"workgroup size": func(p *Program) { p.WorkgroupSize[2] = 2 },
		"default":        func(p *Program) { p.Params[0].Default = LitF32(3) },
		"buffer name":    func(p *Program) { p.Buffers[0].Name = "z" },
		"count":          func(p *Program) { p.Buffers[0].Count = 4 },
		"shared":         func(p *Program) { p.Shared = []SharedDecl{{Name: "s", Type: U32, Count: 1}} },
		"body":           func(p *Program) { p.Body = append(p.Body, ReturnStmt{}) },
		"nan payload": func(p *Program) {
			p.Params[0].Default = Literal{Type: F32, Bits: 0x7fc00001}
		},
	}
	seen := map[uint64]string{base.Digest(): "base"}
	nan := codecSaxpy()
	nan.Params[0].Default = Literal{Type: F32, Bits: defaultNaNBits}
	seen[nan.Digest()] = "default nan"
	for name, change := range changes {
		p := codecSaxpy()
		change(p)
		d := p.Digest()
		if prev, dup := seen[d]; dup {
			t.Errorf("changing %s gives the digest of %s", name, prev)
		}
		seen[d] = name
	}
}

func TestBindingSignature(t *testing.T) {
	base := codecKitchenSink()
	sig := BindingSignature(base)
	if sig != BindingSignature(codecKitchenSink()) {
		t.Fatal("binding signature is not stable")
	}
	differs := map[string]func(p *Program){
		"binding":     func(p *Program) { p.Buffers[0].Binding, p.Buffers[1].Binding = 1, 0 },
		"type":        func(p *Program) { p.Buffers[1].Type = U32 },
		"access":      func(p *Program) { p.Buffers[1].Access = ReadWrite },
		"count":       func(p *Program) { p.Buffers[2].Count = 17 },
		"fixed count": func(p *Program) { p.Buffers[0].Count = 1 },
		"extra buffer": func(p *Program) {
			p.Buffers = append(p.Buffers, BufferDecl{Name: "e", Binding: 4, Type: U32, Access: Read})
		},
		"fewer buffers": func(p *Program) { p.Buffers = p.Buffers[:3] },
	}
	for name, change := range differs {
		p := codecKitchenSink()
		change(p)
		if BindingSignature(p) == sig {
			t.Errorf("changing the buffers' %s keeps the binding signature", name)
		}
	}
	same := map[string]func(p *Program){
		"names": func(p *Program) {
			for i := range p.Buffers {
				p.Buffers[i].Name += "_renamed"
			}
		},
		"body":          func(p *Program) { p.Body = p.Body[:1] },
		"program name":  func(p *Program) { p.Name = "other" },
		"params":        func(p *Program) { p.Params = nil },
		"shared":        func(p *Program) { p.Shared = nil },
		"workgroup":     func(p *Program) { p.WorkgroupSize = [3]uint32{1, 1, 1} },
		"declare order": func(p *Program) { p.Buffers[0], p.Buffers[3] = p.Buffers[3], p.Buffers[0] },
	}
	for name, change := range same {
		p := codecKitchenSink()
		change(p)
		if BindingSignature(p) != sig {
			t.Errorf("changing the %s changes the binding signature", name)
		}
	}
	if BindingSignature(nil) != BindingSignature(&Program{}) {
		t.Error("a nil program should have the signature of one without buffers")
	}
}

func TestMarshalBinary(t *testing.T) {
	p := codecKitchenSink()
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Encode(p)
	if !bytes.Equal(b, want) {
		t.Fatal("MarshalBinary differs from Encode")
	}
	var q Program
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&q, p) {
		t.Fatal("UnmarshalBinary(MarshalBinary(p)) differs from p")
	}
	if err := q.UnmarshalBinary(b[:10]); err == nil {
		t.Fatal("UnmarshalBinary accepted a truncated program")
	}
	if !reflect.DeepEqual(&q, p) {
		t.Fatal("a failed UnmarshalBinary changed the program")
	}
}

func BenchmarkEncode(b *testing.B) {
	p := codecKitchenSink()
	for i := 0; i < b.N; i++ {
		if _, err := Encode(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	data, err := Encode(codecKitchenSink())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	p := codecKitchenSink()
	for i := 0; i < b.N; i++ {
		p.Digest()
	}
}

func FuzzDecode(f *testing.F) {
	for _, p := range []*Program{codecSaxpy(), codecKitchenSink(), codecEveryOp(), codecKitchenSinkV11(), codecEveryOpV11(),
		codecKitchenSinkV12(), codecEveryOpV12(), {Name: "e"}} {
		b, err := Encode(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, p := range append(codecRandomPrograms(8), codecRandomProgramsV12(8)...) {
		b, err := Encode(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("KILNIR"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode refuses a decoded program: %v", err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("not canonical: decoded and re-encoded\n%x\nas\n%x", data, b)
		}
		_ = Validate(p)
	})
}
