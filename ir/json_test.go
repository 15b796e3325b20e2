package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// codecDesignSaxpy is the JSON file form example of docs/design.md, "The program
// (IR)", exactly as written there.
const codecDesignSaxpy = `{
  "kiln": 1,
  "name": "example.saxpy.f32",
  "workgroup_size": [256, 1, 1],
  "params":  [{"name": "a", "type": "f32", "default": 2.0}],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "y", "binding": 1, "type": "f32", "access": "read_write"}],
  "shared":  [],
  "body": [
    {"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"if": {"lt": [{"local": "i"}, {"len": "y"}]}, "then": [
      {"store": "y", "index": {"local": "i"},
       "value": {"add": [{"mul": [{"param": "a"}, {"load": "x", "index": {"local": "i"}}]},
                         {"load": "y", "index": {"local": "i"}}]}}]}
  ]
}`

func TestParseJSONDesignExample(t *testing.T) {
	p, err := ParseJSON([]byte(codecDesignSaxpy))
	if err != nil {
		t.Fatal(err)
	}
	want, err := saxpy().Build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("the design's saxpy parsed as\n%#v\nwant\n%#v", p, want)
	}
}

// TestJSONRoundTripValid: ParseJSON(MarshalJSON(p)) equals p for valid programs.
func TestJSONRoundTripValid(t *testing.T) {
	for name, p := range map[string]*Program{"saxpy": codecSaxpy(), "kitchen_sink": codecKitchenSink(), "kitchen_sink_v11": codecKitchenSinkV11()} {
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatalf("%s: MarshalJSON: %v", name, err)
		}
		q, err := ParseJSON(text)
		if err != nil {
			t.Fatalf("%s: ParseJSON: %v\n%s", name, err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: round trip differs:\n got %#v\nwant %#v", name, q, p)
		}
	}
}

// TestJSONRoundTripEverything covers programs Validate rejects (every operator on
// every type, random trees), through the parser without Validate.
func TestJSONRoundTripEverything(t *testing.T) {
	for name, p := range codecCorpus() {
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatalf("%s: MarshalJSON: %v", name, err)
		}
		if !json.Valid(text) {
			t.Fatalf("%s: MarshalJSON wrote invalid JSON:\n%s", name, text)
		}
		q, err := decodeJSON(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: round trip differs:\n got %#v\nwant %#v\n%s", name, q, p, text)
		}
		again, err := MarshalJSON(q)
		if err != nil || !bytes.Equal(again, text) {
			t.Fatalf("%s: MarshalJSON is not deterministic (err %v)", name, err)
		}
	}
}

func TestMarshalJSONGolden(t *testing.T) {
	for name, p := range map[string]*Program{"saxpy.json": codecSaxpy(), "kitchen_sink.json": codecKitchenSink()} {
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		codecGolden(t, name, text)
	}
}

