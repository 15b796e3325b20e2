package ir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// codecKitchenSinkV11 is a valid program that uses every node, operator, builtin
// and declaration IR v1.1 adds. TestKitchenSinkV11CoversEverything checks that
// claim.
func codecKitchenSinkV11() *Program {
	b := NewBuilder("kiln.test.kitchen_sink_v11", 64, 1, 1)
	b.RequireSubgroupSize(32)
	n := b.Uniform("n", U32)
	bias := b.Uniform("bias", I32)
	scale := b.Uniform("scale", F32)
	in := b.Buffer("in", F32, Read)
	out := b.Buffer("out", U32, Write)
	acc := b.FixedBuffer("acc", U32, ReadWrite, 1)
	sh := b.Shared("sh", I32, 64)

	gid := b.Let("gid", GlobalID(0))
	lid := b.Let("lid", LocalID(0))
	lane := b.Let("lane", SubgroupInvocationID())
	size := b.Let("sg", SubgroupSize())
	x := b.Let("x", Mul(Load(in, gid), scale))
	bits := b.Let("bits", Bitcast(U32, x))
	ibits := b.Let("ibits", Bitcast(I32, Bitcast(F32, Bitcast(I32, Bitcast(F32, bits)))))
	b.Let("rounded", Add(Trunc(x), Round(x)))
	b.Let("counts", Add(Clz(bits), Popcount(bits)))
	b.Let("icounts", Add(Clz(ibits), Popcount(bias)))
	sum := b.Let("sum", SubgroupAdd(x))
	b.Let("lo", SubgroupMin(ibits))
	b.Let("hi", SubgroupMax(bits))
	b.Let("next", SubgroupShuffle(x, Rem(Add(lane, LitU32(1)), size)))
	b.Let("first", SubgroupBroadcast(LitBool(true), LitU32(0)))
	b.AtomicCAS(sh, lid, LitI32(0), bias, "prev")
	b.Barrier()
	// f32 atomic add by compare-exchange.
	old := b.Var("old", U32, Load(acc, LitU32(0)))
	b.While(LitBool(true), func(w *Block) {
		want := w.Let("want", Bitcast(U32, Add(Bitcast(F32, old), sum)))
		got := w.AtomicCAS(acc, LitU32(0), old, want, "got")
		w.If(Eq(got, old), func(t *Block) { t.Break() })
		w.Assign("old", got)
		w.Continue()
	})
	count := b.Var("count", U32, LitU32(0))
	b.For("k", U32, LitU32(0), n, LitU32(1), func(body *Block, k Expr) {
		body.If(Eq(Rem(k, LitU32(2)), LitU32(0)), func(t *Block) { t.Continue() })
		body.Assign("count", Add(count, LitU32(1)))
	})
	b.Store(out, gid, count)
	return b.Program()
}

// codecEveryOpV11 applies every operator and node of IR v1.1 to every type. Like
// codecEveryOp it is not well-typed, but both encodings must carry all of it.
func codecEveryOpV11() *Program {
	b := NewBuilder("kiln.test.every_op_v11", 1, 1, 1)
	b.RequireSubgroupSize(64)
	for _, t := range codecTypesV1() {
		b.Uniform("u_"+t.String(), t)
		b.Shared("s_"+t.String(), t, 3)
	}
	let := codecLets(b)
	for _, t := range codecTypesV1() {
		lit := codecLiteral(t, 0x80000001)
		for _, op := range UnaryOps() {
			let(UnaryExpr{Op: op, X: lit})
		}
		for _, to := range codecTypesV1() {
			let(Bitcast(to, lit))
		}
		for _, op := range SubgroupOps() {
			x := SubgroupExpr{Op: op, X: lit}
			if op.HasLane() {
				x.Lane = Uniform("u_" + t.String())
			}
			let(x)
		}
		let(Uniform("u_" + t.String()))
		b.For("for_"+t.String(), t, lit, lit, lit, func(body *Block, _ Expr) { body.Continue() })
	}
	for _, k := range Builtins() {
		let(BuiltinRef{Kind: k})
	}
	for _, op := range AtomicOps() {
		s := AtomicStmt{Op: op, Target: "s_u32", Index: LitU32(0), Value: LitU32(1)}
		if op == AtomicCompareExchange {
			s.Compare = LitU32(7)
		}
		b.Append(s)
	}
	b.AtomicCAS("s_i32", LitU32(1), LitI32(-1), LitI32(2), "r_cas")
	b.While(LitBool(false), func(w *Block) { w.Continue() })
	return b.Program()
}

