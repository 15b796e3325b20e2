package ir

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// saxpy is the program of the package documentation.
func saxpy() *Builder {
	b := NewBuilder("example.saxpy.f32", 256, 1, 1)
	a := b.Param("a", F32, LitF32(2))
	x := b.Buffer("x", F32, Read)
	y := b.Buffer("y", F32, ReadWrite)
	i := b.Let("i", GlobalID(0))
	b.If(Lt(i, Len(y)), func(then *Block) {
		then.Store(y, i, Add(Mul(a, Load(x, i)), Load(y, i)))
	})
	return b
}

func TestValidateAcceptsWellFormedPrograms(t *testing.T) {
	if _, err := saxpy().Build(); err != nil {
		t.Fatalf("saxpy: %v", err)
	}
	b := NewBuilder("kiln.test.everything", 8, 4, 2)
	b.Param("flag", Bool, LitBool(true))
	b.Param("k", I32, LitI32(-3))
	in := b.Buffer("in", I32, Read)
	out := b.FixedBuffer("out", U32, ReadWrite, 64)
	f := b.Buffer("f", F32, Write)
	sh := b.Shared("tile", F32, 64)
	bits := b.Shared("bits", Bool, 8)
	gid := b.Let("gid", GlobalID(0))
	v := b.Var("acc", I32, Load(in, gid))
	b.Store(bits, LocalID(0), Param("flag"))
	b.Store(sh, LocalID(1), Cast(F32, v))
	b.Barrier()
	b.For("k", I32, LitI32(-4), Param("k"), LitI32(1), func(body *Block, k Expr) {
		body.Assign("acc", Add(Local("acc"), Rem(k, LitI32(3))))
		body.If(Gt(Local("acc"), LitI32(100)), func(then *Block) { then.Break() })
	})
	b.While(LitBool(true), func(body *Block) {
		body.IfElse(Load(bits, LitU32(0)), func(then *Block) { then.Break() }, func(els *Block) {
			els.Return()
		})
	})
	old := b.AtomicResult(AtomicMax, out, Cast(U32, v), LitU32(7), "old")
	b.Atomic(AtomicAdd, out, LitU32(0), old)
	fv := Load(sh, LocalID(1))
	b.Store(f, gid, Fma(fv, Sqrt(Abs(fv)), Select(Ne(fv, fv), LitF32(0), Floor(Neg(fv)))))
	b.Store(out, LitU32(1), Shr(Xor(Not(LitU32(1)), WorkgroupSize(2)), NumWorkgroups(1)))
	b.Let("mixed", LAnd(Cast(Bool, Load(out, WorkgroupID(0))), Not(Eq(LitI32(1), Cast(I32, LitU32(1))))))
	if _, err := b.Build(); err != nil {
		t.Fatalf("everything: %v", err)
	}
}

// rejectCase is a program build makes and the fragments Validate's error must
// contain.
type rejectCase struct {
	name  string
	build func(b *Builder)
	want  []string
}

// checkRejects checks that Validate refuses each case's program with a
// *ValidationError that contains the fragments and has a Fix.
func checkRejects(t *testing.T, cases []rejectCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("kiln.test.invalid", 64, 1, 1)
			tc.build(b)
			err := Validate(b.Program())
			if err == nil {
				t.Fatal("Validate accepted an ill-formed program")
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is %T, want *ValidationError", err, err)
			}
			for _, frag := range tc.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("error %q does not contain %q", err, frag)
				}
			}
			if verr.Fix == "" {
				t.Errorf("error %q has no Fix", err)
			}
		})
	}
}

