// Package verify is kiln's one comparison of outputs with their references:
// what "correct output" means for the kernel corpus (ir/kernels), the
// conformance kit (pluginapi/conformance) and `kiln run --verify` / `kiln tune`.
//
//   - Elements: integers bit for bit; f32 elements under a Bound
//     (Bound.Element): equal bits, any NaN for any NaN, a flushed denormal, then
//     ULP units in the last place (ULP) or absolute and relative bounds. The zero
//     Bound is bit-exact.
//   - Programs: BoundFor derives a program's bound from the inexact operations
//     it uses (div, sqrt, exp, log, sin, cos, f32 subgroup_add); Variants lists
//     the rewritings whose outputs docs/design.md also accepts (fma unfused,
//     denormals flushed).
//   - Buffers compares buffers with references under a bound; Compare does so
//     for a program's outputs; Outputs runs a Reference and, only when the
//     outputs differ, the program's variants too. Each returns a Report (the
//     largest ULP distance seen, the mismatches) and an error that describes the
//     first few mismatching elements.
//
// The package imports neither package testing nor any plugin, so the kiln
// binary can link it. See docs/design.md, "Conformance kit".
package verify
