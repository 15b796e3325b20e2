package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The JSON file form (see docs/design.md, "The program (IR)"): one object whose "kiln" key
// is jsonVersion, then name, workgroup_size, params, buffers, shared, matrices (IR v1.2) and body, with
// one object per expression and statement, named by its single node key.

const jsonVersion = 1

// f32 values that JSON numbers cannot hold are written as strings: "nan" for the
// default quiet NaN (defaultNaNBits), "inf", "-inf", and any other NaN as its bits,
// "0x7fc00001". ParseJSON accepts the bits form for every f32 value.
const (
	defaultNaNBits = 0x7fc00000
	jsonNaN        = "nan"
	jsonInf        = "inf"
	jsonNegInf     = "-inf"
)

// exprShape reports whether key names an expression node in the JSON form and, if
// so, the other keys its object may have. With stmtShape it is the one table of the
// JSON node keys: literals take their type's name, operators their own name.
func exprShape(key string) (extras []string, ok bool) {
	switch key {
	case "local", "param", "len", "fma", "select", "uniform":
		return nil, true
	case "builtin":
		return []string{"axis"}, true
	case "load":
		return []string{"index"}, true
	case "cast", "bitcast":
		return []string{"value"}, true
	}
	if _, ok := ParseSubgroupOp(key); ok {
		return nil, true
	}
	if _, ok := ParseType(key); ok {
		return nil, true
	}
	if _, ok := ParseUnaryOp(key); ok {
		return nil, true
	}
	if _, ok := ParseBinaryOp(key); ok {
		return nil, true
	}
	return nil, false
}

// stmtShape reports whether key names a statement node and, if so, the other keys
// its object may have.
func stmtShape(key string) (extras []string, ok bool) {
	switch key {
	case "let", "assign":
		return []string{"value"}, true
	case "var":
		return []string{"type", "value"}, true
	case "store":
		return []string{"index", "value"}, true
	case "if":
		return []string{"then", "else"}, true
	case "for":
		return []string{"type", "from", "to", "step", "body"}, true
	case "while":
		return []string{"body"}, true
	case "atomic":
		return []string{"target", "index", "compare", "value", "result"}, true
	case "break", "barrier", "return", "continue":
		return nil, true
	}
	return matrixStmtShape(key)
}

// operatorNames lists the JSON names of the unary, binary and subgroup
// operators, each kind in value order.
func operatorNames() []string {
	return slices.Concat(unaryNames[1:], binaryNames[1:], subgroupNames[1:])
}

func exprKeysHelp() string {
	return "f32, u32, i32, bool, f16, bf16, local, param, uniform, builtin, load, len, fma, select, cast, bitcast or an operator (" +
		strings.Join(operatorNames(), ", ") + ")"
}

func stmtKeysHelp() string {
	return "let, var, assign, store, if, for, while, break, continue, barrier, atomic, return, matrix_fill, matrix_load, matrix_store, matrix_mma or matrix_convert"
}

// ParseJSON reads a program in the JSON file form and runs Validate on it. Unknown
// keys, duplicate keys, an object with no or two node keys, wrong operand counts,
// wrong JSON types, missing keys, numbers out of range and a "kiln" other than 1 are
// errors that name the place (body[2].then[0].value, as Validate does) and its line
// and column.
func ParseJSON(data []byte) (*Program, error) {
	p, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	if err := Validate(p); err != nil {
		return nil, fmt.Errorf("ir: JSON program %q is not valid: %w", p.Name, err)
	}
	return p, nil
}

// decodeJSON is ParseJSON without Validate.
func decodeJSON(data []byte) (*Program, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	r := &jreader{data: data, dec: dec}
	root, err := r.value(0)
	if err != nil {
		return nil, err
	}
	off := r.tokenStart()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, jsonErr(data, off, "remove it: a file holds one program object", "unexpected data after the program")
	}
	w := &jwalker{data: data}
	return w.program(root)
}

func jsonErr(data []byte, off int, fix, format string, args ...any) error {
	off = min(max(off, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:off], '\n')+1:off])
	return &pathError{op: "JSON", pos: fmt.Sprintf("line %d:%d", line, col), msg: fmt.Sprintf(format, args...), fix: fix}
}

// The JSON document is first read into a tree of jvalues that keeps every value's
// byte offset and every object's keys in order (duplicates included), then walked.

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	switch k {
	case jBool:
		return "true/false"
	case jNumber:
		return "a number"
	case jString:
		return "a string"
	case jArray:
		return "an array"
	case jObject:
		return "an object"
	}
	return "null"
}

type jvalue struct {
	kind    jkind
	off     int
	text    string // a string's value or a number's literal text
	b       bool
	elems   []jvalue
	members []jmember
}

type jmember struct {
	key string
	off int
	val jvalue
}

// maxJSONDepth bounds the nesting of JSON arrays and objects; it lies above what a
// program within MaxNesting needs (two levels per IR level), so Validate's limit is
// the one users meet.
const maxJSONDepth = 2*MaxNesting + 8

type jreader struct {
	data []byte
	dec  *json.Decoder
}

// tokenStart is the offset of the next token: the decoder's offset past any
// whitespace and separators.
func (r *jreader) tokenStart() int {
	off := int(r.dec.InputOffset())
	for off < len(r.data) && strings.IndexByte(" \t\r\n:,", r.data[off]) >= 0 {
		off++
	}
	return off
}

func (r *jreader) syntax(err error) error {
	const fix = "correct the JSON syntax there"
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return jsonErr(r.data, int(se.Offset), fix, "%s", se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return jsonErr(r.data, len(r.data), fix, "unexpected end of the input")
	}
	return jsonErr(r.data, int(r.dec.InputOffset()), fix, "%v", err)
}

func (r *jreader) value(depth int) (jvalue, error) {
	off := r.tokenStart()
	tok, err := r.dec.Token()
	if err != nil {
		return jvalue{}, r.syntax(err)
	}
	switch t := tok.(type) {
	case string:
		return jvalue{kind: jString, off: off, text: t}, nil
	case json.Number:
		return jvalue{kind: jNumber, off: off, text: string(t)}, nil
	case bool:
		return jvalue{kind: jBool, off: off, b: t}, nil
	case nil:
		return jvalue{kind: jNull, off: off}, nil
	case json.Delim:
		if depth >= maxJSONDepth {
			return jvalue{}, jsonErr(r.data, off, "split the kernel into shallower blocks", "JSON nests deeper than %d levels", maxJSONDepth)
		}
		switch t {
		case '{':
			return r.object(off, depth)
		case '[':
			return r.array(off, depth)
		}
	}
	return jvalue{}, jsonErr(r.data, off, "correct the JSON syntax there", "unexpected %v", tok)
}

