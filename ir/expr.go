package ir

import (
	"math"

	"github.com/kiln-dev/kiln/ir/half"
)

// Expr is an expression node. The concrete types are Literal, LocalRef, ParamRef,
// BuiltinRef, LoadExpr, LenExpr, UnaryExpr, BinaryExpr, FmaExpr, SelectExpr and
// CastExpr, and since IR v1.1 UniformRef, BitcastExpr and SubgroupExpr (values, not
// pointers); no other type implements Expr.
type Expr interface{ isExpr() }

// LocalRef reads a local declared by let, var, for or an atomic's result.
type LocalRef struct{ Name string }

// ParamRef reads a specialization constant.
type ParamRef struct{ Name string }

// UniformRef reads a uniform, a scalar supplied with each dispatch (IR v1.1).
type UniformRef struct{ Name string }

// BuiltinRef reads a per-invocation builtin. Its type is u32. The builtins of IR v1
// have three axes and Axis selects one (0..2); the subgroup builtins of IR v1.1 are
// scalars and Axis is 0 (see BuiltinKind.HasAxis).
type BuiltinRef struct {
	Kind BuiltinKind
	Axis uint8
}

// LoadExpr reads element Index (u32) of a buffer or shared array. Out of bounds gives 0.
type LoadExpr struct {
	Target string
	Index  Expr
}

// LenExpr is the element count of a buffer (u32).
type LenExpr struct{ Buffer string }

// UnaryExpr applies a unary operator.
type UnaryExpr struct {
	Op UnaryOp
	X  Expr
}

// BinaryExpr applies a binary operator; both operands have the same type.
type BinaryExpr struct {
	Op   BinaryOp
	X, Y Expr
}

// FmaExpr is the fused multiply-add A*B+C on f32.
type FmaExpr struct{ A, B, C Expr }

// SelectExpr is Cond ? A : B; Cond is bool, A and B have the same type.
type SelectExpr struct{ Cond, A, B Expr }

// CastExpr converts X to type To with the cast rules of docs/design.md, "IR v1".
type CastExpr struct {
	To Type
	X  Expr
}

// BitcastExpr reinterprets the 32 bits of X (i32, u32 or f32) as type To (another of
// i32, u32 and f32), keeping every bit, NaN payloads included (IR v1.1).
type BitcastExpr struct {
	To Type
	X  Expr
}

// SubgroupExpr is a subgroup operation (IR v1.1): a reduction of X over the lanes
// of the invocation's subgroup (add, min, max), or the value of X in lane Lane
// (shuffle, broadcast). Lane is a u32 and is set exactly for the operations whose
// HasLane is true. Every lane of a subgroup must reach the operation together; see
// SubgroupOp for the semantics of each operation.
type SubgroupExpr struct {
	Op   SubgroupOp
	X    Expr
	Lane Expr
}

func (Literal) isExpr()    {}
func (LocalRef) isExpr()   {}
func (ParamRef) isExpr()   {}
func (BuiltinRef) isExpr() {}
func (LoadExpr) isExpr()   {}
func (LenExpr) isExpr()    {}
func (UnaryExpr) isExpr()  {}
func (BinaryExpr) isExpr() {}
func (FmaExpr) isExpr()    {}
func (SelectExpr) isExpr() {}
func (CastExpr) isExpr()   {}

func (UniformRef) isExpr()   {}
func (BitcastExpr) isExpr()  {}
func (SubgroupExpr) isExpr() {}

// BuiltinKind names a builtin value.
type BuiltinKind uint8

// The builtins, all of type u32. The five of IR v1 have three axes. The two of IR
// v1.1 are scalars: SubgroupSizeBuiltin is the number of lanes of a subgroup as the
// program runs (the program's SubgroupSize when it sets one), and
// SubgroupInvocationIDBuiltin is the invocation's lane in its subgroup, from 0 to
// the subgroup size - 1. Lanes are assigned by local invocation index (see
// docs/design.md, "IR v1.1").
const (
	GlobalIDBuiltin BuiltinKind = iota + 1
	LocalIDBuiltin
	WorkgroupIDBuiltin
	NumWorkgroupsBuiltin
	WorkgroupSizeBuiltin
	SubgroupSizeBuiltin
	SubgroupInvocationIDBuiltin
	builtinEnd
)

