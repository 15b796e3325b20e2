package ir

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// codecKitchenSinkV12 is a valid program that uses every declaration, statement,
// layout, precision and type IR v1.2 adds. TestKitchenSinkV12CoversEverything
// checks that claim.
func codecKitchenSinkV12() *Program {
	b := NewBuilder("kiln.test.kitchen_sink_v12", 64, 1, 1)
	n := b.Uniform("n", U32)
	b.Buffer("a", F16, Read)
	b.Buffer("bb", BF16, Read)
	b.Buffer("x", F32, Read)
	b.Buffer("c", F32, ReadWrite)
	b.Buffer("h", F16, ReadWrite)
	b.Shared("tile", BF16, 32*16)
	b.Matrix("A", F16, 32, 16)
	b.Matrix("B", F16, 16, 32)
	b.Matrix("Ab", BF16, 32, 16)
	b.Matrix("Bb", BF16, 16, 32)
	b.Matrix("A32", F32, 32, 16)
	b.Matrix("B32", F32, 16, 32)
	b.Matrix("acc", F32, 32, 32)
	b.Matrix("out", F16, 32, 32)
	row := b.Let("row", Mul(WorkgroupID(0), LitU32(32)))
	b.MatrixFill("acc", LitF32(0))
	b.MatrixFill("A", LitF16(-0.5))
	b.For("k", U32, LitU32(0), n, LitU32(16), func(body *Block, k Expr) {
		body.MatrixLoadBounded("A", "a", Add(Mul(row, n), k), n, RowMajor, Sub(n, row), Sub(n, k))
		body.MatrixLoad("B", "a", Add(Mul(k, n), row), n, ColMajor)
		body.MatrixMMA("acc", "A", "B")
		body.MatrixLoad("Ab", "bb", k, n, RowMajor)
		body.MatrixStoreBounded("Ab", "tile", LitU32(0), LitU32(16), RowMajor, LitU32(32), LitU32(16))
		body.MatrixLoad("Bb", "tile", LitU32(0), LitU32(32), ColMajor)
		body.MatrixMMA("acc", "Ab", "Bb")
		body.MatrixLoad("A32", "x", k, n, RowMajor)
		body.MatrixConvert("B32", "B")
		body.MatrixMMATF32("acc", "A32", "B32")
	})
	b.MatrixStore("acc", "c", row, n, RowMajor)
	b.MatrixConvert("out", "acc")
	b.MatrixStore("out", "h", row, n, ColMajor)
	i := b.Let("i", GlobalID(0))
	v := b.Let("v", Load("h", i))
	w := b.Var("w", F16, Fma(v, Sqrt(Abs(Neg(v))), LitF16(1.5)))
	b.Assign("w", Min(Max(w, Div(v, LitF16(2))), Sub(Mul(v, v), Add(v, v))))
	wide := b.Let("wide", Cast(F32, Load("bb", i)))
	b.Let("narrow", Select(Lt(v, w), Cast(BF16, wide), LitBF16(-2)))
	b.Store("h", i, Select(Ne(v, v), Cast(F16, wide), w))
	return b.Program()
}