func (r *jreader) object(off, depth int) (jvalue, error) {
	v := jvalue{kind: jObject, off: off}
	for r.dec.More() {
		koff := r.tokenStart()
		tok, err := r.dec.Token()
		if err != nil {
			return jvalue{}, r.syntax(err)
		}
		key, ok := tok.(string)
		if !ok {
			return jvalue{}, jsonErr(r.data, koff, "quote the key", "expected an object key, got %v", tok)
		}
		val, err := r.value(depth + 1)
		if err != nil {
			return jvalue{}, err
		}
		v.members = append(v.members, jmember{key: key, off: koff, val: val})
	}
	return v, r.closing('}')
}

func (r *jreader) array(off, depth int) (jvalue, error) {
	v := jvalue{kind: jArray, off: off}
	for r.dec.More() {
		e, err := r.value(depth + 1)
		if err != nil {
			return jvalue{}, err
		}
		v.elems = append(v.elems, e)
	}
	return v, r.closing(']')
}

func (r *jreader) closing(want json.Delim) error {
	off := r.tokenStart()
	tok, err := r.dec.Token()
	if err != nil {
		return r.syntax(err)
	}
	if tok != want {
		return jsonErr(r.data, off, "correct the JSON syntax there", "expected %v, got %v", want, tok)
	}
	return nil
}

// jwalker turns the jvalue tree into a Program. Its errors carry the line and column
// of the offending value; the path is added by within on the way back up.
type jwalker struct {
	data []byte
}

func (w *jwalker) errAt(v jvalue, fix, format string, args ...any) error {
	return jsonErr(w.data, v.off, fix, format, args...)
}

func (w *jwalker) typeErr(v jvalue, what, want string) error {
	return w.errAt(v, "write "+want+" there", "%s must be %s, got %s", what, want, describe(v))
}

// describe names a scalar's kind and value for messages ("the number 2.5").
func describe(v jvalue) string {
	switch v.kind {
	case jNumber:
		return "the number " + v.text
	case jString:
		return "the string " + strconv.Quote(v.text)
	case jBool:
		return strconv.FormatBool(v.b)
	}
	return v.kind.String()
}

// fields indexes an object's members by key, rejecting duplicate keys and keys that
// are not in allowed.
func (w *jwalker) fields(v jvalue, what string, allowed ...string) (map[string]jvalue, error) {
	if v.kind != jObject {
		return nil, w.typeErr(v, what, "an object")
	}
	m := make(map[string]jvalue, len(v.members))
	for _, mem := range v.members {
		at := jvalue{off: mem.off}
		if _, dup := m[mem.key]; dup {
			return nil, w.errAt(at, "keep one of them", "duplicate key %q in %s", mem.key, what)
		}
		if !slices.Contains(allowed, mem.key) {
			return nil, w.errAt(at, "use only the keys "+strings.Join(allowed, ", "), "unknown key %q in %s", mem.key, what)
		}
		m[mem.key] = mem.val
	}
	return m, nil
}

// need returns the member key of the object obj (indexed as m); it is an error when
// it is missing.
func (w *jwalker) need(m map[string]jvalue, obj jvalue, key, what string) (jvalue, error) {
	v, ok := m[key]
	if !ok {
		return v, w.errAt(obj, fmt.Sprintf("add the key %q", key), "%s is missing %q", what, key)
	}
	return v, nil
}

// node finds the single node key of an expression or statement object (category)
// and checks its other keys against the node's shape.
func (w *jwalker) node(v jvalue, category string, help func() string, shape func(string) ([]string, bool)) (string, map[string]jvalue, error) {
	if v.kind != jObject {
		return "", nil, w.errAt(v, "write "+category+" as an object with one of the keys "+help(),
			"expected %s object, got %s", category, v.kind)
	}
	key := ""
	var extras []string
	for _, mem := range v.members {
		ex, ok := shape(mem.key)
		if !ok {
			continue
		}
		if key != "" && mem.key != key {
			return "", nil, w.errAt(jvalue{off: mem.off}, "write one node per object",
				"%s object has two node keys, %q and %q", category, key, mem.key)
		}
		key, extras = mem.key, ex
	}
	if key == "" {
		keys := make([]string, len(v.members))
		for i, mem := range v.members {
			keys[i] = strconv.Quote(mem.key)
		}
		return "", nil, w.errAt(v, "name the node with one of "+help(),
			"%s object has no node key (keys: %s)", category, strings.Join(keys, ", "))
	}
	m, err := w.fields(v, fmt.Sprintf("%s %q", category, key), append([]string{key}, extras...)...)
	return key, m, err
}

func (w *jwalker) str(v jvalue, what string) (string, error) {
	if v.kind != jString {
		return "", w.typeErr(v, what, "a string")
	}
	return v.text, nil
}

func (w *jwalker) boolean(v jvalue, what string) (bool, error) {
	if v.kind != jBool {
		return false, w.typeErr(v, what, "true or false")
	}
	return v.b, nil
}

// integer returns a JSON number written as an integer (no fraction, no exponent).
func (w *jwalker) integer(v jvalue, what string) (string, error) {
	if v.kind != jNumber || strings.ContainsAny(v.text, ".eE") {
		return "", w.typeErr(v, what, "an integer")
	}
	return v.text, nil
}