// TestValidateRejects pins one error per rule: the path, the message and the Fix.
func TestValidateRejects(t *testing.T) {
	cases := []rejectCase{
		{"operand types differ", func(b *Builder) {
			b.Buffer("out", F32, Write)
			b.Let("i", GlobalID(0))
			b.If(LitBool(true), func(then *Block) {
				then.Store("out", Local("i"), Add(LitF32(1), LitU32(2)))
			})
		}, []string{"body[1].then[0].value: add: operand types f32 and u32 differ. Fix: cast one operand"}},
		{"unknown local", func(b *Builder) {
			b.Let("x", Add(Local("nope"), LitU32(1)))
		}, []string{"body[0].value.args[0]", `local "nope" is not declared`, "Fix:"}},
		{"unknown param", func(b *Builder) { b.Let("x", Param("alpha")) }, []string{`parameter "alpha" is not declared`}},
		{"unknown buffer", func(b *Builder) {
			b.Buffer("a", U32, Read)
			b.Let("x", Load("b", LitU32(0)))
		}, []string{`load: "b" is not a buffer or shared array`, "one of: a"}},
		{"redeclaration", func(b *Builder) {
			b.Let("x", LitU32(1))
			b.If(LitBool(true), func(then *Block) { then.Let("x", LitU32(2)) })
		}, []string{"body[1].then[0]", `"x" is already declared by the let at body[0]`}},
		{"loop var redeclared", func(b *Builder) {
			b.For("k", U32, LitU32(0), LitU32(4), LitU32(1), func(body *Block, k Expr) { body.Var("k", U32, k) })
		}, []string{`"k" is already declared by the for at body[0]`}},
		{"assign to let", func(b *Builder) {
			b.Let("x", LitU32(1))
			b.Assign("x", LitU32(2))
		}, []string{"body[1]", `"x" is declared by the let at body[0] and cannot be assigned`, "Fix: declare it with var"}},
		{"assign to loop var", func(b *Builder) {
			b.For("k", U32, LitU32(0), LitU32(4), LitU32(1), func(body *Block, k Expr) { body.Assign("k", k) })
		}, []string{"cannot be assigned"}},
		{"assign type", func(b *Builder) {
			b.Var("x", U32, LitU32(1))
			b.Assign("x", LitI32(2))
		}, []string{`value assigned to "x" must be u32, got i32`}},
		{"store to read buffer", func(b *Builder) {
			b.Buffer("x", F32, Read)
			b.Store("x", LitU32(0), LitF32(1))
		}, []string{`store: buffer "x" has access read`, "Fix: declare it with access write or read_write"}},
		{"load from write buffer", func(b *Builder) {
			b.Buffer("out", F32, Write)
			b.Let("v", Load("out", LitU32(0)))
		}, []string{`load: buffer "out" has access write`}},
		{"duplicate binding", func(b *Builder) {
			b.Buffer("a", U32, Read)
			b.Buffer("b", U32, Read)
			b.prog.Buffers[1].Binding = 0
		}, []string{"buffers[1]", `binding 0 of "b" is already used by "a"`}},
		{"non-dense binding", func(b *Builder) {
			b.Buffer("a", U32, Read)
			b.prog.Buffers[0].Binding = 3
		}, []string{"buffers[0]", "leaves a gap: bindings must be dense"}},
		{"duplicate array name", func(b *Builder) {
			b.Buffer("a", U32, Read)
			b.Shared("a", U32, 4)
		}, []string{"shared[0]", `"a" is already declared at buffers[0]`}},
		{"workgroup zero", func(b *Builder) { b.prog.WorkgroupSize = [3]uint32{0, 1, 1} }, []string{"workgroup_size", "axis of 0"}},
		{"workgroup too big", func(b *Builder) { b.prog.WorkgroupSize = [3]uint32{64, 32, 1} }, []string{"workgroup_size", "2048 invocations, more than 1024"}},
		{"break outside loop", func(b *Builder) {
			b.If(LitBool(true), func(then *Block) { then.Break() })
		}, []string{"body[0].then[0]", "break outside a loop"}},
		{"bool buffer", func(b *Builder) { b.Buffer("flags", Bool, Read) }, []string{"buffers[0]", "cannot hold bool", "Fix: store booleans as u32"}},
		{"atomic on f32", func(b *Builder) {
			b.Buffer("sum", F32, ReadWrite)
			b.Atomic(AtomicAdd, "sum", LitU32(0), LitF32(1))
		}, []string{"atomic add", `"sum" has element type f32`}},
		{"atomic on read buffer", func(b *Builder) {
			b.Buffer("h", U32, Read)
			b.Atomic(AtomicOr, "h", LitU32(0), LitU32(1))
		}, []string{`atomic or: buffer "h" has access read`}},
		{"atomic result redeclared", func(b *Builder) {
			b.Buffer("h", U32, ReadWrite)
			b.Let("old", LitU32(0))
			b.AtomicResult(AtomicAdd, "h", LitU32(0), LitU32(1), "old")
		}, []string{`"old" is already declared`}},
		{"too many buffers", func(b *Builder) {
			for i := 0; i <= MaxBuffers; i++ {
				b.Buffer(fmt.Sprintf("b%d", i), U32, Read)
			}
		}, []string{"buffers", "declares 33 buffers"}},
		{"zero shared count", func(b *Builder) { b.Shared("tile", F32, 0) }, []string{"shared[0]", "count 0"}},
		{"too much shared", func(b *Builder) {
			b.Shared("a", F32, 6000)
			b.Shared("b", F32, 6000)
		}, []string{"shared[1]", "48000 bytes"}},
		{"index type", func(b *Builder) {
			b.Buffer("x", F32, Read)
			b.Let("v", Load("x", LitI32(0)))
		}, []string{"body[0].value.index", "load index must be u32, got i32"}},
		{"if condition", func(b *Builder) { b.If(LitU32(1), nil) }, []string{"body[0].cond", "if condition must be bool, got u32"}},
		{"while condition", func(b *Builder) { b.While(LitI32(1), nil) }, []string{"while condition must be bool"}},
		{"for type", func(b *Builder) { b.For("k", F32, LitF32(0), LitF32(1), LitF32(1), nil) }, []string{`loop variable "k" has type f32`}},
		{"for bound type", func(b *Builder) { b.For("k", U32, LitU32(0), LitI32(4), LitU32(1), nil) }, []string{"body[0].to", "for to must be u32, got i32"}},
		{"rem on f32", func(b *Builder) { b.Let("r", Rem(LitF32(1), LitF32(2))) }, []string{"rem: operand type f32 is not supported"}},
		{"shift of f32", func(b *Builder) { b.Let("r", Shl(LitF32(1), LitF32(2))) }, []string{"shl: operand type f32 is not supported"}},
		{"land on u32", func(b *Builder) { b.Let("r", LAnd(LitU32(1), LitU32(2))) }, []string{"land: operand type u32 is not supported"}},
		{"lt on bool", func(b *Builder) { b.Let("r", Lt(LitBool(true), LitBool(false))) }, []string{"lt: operand type bool is not supported"}},
		{"sqrt of u32", func(b *Builder) { b.Let("r", Sqrt(LitU32(4))) }, []string{"body[0].value", "sqrt: operand type u32 is not supported"}},
		{"abs of u32", func(b *Builder) { b.Let("r", Abs(LitU32(4))) }, []string{"abs: operand type u32"}},
		{"not of f32", func(b *Builder) { b.Let("r", Not(LitF32(4))) }, []string{"not: operand type f32"}},
		{"fma of i32", func(b *Builder) { b.Let("r", Fma(LitF32(1), LitI32(2), LitF32(3))) }, []string{"body[0].value.args[1]", "fma operand must be f32"}},
		{"select condition", func(b *Builder) { b.Let("r", Select(LitU32(1), LitU32(2), LitU32(3))) }, []string{"select condition must be bool"}},
		{"select arms", func(b *Builder) { b.Let("r", Select(LitBool(true), LitU32(2), LitI32(3))) }, []string{"select: operand types u32 and i32 differ"}},
		{"cast bool to f32", func(b *Builder) { b.Let("r", Cast(F32, LitBool(true))) }, []string{"cast: bool to f32 is not allowed"}},
		{"cast f32 to bool", func(b *Builder) { b.Let("r", Cast(Bool, LitF32(1))) }, []string{"cast: f32 to bool is not allowed"}},
		{"builtin axis", func(b *Builder) { b.Let("r", GlobalID(3)) }, []string{"builtin global_id has axis 3"}},
		{"len of shared", func(b *Builder) {
			b.Shared("s", U32, 4)
			b.Let("n", Len("s"))
		}, []string{`len: "s" is not a buffer`}},
		{"bad bool literal", func(b *Builder) { b.Let("r", Literal{Type: Bool, Bits: 2}) }, []string{"bool literal has bits 0x2"}},
		{"param default type", func(b *Builder) { b.Param("a", F32, LitU32(2)) }, []string{"params[0]", `parameter "a" of type f32 has a default of type u32`}},
		{"param twice", func(b *Builder) {
			b.Param("a", F32, LitF32(2))
			b.Param("a", F32, LitF32(2))
		}, []string{"params[1]", `parameter "a" is declared twice`}},
		{"bad identifier", func(b *Builder) { b.Let("1x", LitU32(0)) }, []string{`let name "1x" is not a valid identifier`}},
		{"bad program name", func(b *Builder) { b.prog.Name = "has space" }, []string{"name", `program name "has space" is not a valid op id`}},
		{"store value type", func(b *Builder) {
			b.Buffer("o", U32, Write)
			b.Store("o", LitU32(0), LitF32(1))
		}, []string{`value stored to "o" must be u32, got f32`}},
		{"local out of scope", func(b *Builder) {
			b.If(LitBool(true), func(then *Block) { then.Let("inner", LitU32(1)) })
			b.Let("x", Local("inner"))
		}, []string{"body[1].value", `local "inner" is not declared`}},
		{"nil statement", func(b *Builder) { b.Append(nil) }, []string{"body[0]", "statement is nil"}},
		{"nil expression", func(b *Builder) { b.Let("x", nil) }, []string{"body[0].value", "expression is missing"}},
	}
	checkRejects(t, cases)
}

