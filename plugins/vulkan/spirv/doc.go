// Package spirv compiles an IR program (v1, v1.1 and v1.2) to a SPIR-V 1.3 compute
// shader for the Vulkan backend (Vulkan 1.1 and later; every module passes
// `spirv-val --target-env vulkan1.1`, except those with cooperative matrices,
// which Debian's validator predates). EmitFor takes a Target, what the device
// offers (subgroup operation classes, float controls, f16 arithmetic and 16-bit
// storage, workgroup memory, cooperative matrices) and how the pipeline runs
// (workgroup size, bindings reached through buffer device addresses, disjoint
// bindings). See docs/design.md, "Vulkan", for the whole account.
//
// The module's interface, which the backend follows:
//
//   - Entry point "main", execution model GLCompute.
//   - Buffers: a Block struct holding a runtime array of 4-byte elements (2-byte
//     for f16 and bf16, IR v1.2: see half.go; their counts are elements), read
//     buffers NonWritable, write buffers without atomics NonReadable, all Restrict
//     when Target.DisjointBindings says no two bindings overlap. A binding is a
//     StorageBuffer variable at set 0, binding = the ir binding, or, when it is
//     one of Target.BufferAddresses, a PhysicalStorageBuffer pointer in the push
//     constants (SPV_KHR_physical_storage_buffer, PhysicalStorageBuffer64
//     addressing), for buffers beyond maxStorageBufferRange.
//   - Push constants: one u32 element count per buffer at offset 4*binding, then
//     the program's uniforms (IR v1.1) at Module.UniformOffset = 4*len(buffers),
//     4 bytes each in declaration order, as ir.EncodeUniforms packs them, then an
//     8-byte device address per addressed binding at Module.AddressOffsets, then
//     the GridWordCount grid words at Module.GridOffset (see Launch) when the
//     module reads them (Module.PushConstantBytes bytes in all). len reads the counts and every
//     bounds check uses them; the backend binds at least 4 bytes to every buffer,
//     also to an empty one, whose count is 0.
//   - Workgroup matrices (IR v1.2) run on the scalar path (matrix.go): Workgroup
//     arrays named kiln_matrix_<name>, each statement between two barriers; or,
//     where Target.Coop offers them, on VK_KHR_cooperative_matrix tiles
//     (coop.go, coopemit.go: Module.MatrixPath, the Vulkan memory model, the
//     SubgroupId input, Module.Subgroups set).
//   - Grid: workgroup_id, num_workgroups and global_id are logical, computed from
//     the physical WorkgroupId and the grid words, so the backend may run one
//     logical grid as several launches of at most maxComputeWorkGroupCount
//     (Launches; Module.Grid is GridLogical). A module that reads no grid
//     builtin is GridFree. Only when the words do not fit in
//     Target.MaxPushConstantBytes does the module read the device's builtins
//     (GridPhysical: one launch).
//   - Workgroup size: the LocalSize execution mode, Target.WorkgroupSize or the
//     program's (Module.WorkgroupSize); workgroup_size reads are constants. No
//     WorkgroupSize builtin (deprecated in SPIR-V 1.6), and no LocalSizeId, which
//     Vulkan allows only with maintenance4: a tuned size is a re-emit.
//   - Specialization constants: parameter i on id i (Module.ParamIDs). SpecData
//     builds the VkSpecializationInfo. With Target.FoldSpec the parameters are
//     plain constants of its values instead, and the module declares no
//     specialization constant.
//   - Module.Subgroups reports a program that uses subgroups, whose pipeline the
//     backend gives a subgroup size.
//   - Loop guard: with Target.LoopGuard (for llvmpipe, which ends a shader's
//     loops after 65535 iterations in all without an error) a program with a
//     loop gets one more storage buffer at binding len(buffers), of GuardBytes,
//     which the backend zeroes; its first word is set when an invocation left a
//     loop other than as the program says (Module.LoopGuard; see loopguard.go).
//
// How the IR's exact semantics are kept, without relying on robustBufferAccess or
// on driver float behaviour beyond Vulkan's guarantees:
//
//   - Loads read from the index, or from index 0 when it is out of bounds, and then
//     select 0; stores and atomics (cas included) run inside a selection construct
//     that skips them out of bounds (an atomic's result is then 0, through an
//     OpPhi). A shared-array access whose index provably lies below the
//     array's count has no check.
//   - Integer division and remainder replace a zero divisor by 1 and select 0. i32
//     division and remainder work on magnitudes with OpUDiv/OpUMod, because Vulkan
//     leaves OpSRem (and OpSMod) undefined for negative operands; MIN / -1 = MIN and
//     MIN % -1 = 0 follow. Shift amounts are and-ed with 31; shr is
//     OpShiftRightArithmetic on i32 and OpShiftRightLogical on u32.
//   - With Target.SignedZeroInfNanPreserve the module declares that execution mode
//     for 32-bit floats, so the driver keeps -0, infinities and NaN through f32
//     arithmetic and its constant folding.
//   - f32 add, sub, mul and div are decorated NoContraction. div scales a divisor
//     above 2^126 (and the dividend) by 1/4 so that it stays in the range where
//     Vulkan bounds OpFDiv's error (2.5 ULP). fma is GLSL.std.450 Fma, which Vulkan
//     may evaluate unfused (the conformance kit accepts either). sqrt, exp, log,
//     sin, cos, floor, ceil, trunc and round (RoundEven) are the GLSL.std.450
//     instructions, with Vulkan's precision.
//   - neg and abs on f32 flip or clear the sign bit. min and max compare integer
//     keys of the bit patterns (a negative value's magnitude bits flipped, so -0
//     sorts below +0) and test NaN on the bits: a NaN operand yields the other one,
//     min(-0, +0) = -0, max(-0, +0) = +0, whatever a driver assumes about NaN and
//     signed zeros or recognizes as a float min.
//   - Comparisons are ordered (OpFOrdLessThan, ...) except ne (OpFUnordNotEqual).
//   - No f32 OpSelect is emitted: f32 selects blend the bit patterns with a mask,
//     because NVIDIA's compiler turns select(x < y, x, y) into fmin, which is wrong
//     for NaN and signed zeros (seen on an H200 with driver 580). i32 and u32
//     selects between values that may be constants after specialization are
//     blended too: llvmpipe folds an OpSelect of two constants with float patterns
//     that take 0x80000000 for 0.0.
//   - f32 to i32/u32 converts only in-range values and selects the saturated bound
//     or 0 for NaN. i32/u32 to f32 is OpConvertSToF/OpConvertUToF: exact below
//     2^24 and, above, correctly rounded in the implementation's rounding mode;
//     Vulkan 1.1 offers no portable way to demand round-to-nearest-even, which is
//     what every known driver (llvmpipe, NVIDIA, AMD, Intel) uses.
//   - bitcast is OpBitcast; clz is 31 - FindUMsb (32 for 0); popcount is
//     OpBitCount; cas is OpAtomicCompareExchange; continue branches to the loop's
//     continue block.
//   - Subgroup builtins and operations are the GroupNonUniform instructions; see
//     subgroup.go for the rules SPIR-V leaves open.
//   - The barrier is OpControlBarrier with Workgroup execution and memory scope and
//     AcquireRelease | WorkgroupMemory | UniformMemory semantics, so both shared
//     arrays and storage buffers written before it are visible to the workgroup
//     after it; read_write buffers of a program with a barrier are Coherent.
//   - Atomics use Device scope on buffers and Workgroup scope on shared arrays,
//     relaxed semantics; min and max follow the element's signedness.
//   - An if whose arms hold only lets, stores and assigns (at most 8 each, no
//     subgroup operation, no load of what an earlier store of the arm may have
//     written, no read of a var the arm assigned) evaluates both arms'
//     expressions, loads included, before its selection construct, which holds
//     only the stores and assigns (hoist.go): the loads use the clamped index
//     and division its guard, so evaluating them speculatively is exact.
//   - let is an SSA value, var a Function variable declared in the entry block, a
//     for loop's variable an OpPhi in the loop header; a for loop of constant
//     bounds and at most 32 iterations asks to be unrolled (LoopControl Unroll).
//
// Every integer and bool value carries the range of values it can take (package
// ir/ranges; see docs/design.md, "Value ranges and bounds-check elision"), from
// literals, folded parameters, the workgroup size, local_id and loop bounds: an
// operator whose result is known is emitted as a constant (through lets and
// builtins), x+0, x-0 and x*1 are x, an if on a constant is its live arm, u32
// div and rem by a divisor that cannot be 0 are plain OpUDiv/OpUMod, and shared
// accesses proven in bounds lose their checks.
//
// Emit is deterministic: the same program and target give the same words.
package spirv
