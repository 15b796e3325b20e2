// Package conformance is the test kit a backend author runs from their own test:
// Run executes the standard kernel corpus (ir/kernels) on a pluginapi.Backend
// in-process at several sizes and compares every output with the CPU reference
// interpreter (ir/interp) under DESIGN.md's comparison rules, with one
// subtest per kernel and size.
//
// The rules (Compare, BoundFor): integer outputs are bit-exact; f32 outputs are
// bit-exact (any NaN equals any NaN, zeros and subnormals equal each other since
// denormals may be flushed) unless the program uses inexact f32 operations, found by
// walking the program: div and sqrt allow 3 ULP, exp 3 + 2·|x| ULP, log 3 ULP or
// 2^-21 absolute, sin and cos 2^-11 absolute (Vulkan's precision rules), fma 2 ULP
// (either the fused or the separately rounded result). Compare is also what
// `kiln run --verify` uses; its Report carries the largest ULP distance seen.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, mybackend.New(), conformance.Options{})
//	}
package conformance