func TestValidateSiblingScopesMayReuseNames(t *testing.T) {
	b := NewBuilder("kiln.test.scopes", 1, 1, 1)
	b.IfElse(LitBool(true), func(then *Block) { then.Let("x", LitU32(1)) }, func(els *Block) { els.Let("x", LitF32(1)) })
	b.For("k", U32, LitU32(0), LitU32(1), LitU32(1), nil)
	b.For("k", U32, LitU32(0), LitU32(1), LitU32(1), nil)
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNesting(t *testing.T) {
	b := NewBuilder("kiln.test.deep", 1, 1, 1)
	e := Expr(LitU32(0))
	for i := 0; i < MaxNesting+1; i++ {
		e = Add(e, LitU32(1))
	}
	b.Let("x", e)
	if err := Validate(b.Program()); err == nil || !strings.Contains(err.Error(), "nest deeper") {
		t.Fatalf("deep expression: got %v", err)
	}
	if err := Validate(nil); err == nil {
		t.Fatal("nil program accepted")
	}
}

// FuzzValidate builds programs from fuzz bytes, most of them ill-typed, and checks
// that Validate neither panics nor hangs on any of them.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("a program of some bytes to start the fuzzer with"))
	f.Add([]byte{64, 1, 1, 32, 2, 1, 3, 2, 4, 1, 2, 3, 11, 1, 13, 2, 11, 12, 3, 9, 8, 1, 13, 3, 0, 1, 11, 4})
	f.Add([]byte{16, 1, 0, 0, 0, 1, 0, 5, 3, 0, 2, 1, 2, 5, 1, 1, 4, 1, 1, 3, 12, 0, 0, 4, 0, 15, 0, 0, 0, 1, 16, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &progGen{data: data}
		_ = Validate(g.program())
	})
}