func TestMarshalJSONLayout(t *testing.T) {
	text, err := MarshalJSON(codecKitchenSink())
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	if !strings.HasPrefix(s, "{\n  \"kiln\": 1,\n  \"name\": ") || !strings.HasSuffix(s, "\n}\n") {
		t.Fatalf("want \"kiln\": 1 first and a final newline:\n%s", s)
	}
	order := []string{`"kiln"`, `"name"`, `"workgroup_size"`, `"params"`, `"buffers"`, `"shared"`, `"body"`}
	last := -1
	for _, k := range order {
		i := strings.Index(s, "\n  "+k+": ")
		if i <= last {
			t.Fatalf("top-level key %s out of order", k)
		}
		last = i
	}
	for _, want := range []string{
		`{"name": "in", "binding": 0, "type": "f32", "access": "read"},`,
		`{"name": "hist", "binding": 2, "type": "u32", "access": "read_write", "count": 16},`,
		`{"name": "seen", "type": "bool", "count": 64},`,
		`{"atomic": "add", "target": "hist", "index": {"rem": [{"local": "u"}, {"u32": 16}]}, "value": {"u32": 1}, "result": "old_add"},`,
		`{"atomic": "min", "target": "ints", "index": {"u32": 0}, "value": {"local": "i"}},`,
		`{"if": {"land": [{"ge": [{"local": "k"}, {"u32": 5}]}, {"load": "seen", "index": {"local": "k"}}]}, "then": [` + "\n        {\"break\": true}\n      ]}\n",
		`], "else": [`,
		`{"for": "m", "type": "i32", "from": {"i32": -2}, "to": {"i32": 2}, "step": {"i32": 1}, "body": []},`,
		`{"min": [{"local": "f"}, {"f32": "0x7fc00001"}]}, {"f32": -0}]}`,
		`{"f32": "inf"}`,
		`{"cast": "bool", "value": {"local": "i"}}`,
		`{"builtin": "num_workgroups", "axis": 2}`,
		`{"barrier": true},`,
		`{"return": true}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("MarshalJSON output lacks %s", want)
		}
	}
	if strings.Count(s, `"else"`) != 1 {
		t.Errorf("\"else\" must appear only for the one non-empty else block")
	}
	if strings.Count(s, `"count"`) != 4 {
		t.Errorf("\"count\" must appear for the fixed buffer and the 3 shared arrays only")
	}
	if strings.Count(s, `"result"`) != 7 {
		t.Errorf("\"result\" must appear only on the 7 atomics that set it")
	}
}

func TestJSONF32Values(t *testing.T) {
	for _, c := range []struct {
		bits uint32
		text string
	}{
		{0x00000000, "0"},
		{0x80000000, "-0"},
		{0x3fc00000, "1.5"},
		{0xbf800000, "-1"},
		{math.Float32bits(0.1), "0.1"},
		{0x00000001, "1e-45"},
		{0x7f7fffff, "3.4028235e+38"},
		{math.Float32bits(16777216), "1.6777216e+07"},
		{0x7f800000, `"inf"`},
		{0xff800000, `"-inf"`},
		{0x7fc00000, `"nan"`},
		{0x7fc00001, `"0x7fc00001"`},
		{0xffc00000, `"0xffc00000"`},
		{0x7f800001, `"0x7f800001"`},
	} {
		p := &Program{Name: "f", WorkgroupSize: [3]uint32{1, 1, 1},
			Params: []ParamDecl{{Name: "d", Type: F32, Default: Literal{Type: F32, Bits: c.bits}}},
			Body:   []Stmt{LetStmt{Name: "x", Value: Literal{Type: F32, Bits: c.bits}}}}
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), `"default": `+c.text+`}`) || !strings.Contains(string(text), `{"f32": `+c.text+`}`) {
			t.Errorf("bits %#08x: want %s in\n%s", c.bits, c.text, text)
		}
		q, err := ParseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := q.Body[0].(LetStmt).Value.(Literal).Bits; got != c.bits || q.Params[0].Default.Bits != c.bits {
			t.Errorf("bits %#08x came back as %#08x / %#08x", c.bits, got, q.Params[0].Default.Bits)
		}
	}
}

// codecJSONProgram wraps body statements (JSON text) in a program header.
func codecJSONProgram(body string) string {
	return `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1],
