// The canonical binary encoding of a Program, format versions 1, 2 and 3. It is the
// only form in which a program crosses the host/plugin boundary, and Digest hashes
// it, so any change to it must add a format version. Each program has exactly one
// encoding: Encode produces it, and Decode accepts nothing else, so
// Encode(Decode(b)) == b for every b that Decode accepts.
//
// Version 1 carries the programs of IR v1; version 2 adds IR v1.1 (uniforms, a
// required subgroup size, and the codes and tags marked "v2" below). Encode writes
// version 1 for every program that uses nothing of IR v1.1, so such a program has
// the same bytes and the same Digest as before version 2 existed, and version 2 only
// for programs that need it. Decode reads both and rejects a version 2 encoding of a
// program that version 1 can carry, and any v2 code or tag in a version 1 encoding.
//
// Version 3 adds IR v1.2: the types f16 and bf16, the matrices declarations and the
// matrix statements (the codes and tags marked "v3"). Encode writes it only for a
// program that uses one of them, so v1 and v1.1 programs keep their bytes and
// digests; Decode rejects a version 3 encoding of a program that uses nothing of
// IR v1.2, and any v3 code or tag in a version 1 or 2 encoding.
//
// Primitives
//
//	byte     one octet
//	uvarint  unsigned LEB128, as Go's encoding/binary.AppendUvarint: 7 bits per byte,
//	         least significant group first, the high bit set on every byte but the
//	         last. At most 10 bytes, value below 2^64, and minimal: a uvarint of more
//	         than one byte never ends in 0x00.
//	u32      a uvarint whose value is at most 0xFFFFFFFF
//	bits32   4 bytes, little-endian
//	string   uvarint byte length n, then n bytes of valid UTF-8
//	list(X)  uvarint item count n, then n items X; an empty list is the single byte 0x00
//
// Program
//
//	magic      6 bytes "KILNIR" (4B 49 4C 4E 49 52)
//	version    uvarint, 1, 2 or 3
//	name       string
//	wg         u32 u32 u32                 workgroup size x, y, z
//	subgroup   u32                         v2 and v3: required subgroup size (0: any)
//	params     list(string type literal)   name, type, default
//	uniforms   list(string type)           v2 and v3: name, type
//	buffers    list(string u32 type access u32)
//	                                       name, binding, element type, access,
//	                                       count (0: the dispatch decides)
//	shared     list(string type u32)       name, element type, count
//	matrices   list(string type u32 u32)   v3 only: name, element type, rows, cols
//	body       block
//
// Nothing may follow the body.
//
//	block      list(stmt)
//	literal    type bits32   (f32: IEEE-754 bits, NaN payloads kept; i32: two's
//	                          complement; u32; bool: 0 false, 1 true; f16, bf16:
//	                          the 16 bits in the low half)
//
// Enumerations, one byte each (codes marked v2 from version 2 on, v3 only in
// version 3)
//
//	type       0x01 u32, 0x02 i32, 0x06 bool, 0x0B f32,
//	           0x09 f16 (v3), 0x0A bf16 (v3)   (the DTypeTag values)
//	access     0x01 read, 0x02 write, 0x03 read_write
//	builtin    0x01 global_id, 0x02 local_id, 0x03 workgroup_id,
//	           0x04 num_workgroups, 0x05 workgroup_size,
//	           0x06 subgroup_size (v2), 0x07 subgroup_invocation_id (v2)
//	unary      0x01 neg, 0x02 not, 0x03 abs, 0x04 sqrt, 0x05 exp, 0x06 log,
//	           0x07 sin, 0x08 cos, 0x09 floor, 0x0A ceil,
//	           0x0B trunc (v2), 0x0C round (v2), 0x0D clz (v2), 0x0E popcount (v2)
//	binary     0x01 add, 0x02 sub, 0x03 mul, 0x04 div, 0x05 rem, 0x06 min,
//	           0x07 max, 0x08 and, 0x09 or, 0x0A xor, 0x0B shl, 0x0C shr,
//	           0x0D eq, 0x0E ne, 0x0F lt, 0x10 le, 0x11 gt, 0x12 ge,
//	           0x13 land, 0x14 lor
//	atomic     0x01 add, 0x02 min, 0x03 max, 0x04 and, 0x05 or, 0x06 xor,
//	           0x07 exchange, 0x08 cas (v2)
//	subgroup   0x01 subgroup_add, 0x02 subgroup_min, 0x03 subgroup_max,
//	           0x04 subgroup_shuffle, 0x05 subgroup_broadcast   (all v2)
//	layout     0x01 row, 0x02 col                       (v3)
//	precision  0x00 default, 0x01 tf32                  (v3)
//
// Expressions: a tag byte, then the fields
//
//	0x01 literal   type bits32
//	0x02 local     string (name)
//	0x03 param     string (name)
//	0x04 builtin   builtin, byte (axis; 0 for the subgroup builtins)
//	0x05 load      string (buffer or shared array), expr (index)
//	0x06 len       string (buffer)
//	0x07 unary     unary, expr
//	0x08 binary    binary, expr (left), expr (right)
//	0x09 fma       expr (a), expr (b), expr (c)          a*b+c
//	0x0A select    expr (cond), expr (a), expr (b)       cond ? a : b
//	0x0B cast      type (to), expr
//	0x0C uniform   string (name)                         v2
//	0x0D bitcast   type (to), expr                       v2
//	0x0E subgroup  subgroup, expr, then expr (lane) for shuffle and broadcast   v2
//
// Statements: a tag byte, then the fields
//
//	0x01 let       string (name), expr (value)
//	0x02 var       string (name), type, expr (value)
//	0x03 assign    string (name), expr (value)
//	0x04 store     string (target), expr (index), expr (value)
//	0x05 if        expr (cond), block (then), block (else)
//	0x06 for       string (var), type, expr (from), expr (to), expr (step), block (body)
//	0x07 while     expr (cond), block (body)
//	0x08 break
//	0x09 barrier
//	0x0A atomic    atomic, string (target), expr (index), expr (value),
//	               then expr (compare) for cas only,
//	               string (result local; empty: none)
//	0x0B return
//	0x0C continue  v2
//	0x0D matrix_fill     string (matrix), expr (value)                        v3
//	0x0E matrix_load     string (matrix), string (from), expr (offset),
//	                     expr (stride), layout, bound                           v3
//	0x0F matrix_store    string (matrix), string (to), expr (offset),
//	                     expr (stride), layout, bound                           v3
//	0x10 matrix_mma      string (acc), string (a), string (b), precision        v3
//	0x11 matrix_convert  string (matrix), string (from)                         v3
//
//	bound      0x00 (none), or 0x01 then expr (rows), expr (cols)
//
// Nesting is counted as Validate counts it: the statements of the body are at depth
// 1, the statements of a block nested in a statement at depth d are at depth d+1,
// the expressions of a statement at depth d are at depth d+1, and the operands of an
// expression at depth d are at depth d+1. An expression deeper than MaxNesting (256)
// is refused by Encode and rejected by Decode. Every statement that holds a block
// also holds an expression (a condition or the loop bounds) that comes first and sits
// one level deeper, so this bounds the nesting of statements as well.
//
// The encoding does not check types, names or bindings: Decode returns whatever
// well-formed program the bytes spell, and the receiver runs Validate.