// progGen turns bytes into a program, drawing every choice from the input.
type progGen struct {
	data []byte
	pos  int
}

func (g *progGen) next() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return b
}

var genNames = []string{"a", "b", "x", "i", "out", "s", ""}

func (g *progGen) name() string { return genNames[int(g.next())%len(genNames)] }
func (g *progGen) typ() Type    { return Type(g.next() % uint8(typeEnd+1)) }

func (g *progGen) program() *Program {
	p := &Program{Name: "kiln.fuzz", WorkgroupSize: [3]uint32{uint32(g.next()), 1, uint32(g.next() % 3)}}
	if g.next()%2 == 1 {
		p.SubgroupSize = uint32(g.next())
	}
	for n := g.next() % 3; n > 0; n-- {
		t := g.typ()
		p.Params = append(p.Params, ParamDecl{Name: g.name(), Type: t, Default: Literal{Type: g.typ(), Bits: uint32(g.next())}})
	}
	for n := g.next() % 3; n > 0; n-- {
		p.Uniforms = append(p.Uniforms, UniformDecl{Name: g.name(), Type: g.typ()})
	}
	for n := g.next() % 4; n > 0; n-- {
		p.Buffers = append(p.Buffers, BufferDecl{Name: g.name(), Binding: uint32(g.next() % 4), Type: g.typ(),
			Access: Access(g.next() % 4), Count: uint32(g.next())})
	}
	for n := g.next() % 2; n > 0; n-- {
		p.Shared = append(p.Shared, SharedDecl{Name: g.name(), Type: g.typ(), Count: uint32(g.next())})
	}
	for n := g.next() % 3; n > 0; n-- {
		p.Matrices = append(p.Matrices, MatrixDecl{Name: g.name(), Type: g.typ(), Rows: 16 * uint32(g.next()%3), Cols: 16 * uint32(g.next()%3)})
	}
	p.Body = g.block(0)
	return p
}