"buffers": [{"name": "y", "binding": 0, "type": "f32", "access": "read_write"}],
"body": [` + body + `]}`
}

func TestParseJSONInputForms(t *testing.T) {
	cases := []struct {
		expr string
		want Expr
	}{
		{`{"f32": "0x3f800000"}`, LitF32(1)},
		{`{"f32": "0X3F800000"}`, nil},
		{`{"f32": 2.0}`, LitF32(2)},
		{`{"f32": 1e-50}`, LitF32(0)},
		{`{"f32": -1e-50}`, Literal{Type: F32, Bits: 0x80000000}},
		{`{"f32": 16777217}`, LitF32(16777216)},
		{`{"f32": "nan"}`, Literal{Type: F32, Bits: defaultNaNBits}},
		{`{"i32": -2147483648}`, LitI32(math.MinInt32)},
		{`{"u32": 4294967295}`, LitU32(math.MaxUint32)},
	}
	for _, c := range cases {
		p, err := decodeJSON([]byte(codecJSONProgram(`{"let": "x", "value": ` + c.expr + `}`)))
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: accepted", c.expr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := p.Body[0].(LetStmt).Value; got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.expr, got, c.want)
		}
	}
	// Declarations that may be left out, and an explicit "count": 0 or empty "else".
	p, err := ParseJSON([]byte(`{"name": "t", "kiln": 1, "body": [{"if": {"bool": true}, "then": [], "else": []}],
		"workgroup_size": [1, 1, 1], "buffers": [{"name": "y", "binding": 0, "type": "u32", "access": "write", "count": 0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Program{Name: "t", WorkgroupSize: [3]uint32{1, 1, 1},
		Buffers: []BufferDecl{{Name: "y", Type: U32, Access: Write}},
		Body:    []Stmt{IfStmt{Cond: LitBool(true)}}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %#v, want %#v", p, want)
	}
}

func TestParseJSONErrors(t *testing.T) {
	prog := codecJSONProgram
	let := func(expr string) string { return prog(`{"let": "x", "value": ` + expr + `}`) }
	deep := strings.Repeat(`{"neg": `, 300) + `{"f32": 1}` + strings.Repeat(`}`, 300)
	cases := []struct {
		name  string
		input string
		want  []string
	}{
		{"empty", ``, []string{"ir: JSON: line 1:1: unexpected end of the input. Fix: "}},
		{"truncated", `{"kiln": 1,` + "\n" + `"name": "x"`, []string{"line 2:12: unexpected end of the input"}},
		{"syntax", "{\"kiln\": 1,\n\n  \"name\" \"x\"}", []string{"line 3:10: invalid character '\"' after object key"}},
		{"trailing comma", `{"kiln": 1,}`, []string{"line 1:12: invalid character '}'"}},
		{"not an object", `[1]`, []string{"the program must be an object, got an array"}},
		{"trailing data", `{"kiln": 1} {}`, []string{"line 1:13: unexpected data after the program"}},
		{"trailing garbage", `{"kiln": 1} x`, []string{"line 1:13: unexpected data after the program"}},
		{"missing kiln", `{"name": "t", "workgroup_size": [1, 1, 1], "body": []}`, []string{`line 1:1: the program is missing "kiln"`, `Fix: start the program with "kiln": 1`}},
		{"kiln 2", `{"kiln": 2, "name": "t", "workgroup_size": [1, 1, 1], "body": []}`, []string{"kiln: line 1:10: JSON form version 2 is not supported", `Fix: write "kiln": 1`}},
		{"kiln string", `{"kiln": "1"}`, []string{`kiln: line 1:10: "kiln" must be an integer, got the string "1"`}},
		{"kiln fraction", `{"kiln": 1.0}`, []string{`"kiln" must be an integer, got the number 1.0`}},
		{"unknown top key", `{"kiln": 1, "bodyy": []}`, []string{`line 1:13: unknown key "bodyy" in the program`}},
		{"duplicate top key", `{"kiln": 1, "kiln": 1}`, []string{`duplicate key "kiln" in the program`}},
		{"missing body", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1]}`, []string{`the program is missing "body"`}},
		{"name type", `{"kiln": 1, "name": 5}`, []string{`name: line 1:21: "name" must be a string, got the number 5`}},
		{"workgroup entries", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1]}`, []string{"workgroup_size: line 1:44: workgroup_size has 2 entries, want 3"}},
		{"workgroup fraction", `{"kiln": 1, "name": "t", "workgroup_size": [1.5, 1, 1]}`, []string{"workgroup_size: ", "workgroup size must be an integer, got the number 1.5"}},
		{"workgroup negative", `{"kiln": 1, "name": "t", "workgroup_size": [-1, 1, 1]}`, []string{"workgroup size -1 is out of range", "Fix: use an integer from 0 to 4294967295"}},
		{"workgroup huge", `{"kiln": 1, "name": "t", "workgroup_size": [4294967296, 1, 1]}`, []string{"workgroup size 4294967296 is out of range"}},
		{"params null", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": null, "body": []}`, []string{`params: line 1:65: "params" must be an array, got null`}},
		{"param default fraction", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [{"name": "n", "type": "u32", "default": 2.5}], "body": []}`,
			[]string{"params[0].default: ", "u32 value must be an integer, got the number 2.5", "Fix: write an integer there"}},
		{"param default bool", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [{"name": "n", "type": "bool", "default": 1}], "body": []}`,
			[]string{"params[0].default: ", "bool value must be true or false, got the number 1"}},
		{"param default missing", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [{"name": "n", "type": "i32"}], "body": []}`,
			[]string{`params[0]: line 1:66: a parameter is missing "default"`}},
		{"param default out of range", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [{"name": "n", "type": "i32", "default": 2147483648}], "body": []}`,
			[]string{"params[0].default: ", "i32 value 2147483648 is out of range", "Fix: use an integer from -2147483648 to 2147483647"}},
		{"param unknown type", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "params": [{"name": "n", "type": "f64", "default": 1}], "body": []}`,
			[]string{`params[0]: `, `parameter type "f64" is not a type`}},
		{"buffer access", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "buffers": [{"name": "y", "binding": 0, "type": "f32", "access": "rw"}], "body": []}`,
			[]string{`buffers[0]: `, `access "rw" is not an access mode`, "Fix: use read, write or read_write"}},
		{"buffer unknown key", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "buffers": [{"name": "y", "binding": 0, "type": "f32", "access": "read", "size": 4}], "body": []}`,
			[]string{`buffers[0]: `, `unknown key "size" in a buffer`}},
		{"shared missing count", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "shared": [{"name": "s", "type": "f32"}], "body": []}`,
			[]string{`shared[0]: `, `a shared array is missing "count"`}},
		{"body not array", `{"kiln": 1, "name": "t", "workgroup_size": [1, 1, 1], "body": {}}`, []string{`body: `, `a block must be an array, got an object`}},
		{"statement not object", prog(`[]`), []string{"body[0]: line 3:10: expected statement object, got an array"}},
		{"no statement key", prog(`{"value": {"u32": 1}}`), []string{`body[0]: `, `statement object has no node key (keys: "value")`, "Fix: name the node with one of let, var"}},
		{"two statement keys", prog(`{"let": "a", "assign": "b", "value": {"u32": 1}}`), []string{`body[0]: line 3:23: statement object has two node keys, "let" and "assign"`}},
		{"duplicate node key", prog(`{"let": "a", "let": "b", "value": {"u32": 1}}`), []string{`body[0]: `, `duplicate key "let" in statement "let"`}},
		{"unknown statement key", prog(`{"let": "a", "type": "u32", "value": {"u32": 1}}`), []string{`body[0]: `, `unknown key "type" in statement "let"`, "Fix: use only the keys let, value"}},
		{"missing value", prog(`{"let": "a"}`), []string{`body[0]: `, `statement "let" is missing "value"`}},
		{"let name type", prog(`{"let": 1, "value": {"u32": 1}}`), []string{`body[0]: `, `"let" must be a string, got the number 1`}},
		{"break false", prog(`{"break": false}`), []string{`body[0]: `, `"break" must be true, got false`}},
		{"return null", prog(`{"return": null}`), []string{`"return" must be true, got null`}},
		{"var type", prog(`{"var": "v", "type": "u16", "value": {"u32": 1}}`), []string{`var type "u16" is not a type`}},
		{"for missing step", prog(`{"for": "k", "type": "u32", "from": {"u32": 0}, "to": {"u32": 1}, "body": []}`), []string{`body[0]: `, `statement "for" is missing "step"`}},
		{"for bad to", prog(`{"for": "k", "type": "u32", "from": {"u32": 0}, "to": {"u32": -1}, "step": {"u32": 1}, "body": []}`), []string{`body[0].to: `, `u32 value -1 is out of range`}},
		{"if missing then", prog(`{"if": {"bool": true}}`), []string{`statement "if" is missing "then"`}},
		{"if cond", prog(`{"if": true, "then": []}`), []string{`body[0].cond: `, `expected expression object, got true/false`}},
		{"else path", prog(`{"if": {"bool": true}, "then": [], "else": [{"return": true}, {"store": "y", "index": {"u32": 0}, "value": {"mul": [{"f32": 1}, {"f32": "x"}]}}]}`),
			[]string{`body[0].else[1].value.args[1]: `, `f32 value "x" is not an f32`}},
		{"while body path", prog(`{"while": {"bool": false}, "body": [{"let": "a", "value": {"sqrt": {"f32": "NaN"}}}]}`),
			[]string{`body[0].body[0].value.args[0]: `, `f32 value "NaN" is not an f32`}},
		{"atomic op", prog(`{"atomic": "sub", "target": "y", "index": {"u32": 0}, "value": {"u32": 1}}`), []string{`body[0]: `, `atomic operation "sub" is not defined`}},
		{"atomic empty result", prog(`{"atomic": "add", "target": "y", "index": {"u32": 0}, "value": {"u32": 1}, "result": ""}`), []string{`"result" is empty`}},
		{"atomic missing target", prog(`{"atomic": "add", "index": {"u32": 0}, "value": {"u32": 1}}`), []string{`statement "atomic" is missing "target"`}},
		{"atomic index", prog(`{"atomic": "add", "target": "y", "index": {"u32": "0"}, "value": {"u32": 1}}`), []string{`body[0].index: `, `u32 value must be an integer, got the string "0"`}},
		{"two expression keys", let(`{"add": [{"u32": 1}, {"u32": 2}], "sub": [{"u32": 1}, {"u32": 2}]}`),
			[]string{`body[0].value: line 3:66: expression object has two node keys, "add" and "sub"`, "Fix: write one node per object"}},
		{"unknown expression", let(`{"sqr": {"f32": 1}}`), []string{`body[0].value: `, `expression object has no node key (keys: "sqr")`, "sqrt"}},
		{"expression not object", let(`3`), []string{`body[0].value: line 3:32: expected expression object, got a number`}},
		{"binary arity", let(`{"add": [{"u32": 1}]}`), []string{`body[0].value: `, `add takes 2 operands, got 1`}},
		{"binary not array", let(`{"add": {"u32": 1}}`), []string{`body[0].value: `, `the operands of "add" must be an array, got an object`}},
		{"fma arity", let(`{"fma": [{"f32": 1}, {"f32": 1}]}`), []string{`fma takes 3 operands, got 2`}},
		{"select arity", let(`{"select": [{"bool": true}, {"f32": 1}, {"f32": 1}, {"f32": 1}]}`), []string{`select takes 3 operands, got 4`}},
		{"unary array", let(`{"sqrt": [{"f32": 1}]}`), []string{`body[0].value: `, `sqrt takes one operand, not an array`}},
		{"operand path", let(`{"select": [{"bool": true}, {"f32": 1}, {"local": 7}]}`), []string{`body[0].value.args[2]: `, `"local" must be a string, got the number 7`}},
		{"cast type", let(`{"cast": "f64", "value": {"u32": 1}}`), []string{`body[0].value: `, `cast type "f64" is not a type`}},
		{"cast missing value", let(`{"cast": "f32"}`), []string{`expression "cast" is missing "value"`}},
		{"cast value path", let(`{"cast": "f32", "value": {"u32": true}}`), []string{`body[0].value.value: `, `u32 value must be an integer, got true`}},
		{"load index path", let(`{"load": "y", "index": {"bool": 1}}`), []string{`body[0].value.index: `, `bool value must be true or false`}},
		{"load missing index", let(`{"load": "y"}`), []string{`expression "load" is missing "index"`}},
		{"load extra key", let(`{"load": "y", "index": {"u32": 0}, "value": {"u32": 0}}`), []string{`unknown key "value" in expression "load"`}},
		{"builtin unknown", let(`{"builtin": "thread_id", "axis": 0}`), []string{`builtin "thread_id" is not defined`}},
		{"builtin axis string", let(`{"builtin": "global_id", "axis": "0"}`), []string{`axis must be an integer, got the string "0"`}},
		{"builtin axis range", let(`{"builtin": "global_id", "axis": 256}`), []string{`axis 256 is out of range`, "Fix: use an integer from 0 to 255"}},
		{"builtin missing axis", let(`{"builtin": "global_id"}`), []string{`expression "builtin" is missing "axis"`}},
		{"u32 negative", let(`{"u32": -1}`), []string{`u32 value -1 is out of range`}},
		{"u32 fraction", let(`{"u32": 1.0}`), []string{`u32 value must be an integer, got the number 1.0`}},
		{"u32 exponent", let(`{"u32": 1e3}`), []string{`u32 value must be an integer, got the number 1e3`}},
		{"i32 too small", let(`{"i32": -2147483649}`), []string{`i32 value -2147483649 is out of range`}},
		{"f32 too big", let(`{"f32": 1e39}`), []string{`f32 value 1e39 is out of the f32 range`, `Fix: write a number, "nan", "inf", "-inf"`}},
		{"f32 bad bits", let(`{"f32": "0x7fc0000g"}`), []string{`f32 value "0x7fc0000g" is not an f32`}},
		{"f32 short bits", let(`{"f32": "0x7fc0000"}`), []string{`f32 value "0x7fc0000" is not an f32`}},
		{"f32 Inf", let(`{"f32": "Infinity"}`), []string{`f32 value "Infinity" is not an f32`}},
		{"f32 bool", let(`{"f32": true}`), []string{`f32 value must be a number or a string such as "nan", got true`}},
		{"bool number", let(`{"bool": 0}`), []string{`bool value must be true or false, got the number 0`}},
		{"deep expression", let(deep), []string{`body[0].value` + strings.Repeat(".args[0]", 255) + `: `, "expressions nest deeper than 256 levels"}},
		{"deep JSON", strings.Repeat("[", 100000), []string{"JSON nests deeper than 520 levels"}},
		{"not valid", prog(`{"let": "x", "value": {"local": "nope"}}`), []string{`ir: JSON program "t" is not valid: body[0].value: local "nope" is not declared`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseJSON([]byte(c.input))
			if err == nil {
				t.Fatalf("ParseJSON accepted it: %#v", p)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\nlacks %q", msg, w)
				}
			}
			if !strings.Contains(msg, ". Fix: ") {
				t.Errorf("error %q has no Fix", msg)
			}
		})
	}
}