// codecEverythingV11 is what a program that uses every node kind of IR v1.1 must
// contain, on top of what the coverage walker can see of IR v1.
func codecEverythingV11() []string {
	want := []string{"uniform-decl", "subgroup-size", "atomic-compare"}
	for _, x := range []Expr{UniformRef{}, BitcastExpr{}, SubgroupExpr{}} {
		want = append(want, fmt.Sprintf("expr:%T", x))
	}
	want = append(want, fmt.Sprintf("stmt:%T", ContinueStmt{}))
	for _, t := range []Type{I32, U32, F32} {
		want = append(want, "bitcast:"+t.String(), "uniform:"+t.String())
	}
	for _, k := range Builtins() {
		if !k.HasAxis() {
			want = append(want, fmt.Sprintf("builtin:%s:0", k))
		}
	}
	for _, o := range UnaryOps() {
		if c, _ := wireUnaryOps.code(o); c >= v2Unary {
			want = append(want, "unary:"+o.String())
		}
	}
	for _, o := range SubgroupOps() {
		want = append(want, "subgroup:"+o.String())
	}
	want = append(want, "atomic:"+AtomicCompareExchange.String())
	return want
}

func TestKitchenSinkV11CoversEverything(t *testing.T) {
	p := codecKitchenSinkV11()
	if err := Validate(p); err != nil {
		t.Fatalf("v1.1 kitchen sink must be a valid program: %v", err)
	}
	for name, p := range map[string]*Program{"kitchen_sink_v11": p, "every_op_v11": codecEveryOpV11()} {
		seen := codecCoverage(p)
		for _, w := range codecEverythingV11() {
			if !seen[w] {
				t.Errorf("%s lacks %s; extend it so the golden digest covers it", name, w)
			}
		}
	}
}

// codecVersionOf returns the format version an encoding declares.
func codecVersionOf(t *testing.T, b []byte) uint64 {
	t.Helper()
	v, n := binary.Uvarint(b[len(wireMagic):])
	if n <= 0 {
		t.Fatal("no version")
	}
	return v
}

// TestEncodeWritesTheLowestVersion: IR v1 programs keep format version 1 (and so
// their digests, pinned by TestDigestGolden); each IR v1.1 feature alone moves a
// program to version 2.
func TestEncodeWritesTheLowestVersion(t *testing.T) {
	for name, p := range map[string]*Program{"saxpy": codecSaxpy(), "kitchen_sink": codecKitchenSink(), "every_op": codecEveryOp()} {
		b, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if v := codecVersionOf(t, b); v != FormatVersionV1 {
			t.Errorf("%s: an IR v1 program encodes as version %d", name, v)
		}
	}
	features := map[string]func(p *Program){
		"subgroup size": func(p *Program) { p.SubgroupSize = 32 },
		"uniform decl":  func(p *Program) { p.Uniforms = []UniformDecl{{Name: "u", Type: U32}} },
		"uniform":       func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: Uniform("u")} },
		"bitcast":       func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: Bitcast(F32, LitU32(1))} },
		"subgroup op":   func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: SubgroupAdd(LitU32(1))} },
		"builtin":       func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: SubgroupInvocationID()} },
		"trunc":         func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: Trunc(LitF32(1))} },
		"popcount":      func(p *Program) { p.Body[0] = LetStmt{Name: "x", Value: Popcount(LitU32(1))} },
		"continue": func(p *Program) {
			p.Body = []Stmt{WhileStmt{Cond: LitBool(false), Body: []Stmt{ContinueStmt{}}}}
		},
		"cas": func(p *Program) {
			p.Body = []Stmt{AtomicStmt{Op: AtomicCompareExchange, Target: "s", Index: LitU32(0), Compare: LitU32(0), Value: LitU32(1)}}
		},
	}
	checkFeatureVersions(t, features, FormatVersionV11)
}