var builtinNames = [...]string{
	GlobalIDBuiltin:             "global_id",
	LocalIDBuiltin:              "local_id",
	WorkgroupIDBuiltin:          "workgroup_id",
	NumWorkgroupsBuiltin:        "num_workgroups",
	WorkgroupSizeBuiltin:        "workgroup_size",
	SubgroupSizeBuiltin:         "subgroup_size",
	SubgroupInvocationIDBuiltin: "subgroup_invocation_id",
}

// HasAxis reports whether the builtin has three axes (the builtins of IR v1); the
// subgroup builtins are scalars.
func (k BuiltinKind) HasAxis() bool { return k >= GlobalIDBuiltin && k <= WorkgroupSizeBuiltin }

// Builtins lists every builtin.
func Builtins() []BuiltinKind { return enumValues(builtinNames[:], GlobalIDBuiltin) }

// String returns the builtin's JSON name.
func (k BuiltinKind) String() string { return enumString(builtinNames[:], GlobalIDBuiltin, k) }

// Valid reports whether k is a defined builtin.
func (k BuiltinKind) Valid() bool { return k > 0 && k < builtinEnd }

// ParseBuiltin turns a builtin name into a BuiltinKind.
func ParseBuiltin(name string) (BuiltinKind, bool) {
	return parseEnum(builtinNames[:], GlobalIDBuiltin, name)
}

// UnaryOp is a unary operator.
type UnaryOp uint8

// The unary operators; the result has the operand's type. neg: i32, u32 (wrapping),
// f32. not: bool (logical), i32, u32 (bitwise). abs: i32 (abs(MIN) = MIN), f32. clz
// and popcount (IR v1.1): i32, u32; clz counts the zero bits above the highest set
// bit of the 32-bit pattern (clz(0) = 32, clz of a negative i32 = 0), popcount
// counts the set bits (popcount(-1) = 32). The rest: f32 only; floor, ceil, trunc
// (toward zero) and round (to nearest, ties to even; IR v1.1) are exact, keep the
// sign of zero (trunc(-0.5) = -0) and return NaN and infinities unchanged.
const (
	OpNeg UnaryOp = iota + 1
	OpNot
	OpAbs
	OpSqrt
	OpExp
	OpLog
	OpSin
	OpCos
	OpFloor
	OpCeil
	OpTrunc
	OpRound
	OpClz
	OpPopcount
	unaryEnd
)

var unaryNames = [...]string{
	OpNeg: "neg", OpNot: "not", OpAbs: "abs", OpSqrt: "sqrt", OpExp: "exp", OpLog: "log",
	OpSin: "sin", OpCos: "cos", OpFloor: "floor", OpCeil: "ceil",
	OpTrunc: "trunc", OpRound: "round", OpClz: "clz", OpPopcount: "popcount",
}

// String returns the operator's JSON name.
func (o UnaryOp) String() string { return enumString(unaryNames[:], OpNeg, o) }

// Valid reports whether o is a defined unary operator.
func (o UnaryOp) Valid() bool { return o > 0 && o < unaryEnd }

// UnaryOps lists every unary operator.
func UnaryOps() []UnaryOp { return enumValues(unaryNames[:], OpNeg) }

// ParseUnaryOp turns an operator name into a UnaryOp.
func ParseUnaryOp(name string) (UnaryOp, bool) { return parseEnum(unaryNames[:], OpNeg, name) }

// BinaryOp is a binary operator. Both operands always have the same type.
type BinaryOp uint8

// The binary operators. add sub mul div min max: i32, u32, f32. rem and or xor shl
// shr: i32, u32. eq ne: any type, result bool. lt le gt ge: i32, u32, f32, result
// bool. land lor: bool.
const (
	OpAdd BinaryOp = iota + 1
	OpSub
	OpMul
	OpDiv
	OpRem
	OpMin
	OpMax
	OpAnd
	OpOr
	OpXor
	OpShl
	OpShr
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpLAnd
	OpLOr
	binaryEnd
)

var binaryNames = [...]string{
	OpAdd: "add", OpSub: "sub", OpMul: "mul", OpDiv: "div", OpRem: "rem", OpMin: "min", OpMax: "max",
	OpAnd: "and", OpOr: "or", OpXor: "xor", OpShl: "shl", OpShr: "shr", OpEq: "eq", OpNe: "ne",
	OpLt: "lt", OpLe: "le", OpGt: "gt", OpGe: "ge", OpLAnd: "land", OpLOr: "lor",
}

