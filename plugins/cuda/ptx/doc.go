// Package ptx compiles an IR program to PTX, NVIDIA's virtual instruction set, for
// the CUDA backend: one text module per (program, specialization, workgroup size,
// target), which the driver's JIT linker turns into a cubin.
//
// The module's interface, which the backend follows:
//
//   - PTX ISA 7.0 (CUDA 11.0, driver R450 and later), .target sm_70 on compute
//     capability 7.x and sm_80 on 8.0 and later (the JIT compiles it for the actual
//     device), .address_size 64.
//   - One kernel, "kiln_main", with .reqntid set to the workgroup size, so a launch
//     with any other block shape fails instead of running wrong, and, for
//     workgroups of up to 256 threads, .minnctapersm 2 (two resident blocks per
//     SM, so one computes while the other waits at a barrier).
//   - Kernel parameters, in order: a .u64 global pointer per buffer binding
//     (kiln_buf<b>), then a .u32 element count per buffer binding (kiln_len<b>).
//     Module.Params lists them. Every buffer pointer must point at least 4 bytes of
//     device memory, also for an empty buffer, whose count is 0.
//   - Specialization parameters and the workgroup size are folded into the code as
//     constants: a specialized or retuned pipeline is another module.
//   - Shared arrays are .shared variables of the kernel, 4 bytes per element (a
//     bool is a u32 0 or 1, so a poisoned element reads as true), 2 for f16
//     and bf16 (IR v1.2), rounded up to whole words. Buffers of f16 and bf16
//     hold 2-byte elements, and their count parameter counts those.
//   - Workgroup matrices (IR v1.2) take the scalar path (matrix.go,
//     matrix_scalar.go): per-invocation .local arrays, with a .shared staging
//     buffer for mma, which Module.SharedBytes counts.
//
// How IR v1's exact semantics are kept (see docs/design.md, "Backends/CUDA"):
//
//   - Out-of-bounds accesses never touch memory: a load is a predicated ld whose
//     destination is zeroed first, a store or atomic is predicated on the index
//     being below the element count (an atomic's result is then 0). A shared
//     access whose index provably lies below the array's count has no check.
//   - f32 add, sub and mul carry an explicit rounding mode (add.rn, sub.rn, mul.rn),
//     which PTX never contracts into an FMA; fma is fma.rn; div and sqrt are the
//     IEEE-rounded div.rn and sqrt.rn. No .ftz anywhere: denormals are kept.
//   - exp, log, sin and cos use the MUFU approximations (ex2.approx, lg2.approx,
//     sin.approx, cos.approx) with a multiply by log2(e) or ln(2), and sin and cos
//     reduce arguments beyond ±π by a three-part Cody-Waite subtraction of a
//     multiple of 2π first.
//   - Integer division and remainder replace a zero divisor (and, on i32, a
//     divisor of -1) by 1 and then select 0 (or, for MIN / -1 and friends, the
//     wrapped negation), since PTX leaves those results unspecified. Shift amounts
//     are and-ed with 31, because PTX clamps larger amounts instead of taking them
//     mod 32.
//   - f32 neg and abs flip or clear the sign bit; min and max are selects on the
//     bit patterns, so NaN operands yield the other operand and the zeros order
//     (min(-0, +0) = -0, max(-0, +0) = +0) without relying on min.f32's handling
//     of signed zeros. Comparisons are ordered, except ne (setp.neu).
//   - f32 to i32/u32 replaces a NaN by 0 before cvt.rzi, whose float-to-integer
//     conversion saturates; i32/u32 to f32 is cvt.rn (round to nearest even).
//   - The barrier is bar.sync 0, which orders shared and global memory for the
//     block. Atomics are atom.global or atom.shared (relaxed, GPU scope for
//     buffers).
//
// Emit simplifies as it writes (see fold.go and docs/design.md, "CUDA" and
// "Value ranges and bounds-check elision"): every integer and bool value carries
// the range of values it can take (package ir/ranges), from literals, the
// folded parameters, the workgroup size, local_id and loop bounds, so integer
// arithmetic whose result is known folds to a literal (through lets, builtins and
// unrolled loop counters), an if on a constant is one of its blocks, div and rem
// by a divisor that cannot be 0 (or -1 on i32) are plain (a constant divisor an
// immediate, a u32 power of two a shift or mask), and shared-array
// accesses whose index is provably in bounds have no check. Constant-trip for
// loops of up to 32 iterations unroll, an if of a few lets, stores and
// assignments becomes predicated straight-line code, and buffer accesses an
// enclosing if's i < len(buf) already bounds skip their own check. With
// Options.NonCoherentReads, read buffers are loaded with ld.global.nc.
//
// Registers: bool values live in predicates (%p), every 32-bit value in .b32
// registers (%r), addresses in .b64 registers (%rd). f16 and bf16 values live
// in .b32 registers too, zero-extended, and the f16 instructions work on .b16
// copies (%h; see half.go). Buffer pointers, element
// counts, builtins and constants are loaded once at the top of the kernel. A var
// is a register, read in place; a let bound to it holds a copy.
//
// Emit is deterministic: the same program and options give the same text.
package ptx