func TestDigestGoldenV11(t *testing.T) {
	checkDigests(t, "the digest of %s changed to %s: the version 2 encoding changed, so add a format version "+
		"(old plugins would misread it) and update this constant and testdata",
		digestCase{"kitchen_sink_v11", codecKitchenSinkV11(), "8c47f1d205f5e500"},
		digestCase{"every_op_v11", codecEveryOpV11(), "fc1e9f19f79d36f8"})
	codecGoldenForms(t, "kitchen_sink_v11", codecKitchenSinkV11())
}

func TestDecodeRejectsEveryTruncationV11(t *testing.T) {
	checkEveryTruncationFails(t, codecKitchenSinkV11())
}

// codecDesignV11 uses every JSON spelling of docs/design.md's "IR v1.1" exactly
// as written there.
const codecDesignV11 = `{
  "kiln": 1,
  "name": "example.v11",
  "workgroup_size": [64, 1, 1],
  "subgroup_size": 32,
  "uniforms": [{"name": "n", "type": "u32"}],
  "buffers": [{"name": "hist", "binding": 0, "type": "u32", "access": "read_write"},
              {"name": "x", "binding": 1, "type": "f32", "access": "read"}],
  "body": [
    {"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"let": "lane", "value": {"builtin": "subgroup_invocation_id"}},
    {"let": "size", "value": {"builtin": "subgroup_size"}},
    {"let": "v", "value": {"load": "x", "index": {"local": "i"}}},
    {"let": "b", "value": {"bitcast": "u32", "value": {"local": "v"}}},
    {"let": "t", "value": {"add": [{"trunc": {"local": "v"}}, {"round": {"local": "v"}}]}},
    {"let": "c", "value": {"add": [{"clz": {"local": "b"}}, {"popcount": {"local": "b"}}]}},
    {"let": "s", "value": {"subgroup_add": {"local": "v"}}},
    {"let": "lo", "value": {"subgroup_min": {"local": "b"}}},
    {"let": "hi", "value": {"subgroup_max": {"local": "b"}}},
    {"let": "sh", "value": {"subgroup_shuffle": [{"local": "v"}, {"local": "lane"}]}},
    {"let": "bc", "value": {"subgroup_broadcast": [{"local": "v"}, {"u32": 0}]}},
    {"atomic": "cas", "target": "hist", "index": {"u32": 0}, "compare": {"u32": 0}, "value": {"uniform": "n"}, "result": "old"},
    {"for": "k", "type": "u32", "from": {"u32": 0}, "to": {"uniform": "n"}, "step": {"u32": 1}, "body": [
      {"continue": true}]}
  ]
}`

func TestParseJSONDesignV11Spellings(t *testing.T) {
	p, err := ParseJSON([]byte(codecDesignV11))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder("example.v11", 64, 1, 1)
	b.RequireSubgroupSize(32)
	n := b.Uniform("n", U32)
	hist := b.Buffer("hist", U32, ReadWrite)
	x := b.Buffer("x", F32, Read)
	i := b.Let("i", GlobalID(0))
	lane := b.Let("lane", SubgroupInvocationID())
	b.Let("size", SubgroupSize())
	v := b.Let("v", Load(x, i))
	bits := b.Let("b", Bitcast(U32, v))
	b.Let("t", Add(Trunc(v), Round(v)))
	b.Let("c", Add(Clz(bits), Popcount(bits)))
	b.Let("s", SubgroupAdd(v))
	b.Let("lo", SubgroupMin(bits))
	b.Let("hi", SubgroupMax(bits))
	b.Let("sh", SubgroupShuffle(v, lane))
	b.Let("bc", SubgroupBroadcast(v, LitU32(0)))
	b.AtomicCAS(hist, LitU32(0), LitU32(0), n, "old")
	b.For("k", U32, LitU32(0), n, LitU32(1), func(body *Block, _ Expr) { body.Continue() })
	want, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("the design's v1.1 spellings parsed as\n%#v\nwant\n%#v", p, want)
	}
	text, err := MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{`"subgroup_size": 32`, `"uniforms": [`, `{"name": "n", "type": "u32"}`,
		`{"builtin": "subgroup_invocation_id"}`, `{"builtin": "subgroup_size"}`, `{"bitcast": "u32", "value": `,
		`{"trunc": `, `{"round": `, `{"clz": `, `{"popcount": `, `{"subgroup_add": {"local": "v"}}`,
		`{"subgroup_shuffle": [{"local": "v"}, {"local": "lane"}]}`, `{"subgroup_broadcast": [`,
		`{"atomic": "cas", "target": "hist", "index": {"u32": 0}, "compare": {"u32": 0}, "value": {"uniform": "n"}, "result": "old"}`,
		`{"continue": true}`} {
		if !strings.Contains(string(text), spelling) {
			t.Errorf("MarshalJSON does not write %s:\n%s", spelling, text)
		}
	}
}

