// Package ir is kiln's portable compute program (IR v1.1): one kernel run by a grid
// of workgroups, with typed scalars (bool, i32, u32, f32), specialization
// parameters, per-dispatch uniforms, storage buffers, workgroup-shared arrays,
// subgroup operations and structured statements. Every backend compiles the same
// Program and must give the semantics below exactly; the CPU reference interpreter
// (ir/interp) defines them. See docs/design.md, "The program (IR)".
//
// A program is built with a Builder, checked by Validate, carried between processes
// in its canonical binary encoding (Encode, Decode; Digest hashes those bytes), and
// read or written by people in the JSON file form (ParseJSON, MarshalJSON).
// Specialization values (SpecValue, SpecMap, SpecCacheKey) key compiled variants.
//
// A saxpy, y = a*x + y:
//
//	b := ir.NewBuilder("example.saxpy.f32", 256, 1, 1)
//	a := b.Param("a", ir.F32, ir.LitF32(2))
//	x := b.Buffer("x", ir.F32, ir.Read)
//	y := b.Buffer("y", ir.F32, ir.ReadWrite)
//	i := b.Let("i", ir.GlobalID(0))
//	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
//		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
//	})
//	prog, err := b.Build() // runs Validate
//
// # Types
//
// No conversion is implicit: both operands of a binary operator have the same type
// (a shift amount too), and Cast converts. Buffers hold i32, u32 or f32 (4 bytes,
// little-endian); shared arrays may also hold bool. Builtins, indices and len are u32.
// Operator domains are listed on UnaryOp and BinaryOp; casts go between any of i32,
// u32 and f32, and between bool and i32/u32, never between bool and f32.
//
// # Semantics
//
//   - Out-of-bounds load gives 0; out-of-bounds store and atomic do nothing (an
//     atomic's result is then 0).
//   - Integers wrap. x/0 = 0 and x%0 = 0; i32 MIN/-1 = MIN and MIN%-1 = 0; % has the
//     sign of the dividend. Shift amounts are taken mod 32; shr is arithmetic on i32,
//     logical on u32.
//   - f32 division by zero follows IEEE-754 (inf or NaN).
//   - Cast f32→int truncates toward zero and saturates (f32→u32: negative gives 0;
//     f32→i32 clamps to [MIN, MAX]); NaN gives 0. int→f32 rounds to nearest even.
//     u32↔i32 keeps the bits. bool→int gives 0 or 1; int→bool is x != 0.
//   - f32 add, sub and mul are correctly rounded and never contracted into a fused
//     multiply-add; fma is the fused form. min and max return the other operand
//     when one is NaN; min(-0, +0) = -0 and max(-0, +0) = +0. Comparisons are
//     ordered (false with a NaN operand) except ne, which is true.
//   - for evaluates from, to and step once; the variable starts at from, the loop
//     runs while it is below to (signed for i32), and step is added (wrapping)
//     after each iteration. break leaves the innermost loop; return ends the
//     invocation.
//   - Locals are block-scoped and never shadow a visible name.
//   - Every invocation of a workgroup must reach the same barriers; shared arrays
//     start undefined.
//
// # IR v1.1
//
// IR v1.1 adds to IR v1, which stays valid and keeps its encoding and digests:
//
//   - Bitcast between i32, u32 and f32 keeps all 32 bits (NaN payloads too).
//   - trunc and round (ties to even) on f32; clz and popcount on i32 and u32, with
//     clz(0) = 32 (see UnaryOp).
//   - continue, in for (adds the step, then tests the bound) and while loops.
//   - Compare-exchange, AtomicCompareExchange ("cas"), on u32 and i32 buffers and
//     shared arrays: stores Value when the element equals Compare; the result is
//     the old value either way.
//   - Uniforms: scalars (i32, u32, f32) declared by the program and supplied with
//     each dispatch as a block of 4 bytes per uniform, little-endian, in declaration
//     order (EncodeUniforms). Buffers and uniforms together are at most MaxBuffers.
//   - Subgroups: a workgroup's invocations, numbered by local index
//     x + X*(y + Y*z), form subgroups of S consecutive invocations, and lane
//     (SubgroupInvocationID) = local index mod S. A program states S
//     (Program.SubgroupSize) or leaves it 0 to run with any size; S is a power of
//     two up to MaxSubgroupSize and divides the workgroup's invocation count, so
//     every subgroup is full (CheckSubgroupSize). Subgroup operations (SubgroupOp)
//     must be reached by every lane of the subgroup together — subgroup-uniform
//     control flow, as for barriers; the reference reports any other use.
//
// Validate enforces the static rules with errors that name the place
// (body[2].then[0].value) and end with a Fix.
package ir