package ir

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// FormatVersion is the newest version of the canonical binary encoding: Decode reads
// versions 1 to FormatVersion, and Encode writes the lowest one that carries the
// program (FormatVersionV1 for every program of IR v1, 2 for IR v1.1, 3 only for a
// program that uses IR v1.2).
const FormatVersion = 3

// FormatVersionV11 is the version of the encoding of IR v1.1 programs.
const FormatVersionV11 = 2

// FormatVersionV1 is the version of the encoding of IR v1 programs, which Encode
// keeps writing for them so their bytes and digests never change.
const FormatVersionV1 = 1

const wireMagic = "KILNIR"

// Expression tags.
const (
	tagLiteral byte = 0x01 + iota
	tagLocal
	tagParam
	tagBuiltin
	tagLoad
	tagLen
	tagUnary
	tagBinary
	tagFma
	tagSelect
	tagCast
	tagUniform // v2
	tagBitcast // v2
	tagSubgroup
	exprTagEnd
)

// Statement tags.
const (
	tagLet byte = 0x01 + iota
	tagVar
	tagAssign
	tagStore
	tagIf
	tagFor
	tagWhile
	tagBreak
	tagBarrier
	tagAtomic
	tagReturn
	tagContinue      // v2
	tagMatrixFill    // v3
	tagMatrixLoad    // v3
	tagMatrixStore   // v3
	tagMatrixMMA     // v3
	tagMatrixConvert // v3
	stmtTagEnd
)

// wireCode pairs an enumeration value with its byte on the wire.
type wireCode[T comparable] struct {
	v    T
	code byte
}

// wireTable maps one enumeration to and from its wire bytes.
type wireTable[T comparable] []wireCode[T]

func (t wireTable[T]) code(v T) (byte, bool) {
	for _, c := range t {
		if c.v == v {
			return c.code, true
		}
	}
	return 0, false
}

func (t wireTable[T]) value(code byte) (T, bool) {
	for _, c := range t {
		if c.code == code {
			return c.v, true
		}
	}
	var zero T
	return zero, false
}

// The wire codes of every enumeration, as documented at the top of this file. Never
// renumber them; a value missing here makes Encode refuse it and fails the tests.
var (
	wireTypes    = wireTable[Type]{{U32, 0x01}, {I32, 0x02}, {Bool, 0x06}, {F32, 0x0B}, {F16, 0x09}, {BF16, 0x0A}}
	wireAccesses = wireTable[Access]{{Read, 0x01}, {Write, 0x02}, {ReadWrite, 0x03}}
	wireBuiltins = wireTable[BuiltinKind]{
		{GlobalIDBuiltin, 0x01}, {LocalIDBuiltin, 0x02}, {WorkgroupIDBuiltin, 0x03},
		{NumWorkgroupsBuiltin, 0x04}, {WorkgroupSizeBuiltin, 0x05},
		{SubgroupSizeBuiltin, 0x06}, {SubgroupInvocationIDBuiltin, 0x07},
	}
	wireUnaryOps = wireTable[UnaryOp]{
		{OpNeg, 0x01}, {OpNot, 0x02}, {OpAbs, 0x03}, {OpSqrt, 0x04}, {OpExp, 0x05},
		{OpLog, 0x06}, {OpSin, 0x07}, {OpCos, 0x08}, {OpFloor, 0x09}, {OpCeil, 0x0A},
		{OpTrunc, 0x0B}, {OpRound, 0x0C}, {OpClz, 0x0D}, {OpPopcount, 0x0E},
	}
	wireBinaryOps = wireTable[BinaryOp]{
		{OpAdd, 0x01}, {OpSub, 0x02}, {OpMul, 0x03}, {OpDiv, 0x04}, {OpRem, 0x05},
		{OpMin, 0x06}, {OpMax, 0x07}, {OpAnd, 0x08}, {OpOr, 0x09}, {OpXor, 0x0A},
		{OpShl, 0x0B}, {OpShr, 0x0C}, {OpEq, 0x0D}, {OpNe, 0x0E}, {OpLt, 0x0F},
		{OpLe, 0x10}, {OpGt, 0x11}, {OpGe, 0x12}, {OpLAnd, 0x13}, {OpLOr, 0x14},
	}
	wireAtomicOps = wireTable[AtomicOp]{
		{AtomicAdd, 0x01}, {AtomicMin, 0x02}, {AtomicMax, 0x03}, {AtomicAnd, 0x04},
		{AtomicOr, 0x05}, {AtomicXor, 0x06}, {AtomicExchange, 0x07}, {AtomicCompareExchange, 0x08},
	}
	wireSubgroupOps = wireTable[SubgroupOp]{
		{SubgroupOpAdd, 0x01}, {SubgroupOpMin, 0x02}, {SubgroupOpMax, 0x03},
		{SubgroupOpShuffle, 0x04}, {SubgroupOpBroadcast, 0x05},
	}
	wireLayouts    = wireTable[MatrixLayout]{{RowMajor, 0x01}, {ColMajor, 0x02}}
	wirePrecisions = wireTable[MatrixPrecision]{{PrecisionDefault, 0x00}, {PrecisionTF32, 0x01}}
)