func (w *jwalker) uint(v jvalue, what string, bits int) (uint64, error) {
	text, err := w.integer(v, what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(text, 10, bits)
	if err != nil {
		top := uint64(1)<<bits - 1
		return 0, w.errAt(v, fmt.Sprintf("use an integer from 0 to %d", top), "%s %s is out of range", what, text)
	}
	return n, nil
}

func (w *jwalker) u32(v jvalue, what string) (uint32, error) {
	n, err := w.uint(v, what, 32)
	return uint32(n), err
}

func (w *jwalker) i32(v jvalue, what string) (int32, error) {
	text, err := w.integer(v, what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return 0, w.errAt(v, fmt.Sprintf("use an integer from %d to %d", math.MinInt32, math.MaxInt32), "%s %s is out of range", what, text)
	}
	return int32(n), nil
}

// f32 returns the bits of an f32 written as a JSON number or as one of the strings
// "nan", "inf", "-inf" and "0x" followed by 8 hex digits (the raw bits).
func (w *jwalker) f32(v jvalue, what string) (uint32, error) {
	const fix = `write a number, "nan", "inf", "-inf" or the bits as "0x7fc00001"`
	switch v.kind {
	case jNumber:
		f, err := strconv.ParseFloat(v.text, 32)
		if err != nil {
			return 0, w.errAt(v, fix, "%s %s is out of the f32 range", what, v.text)
		}
		return math.Float32bits(float32(f)), nil
	case jString:
		switch s := v.text; {
		case s == jsonNaN:
			return defaultNaNBits, nil
		case s == jsonInf:
			return math.Float32bits(float32(math.Inf(1))), nil
		case s == jsonNegInf:
			return math.Float32bits(float32(math.Inf(-1))), nil
		case len(s) == 10 && strings.HasPrefix(s, "0x"):
			if n, err := strconv.ParseUint(s[2:], 16, 32); err == nil {
				return uint32(n), nil
			}
		}
		return 0, w.errAt(v, fix, "%s %q is not an f32", what, v.text)
	}
	return 0, w.typeErr(v, what, "a number or a string such as \"nan\"")
}

func (w *jwalker) typeName(v jvalue, what string) (Type, error) {
	name, err := w.str(v, what)
	if err != nil {
		return 0, err
	}
	t, ok := ParseType(name)
	if !ok {
		return 0, w.errAt(v, "use bool, i32, u32, f32, f16 or bf16", "%s %q is not a type", what, name)
	}
	return t, nil
}

func (w *jwalker) array(v jvalue, what string) ([]jvalue, error) {
	if v.kind != jArray {
		return nil, w.typeErr(v, what, "an array")
	}
	return v.elems, nil
}

// literal reads the value of a literal or parameter default of type t.
func (w *jwalker) literal(t Type, v jvalue) (Literal, error) {
	what := t.String() + " value"
	switch t {
	case Bool:
		b, err := w.boolean(v, what)
		return LitBool(b), err
	case I32:
		n, err := w.i32(v, what)
		return LitI32(n), err
	case U32:
		n, err := w.u32(v, what)
		return LitU32(n), err
	case F16, BF16:
		bits, err := w.half(t, v, what)
		return Literal{Type: t, Bits: bits}, err
	}
	bits, err := w.f32(v, what)
	return Literal{Type: F32, Bits: bits}, err
}

func (w *jwalker) program(v jvalue) (*Program, error) {
	const what = "the program"
	m, err := w.fields(v, what, "kiln", "name", "workgroup_size", "subgroup_size", "params", "uniforms", "buffers", "shared", "matrices", "body")
	if err != nil {
		return nil, err
	}
	kv, ok := m["kiln"]
	if !ok {
		return nil, w.errAt(v, fmt.Sprintf(`start the program with "kiln": %d`, jsonVersion), `the program is missing "kiln"`)
	}
	ver, err := w.u32(kv, `"kiln"`)
	if err != nil {
		return nil, within("kiln", err)
	}
	if ver != jsonVersion {
		return nil, within("kiln", w.errAt(kv, fmt.Sprintf(`write "kiln": %d, the version this build reads`, jsonVersion),
			"JSON form version %d is not supported", ver))
	}
	p := &Program{}
	nv, err := w.need(m, v, "name", what)
	if err != nil {
		return nil, err
	}
	if p.Name, err = w.str(nv, `"name"`); err != nil {
		return nil, within("name", err)
	}
	wv, err := w.need(m, v, "workgroup_size", what)
	if err != nil {
		return nil, err
	}
	if err := w.workgroupSize(wv, &p.WorkgroupSize); err != nil {
		return nil, within("workgroup_size", err)
	}
	if sv, ok := m["subgroup_size"]; ok {
		if p.SubgroupSize, err = w.u32(sv, `"subgroup_size"`); err != nil {
			return nil, within("subgroup_size", err)
		}
	}
	if p.Params, err = jsonList(w, m, "params", (*jwalker).param); err != nil {
		return nil, err
	}
	if p.Uniforms, err = jsonList(w, m, "uniforms", (*jwalker).uniform); err != nil {
		return nil, err
	}
	if p.Buffers, err = jsonList(w, m, "buffers", (*jwalker).buffer); err != nil {
		return nil, err
	}
	if p.Shared, err = jsonList(w, m, "shared", (*jwalker).shared); err != nil {
		return nil, err
	}
	if p.Matrices, err = jsonList(w, m, "matrices", (*jwalker).matrixDecl); err != nil {
		return nil, err
	}
	bv, err := w.need(m, v, "body", what)
	if err != nil {
		return nil, err
	}
	if p.Body, err = w.block(bv, 1); err != nil {
		return nil, within("body", err)
	}
	return p, nil
}

func (w *jwalker) workgroupSize(v jvalue, wg *[3]uint32) error {
	elems, err := w.array(v, `"workgroup_size"`)
	if err != nil {
		return err
	}
	if len(elems) != 3 {
		return w.errAt(v, "write [x, y, z]", "workgroup_size has %d entries, want 3", len(elems))
	}
	for i, e := range elems {
		if wg[i], err = w.u32(e, "workgroup size"); err != nil {
			return err
		}
	}
	return nil
}

// jsonList reads the optional declaration list key of the program object.
func jsonList[T any](w *jwalker, m map[string]jvalue, key string, item func(*jwalker, jvalue) (T, error)) ([]T, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	elems, err := w.array(v, strconv.Quote(key))
	if err != nil {
		return nil, within(key, err)
	}
	var out []T
	for i, e := range elems {
		d, err := item(w, e)
		if err != nil {
			return nil, within(key+index(i), err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (w *jwalker) param(v jvalue) (ParamDecl, error) {
	const what = "a parameter"
	m, name, t, err := w.typedDecl(v, what, "parameter type", "default", "candidates")
	d := ParamDecl{Name: name, Type: t}
	if err != nil {
		return d, err
	}
	dv, err := w.need(m, v, "default", what)
	if err != nil {
		return d, err
	}
	if d.Default, err = w.literal(d.Type, dv); err != nil {
		return d, within(".default", err)
	}
	cv, ok := m["candidates"]
	if !ok {
		return d, nil
	}
	elems, err := w.array(cv, "candidates")
	if err != nil {
		return d, within(".candidates", err)
	}
	for j, e := range elems {
		l, err := w.literal(d.Type, e)
		if err != nil {
			return d, within(".candidates"+index(j), err)
		}
		d.Candidates = append(d.Candidates, l)
	}
	return d, nil
}

func (w *jwalker) uniform(v jvalue) (UniformDecl, error) {
	_, name, t, err := w.typedDecl(v, "a uniform", "uniform type")
	return UniformDecl{Name: name, Type: t}, err
}

func (w *jwalker) buffer(v jvalue) (BufferDecl, error) {
	const what = "a buffer"
	var b BufferDecl
	m, err := w.fields(v, what, "name", "binding", "type", "access", "count")
	if err != nil {
		return b, err
	}
	if b.Name, err = w.needStr(m, v, "name", what); err != nil {
		return b, err
	}
	if b.Binding, err = w.needU32(m, v, "binding", what); err != nil {
		return b, err
	}
	if b.Type, err = w.needType(m, v, "type", what, "buffer type"); err != nil {
		return b, err
	}
	av, err := w.need(m, v, "access", what)
	if err != nil {
		return b, err
	}
	name, err := w.str(av, "access")
	if err != nil {
		return b, err
	}
	var ok bool
	if b.Access, ok = ParseAccess(name); !ok {
		return b, w.errAt(av, "use read, write or read_write", "access %q is not an access mode", name)
	}
	if cv, ok := m["count"]; ok {
		b.Count, err = w.u32(cv, "count")
	}
	return b, err
}

func (w *jwalker) shared(v jvalue) (SharedDecl, error) {
	const what = "a shared array"
	m, name, t, err := w.typedDecl(v, what, "shared array type", "count")
	s := SharedDecl{Name: name, Type: t}
	if err != nil {
		return s, err
	}
	s.Count, err = w.needU32(m, v, "count", what)
	return s, err
}

func (w *jwalker) needStr(m map[string]jvalue, obj jvalue, key, what string) (string, error) {
	v, err := w.need(m, obj, key, what)
	if err != nil {
		return "", err
	}
	return w.str(v, strconv.Quote(key))
}

// typedDecl reads the object v of a declaration (what) with the keys "name",
// "type" (typeWhat in errors) and the other keys allowed, and returns its members
// with its name and type.
func (w *jwalker) typedDecl(v jvalue, what, typeWhat string, keys ...string) (map[string]jvalue, string, Type, error) {
	m, err := w.fields(v, what, append([]string{"name", "type"}, keys...)...)
	if err != nil {
		return nil, "", 0, err
	}
	name, err := w.needStr(m, v, "name", what)
	if err != nil {
		return m, "", 0, err
	}
	t, err := w.needType(m, v, "type", what, typeWhat)
	return m, name, t, err
}

// needType is need of a type name (typeWhat in errors).
func (w *jwalker) needType(m map[string]jvalue, obj jvalue, key, what, typeWhat string) (Type, error) {
	v, err := w.need(m, obj, key, what)
	if err != nil {
		return 0, err
	}
	return w.typeName(v, typeWhat)
}

// needU32 is need of a 32-bit count, index or size.
func (w *jwalker) needU32(m map[string]jvalue, obj jvalue, key, what string) (uint32, error) {
	v, err := w.need(m, obj, key, what)
	if err != nil {
		return 0, err
	}
	return w.u32(v, key)
}

func (w *jwalker) block(v jvalue, depth int) ([]Stmt, error) {
	elems, err := w.array(v, "a block")
	if err != nil {
		return nil, err
	}
	var out []Stmt
	for i, e := range elems {
		s, err := w.stmt(e, depth)
		if err != nil {
			return nil, within(index(i), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// sub reads the expression under key of a node object at depth, naming it with seg.
func (w *jwalker) sub(m map[string]jvalue, obj jvalue, key, what, seg string, depth int) (Expr, error) {
	v, err := w.need(m, obj, key, what)
	if err != nil {
		return nil, err
	}
	x, err := w.expr(v, depth)
	return x, within(seg, err)
}

// operands reads the array of exactly n operand expressions of node key.
func (w *jwalker) operands(v jvalue, key string, n, depth int) ([]Expr, error) {
	elems, err := w.array(v, fmt.Sprintf("the operands of %q", key))
	if err != nil {
		return nil, err
	}
	if len(elems) != n {
		return nil, w.errAt(v, fmt.Sprintf("give %s exactly %d operands", key, n), "%s takes %d operands, got %d", key, n, len(elems))
	}
	xs := make([]Expr, n)
	for i, e := range elems {
		if xs[i], err = w.expr(e, depth); err != nil {
			return nil, within(".args"+index(i), err)
		}
	}
	return xs, nil
}

func (w *jwalker) expr(v jvalue, depth int) (Expr, error) {
	if depth > MaxNesting {
		return nil, w.errAt(v, "bind parts of the expression to locals with let", "expressions nest deeper than %d levels", MaxNesting)
	}
	key, m, err := w.node(v, "expression", exprKeysHelp, exprShape)
	if err != nil {
		return nil, err
	}
	val := m[key]
	what := fmt.Sprintf("expression %q", key)
	switch key {
	case "local":
		name, err := w.str(val, `"local"`)
		return LocalRef{Name: name}, err
	case "param":
		name, err := w.str(val, `"param"`)
		return ParamRef{Name: name}, err
	case "uniform":
		name, err := w.str(val, `"uniform"`)
		return UniformRef{Name: name}, err
	case "len":
		name, err := w.str(val, `"len"`)
		return LenExpr{Buffer: name}, err
	case "builtin":
		name, err := w.str(val, `"builtin"`)
		if err != nil {
			return nil, err
		}
		kind, ok := ParseBuiltin(name)
		if !ok {
			return nil, w.errAt(val, "use global_id, local_id, workgroup_id, num_workgroups, workgroup_size, subgroup_size or subgroup_invocation_id",
				"builtin %q is not defined", name)
		}
		if !kind.HasAxis() {
			if av, ok := m["axis"]; ok {
				return nil, w.errAt(av, `remove "axis"`, "builtin %s is a scalar and has no axis", name)
			}
			return BuiltinRef{Kind: kind}, nil
		}
		av, err := w.need(m, v, "axis", what)
		if err != nil {
			return nil, err
		}
		axis, err := w.uint(av, "axis", 8)
		return BuiltinRef{Kind: kind, Axis: uint8(axis)}, err
	case "load":
		target, err := w.str(val, `"load"`)
		if err != nil {
			return nil, err
		}
		idx, err := w.sub(m, v, "index", what, ".index", depth+1)
		return LoadExpr{Target: target, Index: idx}, err
	case "cast":
		t, err := w.typeName(val, "cast type")
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return CastExpr{To: t, X: x}, err
	case "bitcast":
		t, err := w.typeName(val, "bitcast type")
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return BitcastExpr{To: t, X: x}, err
	case "fma":
		xs, err := w.operands(val, key, 3, depth+1)
		if err != nil {
			return nil, err
		}
		return FmaExpr{A: xs[0], B: xs[1], C: xs[2]}, nil
	case "select":
		xs, err := w.operands(val, key, 3, depth+1)
		if err != nil {
			return nil, err
		}
		return SelectExpr{Cond: xs[0], A: xs[1], B: xs[2]}, nil
	}
	if t, ok := ParseType(key); ok {
		return w.literal(t, val)
	}
	if op, ok := ParseSubgroupOp(key); ok {
		if op.HasLane() {
			xs, err := w.operands(val, key, 2, depth+1)
			if err != nil {
				return nil, err
			}
			return SubgroupExpr{Op: op, X: xs[0], Lane: xs[1]}, nil
		}
		if val.kind == jArray {
			return nil, w.errAt(val, fmt.Sprintf(`write {"%s": E} with the operand itself, not in a list`, key),
				"%s takes one operand, not an array", key)
		}
		x, err := w.expr(val, depth+1)
		return SubgroupExpr{Op: op, X: x}, within(".args[0]", err)
	}
	if op, ok := ParseUnaryOp(key); ok {
		if val.kind == jArray {
			return nil, w.errAt(val, fmt.Sprintf(`write {"%s": E} with the operand itself, not in a list`, key),
				"%s takes one operand, not an array", key)
		}
		x, err := w.expr(val, depth+1)
		return UnaryExpr{Op: op, X: x}, within(".args[0]", err)
	}
	op, _ := ParseBinaryOp(key)
	xs, err := w.operands(val, key, 2, depth+1)
	if err != nil {
		return nil, err
	}
	return BinaryExpr{Op: op, X: xs[0], Y: xs[1]}, nil
}

// flag checks the value of break, barrier and return, which is always true.
func (w *jwalker) flag(v jvalue, key string) error {
	if v.kind != jBool || !v.b {
		return w.errAt(v, fmt.Sprintf(`write {"%s": true}`, key), "%q must be true, got %s", key, describe(v))
	}
	return nil
}

func (w *jwalker) stmt(v jvalue, depth int) (Stmt, error) {
	key, m, err := w.node(v, "statement", stmtKeysHelp, stmtShape)
	if err != nil {
		return nil, err
	}
	val := m[key]
	what := fmt.Sprintf("statement %q", key)
	switch key {
	case "let":
		name, err := w.str(val, `"let"`)
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return LetStmt{Name: name, Value: x}, err
	case "var":
		name, err := w.str(val, `"var"`)
		if err != nil {
			return nil, err
		}
		t, err := w.needType(m, v, "type", what, "var type")
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return VarStmt{Name: name, Type: t, Value: x}, err
	case "assign":
		name, err := w.str(val, `"assign"`)
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return AssignStmt{Name: name, Value: x}, err
	case "store":
		target, err := w.str(val, `"store"`)
		if err != nil {
			return nil, err
		}
		idx, err := w.sub(m, v, "index", what, ".index", depth+1)
		if err != nil {
			return nil, err
		}
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return StoreStmt{Target: target, Index: idx, Value: x}, err
	case "if":
		return w.ifStmt(v, m, depth)
	case "for":
		return w.forStmt(v, m, depth)
	case "while":
		cond, err := w.expr(val, depth+1)
		if err != nil {
			return nil, within(".cond", err)
		}
		bv, err := w.need(m, v, "body", what)
		if err != nil {
			return nil, err
		}
		body, err := w.block(bv, depth+1)
		return WhileStmt{Cond: cond, Body: body}, within(".body", err)
	case "atomic":
		return w.atomicStmt(v, m, depth)
	case "break":
		return BreakStmt{}, w.flag(val, key)
	case "continue":
		return ContinueStmt{}, w.flag(val, key)
	case "barrier":
		return BarrierStmt{}, w.flag(val, key)
	case "return":
		return ReturnStmt{}, w.flag(val, key)
	}
	return w.matrixStmt(key, v, m, depth)
}

func (w *jwalker) ifStmt(v jvalue, m map[string]jvalue, depth int) (Stmt, error) {
	var s IfStmt
	var err error
	if s.Cond, err = w.expr(m["if"], depth+1); err != nil {
		return nil, within(".cond", err)
	}
	tv, err := w.need(m, v, "then", `statement "if"`)
	if err != nil {
		return nil, err
	}
	if s.Then, err = w.block(tv, depth+1); err != nil {
		return nil, within(".then", err)
	}
	if ev, ok := m["else"]; ok {
		if s.Else, err = w.block(ev, depth+1); err != nil {
			return nil, within(".else", err)
		}
	}
	return s, nil
}

func (w *jwalker) forStmt(v jvalue, m map[string]jvalue, depth int) (Stmt, error) {
	const what = `statement "for"`
	var s ForStmt
	var err error
	if s.Var, err = w.str(m["for"], `"for"`); err != nil {
		return nil, err
	}
	if s.Type, err = w.needType(m, v, "type", what, "for type"); err != nil {
		return nil, err
	}
	if s.From, err = w.sub(m, v, "from", what, ".from", depth+1); err != nil {
		return nil, err
	}
	if s.To, err = w.sub(m, v, "to", what, ".to", depth+1); err != nil {
		return nil, err
	}
	if s.Step, err = w.sub(m, v, "step", what, ".step", depth+1); err != nil {
		return nil, err
	}
	bv, err := w.need(m, v, "body", what)
	if err != nil {
		return nil, err
	}
	if s.Body, err = w.block(bv, depth+1); err != nil {
		return nil, within(".body", err)
	}
	return s, nil
}

func (w *jwalker) atomicStmt(v jvalue, m map[string]jvalue, depth int) (Stmt, error) {
	const what = `statement "atomic"`
	var s AtomicStmt
	opv := m["atomic"]
	name, err := w.str(opv, `"atomic"`)
	if err != nil {
		return nil, err
	}
	var ok bool
	if s.Op, ok = ParseAtomicOp(name); !ok {
		return nil, w.errAt(opv, "use add, min, max, and, or, xor, exchange or cas", "atomic operation %q is not defined", name)
	}
	if s.Target, err = w.needStr(m, v, "target", what); err != nil {
		return nil, err
	}
	if s.Index, err = w.sub(m, v, "index", what, ".index", depth+1); err != nil {
		return nil, err
	}
	cv, hasCompare := m["compare"]
	switch {
	case s.Op == AtomicCompareExchange:
		if s.Compare, err = w.sub(m, v, "compare", what, ".compare", depth+1); err != nil {
			return nil, err
		}
	case hasCompare:
		return nil, w.errAt(cv, `remove "compare", or use the operation "cas"`, "atomic %s takes no \"compare\"", name)
	}
	if s.Value, err = w.sub(m, v, "value", what, ".value", depth+1); err != nil {
		return nil, err
	}
	if rv, ok := m["result"]; ok {
		if s.Result, err = w.str(rv, `"result"`); err != nil {
			return nil, err
		}
		if s.Result == "" {
			return nil, w.errAt(rv, `name the result local, or leave "result" out to discard the old value`, `"result" is empty`)
		}
	}
	return s, nil
}

// MarshalJSON writes p in the JSON file form: deterministic, 2-space indented, one
// declaration or statement per line with its expressions inline, "kiln": 1 first,
// then name, workgroup_size, params, buffers, shared, matrices (only when there are any) and body, and a final newline.
// A buffer's "count" appears only when it is fixed, an if's "else" only when it is
// not empty, an atomic's "result" only when it is set. Finite f32 values are written
// in the shortest form that reads back to the same bits (-0 stays -0), the others
// as "nan", "inf", "-inf" or their bits ("0x7fc00001"), so ParseJSON(MarshalJSON(p))
// equals p bit for bit. It refuses what the JSON form cannot carry: nil nodes,
// undefined types and operators, a parameter whose default has another type, bool
// literals other than 0 and 1, strings that are not UTF-8, and nesting deeper than
// MaxNesting. It does not run Validate.
func MarshalJSON(p *Program) ([]byte, error) {
	if p == nil {
		return nil, marshalErr("pass a program built with ir.NewBuilder or ir.ParseJSON", "program is nil")
	}
	w := &jwriter{}
	w.raw(fmt.Sprintf("{\n  \"kiln\": %d,\n  \"name\": ", jsonVersion))
	if err := w.quote(p.Name); err != nil {
		return nil, within("name", err)
	}
	wg := p.WorkgroupSize
	w.raw(fmt.Sprintf(",\n  \"workgroup_size\": [%d, %d, %d]", wg[0], wg[1], wg[2]))
	if p.SubgroupSize != 0 {
		w.raw(fmt.Sprintf(",\n  \"subgroup_size\": %d", p.SubgroupSize))
	}
	w.raw(",\n  \"params\": ")
	if err := jsonDecls(w, "params", p.Params, (*jwriter).param); err != nil {
		return nil, err
	}
	if len(p.Uniforms) > 0 {
		w.raw(",\n  \"uniforms\": ")
		if err := jsonDecls(w, "uniforms", p.Uniforms, (*jwriter).uniform); err != nil {
			return nil, err
		}
	}
	w.raw(",\n  \"buffers\": ")
	if err := jsonDecls(w, "buffers", p.Buffers, (*jwriter).buffer); err != nil {
		return nil, err
	}
	w.raw(",\n  \"shared\": ")
	if err := jsonDecls(w, "shared", p.Shared, (*jwriter).shared); err != nil {
		return nil, err
	}
	if len(p.Matrices) > 0 {
		w.raw(",\n  \"matrices\": ")
		if err := jsonDecls(w, "matrices", p.Matrices, (*jwriter).matrixDecl); err != nil {
			return nil, err
		}
	}
	w.raw(",\n  \"body\": ")
	if err := w.block(p.Body, 2, 1); err != nil {
		return nil, within("body", err)
	}
	w.raw("\n}\n")
	return w.b, nil
}

func marshalErr(fix, format string, args ...any) error {
	return &pathError{op: "MarshalJSON", msg: fmt.Sprintf(format, args...), fix: fix}
}

type jwriter struct {
	b []byte
}

func (w *jwriter) raw(s string) { w.b = append(w.b, s...) }

func (w *jwriter) indent(n int) {
	for i := 0; i < n; i++ {
		w.b = append(w.b, ' ')
	}
}

func (w *jwriter) quote(s string) error {
	if !utf8.ValidString(s) {
		return marshalErr("use UTF-8 names", "string %q is not valid UTF-8", s)
	}
	w.b = append(w.b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			w.b = append(w.b, '\\', byte(r))
		case r == '\n':
			w.raw(`\n`)
		case r == '\t':
			w.raw(`\t`)
		case r < 0x20:
			w.raw(fmt.Sprintf(`\u%04x`, r))
		default:
			w.b = utf8.AppendRune(w.b, r)
		}
	}
	w.b = append(w.b, '"')
	return nil
}

// jsonDecls writes a declaration list, one declaration per line.
func jsonDecls[T any](w *jwriter, key string, decls []T, item func(*jwriter, T) error) error {
	if len(decls) == 0 {
		w.raw("[]")
		return nil
	}
	w.raw("[\n")
	for i, d := range decls {
		w.indent(4)
		if err := item(w, d); err != nil {
			return within(key+index(i), err)
		}
		if i < len(decls)-1 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '\n')
	}
	w.raw("  ]")
	return nil
}

func (w *jwriter) typeName(t Type) error {
	if !t.Valid() {
		return marshalErr("use bool, i32, u32, f32, f16 or bf16", "type %d is not defined", t)
	}
	return w.quote(t.String())
}

// value writes the JSON value of a literal of its own type.
func (w *jwriter) value(l Literal) error {
	switch l.Type {
	case Bool:
		if l.Bits > 1 {
			return marshalErr("use 0 (false) or 1 (true)", "bool literal has bits %#x", l.Bits)
		}
		w.b = strconv.AppendBool(w.b, l.Bits == 1)
	case I32:
		w.b = strconv.AppendInt(w.b, int64(int32(l.Bits)), 10)
	case U32:
		w.b = strconv.AppendUint(w.b, uint64(l.Bits), 10)
	case F32:
		w.raw(f32JSON(l.Bits))
	case F16, BF16:
		if l.Bits > 0xffff {
			return marshalErr("keep the 16 bits of an f16 or bf16 literal in the low half of Bits", "%s literal has bits %#x", l.Type, l.Bits)
		}
		w.raw(halfJSON(l.Type, uint16(l.Bits)))
	default:
		return marshalErr("use bool, i32, u32, f32, f16 or bf16", "literal type %d is not defined", l.Type)
	}
	return nil
}

func f32JSON(bits uint32) string {
	f := math.Float32frombits(bits)
	switch {
	case bits == defaultNaNBits:
		return `"` + jsonNaN + `"`
	case f != f:
		return fmt.Sprintf(`"0x%08x"`, bits)
	case math.IsInf(float64(f), 1):
		return `"` + jsonInf + `"`
	case math.IsInf(float64(f), -1):
		return `"` + jsonNegInf + `"`
	}
	return strconv.FormatFloat(float64(f), 'g', -1, 32)
}

// nameAndType opens an object with `{"key": "name", "type": "t"`.
func (w *jwriter) nameAndType(key, name string, t Type) error {
	w.raw(`{"` + key + `": `)
	if err := w.quote(name); err != nil {
		return err
	}
	w.raw(`, "type": `)
	return w.typeName(t)
}

func (w *jwriter) param(d ParamDecl) error {
	if err := w.nameAndType("name", d.Name, d.Type); err != nil {
		return err
	}
	if d.Default.Type != d.Type {
		return within(".default", marshalErr("give the default the parameter's type",
			"default of type %s for a parameter of type %s", d.Default.Type, d.Type))
	}
	w.raw(`, "default": `)
	if err := w.value(d.Default); err != nil {
		return within(".default", err)
	}
	if len(d.Candidates) > 0 {
		w.raw(`, "candidates": [`)
		for j, l := range d.Candidates {
			if l.Type != d.Type {
				return within(".candidates"+index(j), marshalErr("give every candidate the parameter's type",
					"candidate of type %s for a parameter of type %s", l.Type, d.Type))
			}
			if j > 0 {
				w.raw(", ")
			}
			if err := w.value(l); err != nil {
				return within(".candidates"+index(j), err)
			}
		}
		w.b = append(w.b, ']')
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *jwriter) uniform(u UniformDecl) error {
	if err := w.nameAndType("name", u.Name, u.Type); err != nil {
		return err
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *jwriter) buffer(b BufferDecl) error {
	w.raw(`{"name": `)
	if err := w.quote(b.Name); err != nil {
		return err
	}
	w.raw(fmt.Sprintf(`, "binding": %d, "type": `, b.Binding))
	if err := w.typeName(b.Type); err != nil {
		return err
	}
	if !b.Access.Valid() {
		return marshalErr("use read, write or read_write", "access %d is not defined", b.Access)
	}
	w.raw(`, "access": `)
	if err := w.quote(b.Access.String()); err != nil {
		return err
	}
	if b.Count != 0 {
		w.raw(fmt.Sprintf(`, "count": %d`, b.Count))
	}
	w.b = append(w.b, '}')
	return nil
}

func (w *jwriter) shared(s SharedDecl) error {
	if err := w.nameAndType("name", s.Name, s.Type); err != nil {
		return err
	}
	w.raw(fmt.Sprintf(`, "count": %d}`, s.Count))
	return nil
}

// block writes a statement list whose opening bracket is on a line indented by ind:
// the statements one per line at ind+2, the closing bracket at ind.
func (w *jwriter) block(stmts []Stmt, ind, depth int) error {
	if len(stmts) == 0 {
		w.raw("[]")
		return nil
	}
	w.raw("[\n")
	for i, s := range stmts {
		w.indent(ind + 2)
		if err := w.stmt(s, ind+2, depth); err != nil {
			return within(index(i), err)
		}
		if i < len(stmts)-1 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, '\n')
	}
	w.indent(ind)
	w.b = append(w.b, ']')
	return nil
}

// key writes `, "key": ` followed by the expression x, named seg in errors.
func (w *jwriter) key(key, seg string, x Expr, depth int) error {
	w.raw(`, "` + key + `": `)
	return within(seg, w.expr(x, depth))
}

func (w *jwriter) stmt(s Stmt, ind, depth int) error {
	switch s := s.(type) {
	case LetStmt:
		w.raw(`{"let": `)
		if err := w.quote(s.Name); err != nil {
			return err
		}
		if err := w.key("value", ".value", s.Value, depth+1); err != nil {
			return err
		}
	case VarStmt:
		if err := w.nameAndType("var", s.Name, s.Type); err != nil {
			return err
		}
		if err := w.key("value", ".value", s.Value, depth+1); err != nil {
			return err
		}
	case AssignStmt:
		w.raw(`{"assign": `)
		if err := w.quote(s.Name); err != nil {
			return err
		}
		if err := w.key("value", ".value", s.Value, depth+1); err != nil {
			return err
		}
	case StoreStmt:
		w.raw(`{"store": `)
		if err := w.quote(s.Target); err != nil {
			return err
		}
		if err := w.key("index", ".index", s.Index, depth+1); err != nil {
			return err
		}
		if err := w.key("value", ".value", s.Value, depth+1); err != nil {
			return err
		}
	case IfStmt:
		w.raw(`{"if": `)
		if err := w.expr(s.Cond, depth+1); err != nil {
			return within(".cond", err)
		}
		w.raw(`, "then": `)
		if err := w.block(s.Then, ind, depth+1); err != nil {
			return within(".then", err)
		}
		if len(s.Else) > 0 {
			w.raw(`, "else": `)
			if err := w.block(s.Else, ind, depth+1); err != nil {
				return within(".else", err)
			}
		}
	case ForStmt:
		if err := w.nameAndType("for", s.Var, s.Type); err != nil {
			return err
		}
		if err := w.key("from", ".from", s.From, depth+1); err != nil {
			return err
		}
		if err := w.key("to", ".to", s.To, depth+1); err != nil {
			return err
		}
		if err := w.key("step", ".step", s.Step, depth+1); err != nil {
			return err
		}
		w.raw(`, "body": `)
		if err := w.block(s.Body, ind, depth+1); err != nil {
			return within(".body", err)
		}
	case WhileStmt:
		w.raw(`{"while": `)
		if err := w.expr(s.Cond, depth+1); err != nil {
			return within(".cond", err)
		}
		w.raw(`, "body": `)
		if err := w.block(s.Body, ind, depth+1); err != nil {
			return within(".body", err)
		}
	case BreakStmt:
		w.raw(`{"break": true`)
	case ContinueStmt:
		w.raw(`{"continue": true`)
	case BarrierStmt:
		w.raw(`{"barrier": true`)
	case ReturnStmt:
		w.raw(`{"return": true`)
	case MatrixFillStmt, MatrixLoadStmt, MatrixStoreStmt, MatrixMMAStmt, MatrixConvertStmt:
		if err := w.matrixStmt(s, depth); err != nil {
			return err
		}
	case AtomicStmt:
		if !s.Op.Valid() {
			return marshalErr("use one of ir.AtomicOps()", "atomic operation %d is not defined", s.Op)
		}
		w.raw(`{"atomic": `)
		if err := w.quote(s.Op.String()); err != nil {
			return err
		}
		w.raw(`, "target": `)
		if err := w.quote(s.Target); err != nil {
			return err
		}
		if err := w.key("index", ".index", s.Index, depth+1); err != nil {
			return err
		}
		if s.Op == AtomicCompareExchange {
			if err := w.key("compare", ".compare", s.Compare, depth+1); err != nil {
				return err
			}
		} else if s.Compare != nil {
			return within(".compare", marshalErr(`remove compare, or use the operation cas`, "atomic %s takes no compare value", s.Op))
		}
		if err := w.key("value", ".value", s.Value, depth+1); err != nil {
			return err
		}
		if s.Result != "" {
			w.raw(`, "result": `)
			if err := w.quote(s.Result); err != nil {
				return err
			}
		}
	case nil:
		return marshalErr("remove the empty statement", "statement is nil")
	default:
		return marshalErr("build statements with the ir package's types", "unknown statement type %T", s)
	}
	w.b = append(w.b, '}')
	return nil
}

// operands writes [x0, x1, ...], naming operand i .args[i] in errors.
func (w *jwriter) operands(depth int, xs ...Expr) error {
	w.b = append(w.b, '[')
	for i, x := range xs {
		if i > 0 {
			w.raw(", ")
		}
		if err := w.expr(x, depth); err != nil {
			return within(".args"+index(i), err)
		}
	}
	w.b = append(w.b, ']')
	return nil
}

func (w *jwriter) expr(x Expr, depth int) error {
	if depth > MaxNesting {
		return marshalErr("bind parts of the expression to locals with let", "expressions nest deeper than %d levels", MaxNesting)
	}
	switch x := x.(type) {
	case Literal:
		if !x.Type.Valid() {
			return marshalErr("use bool, i32, u32, f32, f16 or bf16", "literal type %d is not defined", x.Type)
		}
		w.raw(`{"` + x.Type.String() + `": `)
		if err := w.value(x); err != nil {
			return err
		}
	case LocalRef:
		w.raw(`{"local": `)
		if err := w.quote(x.Name); err != nil {
			return err
		}
	case ParamRef:
		w.raw(`{"param": `)
		if err := w.quote(x.Name); err != nil {
			return err
		}
	case BuiltinRef:
		if !x.Kind.Valid() {
			return marshalErr("use one of ir.Builtins()", "builtin %d is not defined", x.Kind)
		}
		if x.Kind.HasAxis() {
			w.raw(fmt.Sprintf(`{"builtin": "%s", "axis": %d`, x.Kind, x.Axis))
		} else if x.Axis != 0 {
			return marshalErr("set the axis of a scalar builtin to 0", "builtin %s has axis %d", x.Kind, x.Axis)
		} else {
			w.raw(fmt.Sprintf(`{"builtin": "%s"`, x.Kind))
		}
	case UniformRef:
		w.raw(`{"uniform": `)
		if err := w.quote(x.Name); err != nil {
			return err
		}
	case BitcastExpr:
		w.raw(`{"bitcast": `)
		if err := w.typeName(x.To); err != nil {
			return err
		}
		if err := w.key("value", ".value", x.X, depth+1); err != nil {
			return err
		}
	case SubgroupExpr:
		if !x.Op.Valid() {
			return marshalErr("use one of ir.SubgroupOps()", "subgroup operation %d is not defined", x.Op)
		}
		w.raw(`{"` + x.Op.String() + `": `)
		if x.Op.HasLane() {
			if err := w.operands(depth+1, x.X, x.Lane); err != nil {
				return err
			}
		} else {
			if x.Lane != nil {
				return marshalErr("remove the lane", "%s takes no lane", x.Op)
			}
			if err := w.expr(x.X, depth+1); err != nil {
				return within(".args[0]", err)
			}
		}
	case LoadExpr:
		w.raw(`{"load": `)
		if err := w.quote(x.Target); err != nil {
			return err
		}
		if err := w.key("index", ".index", x.Index, depth+1); err != nil {
			return err
		}
	case LenExpr:
		w.raw(`{"len": `)
		if err := w.quote(x.Buffer); err != nil {
			return err
		}
	case UnaryExpr:
		if !x.Op.Valid() {
			return marshalErr("use one of ir.UnaryOps()", "unary operator %d is not defined", x.Op)
		}
		w.raw(`{"` + x.Op.String() + `": `)
		if err := w.expr(x.X, depth+1); err != nil {
			return within(".args[0]", err)
		}
	case BinaryExpr:
		if !x.Op.Valid() {
			return marshalErr("use one of ir.BinaryOps()", "binary operator %d is not defined", x.Op)
		}
		w.raw(`{"` + x.Op.String() + `": `)
		if err := w.operands(depth+1, x.X, x.Y); err != nil {
			return err
		}
	case FmaExpr:
		w.raw(`{"fma": `)
		if err := w.operands(depth+1, x.A, x.B, x.C); err != nil {
			return err
		}
	case SelectExpr:
		w.raw(`{"select": `)
		if err := w.operands(depth+1, x.Cond, x.A, x.B); err != nil {
			return err
		}
	case CastExpr:
		w.raw(`{"cast": `)
		if err := w.typeName(x.To); err != nil {
			return err
		}
		if err := w.key("value", ".value", x.X, depth+1); err != nil {
			return err
		}
	case nil:
		return marshalErr("supply an expression", "expression is missing")
	default:
		return marshalErr("build expressions with the ir package's types", "unknown expression type %T", x)
	}
	w.b = append(w.b, '}')
	return nil
}