// codecEveryOpV12 applies every operator to f16 and bf16 operands, casts between
// them and every type, and uses every matrix statement with every layout,
// precision and bound. Like codecEveryOp it is not well-typed, but both
// encodings must carry all of it; its digest pins format version 3.
func codecEveryOpV12() *Program {
	b := NewBuilder("kiln.test.every_op_v12", 1, 1, 1)
	half := []Type{F16, BF16}
	for _, t := range half {
		b.Param("p_"+t.String(), t, codecLiteral(t, 0x3c00))
		b.Uniform("u_"+t.String(), t)
		b.Shared("s_"+t.String(), t, 3)
		for _, a := range codecAccesses() {
			b.FixedBuffer("b_"+t.String()+"_"+a.String(), t, a, 5)
		}
	}
	for _, t := range Types() {
		b.Matrix("m_"+t.String(), t, 16, 32)
	}
	let := codecLets(b)
	for _, t := range half {
		lit := codecLiteral(t, 0x8001)
		let(lit)
		for _, op := range UnaryOps() {
			let(UnaryExpr{Op: op, X: lit})
		}
		for _, op := range BinaryOps() {
			let(BinaryExpr{Op: op, X: lit, Y: Param("p_" + t.String())})
		}
		for _, other := range Types() {
			let(Cast(other, lit))
			let(Cast(t, codecLiteral(other, 1)))
		}
		let(Bitcast(t, LitU32(1)))
		let(Fma(lit, lit, lit))
		let(SubgroupAdd(lit))
		b.Var("var_"+t.String(), t, lit)
		b.Store("s_"+t.String(), LitU32(0), lit)
	}
	for _, bits := range []uint32{0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7e01, 0x7fc0, 0xffff, 1, 0x7bff, 0x3c00} {
		let(Literal{Type: F16, Bits: bits})
		let(Literal{Type: BF16, Bits: bits})
	}
	b.MatrixFill("m_f32", LitF32(1))
	for _, layout := range []MatrixLayout{RowMajor, ColMajor} {
		b.MatrixLoad("m_f16", "b_f16_read", LitU32(1), LitU32(2), layout)
		b.MatrixLoadBounded("m_bf16", "s_bf16", LitU32(3), LitU32(4), layout, LitU32(5), LitU32(6))
		b.MatrixStore("m_f16", "b_f16_write", LitU32(7), LitU32(8), layout)
		b.MatrixStoreBounded("m_bf16", "s_bf16", LitU32(9), LitU32(10), layout, LitU32(11), LitU32(12))
	}
	b.MatrixMMA("m_f32", "m_f16", "m_f16")
	b.MatrixMMATF32("m_f32", "m_bf16", "m_f32")
	b.MatrixConvert("m_bool", "m_i32")
	return b.Program()
}

// codecRandomProgramsV12 returns n reproducible random programs that use IR v1.2.
func codecRandomProgramsV12(n int) []*Program {
	g := codecGen{r: rand.New(rand.NewPCG(3, 4)), v12: true}
	out := make([]*Program, n)
	for i := range out {
		out[i] = g.program()
	}
	return out
}

func (g codecGen) bound() *MatrixBound {
	if g.r.IntN(2) == 0 {
		return nil
	}
	return &MatrixBound{Rows: g.expr(1), Cols: g.expr(1)}
}

func (g codecGen) matrixStmt() Stmt {
	layout := []MatrixLayout{RowMajor, ColMajor}[g.r.IntN(2)]
	switch g.r.IntN(5) {
	case 0:
		return MatrixFillStmt{Matrix: g.name(), Value: g.expr(2)}
	case 1:
		return MatrixLoadStmt{Matrix: g.name(), From: g.name(), Offset: g.expr(2), Stride: g.expr(1), Layout: layout, Bound: g.bound()}
	case 2:
		return MatrixStoreStmt{Matrix: g.name(), To: g.name(), Offset: g.expr(2), Stride: g.expr(1), Layout: layout, Bound: g.bound()}
	case 3:
		return MatrixMMAStmt{Acc: g.name(), A: g.name(), B: g.name(), Precision: MatrixPrecision(g.r.IntN(2))}
	}
	return MatrixConvertStmt{Matrix: g.name(), From: g.name()}
}

func TestKitchenSinkV12CoversEverything(t *testing.T) {
	p := codecKitchenSinkV12()
	if err := Validate(p); err != nil {
		t.Fatalf("kitchen sink v12 must be a valid program: %v", err)
	}
	seen := map[string]bool{}
	anyStmt(p.Body, func(s Stmt) bool {
		seen[fmt.Sprintf("stmt:%T", s)] = true
		switch s := s.(type) {
		case MatrixLoadStmt:
			seen["layout:"+s.Layout.String()] = true
			seen[fmt.Sprintf("bound:%v", s.Bound != nil)] = true
		case MatrixStoreStmt:
			seen["layout:"+s.Layout.String()] = true
			seen[fmt.Sprintf("bound:%v", s.Bound != nil)] = true
		case MatrixMMAStmt:
			a, _ := p.Matrix(s.A)
			seen["mma:"+a.Type.String()+":"+s.Precision.String()] = true
		}
		return false
	})
	anyExpr(p.Body, func(x Expr) bool {
		switch x := x.(type) {
		case Literal:
			seen["literal:"+x.Type.String()] = true
		case CastExpr:
			seen["cast:"+x.To.String()] = true
		}
		return false
	})
	for _, m := range p.Matrices {
		seen["matrix:"+m.Type.String()] = true
	}
	for _, b := range p.Buffers {
		seen["buffer:"+b.Type.String()] = true
	}
	for _, s := range p.Shared {
		seen["shared:"+s.Type.String()] = true
	}
	want := []string{"layout:row", "layout:col", "bound:true", "bound:false", "mma:f16:", "mma:bf16:", "mma:f32:tf32",
		"literal:f16", "literal:bf16", "cast:f16", "cast:bf16", "cast:f32", "matrix:f16", "matrix:bf16", "matrix:f32",
		"buffer:f16", "buffer:bf16", "shared:bf16"}
	for _, s := range []Stmt{MatrixFillStmt{}, MatrixLoadStmt{}, MatrixStoreStmt{}, MatrixMMAStmt{}, MatrixConvertStmt{}} {
		want = append(want, fmt.Sprintf("stmt:%T", s))
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("kitchen sink v12 lacks %s; extend it so the golden digest covers it", w)
		}
	}
}

