// Package ranges computes closed intervals of the values a 32-bit IR expression
// can take, under the exact integer semantics of docs/design.md, "The program
// (IR v1)": wrapping add, sub and mul, x/0 = 0 and x%0 = 0, shift amounts mod 32,
// i32 MIN / -1 = MIN. The GPU emitters (plugins/cuda/ptx, plugins/vulkan/spirv)
// use it to fold integer arithmetic whose result is known and to drop the bounds
// check of a shared-array access whose index is provably below the array's fixed
// count (see docs/design.md, "Value ranges and bounds-check elision").
//
// A [Range] is an interval of bit patterns in unsigned order: for u32 the values
// themselves, for i32 their two's complement bits, for bool 0 or 1. The zero
// Range is [Unknown]: every pattern. Every transfer function is sound: when the
// operands lie in their ranges, the IR result lies in the returned range.
// Wherever a result could wrap around (or an i32 operator's answer depends on
// signs the ranges leave open) the result is Unknown, except for operands that
// are both exact, which are evaluated exactly.
package ranges