// String returns the operator's JSON name.
func (o BinaryOp) String() string { return enumString(binaryNames[:], OpAdd, o) }

// Valid reports whether o is a defined binary operator.
func (o BinaryOp) Valid() bool { return o > 0 && o < binaryEnd }

// IsComparison reports whether o yields bool from two operands of another type.
func (o BinaryOp) IsComparison() bool { return o >= OpEq && o <= OpGe }

// BinaryOps lists every binary operator.
func BinaryOps() []BinaryOp { return enumValues(binaryNames[:], OpAdd) }

// ParseBinaryOp turns an operator name into a BinaryOp.
func ParseBinaryOp(name string) (BinaryOp, bool) { return parseEnum(binaryNames[:], OpAdd, name) }

// Expression constructors. They build nodes only; Validate checks the types.

// LitF32 is an f32 literal.
func LitF32(v float32) Literal { return Literal{Type: F32, Bits: math.Float32bits(v)} }

// LitF16 returns an f16 literal: v rounded to binary16, ties to even (IR v1.2).
func LitF16(v float32) Literal { return Literal{Type: F16, Bits: uint32(half.NewFloat16(v))} }

// LitBF16 returns a bf16 literal: v rounded to bfloat16, ties to even (IR v1.2).
func LitBF16(v float32) Literal { return Literal{Type: BF16, Bits: uint32(half.NewBFloat16(v))} }

// LitU32 is a u32 literal.
func LitU32(v uint32) Literal { return Literal{Type: U32, Bits: v} }

// LitI32 is an i32 literal.
func LitI32(v int32) Literal { return Literal{Type: I32, Bits: uint32(v)} }

// LitBool is a bool literal.
func LitBool(v bool) Literal {
	if v {
		return Literal{Type: Bool, Bits: 1}
	}
	return Literal{Type: Bool}
}

// Local reads a local (let, var, for variable or atomic result) by name.
func Local(name string) Expr { return LocalRef{Name: name} }

// Param reads a specialization constant by name.
func Param(name string) Expr { return ParamRef{Name: name} }

// GlobalID is the invocation's global id on axis (0..2).
func GlobalID(axis uint8) Expr { return BuiltinRef{GlobalIDBuiltin, axis} }

// LocalID is the invocation's id within its workgroup on axis.
func LocalID(axis uint8) Expr { return BuiltinRef{LocalIDBuiltin, axis} }

// WorkgroupID is the workgroup's id on axis.
func WorkgroupID(axis uint8) Expr { return BuiltinRef{WorkgroupIDBuiltin, axis} }

// NumWorkgroups is the number of workgroups dispatched on axis.
func NumWorkgroups(axis uint8) Expr { return BuiltinRef{NumWorkgroupsBuiltin, axis} }

// WorkgroupSize is the workgroup size on axis as dispatched (after any override).
func WorkgroupSize(axis uint8) Expr { return BuiltinRef{WorkgroupSizeBuiltin, axis} }

// SubgroupSize is the number of lanes of a subgroup as the program runs (IR v1.1).
func SubgroupSize() Expr { return BuiltinRef{Kind: SubgroupSizeBuiltin} }

// SubgroupInvocationID is the invocation's lane in its subgroup (IR v1.1).
func SubgroupInvocationID() Expr { return BuiltinRef{Kind: SubgroupInvocationIDBuiltin} }

// Uniform reads a uniform by name (IR v1.1).
func Uniform(name string) Expr { return UniformRef{Name: name} }

// Bitcast reinterprets the bits of x as type t (IR v1.1).
func Bitcast(t Type, x Expr) Expr { return BitcastExpr{To: t, X: x} }

// SubgroupAdd is the sum of x over the lanes of the subgroup (IR v1.1).
func SubgroupAdd(x Expr) Expr { return SubgroupExpr{Op: SubgroupOpAdd, X: x} }

// SubgroupMin is the minimum of x over the lanes of the subgroup (IR v1.1).
func SubgroupMin(x Expr) Expr { return SubgroupExpr{Op: SubgroupOpMin, X: x} }

// SubgroupMax is the maximum of x over the lanes of the subgroup (IR v1.1).
func SubgroupMax(x Expr) Expr { return SubgroupExpr{Op: SubgroupOpMax, X: x} }