// TestMarshalJSONOmitsV11Fields: a program without uniforms or a subgroup size is
// written exactly as before IR v1.1.
func TestMarshalJSONOmitsV11Fields(t *testing.T) {
	text, err := MarshalJSON(codecSaxpy())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), "uniforms") || strings.Contains(string(text), "subgroup_size") {
		t.Fatalf("an IR v1 program gained v1.1 fields:\n%s", text)
	}
}

func TestValidateV11(t *testing.T) {
	ok := map[string]func(b *Builder){
		"every subgroup size": func(b *Builder) { b.RequireSubgroupSize(64) },
		"bitcast i32 to u32":  func(b *Builder) { b.Let("x", Bitcast(U32, LitI32(-1))) },
		"shuffle bool":        func(b *Builder) { b.Let("x", SubgroupShuffle(LitBool(true), LitU32(1))) },
		"clz i32":             func(b *Builder) { b.Let("x", Add(Clz(LitI32(1)), LitI32(1))) },
		"continue in for": func(b *Builder) {
			b.For("k", I32, LitI32(0), LitI32(3), LitI32(1), func(body *Block, _ Expr) { body.Continue() })
		},
		"32 buffers and uniforms": func(b *Builder) {
			for i := 0; i < 16; i++ {
				b.Buffer(fmt.Sprintf("b%d", i), U32, Read)
				b.Uniform(fmt.Sprintf("u%d", i), U32)
			}
		},
	}
	for name, f := range ok {
		b := NewBuilder("kiln.test", 64, 1, 1)
		f(b)
		if _, err := b.Build(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// onH declares the buffer h of type t and access a before stmt's statement.
	onH := func(t Type, a Access, stmt func(b *Builder)) func(b *Builder) {
		return func(b *Builder) {
			b.Buffer("h", t, a)
			stmt(b)
		}
	}
	bad := []struct {
		name string
		f    func(b *Builder)
		path string
		want string
	}{
		{"subgroup size not a power of two", func(b *Builder) { b.RequireSubgroupSize(24) }, "subgroup_size", "not a power of two"},
		{"subgroup size too big", func(b *Builder) { b.RequireSubgroupSize(256) }, "subgroup_size", "not a power of two from 1 to 128"},
		{"partial subgroup", func(b *Builder) { b.RequireSubgroupSize(128) }, "subgroup_size", "not a multiple of the subgroup size 128"},
		{"uniform type bool", func(b *Builder) { b.Uniform("u", Bool) }, "uniforms[0]", "has type bool"},
		{"uniform bad name", func(b *Builder) { b.Uniform("1u", U32) }, "uniforms[0]", "not a valid identifier"},
		{"uniform twice", func(b *Builder) { b.Uniform("u", U32); b.Uniform("u", F32) }, "uniforms[1]", "declared twice"},
		{"uniform is a param", func(b *Builder) { b.Param("u", U32, LitU32(0)); b.Uniform("u", U32) }, "uniforms[0]", "already declared as a parameter"},
		{"too many buffers and uniforms", func(b *Builder) {
			for i := 0; i < 17; i++ {
				b.Buffer(fmt.Sprintf("b%d", i), U32, Read)
				b.Uniform(fmt.Sprintf("u%d", i), U32)
			}
		}, "uniforms", "17 buffers and 17 uniforms"},
		{"undeclared uniform", func(b *Builder) { b.Let("x", Uniform("n")) }, "body[0].value", `uniform "n" is not declared`},
		{"uniform type mismatch", func(b *Builder) { b.Uniform("n", I32); b.Let("x", Add(Uniform("n"), LitU32(1))) }, "body[0].value", "operand types i32 and u32 differ"},
		{"bitcast same type", func(b *Builder) { b.Let("x", Bitcast(U32, LitU32(1))) }, "body[0].value", "already u32"},
		{"bitcast to bool", func(b *Builder) { b.Let("x", Bitcast(Bool, LitU32(1))) }, "body[0].value", "target type bool"},
		{"bitcast from bool", func(b *Builder) { b.Let("x", Bitcast(U32, LitBool(true))) }, "body[0].value", "operand type bool"},
		{"trunc on u32", func(b *Builder) { b.Let("x", Trunc(LitU32(1))) }, "body[0].value", "trunc: operand type u32"},
		{"round on i32", func(b *Builder) { b.Let("x", Round(LitI32(1))) }, "body[0].value", "round: operand type i32"},
		{"clz on f32", func(b *Builder) { b.Let("x", Clz(LitF32(1))) }, "body[0].value", "clz: operand type f32"},
		{"popcount on bool", func(b *Builder) { b.Let("x", Popcount(LitBool(true))) }, "body[0].value", "popcount: operand type bool"},
		{"subgroup axis", func(b *Builder) { b.Let("x", BuiltinRef{Kind: SubgroupSizeBuiltin, Axis: 1}) }, "body[0].value", "subgroup_size has axis 1"},
		{"subgroup_add bool", func(b *Builder) { b.Let("x", SubgroupAdd(LitBool(true))) }, "body[0].value", "subgroup_add: operand type bool"},
		{"subgroup_max bool", func(b *Builder) { b.Let("x", SubgroupMax(LitBool(true))) }, "body[0].value", "subgroup_max: operand type bool"},
		{"shuffle lane i32", func(b *Builder) { b.Let("x", SubgroupShuffle(LitF32(1), LitI32(0))) }, "body[0].value.args[1]", "subgroup_shuffle lane must be u32"},
		{"broadcast without lane", func(b *Builder) { b.Let("x", SubgroupBroadcast(LitF32(1), nil)) }, "body[0].value", "lane is missing"},
		{"reduction with lane", func(b *Builder) { b.Let("x", SubgroupExpr{Op: SubgroupOpMin, X: LitU32(1), Lane: LitU32(0)}) }, "body[0].value", "takes one operand"},
		{"invalid subgroup op", func(b *Builder) { b.Let("x", SubgroupExpr{X: LitU32(1)}) }, "body[0].value", "invalid subgroup operation 0"},
		{"continue outside loop", func(b *Builder) { b.Continue() }, "body[0]", "continue outside a loop"},
		{"cas without compare", onH(U32, ReadWrite, func(b *Builder) {
			b.Append(AtomicStmt{Op: AtomicCompareExchange, Target: "h", Index: LitU32(0), Value: LitU32(1)})
		}), "body[0]", "compare is missing"},
		{"cas compare type", onH(U32, ReadWrite, func(b *Builder) { b.AtomicCAS("h", LitU32(0), LitI32(0), LitU32(1), "old") }), "body[0].compare", "atomic cas compare must be u32, got i32"},
		{"cas on f32", onH(F32, ReadWrite, func(b *Builder) { b.AtomicCAS("h", LitU32(0), LitF32(0), LitF32(1), "old") }), "body[0]", "atomic cas: \"h\" has element type f32"},
		{"cas on a read buffer", onH(U32, Read, func(b *Builder) { b.AtomicCAS("h", LitU32(0), LitU32(0), LitU32(1), "old") }), "body[0]", "buffer \"h\" has access read"},
		{"compare on add", onH(U32, ReadWrite, func(b *Builder) {
			b.Append(AtomicStmt{Op: AtomicAdd, Target: "h", Index: LitU32(0), Value: LitU32(1), Compare: LitU32(0)})
		}), "body[0].compare", "atomic add takes no compare value"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("kiln.test", 64, 1, 1)
			c.f(b)
			_, err := b.Build()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a *ValidationError, got %v", err)
			}
			if ve.Path != c.path || !strings.Contains(ve.Msg, c.want) || ve.Fix == "" {
				t.Fatalf("got %q at %q (fix %q), want %q at %q", ve.Msg, ve.Path, ve.Fix, c.want, c.path)
			}
		})
	}
}