// The first code of each table, tag list and enumeration that only version 2 has;
// noV2 marks a table with no version 2 codes.
const (
	v2Builtin  byte = 0x06
	v2Unary    byte = 0x0B
	v2Atomic   byte = 0x08
	v2Subgroup byte = 0x01
	v2ExprTag       = tagUniform
	v2StmtTag       = tagContinue
	v3StmtTag       = tagMatrixFill
	noV2       byte = 0xFF
)

// pathError is a failure at one node of a program. Path is completed while the
// error travels back up the tree (see within), so the happy path builds no strings.
type pathError struct {
	op   string // what failed: "encode", "JSON", "MarshalJSON"
	path string // body[2].then[0].value, in Validate's style
	pos  string // "line 3:14" for JSON input, else empty
	msg  string
	fix  string
}

func (e *pathError) Error() string {
	return "ir: " + e.op + ": " + errorText(e.path, e.pos, e.msg, e.fix)
}

// within prefixes the path of a *pathError with seg ("body", "[2]", ".value").
func within(seg string, err error) error {
	var pe *pathError
	if errors.As(err, &pe) {
		pe.path = seg + pe.path
	}
	return err
}

func index(i int) string { return fmt.Sprintf("[%d]", i) }

// Encode returns p's canonical binary encoding (see the top of this file). It
// refuses, with an error naming the node, what the format cannot carry: a nil
// program, expression or statement, a node type of another package, an undefined
// type, access, builtin or operator, a string that is not UTF-8, and nesting deeper
// than MaxNesting. It does not run Validate.
func Encode(p *Program) ([]byte, error) {
	if p == nil {
		return nil, &pathError{op: "encode", msg: "program is nil", fix: "pass a program built with ir.NewBuilder or ir.ParseJSON"}
	}
	// The parts are encoded first, each on its own: whether they use IR v1.1 or
	// v1.2 decides the version, and so the header fields written in front of them.
	params := &encoder{}
	params.uvarint(uint64(len(p.Params)))
	for i, d := range p.Params {
		if err := params.param(d); err != nil {
			return nil, within("params"+index(i), err)
		}
	}
	uniforms := &encoder{}
	uniforms.uvarint(uint64(len(p.Uniforms)))
	for i, u := range p.Uniforms {
		if err := uniforms.uniform(u); err != nil {
			return nil, within("uniforms"+index(i), err)
		}
	}
	arrays := &encoder{}
	arrays.uvarint(uint64(len(p.Buffers)))
	for i, b := range p.Buffers {
		if err := arrays.buffer(b); err != nil {
			return nil, within("buffers"+index(i), err)
		}
	}
	arrays.uvarint(uint64(len(p.Shared)))
	for i, s := range p.Shared {
		if err := arrays.shared(s); err != nil {
			return nil, within("shared"+index(i), err)
		}
	}
	matrices := &encoder{}
	matrices.uvarint(uint64(len(p.Matrices)))
	for i, m := range p.Matrices {
		if err := matrices.matrix(m); err != nil {
			return nil, within("matrices"+index(i), err)
		}
	}
	body := &encoder{buf: make([]byte, 0, 256)}
	if err := body.block(p.Body, 1); err != nil {
		return nil, within("body", err)
	}
	parts := []*encoder{params, uniforms, arrays, matrices, body}
	version := FormatVersionV1
	for _, part := range parts {
		if part.v2 {
			version = max(version, FormatVersionV11)
		}
		if part.v3 {
			version = FormatVersion
		}
	}
	if p.SubgroupSize != 0 || len(p.Uniforms) > 0 {
		version = max(version, FormatVersionV11)
	}
	if len(p.Matrices) > 0 {
		version = FormatVersion
	}
	e := &encoder{buf: make([]byte, 0, 64+len(arrays.buf)+len(body.buf))}
	e.buf = append(e.buf, wireMagic...)
	e.uvarint(uint64(version))
	if err := e.str(p.Name); err != nil {
		return nil, within("name", err)
	}
	for _, n := range p.WorkgroupSize {
		e.uvarint(uint64(n))
	}
	if version >= FormatVersionV11 {
		e.uvarint(uint64(p.SubgroupSize))
	}
	e.buf = append(e.buf, params.buf...)
	if version >= FormatVersionV11 {
		e.buf = append(e.buf, uniforms.buf...)
	}
	e.buf = append(e.buf, arrays.buf...)
	if version >= FormatVersion {
		e.buf = append(e.buf, matrices.buf...)
	}
	return append(e.buf, body.buf...), nil
}

// MarshalBinary is Encode, for encoding.BinaryMarshaler.
func (p *Program) MarshalBinary() ([]byte, error) { return Encode(p) }

