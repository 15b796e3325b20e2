// Package interp is kiln's CPU reference interpreter: it runs an IR v1.2 program
// with exactly the semantics of docs/design.md, "The program (IR)", and is the
// oracle every GPU backend is checked against. Compile validates a program and
// turns it into closures once; Kernel.Run executes one dispatch and is safe for
// concurrent use. Options.Strict turns on strict mode, a race checker for shared
// memory (see docs/design.md, "The oracle and strict mode").
//
// # Execution model
//
// A workgroup runs in lockstep, SIMD style. Every invocation is a lane, and every
// expression node is a closure that computes its value for a range of lanes into a
// register (one uint32 per lane: f32 as IEEE bits, i32 as two's complement, bool as
// 0 or 1, f16 and bf16 as their 16 bits in the low half). Leaves return registers directly: literals and parameters are filled once
// at compile time, len and num_workgroups once per run, workgroup_id and global_id
// once per workgroup, local_id once per kernel. A let bound to such a value reads it
// without a copy.
//
// Expressions are pure and total, so they are computed on inactive lanes too; only
// side effects (assign, store, atomic, break, return) look at the active-lane mask.
// The mask keeps a tight [lo, hi) range of active lanes, so divergent code only
// touches the lanes that can be active. if splits the mask (a branch with no active
// lane is skipped); a loop iterates while any lane is active; break removes lanes
// from the innermost loop, return ends them for good; after an if or a loop the
// mask is restored minus the lanes that left. A barrier must be reached by every
// invocation of the workgroup at once: if any lane returned, broke out, or is in the
// other branch, Run stops with an error naming the workgroup, the lane and the
// statement path (such as body[3].then[1]) instead of hanging. Lockstep execution
// makes barriers exact: every lane finishes the statements before a barrier before
// any lane runs the statements after it. Shared arrays are filled with 0xDEADBEEF
// at the start of every workgroup (a poisoned bool reads as true). Stores and
// atomics apply lane by lane in lane order.
//
// Workgroups run in parallel: GOMAXPROCS workers take units from an atomic counter,
// and each worker owns its registers, masks and shared arrays, allocated once per
// run. A unit is one workgroup, or, for a program without barriers and shared
// arrays (whose workgroups cannot observe each other), up to 2048/size consecutive
// workgroups of one row of the grid run together as one wide register set.
//
// When a workgroup is one row of x (workgroup size [X, 1, 1]), global_id(0) is the
// unit's first id plus the lane; a load or store indexed by global_id(0) plus a
// constant then touches one run of words, and when the run lies in the buffer the
// load's register is a view of the buffer and the store one copy, with a single
// bounds check for the unit. An if on global_id(0) + constant < a value that is
// the same in every lane (len, a parameter, a uniform) splits the lanes with one
// subtraction. Everything else is checked lane by lane.
//
// Subgroups (IR v1.1) are runs of consecutive lanes of a workgroup. A subgroup
// operation reads the mask of its statement: a subgroup whose lanes are all
// active computes the operation, one with no active lane is skipped, and one with
// some lanes active stops the run with an error naming the workgroup, the lanes
// and the statement, as a divergent barrier does. The interpreter emulates any
// subgroup size the program allows (Options.SubgroupSize).
//
// Workgroup matrices (IR v1.2) are held once per worker, row-major in register
// form, for the workgroup it runs, and read as zeros in each new workgroup. A
// matrix statement runs once for the workgroup: like a barrier it needs every
// invocation in its mask (else Run stops with an error naming the statement and
// a missing invocation, in strict mode or not), and it takes its operands
// (offset, stride, bound, fill value), which every invocation computes, from the
// invocation with local id (0,0,0). Matrix statements run in program order, so
// they are ordered among themselves. Programs with matrices run one workgroup per
// unit.
//
// Strict mode keeps a shadow of each shared word: the lanes that wrote, read and
// atomically updated it since the last barrier, and whether the workgroup wrote it
// at all. Only the active lanes of a statement count; lanes outside a branch that
// compute its loads on the side are not checked. The first hazard stops the run
// with a *StrictError. A matrix statement's shared-array accesses are recorded as
// the whole workgroup's: they race with any invocation's access of the word in
// the same interval (one of the two writing), never with another matrix
// statement's. Strict mode also reports a matrix statement whose operands differ
// between invocations and one that reads a matrix the workgroup has not written
// (outside strict mode such a matrix reads as 0). Buffer atomics use sync/atomic, and a buffer that any
// atomic targets is loaded and stored atomically everywhere; shared-array atomics are
// plain, since one worker runs a whole workgroup. Cancelling the context stops a run
// between workgroups and inside loops (each iteration checks a stop flag), so even an
// infinite loop returns promptly with an error wrapping ctx.Err().
//
// Buffers are little-endian words. On a little-endian host, read inputs are used in
// place (they are never written) and outputs are returned without a copy; read_write
// inputs are always copied, so the caller's inputs are never modified. Buffers of
// f16 and bf16 are 2 little-endian bytes per element to the caller (len counts
// elements, so a buffer may hold an odd count); the interpreter copies them into
// one word per element and back. Shared arrays of them start with the poison's
// low 16 bits, 0xBEEF.
//
// # Math
//
//   - Integers wrap; x/0 = 0 and x%0 = 0; i32 MIN/-1 = MIN and MIN%-1 = 0; % has the
//     sign of the dividend; shift amounts are taken mod 32 (a negative i32 amount
//     too); shr is arithmetic on i32 and logical on u32.
//   - f32 add, sub, mul and div are single float32 operations, each rounded to
//     nearest even: every node is its own closure storing its result as bits, so Go
//     never contracts a*b+c into an FMA.
//   - fma is exactly fused: the product of two f32 values is exact in float64, the
//     float64 sum is made round-to-odd using the exact TwoSum error, and rounding that
//     to f32 is then correct (float64 has more than two extra bits). A plain
//     float64 FMA rounded to f32 would round twice.
//   - min and max on f32 return the other operand when one is NaN (NaN if both are),
//     min(-0, +0) = -0 and max(-0, +0) = +0. Comparisons are ordered (false with NaN)
//     except ne. neg and abs flip or clear the sign bit, keeping NaN payloads.
//   - sqrt, exp, log, sin and cos are computed in float64 by Go's math package and
//     rounded once to f32: sqrt is then correctly rounded, the others are well inside
//     the Vulkan precision bounds. floor, ceil, trunc and round (ties to even) are
//     exact. Denormals are kept.
//   - clz and popcount count the bits of the 32-bit pattern (clz(0) = 32); bitcast
//     keeps the bits, since every register holds bits.
//   - subgroup_add on f32 adds in a pairwise tree (lanes 2i and 2i+1 first); on
//     integers it wraps. subgroup_min and subgroup_max follow min and max.
//     subgroup_shuffle and subgroup_broadcast read another lane of the subgroup, 0
//     for a lane at or beyond the subgroup size; broadcast's lane must be the same
//     on every lane.
//   - cas stores its value when the element equals the compare operand and returns
//     the old element either way; on buffers it is a sync/atomic compare-and-swap.
//   - f32 to i32/u32 truncates toward zero and saturates (u32: negative gives 0,
//     at least 2^32 gives MAX; i32 clamps to [MIN, MAX]); NaN gives 0. i32/u32 to f32
//     is Go's conversion, rounding to nearest even. u32 and i32 reinterpret bits;
//     bool to an integer is 0 or 1, an integer to bool is != 0.
//   - Out-of-bounds loads give 0; out-of-bounds stores and atomics do nothing and an
//     atomic's result is then 0.
//   - f16 (IR v1.2) add, sub, mul, div, sqrt and fma are ir/half's, each correctly
//     rounded in binary16 (fma fused), never rounded through float32 first. neg and
//     abs flip or clear the sign bit; min, max and the comparisons follow f32's
//     rules. Denormals are kept. bf16 has no arithmetic.
//   - cast f32 to f16 or bf16 rounds to nearest even (overflow gives ±inf, NaN a
//     quiet NaN, subnormals are kept); f16 and bf16 to f32 is exact.
//   - matrix_load gives element (r, c) the array's element offset + r·stride + c
//     (row) or offset + c·stride + r (col) in u32 arithmetic, 0 where (r, c) is
//     outside the bound or the index outside the array; matrix_store writes the
//     same elements, in row-major order of the tile, and skips the others.
//   - matrix_mma adds to each accumulator element its products in order of k:
//     acc = fl32(acc + fl32(a·b)) for k = 0..K-1 (the products of f16 and bf16
//     values are exact; tf32 precision is ignored, the f32 operands used as
//     they are). matrix_convert goes through f32 exactly, then rounds as cast.
package interp