func TestCheckSubgroupSize(t *testing.T) {
	for _, c := range []struct {
		wg   [3]uint32
		size uint32
		ok   bool
	}{
		{[3]uint32{64, 1, 1}, 1, true},
		{[3]uint32{64, 1, 1}, 64, true},
		{[3]uint32{8, 8, 2}, 128, true},
		{[3]uint32{48, 1, 1}, 32, false},
		{[3]uint32{48, 1, 1}, 16, true},
		{[3]uint32{64, 1, 1}, 0, false},
		{[3]uint32{64, 1, 1}, 3, false},
		{[3]uint32{1024, 1, 1}, 256, false},
	} {
		err := CheckSubgroupSize(c.wg, c.size)
		if (err == nil) != c.ok {
			t.Errorf("CheckSubgroupSize(%v, %d) = %v, want ok=%v", c.wg, c.size, err, c.ok)
		}
	}
}

func TestParseJSONV11Errors(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"axis on subgroup builtin", `{"let": "x", "value": {"builtin": "subgroup_size", "axis": 0}}`, "has no axis"},
		{"compare on add", `{"atomic": "add", "target": "y", "index": {"u32": 0}, "compare": {"u32": 0}, "value": {"u32": 1}}`, `takes no "compare"`},
		{"cas without compare", `{"atomic": "cas", "target": "y", "index": {"u32": 0}, "value": {"u32": 1}}`, `is missing "compare"`},
		{"shuffle one operand", `{"let": "x", "value": {"subgroup_shuffle": {"u32": 1}}}`, "the operands of \"subgroup_shuffle\" must be an array"},
		{"shuffle three operands", `{"let": "x", "value": {"subgroup_shuffle": [{"u32": 1}, {"u32": 1}, {"u32": 1}]}}`, "takes 2 operands, got 3"},
		{"add in a list", `{"let": "x", "value": {"subgroup_add": [{"u32": 1}]}}`, "takes one operand, not an array"},
		{"continue false", `{"while": {"bool": true}, "body": [{"continue": false}]}`, `"continue" must be true`},
		{"bitcast without value", `{"let": "x", "value": {"bitcast": "u32"}}`, `is missing "value"`},
		{"bitcast bad type", `{"let": "x", "value": {"bitcast": "u64", "value": {"f32": 1}}}`, `bitcast type "u64" is not a type`},
		{"uniform not a string", `{"let": "x", "value": {"uniform": 1}}`, `"uniform" must be a string`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJSON([]byte(codecJSONProgram(c.body)))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix: ") {
				t.Fatalf("error %v, want %q and a Fix", err, c.want)
			}
		})
	}
	for name, text := range map[string]string{
		"subgroup_size string": `{"kiln": 1, "name": "p", "workgroup_size": [1, 1, 1], "subgroup_size": "32", "body": []}`,
		"uniform extra key":    `{"kiln": 1, "name": "p", "workgroup_size": [1, 1, 1], "uniforms": [{"name": "n", "type": "u32", "default": 1}], "body": []}`,
		"uniform no type":      `{"kiln": 1, "name": "p", "workgroup_size": [1, 1, 1], "uniforms": [{"name": "n"}], "body": []}`,
	} {
		if _, err := ParseJSON([]byte(text)); err == nil || !strings.Contains(err.Error(), "Fix: ") {
			t.Errorf("%s: error %v, want one with a Fix", name, err)
		}
	}
}

