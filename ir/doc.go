// Package ir is kiln's portable compute program (IR v1): one kernel run by a grid of
// workgroups, with typed scalars (bool, i32, u32, f32), specialization parameters,
// storage buffers, workgroup-shared arrays and structured statements. Every backend
// compiles the same Program and must give the semantics below exactly; the CPU
// reference interpreter (plugins/cpuref/interp) defines them.
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
// Validate enforces the static rules with errors that name the place
// (body[2].then[0].value) and end with a Fix.
package ir