// TestJSONNestingLimitMatchesValidate: the deepest program Validate accepts, built
// with two-operand nodes (the most JSON nesting per level), parses; one level more
// fails on the IR limit, not on the JSON one.
func TestJSONNestingLimitMatchesValidate(t *testing.T) {
	chain := func(n int) *Program {
		var x Expr = LitU32(1)
		for i := 0; i < n; i++ {
			x = Add(x, LitU32(1))
		}
		b := NewBuilder("p", 1, 1, 1)
		b.While(LitBool(false), func(w *Block) { w.Let("x", x) })
		return b.Program()
	}
	n := 0
	for Validate(chain(n+1)) == nil {
		n++
	}
	text, err := MarshalJSON(chain(n))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseJSON(text); err != nil {
		t.Fatalf("the deepest valid program does not parse: %v", err)
	}
	deeper := strings.Replace(string(text), `"value": {"add": [`, `"value": {"add": [{"add": [`, 1)
	deeper = strings.Replace(deeper, `]}}`, `]}, {"u32": 1}]}}`, 1)
	_, err = ParseJSON([]byte(deeper))
	if err == nil || !strings.Contains(err.Error(), "expressions nest deeper than 256 levels") {
		t.Fatalf("one level deeper: %v", err)
	}
}

func TestParseJSONRunsValidate(t *testing.T) {
	_, err := ParseJSON([]byte(codecJSONProgram(`{"store": "y", "index": {"u32": 0}, "value": {"u32": 1}}`)))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Path != "body[0].value" {
		t.Fatalf("want the *ValidationError of a u32 stored to an f32 buffer, got %v", err)
	}
}