// SubgroupShuffle is x as lane lane of the subgroup holds it (IR v1.1).
func SubgroupShuffle(x, lane Expr) Expr { return SubgroupExpr{Op: SubgroupOpShuffle, X: x, Lane: lane} }

// SubgroupBroadcast is x as lane lane of the subgroup holds it, where lane is the
// same on every lane (IR v1.1).
func SubgroupBroadcast(x, lane Expr) Expr {
	return SubgroupExpr{Op: SubgroupOpBroadcast, X: x, Lane: lane}
}

// Load reads target[index] from a buffer or shared array; out of bounds gives 0.
func Load(target string, index Expr) Expr { return LoadExpr{Target: target, Index: index} }

// Len is the element count of a buffer, as u32.
func Len(buffer string) Expr { return LenExpr{Buffer: buffer} }

// Fma is the fused a*b+c on f32.
func Fma(a, b, c Expr) Expr { return FmaExpr{A: a, B: b, C: c} }

// Select is cond ? a : b.
func Select(cond, a, b Expr) Expr { return SelectExpr{Cond: cond, A: a, B: b} }

// Cast converts x to t (see docs/design.md, "IR v1", for the rules).
func Cast(t Type, x Expr) Expr { return CastExpr{To: t, X: x} }

// Neg is -x.
func Neg(x Expr) Expr { return UnaryExpr{OpNeg, x} }

// Not is logical not on bool, bitwise not on integers.
func Not(x Expr) Expr { return UnaryExpr{OpNot, x} }

// Abs is |x|.
func Abs(x Expr) Expr { return UnaryExpr{OpAbs, x} }

// Sqrt is the square root of x.
func Sqrt(x Expr) Expr { return UnaryExpr{OpSqrt, x} }

// Exp is e to the power x.
func Exp(x Expr) Expr { return UnaryExpr{OpExp, x} }

// Log is the natural logarithm of x.
func Log(x Expr) Expr { return UnaryExpr{OpLog, x} }

// Sin is the sine of x (radians).
func Sin(x Expr) Expr { return UnaryExpr{OpSin, x} }

// Cos is the cosine of x (radians).
func Cos(x Expr) Expr { return UnaryExpr{OpCos, x} }

// Floor rounds x toward negative infinity.
func Floor(x Expr) Expr { return UnaryExpr{OpFloor, x} }

// Ceil rounds x toward positive infinity.
func Ceil(x Expr) Expr { return UnaryExpr{OpCeil, x} }

// Trunc rounds x toward zero (IR v1.1).
func Trunc(x Expr) Expr { return UnaryExpr{OpTrunc, x} }

// Round rounds x to the nearest integer, ties to even (IR v1.1).
func Round(x Expr) Expr { return UnaryExpr{OpRound, x} }

// Clz counts the leading zero bits of x (IR v1.1); Clz of 0 is 32.
func Clz(x Expr) Expr { return UnaryExpr{OpClz, x} }

// Popcount counts the set bits of x (IR v1.1).
func Popcount(x Expr) Expr { return UnaryExpr{OpPopcount, x} }

// Add is x + y (wrapping on integers).
func Add(x, y Expr) Expr { return BinaryExpr{OpAdd, x, y} }

// Sub is x - y (wrapping on integers).
func Sub(x, y Expr) Expr { return BinaryExpr{OpSub, x, y} }

// Mul is x * y (wrapping on integers).
func Mul(x, y Expr) Expr { return BinaryExpr{OpMul, x, y} }

// Div is x / y; integer division by zero gives 0.
func Div(x, y Expr) Expr { return BinaryExpr{OpDiv, x, y} }

// Rem is x % y on integers, with the sign of x; x % 0 gives 0.
func Rem(x, y Expr) Expr { return BinaryExpr{OpRem, x, y} }

// Min is the smaller of x and y; on f32 a NaN operand yields the other one.
func Min(x, y Expr) Expr { return BinaryExpr{OpMin, x, y} }

// Max is the larger of x and y; on f32 a NaN operand yields the other one.
func Max(x, y Expr) Expr { return BinaryExpr{OpMax, x, y} }

// And is bitwise and.
func And(x, y Expr) Expr { return BinaryExpr{OpAnd, x, y} }

