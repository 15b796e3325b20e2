package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// castCases is the cast table: every allowed pair of types (bool and f32 do not
// cast to each other), identity casts included, on the edge values of the source
// type: f32 to integers truncates toward zero and saturates, NaN gives 0; integers
// to f32 round to nearest even; u32 and i32 reinterpret bits; bool gives 0/1 and
// an integer gives != 0.
func castCases() []semantic {
	pins := castPins()
	var out []semantic
	for _, from := range []ir.Type{ir.I32, ir.U32, ir.F32, ir.Bool} {
		for _, to := range []ir.Type{ir.I32, ir.U32, ir.F32, ir.Bool} {
			if from == ir.F32 && to == ir.Bool || from == ir.Bool && to == ir.F32 {
				continue
			}
			name := fmt.Sprintf("%s.%s", from, to)
			c := opCase{
				name: name, in: from, out: to, pinned: pins[name],
				fn:   func(x []ir.Expr) ir.Expr { return ir.Cast(to, x[0]) },
				cols: [][]uint32{edgesOf(from)}, consts: [][]uint32{constsOf(from)},
			}
			out = append(out, c.semantics()...)
		}
	}
	// bitcast (IR v1.1) keeps all 32 bits between i32, u32 and f32: NaN payloads,
	// -0 and denormals included.
	for _, from := range []ir.Type{ir.I32, ir.U32, ir.F32} {
		for _, to := range []ir.Type{ir.I32, ir.U32, ir.F32} {
			if from == to {
				continue
			}
			name := fmt.Sprintf("bitcast.%s.%s", from, to)
			c := opCase{
				name: name, in: from, out: to, pinned: bitcastPins(from, to),
				fn:   func(x []ir.Expr) ir.Expr { return ir.Bitcast(to, x[0]) },
				cols: [][]uint32{edgesOf(from)}, consts: [][]uint32{constsOf(from)},
			}
			out = append(out, c.semantics()...)
		}
	}
	return out
}

// bitcastPins are rows whose bits must come through: every row maps x to x.
func bitcastPins(from, to ir.Type) [][]uint32 {
	bits := []uint32{0, negZero, 0x7FC00001, 0xFFC00000, 0x00000001, 0x3F800000, 0xFFFFFFFF}
	if to == ir.F32 {
		// An f32 output compares NaN with any NaN; these NaNs still must not move.
		bits = []uint32{0, negZero, 0x3F800000, 0x807FFFFF, infBits}
	}
	var out [][]uint32
	for _, b := range bits {
		out = append(out, []uint32{b, b})
	}
	_ = from
	return out
}

// castPins are docs/design.md's values for casts, by "from.to".
func castPins() map[string][][]uint32 {
	return map[string][][]uint32{
		"f32.i32": {{f(1.9), 1}, {f(-1.9), i(-1)}, {f(2147483520), 2147483520}, {f(0x1p31), maxI32Bits},
			{f(3e9), maxI32Bits}, {f(-0x1p31), minI32Bits}, {f(-3e9), minI32Bits}, {nanBits, 0}, {negNaNBits, 0},
			{infBits, maxI32Bits}, {negInfBits, minI32Bits}, {negZero, 0}, {f(-2147483520), i(-2147483520)}, {f(0.5), 0},
			{f(0x1p-140), 0}},
		"f32.u32": {{f(1.9), 1}, {f(-0.5), 0}, {f(-1), 0}, {negInfBits, 0}, {f(4294967040), 4294967040},
			{f(0x1p32), 0xFFFFFFFF}, {infBits, 0xFFFFFFFF}, {nanBits, 0}, {f(3e9), 3000000000}, {negZero, 0},
			{f(-3e9), 0}},
		"i32.f32": {{16777217, f(16777216)}, {16777219, f(16777220)}, {i(-1), f(-1)}, {minI32Bits, f(-0x1p31)},
			{maxI32Bits, f(0x1p31)}, {0, 0}, {i(-16777219), f(-16777220)}},
		"u32.f32": {{0xFFFFFFFF, f(0x1p32)}, {16777217, f(16777216)}, {0x80000000, f(0x1p31)},
			{0xFFFFFF7F, f(4294967040)}, {0xFFFFFF80, f(0x1p32)}},
		"i32.u32":  {{i(-1), 0xFFFFFFFF}, {minI32Bits, 0x80000000}},
		"u32.i32":  {{0xFFFFFFFF, i(-1)}},
		"bool.i32": {{1, 1}, {0, 0}},
		"bool.u32": {{1, 1}, {0, 0}},
		"i32.bool": {{0, 0}, {5, 1}, {minI32Bits, 1}},
		"u32.bool": {{0, 0}, {0x80000000, 1}},
		"f32.f32":  {{negZero, negZero}, {f(0x1p-140), f(0x1p-140)}},
	}
}