// TestJSONNodeKeysAreDistinct: a new type or operator whose name clashes with
// another node key or with a field name would make the JSON form ambiguous.
func TestJSONNodeKeysAreDistinct(t *testing.T) {
	var exprKeys []string
	for _, ty := range Types() {
		exprKeys = append(exprKeys, ty.String())
	}
	exprKeys = append(exprKeys, operatorNames()...)
	exprKeys = append(exprKeys, "local", "param", "builtin", "load", "len", "fma", "select", "cast", "uniform", "bitcast")
	stmtKeys := []string{"let", "var", "assign", "store", "if", "for", "while", "break", "barrier", "atomic", "return", "continue"}
	for _, c := range []struct {
		keys  []string
		shape func(string) ([]string, bool)
	}{{exprKeys, exprShape}, {stmtKeys, stmtShape}} {
		seen := map[string]bool{}
		for _, k := range c.keys {
			if seen[k] {
				t.Errorf("node key %q is used twice", k)
			}
			seen[k] = true
			if _, ok := c.shape(k); !ok {
				t.Errorf("node key %q is not recognized", k)
			}
		}
		for _, k := range c.keys {
			extras, _ := c.shape(k)
			for _, e := range extras {
				if seen[e] {
					t.Errorf("field %q of %q is also a node key", e, k)
				}
			}
		}
	}
}