func TestDigestGoldenV12(t *testing.T) {
	checkDigests(t, "the digest of %s changed to %s: the version 3 encoding changed, so add a format version "+
		"(old plugins would misread it) and update this constant and testdata",
		digestCase{"kitchen_sink_v12", codecKitchenSinkV12(), "f9908529326fcb95"},
		digestCase{"every_op_v12", codecEveryOpV12(), "c6eed7fe86fb3ac5"})
	for name, p := range map[string]*Program{"kitchen_sink_v12": codecKitchenSinkV12(), "every_op_v12": codecEveryOpV12()} {
		codecGoldenForms(t, name, p)
	}
}

// TestEncodeWritesVersion3: each IR v1.2 feature alone moves a program to format
// version 3, which round-trips; v1 and v1.1 programs stay at 1 and 2
// (TestEncodeWritesTheLowestVersion).
func TestEncodeWritesVersion3(t *testing.T) {
	features := map[string]func(p *Program){
		"f16 literal":    func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: LitF16(1)} },
		"bf16 cast":      func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: Cast(BF16, LitF32(1))} },
		"f16 buffer":     func(p *Program) { p.Buffers = []BufferDecl{{Name: "b", Type: F16, Access: Read}} },
		"bf16 shared":    func(p *Program) { p.Shared = []SharedDecl{{Name: "s", Type: BF16, Count: 2}} },
		"f16 param":      func(p *Program) { p.Params = []ParamDecl{{Name: "p", Type: F16, Default: LitF16(1)}} },
		"bf16 uniform":   func(p *Program) { p.Uniforms = []UniformDecl{{Name: "u", Type: BF16}} },
		"f32 matrix":     func(p *Program) { p.Matrices = []MatrixDecl{{Name: "m", Type: F32, Rows: 16, Cols: 16}} },
		"matrix_fill":    func(p *Program) { p.Body[0] = MatrixFillStmt{Matrix: "m", Value: LitF32(0)} },
		"matrix_mma":     func(p *Program) { p.Body[0] = MatrixMMAStmt{Acc: "c", A: "a", B: "b"} },
		"matrix_convert": func(p *Program) { p.Body[0] = MatrixConvertStmt{Matrix: "c", From: "a"} },
		"nested load": func(p *Program) {
			p.Body[0] = WhileStmt{Cond: LitBool(false), Body: []Stmt{MatrixLoadStmt{Matrix: "m", From: "a", Offset: LitU32(0), Stride: LitU32(0), Layout: ColMajor}}}
		},
		"store with v1.1": func(p *Program) {
			p.SubgroupSize = 32
			p.Body[0] = MatrixStoreStmt{Matrix: "m", To: "a", Offset: LitU32(0), Stride: LitU32(0), Layout: RowMajor,
				Bound: &MatrixBound{Rows: LitU32(1), Cols: Uniform("u")}}
		},
	}
	checkFeatureVersions(t, features, FormatVersion)
}

// codecHeaderV3 starts a version 3 program "p" of workgroup 1×1×1 with no
// subgroup size, params, uniforms, buffers or shared arrays, then the matrices.
func codecHeaderV3(matrices ...MatrixDecl) codecWire {
	w := codecWire(wireMagic).uv(FormatVersion).str("p").uv(1).uv(1).uv(1).uv(0).uv(0).uv(0).uv(0).uv(0)
	w = w.uv(uint64(len(matrices)))
	for _, m := range matrices {
		c, _ := wireTypes.code(m.Type)
		w = w.str(m.Name).raw(c).uv(uint64(m.Rows)).uv(uint64(m.Cols))
	}
	return w
}