// UnmarshalBinary replaces *p with the program Decode reads from data.
func (p *Program) UnmarshalBinary(data []byte) error {
	q, err := Decode(data)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// Digest is the xxhash64 of p's canonical encoding: equal programs have equal
// digests on every machine and in every process. It is 0 for a program Encode
// refuses (Validate rejects all of those).
func (p *Program) Digest() uint64 {
	b, err := Encode(p)
	if err != nil {
		return 0
	}
	return xxhash.Sum64(b)
}

// DigestHex is Digest as 16 lowercase hex digits.
func (p *Program) DigestHex() string { return fmt.Sprintf("%016x", p.Digest()) }

const bindingSignatureDomain = "kiln-binding-signature-v1"

// BindingSignature hashes p's binding layout for cache keys: for each buffer, in
// binding order, its binding, element type, access and fixed count (0 when the
// dispatch decides). Names, parameters, shared arrays and the body do not count,
// nor does the order in which the buffers are declared.
func BindingSignature(p *Program) uint64 {
	var bufs []BufferDecl
	if p != nil {
		bufs = slices.Clone(p.Buffers)
	}
	slices.SortStableFunc(bufs, func(a, b BufferDecl) int { return cmp.Compare(a.Binding, b.Binding) })
	buf := make([]byte, 0, len(bindingSignatureDomain)+10+13*len(bufs))
	buf = append(buf, bindingSignatureDomain...)
	buf = append(buf, 0)
	buf = binary.AppendUvarint(buf, uint64(len(bufs)))
	for _, b := range bufs {
		access, _ := wireAccesses.code(b.Access)
		buf = binary.LittleEndian.AppendUint32(buf, b.Binding)
		buf = binary.LittleEndian.AppendUint32(buf, DTypeTag(b.Type))
		buf = append(buf, access)
		buf = binary.LittleEndian.AppendUint32(buf, b.Count)
	}
	return xxhash.Sum64(buf)
}

type encoder struct {
	buf []byte
	v2  bool // something only version 2 and later carry was encoded
	v3  bool // something only version 3 carries was encoded
}

// encodeCode appends an enumeration's wire code, noting a version 2 code.
func encodeCode[T comparable](e *encoder, t wireTable[T], v T, firstV2 byte) bool {
	c, ok := t.code(v)
	if !ok {
		return false
	}
	if c >= firstV2 {
		e.v2 = true
	}
	e.buf = append(e.buf, c)
	return true
}

func encodeErr(fix, format string, args ...any) error {
	return &pathError{op: "encode", msg: fmt.Sprintf(format, args...), fix: fix}
}

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }

func (e *encoder) str(s string) error {
	if !utf8.ValidString(s) {
		return encodeErr("use UTF-8 names", "string %q is not valid UTF-8", s)
	}
	e.uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
	return nil
}

func (e *encoder) typ(t Type) error {
	c, ok := wireTypes.code(t)
	if !ok {
		return encodeErr("use bool, i32, u32, f32, f16 or bf16", "type %d has no wire code", t)
	}
	if t.Is16Bit() {
		e.v3 = true
	}
	e.buf = append(e.buf, c)
	return nil
}

func (e *encoder) literal(l Literal) error {
	if err := e.typ(l.Type); err != nil {
		return err
	}
	if l.Type.Is16Bit() && l.Bits > 0xffff {
		return encodeErr("keep the 16 bits of an f16 or bf16 literal in the low half of Bits (build it with ir.LitF16 or ir.LitBF16)",
			"%s literal has bits %#x", l.Type, l.Bits)
	}
	e.buf = binary.LittleEndian.AppendUint32(e.buf, l.Bits)
	return nil
}

func (e *encoder) param(d ParamDecl) error {
	if err := e.str(d.Name); err != nil {
		return err
	}
	if err := e.typ(d.Type); err != nil {
		return err
	}
	return within(".default", e.literal(d.Default))
}

func (e *encoder) buffer(b BufferDecl) error {
	if err := e.str(b.Name); err != nil {
		return err
	}
	e.uvarint(uint64(b.Binding))
	if err := e.typ(b.Type); err != nil {
		return err
	}
	c, ok := wireAccesses.code(b.Access)
	if !ok {
		return encodeErr("use read, write or read_write", "access %d has no wire code", b.Access)
	}
	e.buf = append(e.buf, c)
	e.uvarint(uint64(b.Count))
	return nil
}

func (e *encoder) uniform(u UniformDecl) error {
	if err := e.str(u.Name); err != nil {
		return err
	}
	return e.typ(u.Type)
}

func (e *encoder) shared(s SharedDecl) error {
	if err := e.str(s.Name); err != nil {
		return err
	}
	if err := e.typ(s.Type); err != nil {
		return err
	}
	e.uvarint(uint64(s.Count))
	return nil
}

func (e *encoder) block(stmts []Stmt, depth int) error {
	e.uvarint(uint64(len(stmts)))
	for i, s := range stmts {
		if err := e.stmt(s, depth); err != nil {
			return within(index(i), err)
		}
	}
	return nil
}

// exprs encodes operands at depth, naming them with suffix (".args" → .args[i]).
func (e *encoder) exprs(depth int, suffix string, xs ...Expr) error {
	for i, x := range xs {
		if err := e.expr(x, depth); err != nil {
			return within(suffix+index(i), err)
		}
	}
	return nil
}

