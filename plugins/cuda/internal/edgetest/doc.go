// Package edgetest is the semantic edge table that pins the CUDA backend's
// values: small programs that run every IR operation on its edge values (NaN,
// ±0, ±inf, denormals, MIN / -1, shifts of 32 and more, saturating casts) and
// every subgroup operation at every size a warp runs, each with its launch, and
// the rule by which a result is compared with the CPU reference interpreter (the
// oracle). Statements, memory, atomics, uniforms and launch shapes are the
// conformance kit's tables (pluginapi/conformance), which every backend runs;
// this table holds only what CUDA pins tighter. The IR v1.2 rows (HalfCases:
// every f16 operator and 16-bit cast; MatrixCases: scripts of matrix statements
// on the scalar matrix path) carry the outputs they must give (Case.Want),
// computed with ir/half and a Go model of the matrix semantics, which the tests
// also check against the oracle.
//
// The rules are CUDA's, tighter than the cross-backend bounds of docs/design.md, "Conformance kit", because the
// PTX the backend emits is IEEE-exact where the ISA allows it: every result must
// match the oracle bit for bit (any NaN equals any NaN; denormals are kept, never
// flushed), div, sqrt and fma included. Only exp, log, sin and cos, which run on
// the MUFU approximations, are compared within bounds (see Case.Match).
//
// The ptx package's tests run the table on their PTX interpreter; the backend's
// GPU tests run it on a device. Nothing outside those tests imports it.
package edgetest