func TestDecodeRejectsV12(t *testing.T) {
	m := MatrixDecl{Name: "m", Type: F32, Rows: 16, Cols: 16}
	load := func(tail ...byte) codecWire {
		return codecHeaderV3(m).uv(1).raw(tagMatrixLoad).str("m").str("a").raw(tagLiteral, 0x01, 0, 0, 0, 0).raw(tagLiteral, 0x01, 0, 0, 0, 0).raw(tail...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"f16 in version 1", codecHeader().uv(1).raw(tagLet).str("x").raw(tagLiteral, 0x09, 0, 0, 0, 0), "expected a type (one of 0x01 0x02 0x06 0x0b), got 0x09"},
		{"bf16 in version 2", codecHeaderV2(32, false).uv(1).raw(tagLet).str("x").raw(tagLiteral, 0x0A, 0, 0, 0, 0), "got 0x0a"},
		{"matrix tag in version 2", codecHeaderV2(32, false).uv(1).raw(tagMatrixFill), "expected a statement tag (0x01..0x0c), got 0x0d"},
		{"matrix tag in version 1", codecHeader().uv(1).raw(tagMatrixConvert), "expected a statement tag (0x01..0x0b), got 0x11"},
		{"bad statement tag in version 3", codecHeaderV3(m).uv(1).raw(0x12), "expected a statement tag (0x01..0x11), got 0x12"},
		{"version 3 without v1.2", codecHeaderV3().uv(0), "format version 3 for a program that uses nothing of IR v1.2; its canonical encoding is version 1"},
		{"version 3 with only v1.1", codecHeaderV3().uv(1).raw(tagContinue), "its canonical encoding is version 2"},
		{"bad layout", load(0x03, 0x00), "expected a matrix layout (one of 0x01 0x02), got 0x03"},
		{"bad bound flag", load(0x01, 0x02), "expected a bound flag (0x00 or 0x01), got 0x02"},
		{"bad precision", codecHeaderV3(m).uv(1).raw(tagMatrixMMA).str("m").str("m").str("m").raw(0x02), "expected a matrix precision (one of 0x00 0x01), got 0x02"},
		{"wide f16 literal", codecHeaderV3().uv(1).raw(tagLet).str("x").raw(tagLiteral, 0x09, 0, 0, 1, 0), "expected f16 literal bits at most 0xffff, got 0x10000"},
		{"matrix rows over u32", codecWire(wireMagic).uv(FormatVersion).str("p").uv(1).uv(1).uv(1).uv(0).uv(0).uv(0).uv(0).uv(0).uv(1).str("m").raw(0x0B).uv(1 << 32), "matrix rows (at most 4294967295)"},
		{"too many matrices", codecWire(wireMagic).uv(FormatVersion).str("p").uv(1).uv(1).uv(1).uv(0).uv(0).uv(0).uv(0).uv(0).uv(1000), "expected a number of matrices that the 0 bytes left can hold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.data)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode: %v, want a *DecodeError", err)
			}
			if !strings.Contains(de.Msg, c.want) {
				t.Errorf("message %q, want %q", de.Msg, c.want)
			}
		})
	}
	// The well-formed version of the load case decodes.
	if _, err := Decode(load(0x02, 0x00)); err != nil {
		t.Fatalf("a well-formed matrix_load: %v", err)
	}
}

func TestDecodeRejectsEveryTruncationV12(t *testing.T) {
	checkEveryTruncationFails(t, codecKitchenSinkV12())
	checkEveryTruncationFails(t, codecEveryOpV12())
}

func TestEncodeRefusesV12(t *testing.T) {
	cases := []struct {
		name string
		p    *Program
		want string
	}{
		{"wide f16 literal", codecLetProgram(Literal{Type: F16, Bits: 0x10000}), "body[0].value: f16 literal has bits 0x10000"},
		{"bad layout", &Program{Body: []Stmt{MatrixLoadStmt{Matrix: "m", From: "a", Offset: LitU32(0), Stride: LitU32(0)}}}, "body[0].layout: layout 0 has no wire code"},
		{"bad precision", &Program{Body: []Stmt{MatrixMMAStmt{Acc: "c", A: "a", B: "b", Precision: 9}}}, "body[0].precision: precision 9 has no wire code"},
		{"nil bound", &Program{Body: []Stmt{MatrixStoreStmt{Matrix: "m", To: "a", Offset: LitU32(0), Stride: LitU32(0), Layout: RowMajor,
			Bound: &MatrixBound{Rows: LitU32(1)}}}}, "body[0].bound[1]: expression is missing"},
		{"bad matrix type", &Program{Matrices: []MatrixDecl{{Name: "m"}}}, "matrices[0]: type 0 has no wire code"},
	}
	for _, c := range cases {
		_, err := Encode(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: error %v, want it to contain %q and a Fix", c.name, err, c.want)
		}
		if _, err := MarshalJSON(c.p); err == nil && c.name != "bad matrix type" {
			t.Errorf("%s: MarshalJSON accepted it", c.name)
		}
	}
}

