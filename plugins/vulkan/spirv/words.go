package spirv

// The numbers of the SPIR-V specification (unified, version 1.3 and earlier) and of
// the GLSL.std.450 extended instruction set that the emitter uses. Only what the
// emitter writes is listed.

// Module header.
const (
	magic      = 0x07230203
	version13  = 0x00010300 // SPIR-V 1.3: the version Vulkan 1.1 requires every driver to accept
	generator  = 0          // no registered generator id
	headerSize = 5
)

// Opcodes.
const (
	opName                  = 5
	opExtension             = 10
	opExtInstImport         = 11
	opExtInst               = 12
	opMemoryModel           = 14
	opEntryPoint            = 15
	opExecutionMode         = 16
	opCapability            = 17
	opTypeVoid              = 19
	opTypeBool              = 20
	opTypeInt               = 21
	opTypeFloat             = 22
	opTypeVector            = 23
	opTypeArray             = 28
	opTypeRuntimeArray      = 29
	opTypeStruct            = 30
	opTypePointer           = 32
	opTypeFunction          = 33
	opConstantTrue          = 41
	opConstantFalse         = 42
	opConstant              = 43
	opSpecConstantTrue      = 48
	opSpecConstantFalse     = 49
	opSpecConstant          = 50
	opSpecConstantComposite = 51
	opFunction              = 54
	opFunctionEnd           = 56
	opVariable              = 59
	opLoad                  = 61
	opStore                 = 62
	opAccessChain           = 65
	opDecorate              = 71
	opMemberDecorate        = 72
	opCompositeExtract      = 81
	opConvertFToU           = 109
	opConvertFToS           = 110
	opConvertSToF           = 111
	opConvertUToF           = 112
	opBitcast               = 124
	opSNegate               = 126
	opIAdd                  = 128
	opFAdd                  = 129
	opISub                  = 130
	opFSub                  = 131
	opIMul                  = 132
	opFMul                  = 133
	opUDiv                  = 134
	opFDiv                  = 136
	opUMod                  = 137
	opLogicalEqual          = 164
	opLogicalNotEqual       = 165
	opLogicalOr             = 166
	opLogicalAnd            = 167
	opLogicalNot            = 168
	opSelect                = 169
	opIEqual                = 170
	opINotEqual             = 171
	opUGreaterThan          = 172
	opSGreaterThan          = 173
	opUGreaterThanEqual     = 174
	opSGreaterThanEqual     = 175
	opULessThan             = 176
	opSLessThan             = 177
	opULessThanEqual        = 178
	opSLessThanEqual        = 179
	opFOrdEqual             = 180
	opFUnordNotEqual        = 183
	opFOrdLessThan          = 184
	opFOrdGreaterThan       = 186
	opFOrdLessThanEqual     = 188
	opFOrdGreaterThanEqual  = 190
	opShiftRightLogical     = 194
	opShiftRightArithmetic  = 195
	opShiftLeftLogical      = 196
	opBitwiseOr             = 197
	opBitwiseXor            = 198
	opBitwiseAnd            = 199
	opNot                   = 200
	opBitCount              = 205
	opControlBarrier        = 224
	opAtomicExchange        = 229
	opAtomicCompareExchange = 230
	opAtomicIAdd            = 234
	opAtomicSMin            = 236
	opAtomicUMin            = 237
	opAtomicSMax            = 238
	opAtomicUMax            = 239
	opAtomicAnd             = 240
	opAtomicOr              = 241
	opAtomicXor             = 242
	opPhi                   = 245
	opLoopMerge             = 246
	opSelectionMerge        = 247
	opLabel                 = 248
	opBranch                = 249
	opBranchConditional     = 250
	opReturn                = 253
	opUnreachable           = 255

	opGroupNonUniformBroadcast = 337
	opGroupNonUniformShuffle   = 345
	opGroupNonUniformIAdd      = 349
	opGroupNonUniformFAdd      = 350
	opGroupNonUniformSMin      = 353
	opGroupNonUniformUMin      = 354
	opGroupNonUniformSMax      = 356
	opGroupNonUniformUMax      = 357
	groupOperationReduce       = 0
	scopeSubgroup              = 3

	capabilityShader                         = 1
	capabilityGroupNonUniform                = 61
	capabilityGroupNonUniformArithmetic      = 63
	capabilityGroupNonUniformBallot          = 64
	capabilityGroupNonUniformShuffle         = 65
	capabilitySignedZeroInfNanPreserve       = 4466
	executionModeSignedZeroInfNanPreserve    = 4461
	capabilityDenormPreserve                 = 4464
	executionModeDenormPreserve              = 4459
	builtInSubgroupSize                      = 36
	builtInSubgroupLocalInvocationID         = 41
	addressingLogical                        = 0
	addressingPhysicalStorageBuffer64        = 5348
	capabilityPhysicalStorageBufferAddresses = 5347
	storagePhysicalStorageBuffer             = 5349
	memoryAccessAligned                      = 0x2
	memoryModelGLSL450                       = 1
	executionModelGLCompute                  = 5
	executionModeLocalSize                   = 17
	functionControlNone                      = 0
	selectionControlNone                     = 0
	loopControlNone                          = 0
	loopControlUnroll                        = 0x1
	decorationSpecID                         = 1
	decorationBlock                          = 2
	decorationArrayStride                    = 6
	decorationBuiltIn                        = 11
	decorationRestrict                       = 19
	decorationNonWritable                    = 24
	decorationNonReadable                    = 25
	decorationCoherent                       = 23
	decorationBinding                        = 33
	decorationDescriptorSet                  = 34
	decorationOffset                         = 35
	decorationNoContraction                  = 42
	builtInWorkgroupID                       = 26
	builtInLocalInvocationID                 = 27
	builtInNumWorkgroups                     = 24
	builtInGlobalInvocationID                = 28
	storageInput                             = 1
	storageWorkgroup                         = 4
	storageFunction                          = 7
	storagePushConstant                      = 9
	storageStorageBuffer                     = 12
	scopeDevice                              = 1
	scopeWorkgroup                           = 2
	semanticsNone                            = 0
	semanticsAcquireRelease                  = 0x8
	semanticsUniformMemory                   = 0x40
	semanticsWorkgroupMemory                 = 0x100
)

// GLSL.std.450 extended instructions.
const (
	glslRoundEven = 2
	glslTrunc     = 3
	glslFloor     = 8
	glslCeil      = 9
	glslSin       = 13
	glslCos       = 14
	glslExp       = 27
	glslLog       = 28
	glslSqrt      = 31
	glslUMin      = 38
	glslSMin      = 39
	glslUMax      = 41
	glslSMax      = 42
	glslFma       = 50
	glslFindUMsb  = 75
)

// appendInst appends one instruction: the word count and opcode, then the operands.
func appendInst(dst []uint32, op uint32, operands ...uint32) []uint32 {
	dst = append(dst, uint32(len(operands)+1)<<16|op)
	return append(dst, operands...)
}

// stringWords encodes s as a SPIR-V literal string: UTF-8 bytes, nul-terminated,
// padded with zeros to whole words, packed little-endian into each word.
func stringWords(s string) []uint32 {
	out := make([]uint32, len(s)/4+1)
	for i := 0; i < len(s); i++ {
		out[i/4] |= uint32(s[i]) << (8 * (i % 4))
	}
	return out
}

// isAtomic reports whether opcode is one of the atomic instructions (OpAtomicLoad
// through OpAtomicXor).
func isAtomic(opcode uint32) bool { return opcode >= 227 && opcode <= opAtomicXor }
