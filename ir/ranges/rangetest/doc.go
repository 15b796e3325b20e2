// Package rangetest holds the programs the GPU emitters' tests use to pin
// bounds-check elision (see docs/design.md, "Value ranges and bounds-check
// elision"): each accesses shared arrays named safe* only at indices whose range
// lies inside the array, so an emitter drops every check on them, and arrays
// named risky* only at indices that can fall outside (local_id + 1 on an array of
// the workgroup's size, a counted loop whose variable wraps, vars assigned in
// loops, an index through i32 arithmetic, a uniform), so every access keeps its
// check. Run next to the CPU reference, each case's outputs show whether the
// out-of-bounds loads gave 0 and the stores and atomics did nothing.
package rangetest