// codecDesignV12 uses the JSON spellings of /work/shared/DESIGN.md's "IR v1.2"
// exactly as written there.
const codecDesignV12 = `{
  "kiln": 1,
  "name": "example.v12",
  "workgroup_size": [128, 1, 1],
  "uniforms": [{"name": "n", "type": "u32"}],
  "buffers": [{"name": "a", "binding": 0, "type": "bf16", "access": "read"},
              {"name": "b", "binding": 1, "type": "bf16", "access": "read"},
              {"name": "c", "binding": 2, "type": "f32", "access": "read_write"},
              {"name": "h", "binding": 3, "type": "f16", "access": "read_write"}],
  "matrices": [{"name": "A", "type": "bf16", "rows": 64, "cols": 16},
               {"name": "B", "type": "bf16", "rows": 16, "cols": 64},
               {"name": "acc", "type": "f32", "rows": 64, "cols": 64},
               {"name": "D", "type": "f16", "rows": 64, "cols": 64}],
  "body": [
    {"let": "row", "value": {"mul": [{"builtin": "workgroup_id", "axis": 1}, {"u32": 64}]}},
    {"matrix_fill": "acc", "value": {"f32": 0}},
    {"for": "k", "type": "u32", "from": {"u32": 0}, "to": {"uniform": "n"}, "step": {"u32": 16}, "body": [
      {"matrix_load": "A", "from": "a", "offset": {"add": [{"mul": [{"local": "row"}, {"uniform": "n"}]}, {"local": "k"}]},
       "stride": {"uniform": "n"}, "layout": "row", "bound": [{"sub": [{"uniform": "n"}, {"local": "row"}]}, {"sub": [{"uniform": "n"}, {"local": "k"}]}]},
      {"matrix_load": "B", "from": "b", "offset": {"mul": [{"local": "k"}, {"uniform": "n"}]}, "stride": {"uniform": "n"}, "layout": "col"},
      {"matrix_mma": "acc", "a": "A", "b": "B"}
    ]},
    {"matrix_store": "acc", "to": "c", "offset": {"mul": [{"local": "row"}, {"uniform": "n"}]}, "stride": {"uniform": "n"}, "layout": "row"},
    {"matrix_convert": "D", "from": "acc"},
    {"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"store": "h", "index": {"local": "i"}, "value": {"add": [{"load": "h", "index": {"local": "i"}}, {"f16": 1.5}]}},
    {"let": "m2", "value": {"select": [{"bool": true}, {"bf16": -2.0}, {"cast": "bf16", "value": {"f32": 3}}]}}
  ]
}`

func TestParseJSONDesignV12Spellings(t *testing.T) {
	p, err := ParseJSON([]byte(codecDesignV12))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Matrices) != 4 || p.Matrices[2] != (MatrixDecl{Name: "acc", Type: F32, Rows: 64, Cols: 64}) {
		t.Errorf("matrices %+v", p.Matrices)
	}
	loop := p.Body[2].(ForStmt)
	a := loop.Body[0].(MatrixLoadStmt)
	if a.Matrix != "A" || a.From != "a" || a.Layout != RowMajor || a.Bound == nil {
		t.Errorf("matrix_load %+v", a)
	}
	if bl := loop.Body[1].(MatrixLoadStmt); bl.Layout != ColMajor || bl.Bound != nil {
		t.Errorf("matrix_load B %+v", bl)
	}
	if mma := loop.Body[2].(MatrixMMAStmt); mma != (MatrixMMAStmt{Acc: "acc", A: "A", B: "B"}) {
		t.Errorf("matrix_mma %+v", mma)
	}
	if cv := p.Body[4].(MatrixConvertStmt); cv != (MatrixConvertStmt{Matrix: "D", From: "acc"}) {
		t.Errorf("matrix_convert %+v", cv)
	}
	text, err := MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseJSON(text)
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip: %v\n%s", err, text)
	}
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Decode(b); err != nil || !reflect.DeepEqual(p, r) {
		t.Fatalf("binary round trip: %v", err)
	}
}