func (e *encoder) expr(x Expr, depth int) error {
	if depth > MaxNesting {
		return encodeErr("bind parts of the expression to locals with let", "expressions nest deeper than %d levels", MaxNesting)
	}
	switch x := x.(type) {
	case Literal:
		e.buf = append(e.buf, tagLiteral)
		return e.literal(x)
	case LocalRef:
		e.buf = append(e.buf, tagLocal)
		return e.str(x.Name)
	case ParamRef:
		e.buf = append(e.buf, tagParam)
		return e.str(x.Name)
	case BuiltinRef:
		e.buf = append(e.buf, tagBuiltin)
		if !encodeCode(e, wireBuiltins, x.Kind, v2Builtin) {
			return encodeErr("use one of ir.Builtins()", "builtin %d has no wire code", x.Kind)
		}
		e.buf = append(e.buf, x.Axis)
		return nil
	case UniformRef:
		e.v2 = true
		e.buf = append(e.buf, tagUniform)
		return e.str(x.Name)
	case BitcastExpr:
		e.v2 = true
		e.buf = append(e.buf, tagBitcast)
		if err := e.typ(x.To); err != nil {
			return err
		}
		return within(".value", e.expr(x.X, depth+1))
	case SubgroupExpr:
		e.v2 = true
		e.buf = append(e.buf, tagSubgroup)
		if !encodeCode(e, wireSubgroupOps, x.Op, v2Subgroup) {
			return encodeErr("use one of ir.SubgroupOps()", "subgroup operation %d has no wire code", x.Op)
		}
		if !x.Op.HasLane() {
			if x.Lane != nil {
				return encodeErr("remove the lane", "%s takes no lane", x.Op)
			}
			return e.exprs(depth+1, ".args", x.X)
		}
		return e.exprs(depth+1, ".args", x.X, x.Lane)
	case LoadExpr:
		e.buf = append(e.buf, tagLoad)
		if err := e.str(x.Target); err != nil {
			return err
		}
		return within(".index", e.expr(x.Index, depth+1))
	case LenExpr:
		e.buf = append(e.buf, tagLen)
		return e.str(x.Buffer)
	case UnaryExpr:
		e.buf = append(e.buf, tagUnary)
		if !encodeCode(e, wireUnaryOps, x.Op, v2Unary) {
			return encodeErr("use one of ir.UnaryOps()", "unary operator %d has no wire code", x.Op)
		}
		return e.exprs(depth+1, ".args", x.X)
	case BinaryExpr:
		c, ok := wireBinaryOps.code(x.Op)
		if !ok {
			return encodeErr("use one of ir.BinaryOps()", "binary operator %d has no wire code", x.Op)
		}
		e.buf = append(e.buf, tagBinary, c)
		return e.exprs(depth+1, ".args", x.X, x.Y)
	case FmaExpr:
		e.buf = append(e.buf, tagFma)
		return e.exprs(depth+1, ".args", x.A, x.B, x.C)
	case SelectExpr:
		e.buf = append(e.buf, tagSelect)
		return e.exprs(depth+1, ".args", x.Cond, x.A, x.B)
	case CastExpr:
		e.buf = append(e.buf, tagCast)
		if err := e.typ(x.To); err != nil {
			return err
		}
		return within(".value", e.expr(x.X, depth+1))
	case nil:
		return encodeErr("supply an expression", "expression is missing")
	default:
		return encodeErr("build expressions with the ir package's types", "unknown expression type %T", x)
	}
}

func (e *encoder) stmt(s Stmt, depth int) error {
	switch s := s.(type) {
	case LetStmt:
		e.buf = append(e.buf, tagLet)
		if err := e.str(s.Name); err != nil {
			return err
		}
		return within(".value", e.expr(s.Value, depth+1))
	case VarStmt:
		e.buf = append(e.buf, tagVar)
		if err := e.str(s.Name); err != nil {
			return err
		}
		if err := e.typ(s.Type); err != nil {
			return err
		}
		return within(".value", e.expr(s.Value, depth+1))
	case AssignStmt:
		e.buf = append(e.buf, tagAssign)
		if err := e.str(s.Name); err != nil {
			return err
		}
		return within(".value", e.expr(s.Value, depth+1))
	case StoreStmt:
		e.buf = append(e.buf, tagStore)
		if err := e.str(s.Target); err != nil {
			return err
		}
		if err := e.expr(s.Index, depth+1); err != nil {
			return within(".index", err)
		}
		return within(".value", e.expr(s.Value, depth+1))
	case IfStmt:
		e.buf = append(e.buf, tagIf)
		if err := e.expr(s.Cond, depth+1); err != nil {
			return within(".cond", err)
		}
		if err := e.block(s.Then, depth+1); err != nil {
			return within(".then", err)
		}
		return within(".else", e.block(s.Else, depth+1))
	case ForStmt:
		e.buf = append(e.buf, tagFor)
		if err := e.str(s.Var); err != nil {
			return err
		}
		if err := e.typ(s.Type); err != nil {
			return err
		}
		for _, part := range [...]struct {
			x    Expr
			name string
		}{{s.From, ".from"}, {s.To, ".to"}, {s.Step, ".step"}} {
			if err := e.expr(part.x, depth+1); err != nil {
				return within(part.name, err)
			}
		}
		return within(".body", e.block(s.Body, depth+1))
	case WhileStmt:
		e.buf = append(e.buf, tagWhile)
		if err := e.expr(s.Cond, depth+1); err != nil {
			return within(".cond", err)
		}
		return within(".body", e.block(s.Body, depth+1))
	case BreakStmt:
		e.buf = append(e.buf, tagBreak)
		return nil
	case BarrierStmt:
		e.buf = append(e.buf, tagBarrier)
		return nil
	case AtomicStmt:
		e.buf = append(e.buf, tagAtomic)
		if !encodeCode(e, wireAtomicOps, s.Op, v2Atomic) {
			return encodeErr("use one of ir.AtomicOps()", "atomic operation %d has no wire code", s.Op)
		}
		if err := e.str(s.Target); err != nil {
			return err
		}
		if err := e.expr(s.Index, depth+1); err != nil {
			return within(".index", err)
		}
		if err := e.expr(s.Value, depth+1); err != nil {
			return within(".value", err)
		}
		if s.Op == AtomicCompareExchange {
			if err := e.expr(s.Compare, depth+1); err != nil {
				return within(".compare", err)
			}
		} else if s.Compare != nil {
			return within(".compare", encodeErr("remove compare, or use the operation cas", "atomic %s takes no compare value", s.Op))
		}
		return e.str(s.Result)
	case ReturnStmt:
		e.buf = append(e.buf, tagReturn)
		return nil
	case ContinueStmt:
		e.v2 = true
		e.buf = append(e.buf, tagContinue)
		return nil
	case MatrixFillStmt, MatrixLoadStmt, MatrixStoreStmt, MatrixMMAStmt, MatrixConvertStmt:
		e.v3 = true
		return e.matrixStmt(s, depth)
	case nil:
		return encodeErr("remove the empty statement", "statement is nil")
	default:
		return encodeErr("build statements with the ir package's types", "unknown statement type %T", s)
	}
}

