// Package conformance is the test kit a backend author runs from their own test:
// Run checks a pluginapi.Backend in-process against the CPU reference
// interpreter, the whole contract of docs/design.md, "The program (IR)", as
// subtests: its description and handle contract, the semantics tables (over 300
// small programs on edge values) and the standard kernel corpus at several
// sizes.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, mybackend.New(), conformance.Options{})
//	}
//
// Run is the thin *testing.T wrapper of package kit (pluginapi/conformance/kit),
// the kit itself, which does not import package testing: `kiln conformance`
// runs kit.Check against an installed plugin over the wire. Outputs are compared
// by package verify (ir/verify), kiln's one comparison: integers bit for bit,
// f32 elements within verify.BoundFor the program, against the reference and,
// when they differ, against the program's variants too (fma evaluated unfused,
// denormals flushed), which docs/design.md allows. See docs/design.md,
// "Conformance kit".
package conformance
