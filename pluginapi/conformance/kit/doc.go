// Package kit is the conformance kit itself, free of package testing: Check runs
// the whole contract of docs/design.md, "The program (IR)", as subtests of any T
// against the CPU reference interpreter (ir/interp, in strict mode): a backend's
// description and handle contract, the semantics tables (operators, casts,
// memory and bounds, control flow, atomics, uniforms, subgroups: over 300 small
// programs on edge values, see SemanticCases and SemanticPrograms), and the
// standard kernel corpus (ir/kernels) at several sizes. Outputs are compared by
// package verify (verify.Outputs: the reference and, when they differ, the
// program's accepted variants).
//
// Plugin authors call it through conformance.Run from their own test; `kiln
// conformance` runs Check on a T of its own against an installed plugin over
// the wire, so the kiln binary does not link package testing. See
// docs/design.md, "Conformance kit".
package kit