// DecodeError is a Decode failure: the byte offset where the problem starts, what
// was expected there, and what to do about it.
type DecodeError struct {
	Offset int
	Msg    string
	Fix    string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("ir: decode: byte %d: %s. Fix: %s", e.Offset, e.Msg, e.Fix)
}

const decodeFix = "pass the bytes that ir.Encode produced, unchanged"

// Minimum encoded sizes of list items, so a count is checked against the bytes left
// before anything is read.
const (
	minParamBytes   = 1 + 1 + 5 // empty name, type, literal
	minBufferBytes  = 1 + 1 + 1 + 1 + 1
	minSharedBytes  = 1 + 1 + 1
	minUniformBytes = 1 + 1
	minStmtBytes    = 1
)

// Decode reads a program from its canonical binary encoding. It accepts exactly the
// bytes Encode produces: wrong magic or version, truncation, a non-minimal or
// oversized varint, a count larger than the remaining bytes could hold, an unknown
// tag or enumeration byte, a string that is not UTF-8, nesting deeper than
// MaxNesting and trailing bytes are each a *DecodeError. Decode never panics, runs
// in time linear in len(data), and allocates in proportion to len(data). Empty lists
// decode as nil slices, as the Builder makes them. It does not run Validate.
func Decode(data []byte) (*Program, error) {
	d := &decoder{data: data}
	if len(data) < len(wireMagic) || string(data[:len(wireMagic)]) != wireMagic {
		head := data[:min(len(data), len(wireMagic))]
		return nil, &DecodeError{Offset: 0, Msg: fmt.Sprintf("expected the magic %q, got %q", wireMagic, head),
			Fix: "pass a program encoded by ir.Encode (the bytes start with KILNIR)"}
	}
	d.off = len(wireMagic)
	v, err := d.uvarint("format version")
	if err != nil {
		return nil, err
	}
	if v < FormatVersionV1 || v > FormatVersion {
		return nil, &DecodeError{Offset: len(wireMagic),
			Msg: fmt.Sprintf("format version %d, this build reads versions %d to %d", v, FormatVersionV1, FormatVersion),
			Fix: "build the host and the plugin with the same kiln IR format version (upgrade the older one)"}
	}
	d.version = int(v)
	p := &Program{}
	if p.Name, err = d.str("program name"); err != nil {
		return nil, err
	}
	for i := range p.WorkgroupSize {
		if p.WorkgroupSize[i], err = d.u32("workgroup size"); err != nil {
			return nil, err
		}
	}
	if d.version >= 2 {
		if p.SubgroupSize, err = d.u32("subgroup size"); err != nil {
			return nil, err
		}
	}
	if p.Params, err = decodeList(d, "params", minParamBytes, (*decoder).param); err != nil {
		return nil, err
	}
	if d.version >= 2 {
		if p.Uniforms, err = decodeList(d, "uniforms", minUniformBytes, (*decoder).uniform); err != nil {
			return nil, err
		}
	}
	if p.Buffers, err = decodeList(d, "buffers", minBufferBytes, (*decoder).buffer); err != nil {
		return nil, err
	}
	if p.Shared, err = decodeList(d, "shared arrays", minSharedBytes, (*decoder).shared); err != nil {
		return nil, err
	}
	if d.version >= 3 {
		if p.Matrices, err = decodeList(d, "matrices", minMatrixBytes, (*decoder).matrix); err != nil {
			return nil, err
		}
	}
	if p.Body, err = d.block(1); err != nil {
		return nil, err
	}
	if d.off != len(d.data) {
		return nil, d.failAt(d.off, "expected the end of the program, got %d more bytes", len(d.data)-d.off)
	}
	v2 := d.v2 || p.SubgroupSize != 0 || len(p.Uniforms) > 0
	v3 := d.v3 || len(p.Matrices) > 0
	switch {
	case d.version == 3 && !v3:
		canonical := FormatVersionV1
		if v2 {
			canonical = FormatVersionV11
		}
		return nil, &DecodeError{Offset: len(wireMagic),
			Msg: fmt.Sprintf("format version 3 for a program that uses nothing of IR v1.2; its canonical encoding is version %d", canonical),
			Fix: decodeFix}
	case d.version == 2 && !v2:
		return nil, &DecodeError{Offset: len(wireMagic),
			Msg: "format version 2 for a program that uses nothing of IR v1.1; its canonical encoding is version 1",
			Fix: decodeFix}
	}
	return p, nil
}

type decoder struct {
	data    []byte
	off     int
	version int
	v2      bool // something only version 2 and later carry was decoded
	v3      bool // something only version 3 carries was decoded
}

func (d *decoder) failAt(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Msg: fmt.Sprintf(format, args...), Fix: decodeFix}
}

func (d *decoder) next(what string) (byte, error) {
	if d.off >= len(d.data) {
		return 0, d.failAt(d.off, "expected %s, got the end of the input", what)
	}
	b := d.data[d.off]
	d.off++
	return b, nil
}

func (d *decoder) uvarint(what string) (uint64, error) {
	start := d.off
	var v uint64
	for i := 0; ; i++ {
		if d.off >= len(d.data) {
			return 0, d.failAt(start, "expected %s (a uvarint), got the end of the input", what)
		}
		b := d.data[d.off]
		d.off++
		if i == 9 && b > 1 {
			return 0, d.failAt(start, "expected %s (a uvarint), got one that overflows 64 bits", what)
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, d.failAt(start, "expected %s (a uvarint), got a non-minimal encoding", what)
			}
			return v, nil
		}
	}
}

func (d *decoder) u32(what string) (uint32, error) {
	start := d.off
	v, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	if v > math.MaxUint32 {
		return 0, d.failAt(start, "expected %s (at most %d), got %d", what, uint32(math.MaxUint32), v)
	}
	return uint32(v), nil
}

