package spirv

import "github.com/kiln-dev/kiln/ir"

// The lookup tables of the emitter, built once when the package loads and only
// read afterwards.

// subgroupClassNames names each subgroup operation class in errors.
var subgroupClassNames = map[SubgroupFeatures]string{
	SubgroupBasic: "basic", SubgroupArithmetic: "arithmetic", SubgroupBallot: "ballot", SubgroupShuffle: "shuffle",
}

// subgroupClassCaps is the capability each subgroup class beyond basic needs.
var subgroupClassCaps = map[SubgroupFeatures]uint32{
	SubgroupArithmetic: capabilityGroupNonUniformArithmetic,
	SubgroupBallot:     capabilityGroupNonUniformBallot,
	SubgroupShuffle:    capabilityGroupNonUniformShuffle,
}

// f32UnaryExt is the GLSL.std.450 instruction of each f32 unary operator that is
// one.
var f32UnaryExt = map[ir.UnaryOp]uint32{
	ir.OpSqrt: glslSqrt, ir.OpExp: glslExp, ir.OpLog: glslLog, ir.OpSin: glslSin,
	ir.OpCos: glslCos, ir.OpFloor: glslFloor, ir.OpCeil: glslCeil,
	ir.OpTrunc: glslTrunc, ir.OpRound: glslRoundEven,
}

// boolBinary is the opcode of each bool binary operator.
var boolBinary = map[ir.BinaryOp]uint32{
	ir.OpEq: opLogicalEqual, ir.OpNe: opLogicalNotEqual, ir.OpLAnd: opLogicalAnd, ir.OpLOr: opLogicalOr,
}

// intBinary is the opcode of each integer operator that is one instruction for
// i32 and u32 alike.
var intBinary = map[ir.BinaryOp]uint32{
	ir.OpAdd: opIAdd, ir.OpSub: opISub, ir.OpMul: opIMul,
	ir.OpAnd: opBitwiseAnd, ir.OpOr: opBitwiseOr, ir.OpXor: opBitwiseXor,
}

// intCompare is the opcode of each integer comparison: {u32, i32}.
var intCompare = map[ir.BinaryOp][2]uint32{
	ir.OpEq: {opIEqual, opIEqual}, ir.OpNe: {opINotEqual, opINotEqual},
	ir.OpLt: {opULessThan, opSLessThan}, ir.OpLe: {opULessThanEqual, opSLessThanEqual},
	ir.OpGt: {opUGreaterThan, opSGreaterThan}, ir.OpGe: {opUGreaterThanEqual, opSGreaterThanEqual},
}

// f32Arith is the opcode of the f32 operators that are one instruction.
var f32Arith = map[ir.BinaryOp]uint32{ir.OpAdd: opFAdd, ir.OpSub: opFSub, ir.OpMul: opFMul}

// f32Compare is the opcode of each f32 comparison: ordered, except ne.
var f32Compare = map[ir.BinaryOp]uint32{
	ir.OpEq: opFOrdEqual, ir.OpNe: opFUnordNotEqual, ir.OpLt: opFOrdLessThan,
	ir.OpLe: opFOrdLessThanEqual, ir.OpGt: opFOrdGreaterThan, ir.OpGe: opFOrdGreaterThanEqual,
}

// subgroupIntReduce is the opcode of each integer subgroup reduction: {u32, i32}.
var subgroupIntReduce = map[ir.SubgroupOp][2]uint32{
	ir.SubgroupOpAdd: {opGroupNonUniformIAdd, opGroupNonUniformIAdd},
	ir.SubgroupOpMin: {opGroupNonUniformUMin, opGroupNonUniformSMin},
	ir.SubgroupOpMax: {opGroupNonUniformUMax, opGroupNonUniformSMax},
}