func TestMarshalJSONRefusesV11(t *testing.T) {
	for name, c := range map[string]struct {
		p    *Program
		want string
	}{
		"scalar builtin axis": {codecLetProgram(BuiltinRef{Kind: SubgroupSizeBuiltin, Axis: 2}), "builtin subgroup_size has axis 2"},
		"bad subgroup op":     {codecLetProgram(SubgroupExpr{X: LitU32(1)}), "subgroup operation 0 is not defined"},
		"lane on reduction":   {codecLetProgram(SubgroupExpr{Op: SubgroupOpAdd, X: LitU32(1), Lane: LitU32(1)}), "subgroup_add takes no lane"},
		"compare on add":      {&Program{Body: []Stmt{AtomicStmt{Op: AtomicAdd, Target: "h", Index: LitU32(0), Value: LitU32(1), Compare: LitU32(1)}}}, "body[0].compare: atomic add takes no compare value"},
		"bad uniform type":    {&Program{Uniforms: []UniformDecl{{Name: "u"}}}, "uniforms[0]: type 0 is not defined"},
	} {
		text, err := MarshalJSON(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix: ") {
			t.Errorf("%s: MarshalJSON gave %v (%s), want %q", name, err, text, c.want)
		}
	}
}

func TestBuilderV11(t *testing.T) {
	b := NewBuilder("kiln.test", 32, 1, 1)
	u := b.Uniform("n", U32)
	b.RequireSubgroupSize(32)
	b.Buffer("h", U32, ReadWrite)
	old := b.AtomicCAS("h", LitU32(0), LitU32(0), u, "old")
	b.Let("o", old)
	p := b.MustBuild()
	if p.SubgroupSize != 32 || !reflect.DeepEqual(p.Uniforms, []UniformDecl{{Name: "n", Type: U32}}) {
		t.Fatalf("builder lost v1.1 declarations: %#v", p)
	}
	if d, ok := p.Uniform("n"); !ok || d.Type != U32 {
		t.Fatal("Program.Uniform does not find n")
	}
	if _, ok := p.Uniform("m"); ok {
		t.Fatal("Program.Uniform finds an undeclared uniform")
	}
	q := b.Program()
	q.Uniforms[0].Name = "changed"
	if b.Program().Uniforms[0].Name != "n" {
		t.Fatal("Program shares its uniform slice with the builder")
	}
	if !bytes.Contains(mustEncode(t, p), []byte("old")) {
		t.Fatal("encoding lacks the cas result")
	}
}

