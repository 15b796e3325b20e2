// Package half converts between float32 and the two 16-bit float types of IR v1.2,
// IEEE binary16 ([Float16]) and bfloat16 ([BFloat16]), and does binary16
// arithmetic correctly rounded, as the CPU reference oracle needs it.
//
// Conversions to a 16-bit type round to nearest, ties to even; a value too large
// for the type becomes an infinity of its sign, NaN stays NaN (quiet) and
// subnormals are kept, not flushed. Conversions to float32 and float64 are exact.
// See docs/design.md, "IR v1.2".
package half