// TestJSONHalfLiterals pins the reading and writing of f16 and bf16 literals:
// one rounding from the decimal, ties to even, the shortest form on output.
func TestJSONHalfLiterals(t *testing.T) {
	cases := []struct {
		t    Type
		in   string
		bits uint32
		out  string
	}{
		{F16, "1.5", 0x3e00, "1.5"},
		{F16, "0.1", 0x2e66, "0.1"},
		{F16, "-0.0", 0x8000, "-0"},
		{F16, "2049", 0x6800, "2048"}, // tie: to even
		{F16, "2051", 0x6802, "2052"}, // tie: to even (up)
		{F16, "65504", 0x7bff, "65504"},
		{F16, "65519.99", 0x7bff, "65504"},
		{F16, "5.960464477539063e-8", 0x0001, "6e-08"},
		{F16, `"nan"`, 0x7e00, `"nan"`},
		{F16, `"-inf"`, 0xfc00, `"-inf"`},
		{F16, `"0x7e01"`, 0x7e01, `"0x7e01"`},
		{BF16, "-2.0", 0xc000, "-2"},
		{BF16, "3.14159", 0x4049, "3.14"},
		{BF16, "1.00390625", 0x3f80, "1"},     // tie: to even (down)
		{BF16, "1.01171875", 0x3f82, "1.016"}, // tie: to even (up)
		{BF16, `"nan"`, 0x7fc0, `"nan"`},
		{BF16, `"inf"`, 0x7f80, `"inf"`},
		{BF16, `"0xffc1"`, 0xffc1, `"0xffc1"`},
	}
	for _, c := range cases {
		src := fmt.Sprintf(`{"%s": %s}`, c.t, c.in)
		p, err := decodeJSON([]byte(codecJSONProgram(fmt.Sprintf(`{"let": "x", "value": %s}`, src))))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		got := p.Body[0].(LetStmt).Value.(Literal)
		if got != (Literal{Type: c.t, Bits: c.bits}) {
			t.Errorf("%s: bits %#04x, want %#04x", src, got.Bits, c.bits)
		}
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"%s": %s}`, c.t, c.out)
		if !strings.Contains(string(text), want) {
			t.Errorf("%s: MarshalJSON wrote\n%s\nwant %s", src, text, want)
		}
	}
	// Every 16-bit pattern of both types survives writing and reading.
	w := &jwalker{}
	for bits := 0; bits <= 0xffff; bits++ {
		for _, typ := range []Type{F16, BF16} {
			text := halfJSON(typ, uint16(bits))
			v := jvalue{kind: jNumber, text: text}
			if unq, ok := strings.CutPrefix(text, `"`); ok {
				v = jvalue{kind: jString, text: strings.TrimSuffix(unq, `"`)}
			}
			got, err := w.half(typ, v, "value")
			if err != nil || got != uint32(bits) {
				t.Fatalf("%s bits %#04x written as %s read back as %#04x (%v)", typ, bits, text, got, err)
			}
		}
	}
}