func mustEncode(t *testing.T, p *Program) []byte {
	t.Helper()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUsesSubgroups(t *testing.T) {
	for name, c := range map[string]struct {
		p    *Program
		want bool
	}{
		"saxpy":        {codecSaxpy(), false},
		"kitchen sink": {codecKitchenSink(), false},
		"v1.1 sink":    {codecKitchenSinkV11(), true},
		"lane builtin": {&Program{Body: []Stmt{IfStmt{Cond: LitBool(true), Else: []Stmt{
			StoreStmt{Target: "s", Index: LitU32(0), Value: Add(LitU32(1), SubgroupInvocationID())}}}}}, true},
		"size in a for bound": {&Program{Body: []Stmt{ForStmt{Var: "k", Type: U32, From: LitU32(0), To: SubgroupSize(), Step: LitU32(1)}}}, true},
		"shuffle in cas": {&Program{Body: []Stmt{AtomicStmt{Op: AtomicCompareExchange, Target: "s", Index: LitU32(0),
			Compare: SubgroupShuffle(LitU32(0), LitU32(1)), Value: LitU32(1)}}}, true},
		"required size alone": {&Program{SubgroupSize: 32}, false},
	} {
		if got := c.p.UsesSubgroups(); got != c.want {
			t.Errorf("%s: UsesSubgroups = %v, want %v", name, got, c.want)
		}
	}
}
