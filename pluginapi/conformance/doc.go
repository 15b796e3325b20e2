// Package conformance is the test kit a backend author runs from their own test:
// the whole contract of docs/design.md, "The program (IR)", as subtests. Run
// checks a pluginapi.Backend in-process against the CPU reference interpreter
// (ir/interp, in strict mode): its description and handle contract, the
// semantics tables (operators, casts, memory and bounds, control flow, atomics,
// uniforms, subgroups: over 300 small programs on edge values, see
// SemanticCases), and the standard kernel corpus (ir/kernels) at several sizes.
//
// Outputs are compared by Verify: integers bit for bit, f32 elements by the one
// float comparison of kiln (kernels.Bound.Element, with kernels.BoundFor the
// program), against the reference and, when they differ, against the program's
// Variants too (fma evaluated unfused, denormals flushed), which docs/design.md
// allows and no per-element bound can express. Verify is also what `kiln run
// --verify` uses; its Report carries the largest ULP distance seen. Check runs
// the kit on any T (the part of *testing.T it uses), which is how `kiln
// conformance` runs it against an installed plugin over the wire. See
// docs/design.md, "Conformance kit".
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, mybackend.New(), conformance.Options{})
//	}
package conformance