func (d *decoder) str(what string) (string, error) {
	start := d.off
	n, err := d.uvarint(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(len(d.data)-d.off) {
		return "", d.failAt(start, "expected %s of %d bytes, but only %d bytes are left", what, n, len(d.data)-d.off)
	}
	raw := d.data[d.off : d.off+int(n)]
	if !utf8.Valid(raw) {
		return "", d.failAt(start, "expected %s in UTF-8, got %q", what, raw)
	}
	d.off += int(n)
	return string(raw), nil
}

// decodeList reads a count and that many items. The count is checked against the
// bytes left before any item is read, and the slice grows only with items actually
// decoded, so nested lists cannot claim memory the input does not pay for.
func decodeList[T any](d *decoder, what string, minBytes int, item func(*decoder) (T, error)) ([]T, error) {
	n, err := d.count(what, minBytes)
	if err != nil {
		return nil, err
	}
	var out []T
	for i := 0; i < n; i++ {
		v, err := item(d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) count(what string, minBytes int) (int, error) {
	start := d.off
	n, err := d.uvarint("number of " + what)
	if err != nil {
		return 0, err
	}
	left := len(d.data) - d.off
	if n > uint64(left/minBytes) {
		return 0, d.failAt(start, "expected a number of %s that the %d bytes left can hold, got %d", what, left, n)
	}
	return int(n), nil
}

// decodeEnum reads one code of table t; codes from firstV2 on exist only in version 2.
func decodeEnum[T comparable](d *decoder, t wireTable[T], firstV2 byte, what string) (T, error) {
	start := d.off
	c, err := d.next(what)
	if err != nil {
		var zero T
		return zero, err
	}
	v, ok := t.value(c)
	if ok && c >= firstV2 {
		if d.version < 2 {
			ok = false
		}
		d.v2 = true
	}
	if !ok {
		var codes []string
		for _, w := range t {
			if w.code < firstV2 || d.version >= 2 {
				codes = append(codes, fmt.Sprintf("%#02x", w.code))
			}
		}
		var zero T
		return zero, d.failAt(start, "expected %s (one of %s), got %#02x", what, strings.Join(codes, " "), c)
	}
	return v, nil
}

// typ reads a type; f16 and bf16 exist only in version 3.
func (d *decoder) typ() (Type, error) {
	start := d.off
	c, err := d.next("a type")
	if err != nil {
		return 0, err
	}
	t, ok := wireTypes.value(c)
	if ok && t.Is16Bit() {
		ok = d.version >= 3
		d.v3 = true
	}
	if !ok {
		var codes []string
		for _, w := range wireTypes {
			if !w.v.Is16Bit() || d.version >= 3 {
				codes = append(codes, fmt.Sprintf("%#02x", w.code))
			}
		}
		return 0, d.failAt(start, "expected a type (one of %s), got %#02x", strings.Join(codes, " "), c)
	}
	return t, nil
}

func (d *decoder) uniform() (UniformDecl, error) {
	var u UniformDecl
	var err error
	if u.Name, err = d.str("uniform name"); err != nil {
		return u, err
	}
	u.Type, err = d.typ()
	return u, err
}

func (d *decoder) literal() (Literal, error) {
	t, err := d.typ()
	if err != nil {
		return Literal{}, err
	}
	if len(d.data)-d.off < 4 {
		return Literal{}, d.failAt(d.off, "expected 4 bytes of literal bits, got %d", len(d.data)-d.off)
	}
	bits := binary.LittleEndian.Uint32(d.data[d.off:])
	if t.Is16Bit() && bits > 0xffff {
		return Literal{}, d.failAt(d.off, "expected %s literal bits at most 0xffff, got %#x", t, bits)
	}
	d.off += 4
	return Literal{Type: t, Bits: bits}, nil
}

func (d *decoder) param() (ParamDecl, error) {
	var p ParamDecl
	var err error
	if p.Name, err = d.str("parameter name"); err != nil {
		return p, err
	}
	if p.Type, err = d.typ(); err != nil {
		return p, err
	}
	p.Default, err = d.literal()
	return p, err
}

func (d *decoder) buffer() (BufferDecl, error) {
	var b BufferDecl
	var err error
	if b.Name, err = d.str("buffer name"); err != nil {
		return b, err
	}
	if b.Binding, err = d.u32("buffer binding"); err != nil {
		return b, err
	}
	if b.Type, err = d.typ(); err != nil {
		return b, err
	}
	if b.Access, err = decodeEnum(d, wireAccesses, noV2, "a buffer access"); err != nil {
		return b, err
	}
	b.Count, err = d.u32("buffer count")
	return b, err
}

func (d *decoder) shared() (SharedDecl, error) {
	var s SharedDecl
	var err error
	if s.Name, err = d.str("shared array name"); err != nil {
		return s, err
	}
	if s.Type, err = d.typ(); err != nil {
		return s, err
	}
	s.Count, err = d.u32("shared array count")
	return s, err
}

func (d *decoder) block(depth int) ([]Stmt, error) {
	return decodeList(d, "statements", minStmtBytes, func(d *decoder) (Stmt, error) { return d.stmt(depth) })
}

// exprs reads n operands at depth into the pointed-to expressions.
func (d *decoder) exprs(depth int, dst ...*Expr) error {
	for _, p := range dst {
		x, err := d.expr(depth)
		if err != nil {
			return err
		}
		*p = x
	}
	return nil
}

func (d *decoder) expr(depth int) (Expr, error) {
	start := d.off
	if depth > MaxNesting {
		return nil, d.failAt(start, "expected expressions nested at most %d levels deep", MaxNesting)
	}
	tag, err := d.next("an expression tag")
	if err != nil {
		return nil, err
	}
	end := exprTagEnd
	if d.version < 2 {
		end = v2ExprTag
	}
	if tag < tagLiteral || tag >= end {
		return nil, d.failAt(start, "expected an expression tag (%#02x..%#02x), got %#02x", tagLiteral, end-1, tag)
	}
	if tag >= v2ExprTag {
		d.v2 = true
	}
	switch tag {
	case tagLiteral:
		l, err := d.literal()
		if err != nil {
			return nil, err
		}
		return l, nil
	case tagLocal:
		name, err := d.str("local name")
		if err != nil {
			return nil, err
		}
		return LocalRef{Name: name}, nil
	case tagParam:
		name, err := d.str("parameter name")
		if err != nil {
			return nil, err
		}
		return ParamRef{Name: name}, nil
	case tagBuiltin:
		k, err := decodeEnum(d, wireBuiltins, v2Builtin, "a builtin")
		if err != nil {
			return nil, err
		}
		axis, err := d.next("a builtin axis")
		if err != nil {
			return nil, err
		}
		return BuiltinRef{Kind: k, Axis: axis}, nil
	case tagLoad:
		var x LoadExpr
		if x.Target, err = d.str("load target"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.Index); err != nil {
			return nil, err
		}
		return x, nil
	case tagLen:
		name, err := d.str("len buffer")
		if err != nil {
			return nil, err
		}
		return LenExpr{Buffer: name}, nil
	case tagUnary:
		var x UnaryExpr
		if x.Op, err = decodeEnum(d, wireUnaryOps, v2Unary, "a unary operator"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.X); err != nil {
			return nil, err
		}
		return x, nil
	case tagBinary:
		var x BinaryExpr
		if x.Op, err = decodeEnum(d, wireBinaryOps, noV2, "a binary operator"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.X, &x.Y); err != nil {
			return nil, err
		}
		return x, nil
	case tagFma:
		var x FmaExpr
		if err := d.exprs(depth+1, &x.A, &x.B, &x.C); err != nil {
			return nil, err
		}
		return x, nil
	case tagSelect:
		var x SelectExpr
		if err := d.exprs(depth+1, &x.Cond, &x.A, &x.B); err != nil {
			return nil, err
		}
		return x, nil
	case tagCast:
		var x CastExpr
		if x.To, err = d.typ(); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.X); err != nil {
			return nil, err
		}
		return x, nil
	case tagUniform:
		name, err := d.str("uniform name")
		if err != nil {
			return nil, err
		}
		return UniformRef{Name: name}, nil
	case tagBitcast:
		var x BitcastExpr
		if x.To, err = d.typ(); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.X); err != nil {
			return nil, err
		}
		return x, nil
	case tagSubgroup:
		var x SubgroupExpr
		if x.Op, err = decodeEnum(d, wireSubgroupOps, v2Subgroup, "a subgroup operation"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &x.X); err != nil {
			return nil, err
		}
		if x.Op.HasLane() {
			if err := d.exprs(depth+1, &x.Lane); err != nil {
				return nil, err
			}
		}
		return x, nil
	}
	return nil, d.failAt(start, "expected an expression tag (%#02x..%#02x), got %#02x", tagLiteral, exprTagEnd-1, tag)
}

func (d *decoder) stmt(depth int) (Stmt, error) {
	start := d.off
	tag, err := d.next("a statement tag")
	if err != nil {
		return nil, err
	}
	end := stmtTagEnd
	switch d.version {
	case 1:
		end = v2StmtTag
	case 2:
		end = v3StmtTag
	}
	if tag < tagLet || tag >= end {
		return nil, d.failAt(start, "expected a statement tag (%#02x..%#02x), got %#02x", tagLet, end-1, tag)
	}
	if tag >= v3StmtTag {
		d.v3 = true
		return d.matrixStmt(tag, depth)
	}
	if tag >= v2StmtTag {
		d.v2 = true
	}
	switch tag {
	case tagLet:
		var s LetStmt
		if s.Name, err = d.str("let name"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Value); err != nil {
			return nil, err
		}
		return s, nil
	case tagVar:
		var s VarStmt
		if s.Name, err = d.str("var name"); err != nil {
			return nil, err
		}
		if s.Type, err = d.typ(); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Value); err != nil {
			return nil, err
		}
		return s, nil
	case tagAssign:
		var s AssignStmt
		if s.Name, err = d.str("assign name"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Value); err != nil {
			return nil, err
		}
		return s, nil
	case tagStore:
		var s StoreStmt
		if s.Target, err = d.str("store target"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Index, &s.Value); err != nil {
			return nil, err
		}
		return s, nil
	case tagIf:
		var s IfStmt
		if err := d.exprs(depth+1, &s.Cond); err != nil {
			return nil, err
		}
		if s.Then, err = d.block(depth + 1); err != nil {
			return nil, err
		}
		if s.Else, err = d.block(depth + 1); err != nil {
			return nil, err
		}
		return s, nil
	case tagFor:
		var s ForStmt
		if s.Var, err = d.str("for variable"); err != nil {
			return nil, err
		}
		if s.Type, err = d.typ(); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.From, &s.To, &s.Step); err != nil {
			return nil, err
		}
		if s.Body, err = d.block(depth + 1); err != nil {
			return nil, err
		}
		return s, nil
	case tagWhile:
		var s WhileStmt
		if err := d.exprs(depth+1, &s.Cond); err != nil {
			return nil, err
		}
		if s.Body, err = d.block(depth + 1); err != nil {
			return nil, err
		}
		return s, nil
	case tagBreak:
		return BreakStmt{}, nil
	case tagBarrier:
		return BarrierStmt{}, nil
	case tagAtomic:
		var s AtomicStmt
		if s.Op, err = decodeEnum(d, wireAtomicOps, v2Atomic, "an atomic operation"); err != nil {
			return nil, err
		}
		if s.Target, err = d.str("atomic target"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Index, &s.Value); err != nil {
			return nil, err
		}
		if s.Op == AtomicCompareExchange {
			if err := d.exprs(depth+1, &s.Compare); err != nil {
				return nil, err
			}
		}
		if s.Result, err = d.str("atomic result name"); err != nil {
			return nil, err
		}
		return s, nil
	case tagReturn:
		return ReturnStmt{}, nil
	case tagContinue:
		return ContinueStmt{}, nil
	}
	return nil, d.failAt(start, "expected a statement tag (%#02x..%#02x), got %#02x", tagLet, stmtTagEnd-1, tag)
}