func TestMarshalJSONRefuses(t *testing.T) {
	cases := []struct {
		name string
		p    *Program
		want string
	}{
		{"nil", nil, "program is nil"},
		{"bool bits", codecLetProgram(Literal{Type: Bool, Bits: 2}), "body[0].value: bool literal has bits 0x2"},
		{"default type", &Program{Params: []ParamDecl{{Name: "a", Type: U32, Default: LitI32(1)}}}, "params[0].default: default of type i32 for a parameter of type u32"},
		{"bad type", codecLetProgram(Literal{Type: 0}), "body[0].value: literal type 0 is not defined"},
		{"bad access", &Program{Buffers: []BufferDecl{{Name: "b", Type: U32}}}, "buffers[0]: access 0 is not defined"},
		{"bad shared type", &Program{Shared: []SharedDecl{{Name: "s"}}}, "shared[0]: type 0 is not defined"},
		{"bad unary", codecLetProgram(UnaryExpr{Op: 0, X: LitF32(1)}), "unary operator 0 is not defined"},
		{"bad binary", codecLetProgram(BinaryExpr{Op: binaryEnd, X: LitF32(1), Y: LitF32(1)}), "binary operator 21 is not defined"},
		{"bad builtin", codecLetProgram(BuiltinRef{}), "builtin 0 is not defined"},
		{"bad atomic", &Program{Body: []Stmt{AtomicStmt{}}}, "atomic operation 0 is not defined"},
		{"nil expression", codecLetProgram(Fma(LitF32(1), LitF32(1), nil)), "body[0].value.args[2]: expression is missing"},
		{"nil statement", &Program{Body: []Stmt{ForStmt{Var: "k", Type: U32, From: LitU32(0), To: LitU32(1), Step: LitU32(1), Body: []Stmt{nil}}}}, "body[0].body[0]: statement is nil"},
		{"foreign expression", codecLetProgram(codecFakeExpr{}), "unknown expression type"},
		{"foreign statement", &Program{Body: []Stmt{codecFakeStmt{}}}, "unknown statement type"},
		{"bad UTF-8", &Program{Name: "\xff"}, "name: string \"\\xff\" is not valid UTF-8"},
		{"deep", codecLetProgram(codecNest(LitF32(1), MaxNesting)), "expressions nest deeper than 256 levels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, err := MarshalJSON(c.p)
			if err == nil {
				t.Fatalf("MarshalJSON accepted it:\n%s", text)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "ir: MarshalJSON: ") || !strings.Contains(msg, ". Fix: ") {
				t.Fatalf("error %q, want %q and a Fix", msg, c.want)
			}
		})
	}
}