func TestParseJSONV12Errors(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"f16 out of range", `{"let": "x", "value": {"f16": 65520}}`, []string{"body[0].value", "f16 value 65520 is out of the f16 range"}},
		{"bf16 out of range", `{"let": "x", "value": {"bf16": 1e39}}`, []string{"bf16 value 1e39 is out of the bf16 range"}},
		{"f16 bits too long", `{"let": "x", "value": {"f16": "0x00007e00"}}`, []string{`f16 value "0x00007e00" is not an f16`}},
		{"f16 bool", `{"let": "x", "value": {"f16": true}}`, []string{"f16 value must be a number or a string"}},
		{"unknown statement", `{"matrix_transpose": "A"}`, []string{"body[0]", `statement object has no node key (keys: "matrix_transpose")`}},
		{"bad layout", `{"matrix_load": "A", "from": "a", "offset": {"u32": 0}, "stride": {"u32": 16}, "layout": "diag"}`, []string{"body[0].layout", `layout "diag" is not defined`, `Fix: write "row" or "col"`}},
		{"missing layout", `{"matrix_store": "A", "to": "a", "offset": {"u32": 0}, "stride": {"u32": 16}}`, []string{`statement "matrix_store" is missing "layout"`}},
		{"bound of one", `{"matrix_load": "A", "from": "a", "offset": {"u32": 0}, "stride": {"u32": 16}, "layout": "row", "bound": [{"u32": 1}]}`, []string{"body[0].bound", "bound has 1 entries, want 2"}},
		{"bound expression", `{"matrix_load": "A", "from": "a", "offset": {"u32": 0}, "stride": {"u32": 16}, "layout": "row", "bound": [{"u32": 1}, {"nope": 1}]}`, []string{"body[0].bound[1]"}},
		{"unknown key", `{"matrix_fill": "A", "value": {"f16": 0}, "to": "a"}`, []string{`unknown key "to" in statement "matrix_fill"`}},
		{"empty precision", `{"matrix_mma": "C", "a": "A", "b": "B", "precision": ""}`, []string{`precision "" is not defined`}},
		{"bad precision", `{"matrix_mma": "C", "a": "A", "b": "B", "precision": "fp8"}`, []string{`precision "fp8" is not defined`}},
		{"missing b", `{"matrix_mma": "C", "a": "A"}`, []string{`statement "matrix_mma" is missing "b"`}},
		{"convert name", `{"matrix_convert": 3, "from": "A"}`, []string{`"matrix_convert" must be a string`}},
	}
	for _, c := range cases {
		_, err := decodeJSON([]byte(codecJSONProgram(c.body)))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
	bad := `{"kiln": 1, "name": "x", "workgroup_size": [1, 1, 1], "matrices": [{"name": "m", "type": "f16", "rows": 16}], "body": []}`
	if _, err := ParseJSON([]byte(bad)); err == nil || !strings.Contains(err.Error(), `matrices[0]: `) || !strings.Contains(err.Error(), `a matrix is missing "cols"`) {
		t.Errorf("matrix without cols: %v", err)
	}
	invalid := `{"kiln": 1, "name": "x", "workgroup_size": [1, 1, 1], "matrices": [{"name": "m", "type": "f16", "rows": 16, "cols": 8}], "body": []}`
	if _, err := ParseJSON([]byte(invalid)); err == nil || !strings.Contains(err.Error(), `matrix "m" has cols 8`) {
		t.Errorf("ParseJSON does not validate matrices: %v", err)
	}
}

func TestMarshalJSONOmitsV12Fields(t *testing.T) {
	text, err := MarshalJSON(codecKitchenSinkV11())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), "matrices") {
		t.Errorf("a program without matrices writes \"matrices\":\n%s", text)
	}
	text, err = MarshalJSON(codecKitchenSinkV12())
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	if !strings.Contains(s, "\n  \"matrices\": [\n    {\"name\": \"A\", \"type\": \"f16\", \"rows\": 32, \"cols\": 16},") ||
		strings.Index(s, `"shared"`) > strings.Index(s, `"matrices"`) || strings.Index(s, `"matrices"`) > strings.Index(s, `"body"`) {
		t.Errorf("matrices not written between shared and body:\n%s", s)
	}
	if !strings.Contains(s, `{"matrix_mma": "acc", "a": "A", "b": "B"}`) || !strings.Contains(s, `"precision": "tf32"`) {
		t.Errorf("precision written when default, or not when tf32:\n%s", s)
	}
}

// TestSpecAndLiteralStringsV12: 16-bit literals print their value, and the dtype
// spec values of f16 and bf16 are distinct keys named by the type.
func TestSpecAndLiteralStringsV12(t *testing.T) {
	if got := LitF16(1.5).String(); got != "1.5" {
		t.Errorf("LitF16(1.5).String() = %q", got)
	}
	if got := LitBF16(-2).String(); got != "-2" {
		t.Errorf("LitBF16(-2).String() = %q", got)
	}
	if got := SpecDType(BF16).String(); got != "dtype bf16" {
		t.Errorf("SpecDType(BF16).String() = %q", got)
	}
	var a, b SpecMap
	a.Set("type", SpecDType(F16))
	b.Set("type", SpecDType(BF16))
	if a.CacheHash() == b.CacheHash() {
		t.Error("f16 and bf16 dtype specs hash equal")
	}
}