func (g *progGen) bound() *MatrixBound {
	if g.next()%2 == 0 {
		return nil
	}
	return &MatrixBound{g.expr(0), g.expr(0)}
}

func (g *progGen) block(depth int) []Stmt {
	var out []Stmt
	for n := g.next() % 4; n > 0 && depth < 6; n-- {
		out = append(out, g.stmt(depth))
	}
	return out
}

func (g *progGen) stmt(depth int) Stmt {
	switch g.next() % 18 {
	case 0:
		return LetStmt{g.name(), g.expr(0)}
	case 1:
		return VarStmt{g.name(), g.typ(), g.expr(0)}
	case 2:
		return AssignStmt{g.name(), g.expr(0)}
	case 3:
		return StoreStmt{g.name(), g.expr(0), g.expr(0)}
	case 4:
		return IfStmt{g.expr(0), g.block(depth + 1), g.block(depth + 1)}
	case 5:
		return ForStmt{g.name(), g.typ(), g.expr(0), g.expr(0), g.expr(0), g.block(depth + 1)}
	case 6:
		return WhileStmt{g.expr(0), g.block(depth + 1)}
	case 7:
		return BreakStmt{}
	case 8:
		return BarrierStmt{}
	case 9:
		s := AtomicStmt{Op: AtomicOp(g.next() % 10), Target: g.name(), Index: g.expr(0), Value: g.expr(0), Result: g.name()}
		if g.next()%2 == 1 {
			s.Compare = g.expr(0)
		}
		return s
	case 10:
		return ReturnStmt{}
	case 11:
		return ContinueStmt{}
	case 12:
		return MatrixFillStmt{g.name(), g.expr(0)}
	case 13:
		return MatrixLoadStmt{g.name(), g.name(), g.expr(0), g.expr(0), MatrixLayout(g.next() % 4), g.bound()}
	case 14:
		return MatrixStoreStmt{g.name(), g.name(), g.expr(0), g.expr(0), MatrixLayout(g.next() % 4), g.bound()}
	case 15:
		return MatrixMMAStmt{g.name(), g.name(), g.name(), MatrixPrecision(g.next() % 3)}
	case 16:
		return MatrixConvertStmt{g.name(), g.name()}
	}
	return nil
}

func (g *progGen) expr(depth int) Expr {
	if depth > 5 {
		return Literal{Type: g.typ(), Bits: uint32(g.next())}
	}
	switch g.next() % 15 {
	case 0:
		return Literal{Type: g.typ(), Bits: uint32(g.next())}
	case 1:
		return LocalRef{g.name()}
	case 2:
		return ParamRef{g.name()}
	case 3:
		return BuiltinRef{BuiltinKind(g.next() % 9), g.next() % 4}
	case 4:
		return LoadExpr{g.name(), g.expr(depth + 1)}
	case 5:
		return LenExpr{g.name()}
	case 6:
		return UnaryExpr{UnaryOp(g.next() % 16), g.expr(depth + 1)}
	case 7:
		return BinaryExpr{BinaryOp(g.next() % 22), g.expr(depth + 1), g.expr(depth + 1)}
	case 8:
		return FmaExpr{g.expr(depth + 1), g.expr(depth + 1), g.expr(depth + 1)}
	case 9:
		return SelectExpr{g.expr(depth + 1), g.expr(depth + 1), g.expr(depth + 1)}
	case 10:
		return CastExpr{g.typ(), g.expr(depth + 1)}
	case 11:
		return UniformRef{g.name()}
	case 12:
		return BitcastExpr{g.typ(), g.expr(depth + 1)}
	case 13:
		x := SubgroupExpr{Op: SubgroupOp(g.next() % 7), X: g.expr(depth + 1)}
		if g.next()%2 == 1 {
			x.Lane = g.expr(depth + 1)
		}
		return x
	}
	return nil
}