func TestMarshalJSONEscapes(t *testing.T) {
	p := &Program{Name: "q\"b\\n\n\t\x01é<>&\u2028", Body: []Stmt{LetStmt{Name: "x", Value: LitU32(1)}}}
	text, err := MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), `"name": "q\"b\\n\n\t\u0001é<>&`+"\u2028"+`"`) {
		t.Fatalf("unexpected escaping:\n%s", text)
	}
	q, err := decodeJSON(text)
	if err != nil || q.Name != p.Name {
		t.Fatalf("name %q came back as %q (%v)", p.Name, q.Name, err)
	}
}

func BenchmarkParseJSON(b *testing.B) {
	text, err := MarshalJSON(codecKitchenSink())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		if _, err := ParseJSON(text); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseJSON: no input panics or hangs the parser; what parses re-marshals and
// re-parses to an equal program (checked before Validate, so mutated programs that
// are ill-typed still exercise the round trip) and also survives the binary encoding;
// ParseJSON accepts exactly what parses and validates.
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(codecDesignSaxpy))
	f.Add([]byte(codecDesignV11))
	f.Add([]byte(codecDesignV12))
	for _, p := range []*Program{codecSaxpy(), codecKitchenSink(), codecEveryOp(), codecKitchenSinkV11(), codecEveryOpV11(),
		codecKitchenSinkV12(), codecEveryOpV12(), codecRandomProgramsV12(1)[0]} {
		text, err := MarshalJSON(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	f.Add([]byte(codecJSONProgram(`{"let": "x", "value": {"f32": "0x7fc00001"}}`)))
	f.Add([]byte(`{"kiln": 1, "kiln": 2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeJSON(data)
		if err != nil {
			if _, perr := ParseJSON(data); perr == nil {
				t.Fatalf("ParseJSON accepts what the parser rejects: %v", err)
			}
			return
		}
		if _, perr := ParseJSON(data); (perr == nil) != (Validate(p) == nil) {
			t.Fatalf("ParseJSON error %v disagrees with Validate %v", perr, Validate(p))
		}
		text, err := MarshalJSON(p)
		if err != nil {
			t.Fatalf("MarshalJSON refuses a parsed program: %v", err)
		}
		q, err := decodeJSON(text)
		if err != nil {
			t.Fatalf("re-parse failed: %v\n%s", err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip differs:\n got %#v\nwant %#v", q, p)
		}
		b, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode refuses a parsed program: %v", err)
		}
		if r, err := Decode(b); err != nil || !reflect.DeepEqual(withoutCandidates(p), r) {
			t.Fatalf("binary round trip of a parsed program failed (%v)", err)
		}
	})
}