// Or is bitwise or.
func Or(x, y Expr) Expr { return BinaryExpr{OpOr, x, y} }

// Xor is bitwise exclusive or.
func Xor(x, y Expr) Expr { return BinaryExpr{OpXor, x, y} }

// Shl is x << (y mod 32).
func Shl(x, y Expr) Expr { return BinaryExpr{OpShl, x, y} }

// Shr is x >> (y mod 32): arithmetic on i32, logical on u32.
func Shr(x, y Expr) Expr { return BinaryExpr{OpShr, x, y} }

// Eq is x == y.
func Eq(x, y Expr) Expr { return BinaryExpr{OpEq, x, y} }

// Ne is x != y (true when either f32 operand is NaN).
func Ne(x, y Expr) Expr { return BinaryExpr{OpNe, x, y} }

// Lt is x < y.
func Lt(x, y Expr) Expr { return BinaryExpr{OpLt, x, y} }

// Le is x <= y.
func Le(x, y Expr) Expr { return BinaryExpr{OpLe, x, y} }

// Gt is x > y.
func Gt(x, y Expr) Expr { return BinaryExpr{OpGt, x, y} }

// Ge is x >= y.
func Ge(x, y Expr) Expr { return BinaryExpr{OpGe, x, y} }

// LAnd is logical and of two bools.
func LAnd(x, y Expr) Expr { return BinaryExpr{OpLAnd, x, y} }

// LOr is logical or of two bools.
func LOr(x, y Expr) Expr { return BinaryExpr{OpLOr, x, y} }

// SubgroupOp is a subgroup operation (IR v1.1). See docs/design.md, "IR v1.1".
type SubgroupOp uint8

// The subgroup operations. Each is evaluated by all the lanes of a subgroup together
// (a program must reach it in subgroup-uniform control flow, as it reaches barriers)
// and its result has the type of X.
//
//   - SubgroupOpAdd: i32, u32, f32. The sum over all lanes; integers wrap and are
//     exact. On f32 the reference adds in a pairwise tree (lanes 2i and 2i+1 first,
//     then pairs of those sums, and so on), so every lane gets the same value; a
//     backend may add in another order and conforms when its result lies within
//     (S-1)·2^-23·Σ|x| of the reference's (S the subgroup size), with NaN for NaN.
//   - SubgroupOpMin, SubgroupOpMax: i32, u32, f32, with the rules of the min and max
//     operators (a NaN lane is ignored unless every lane is NaN; -0 < +0), so the
//     result is exact and independent of order.
//   - SubgroupOpShuffle: any type. The value of X in lane Lane of the same subgroup;
//     a Lane at or above the subgroup size gives 0 (false for bool).
//   - SubgroupOpBroadcast: as shuffle, but Lane must be the same on every lane of the
//     subgroup (backends may then use a cheaper broadcast); the reference reports a
//     Lane that differs between lanes as an error.
const (
	SubgroupOpAdd SubgroupOp = iota + 1
	SubgroupOpMin
	SubgroupOpMax
	SubgroupOpShuffle
	SubgroupOpBroadcast
	subgroupEnd
)

var subgroupNames = [...]string{
	SubgroupOpAdd: "subgroup_add", SubgroupOpMin: "subgroup_min", SubgroupOpMax: "subgroup_max",
	SubgroupOpShuffle: "subgroup_shuffle", SubgroupOpBroadcast: "subgroup_broadcast",
}

// String returns the operation's JSON name ("subgroup_add").
func (o SubgroupOp) String() string { return enumString(subgroupNames[:], SubgroupOpAdd, o) }

// Valid reports whether o is a defined subgroup operation.
func (o SubgroupOp) Valid() bool { return o > 0 && o < subgroupEnd }

// HasLane reports whether the operation takes a lane operand (shuffle, broadcast).
func (o SubgroupOp) HasLane() bool { return o == SubgroupOpShuffle || o == SubgroupOpBroadcast }

// SubgroupOps lists every subgroup operation.
func SubgroupOps() []SubgroupOp { return enumValues(subgroupNames[:], SubgroupOpAdd) }

// ParseSubgroupOp turns an operation's JSON name ("subgroup_add") into a SubgroupOp.
func ParseSubgroupOp(name string) (SubgroupOp, bool) {
	return parseEnum(subgroupNames[:], SubgroupOpAdd, name)
}
