package backend

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/interp"
)

// The semantic edge table: small programs that exercise every IR v1 operation on its
// edge values (NaN, ±0, ±inf, denormals, MIN/-1, shifts of 32 and more, saturating
// casts) and every statement kind, each run on the Vulkan backend and on the CPU
// reference and compared under DESIGN.md's rules:
//   - integers, comparisons, add/sub/mul/min/max/select/cast (and the other exact
//     operations: neg, abs, floor, ceil) bit for bit, any NaN equal to any NaN;
//   - div and sqrt within 3 ULP;
//   - exp, log, sin, cos within the Vulkan precision rules;
//   - fma fused or as a rounded multiply then add;
//   - denormals may be flushed to zero, in the inputs and in the results (a zero or
//     denormal result is accepted wherever the reference is zero, denormal or the
//     smallest normal, which a result tiny before rounding can become).

// edge is one program and launch of the table.
type edge struct {
	name   string
	prog   *ir.Program
	grid   [3]uint32
	inputs [][]byte
	counts []uint32
	spec   ir.SpecMap
	wg     [3]uint32
	// match compares element i of output buffer out; nil means exact.
	match func(out, i int, got, want uint32) bool
	// unfused, when set, is the same computation with fma written as mul then add:
	// its reference is accepted too.
	unfused *ir.Program
}

// Edge values by type, as bit patterns.
var (
	f32Edges = f32Bits(0, negZero(), 1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3, 0.1, -7.9, 100.5,
		123456.79, 16777216, 16777217, 2147483520, 2147483648, 4294967040, 4294967296, -2147483648, -2147483904,
		math.MaxFloat32, -math.MaxFloat32, 0x1p-126, math.SmallestNonzeroFloat32, 0x1.fffffcp-127, -0x1p-140,
		1e-10, 3.1415927, -3.1415927, 10, 88.7, -104, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	i32Edges = i32Bits(0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 32, 33, 64, -32, math.MaxInt32, math.MinInt32, math.MinInt32+1, 0x55555555, -123456789)
	u32Edges = []uint32{0, 1, 2, 3, 7, 31, 32, 33, 64, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff, 123456789, 0xdeadbeef}
)

func negZero() float32 { return float32(math.Copysign(0, -1)) }

func f32Bits(vs ...float32) []uint32 {
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = math.Float32bits(v)
	}
	return append(out, 0x7fc00001, 0xffc00000) // NaNs with a payload and a sign
}

func i32Bits(vs ...int32) []uint32 {
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = uint32(v)
	}
	return out
}

func edgesOf(t ir.Type) []uint32 {
	switch t {
	case ir.F32:
		return f32Edges
	case ir.I32:
		return i32Edges
	}
	return u32Edges
}

func words(ws []uint32) []byte {
	out := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
	return out
}

func wordsOf(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// elementwise builds out[i] = f(a[i], b[i], c[i]) over n elements for the inputs
// given (one to three buffers of type in), with the result of type out (a bool
// result is stored as u32).
func elementwise(name string, in, out ir.Type, inputs [][]uint32, f func(args []ir.Expr) ir.Expr) *ir.Program {
	b := ir.NewBuilder("edge."+name, 64, 1, 1)
	var bufs []string
	for k := range inputs {
		bufs = append(bufs, b.Buffer(fmt.Sprintf("in%d", k), in, ir.Read))
	}
	store := out
	if out == ir.Bool {
		store = ir.U32
	}
	res := b.Buffer("out", store, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(res)), func(then *ir.Block) {
		var args []ir.Expr
		for _, buf := range bufs {
			args = append(args, ir.Load(buf, i))
		}
		v := f(args)
		if out == ir.Bool {
			v = ir.Cast(ir.U32, v)
		}
		then.Store(res, i, v)
	})
	return b.Program()
}

// pairs returns every (x, y) of xs × xs as two columns.
func pairs(xs []uint32) (a, b []uint32) {
	for _, x := range xs {
		for _, y := range xs {
			a, b = append(a, x), append(b, y)
		}
	}
	return a, b
}

// launch fills in the grid, inputs and output count of an elementwise edge.
func launch(e edge, cols [][]uint32) edge {
	n := uint32(len(cols[0]))
	e.grid = [3]uint32{(n + 63) / 64, 1, 1}
	for _, c := range cols {
		e.inputs = append(e.inputs, words(c))
	}
	e.inputs = append(e.inputs, nil)
	e.counts = make([]uint32, len(cols)+1)
	e.counts[len(cols)] = n
	return e
}

// ulps is the distance between two finite-or-infinite f32 values in units in the
// last place.
func ulps(a, b uint32) uint64 {
	ord := func(x uint32) int64 {
		if x&0x80000000 != 0 {
			return -int64(x & 0x7fffffff)
		}
		return int64(x)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

func isNaN32(x uint32) bool { return x&0x7f800000 == 0x7f800000 && x&0x7fffff != 0 }
func isInf32(x uint32) bool { return x&0x7fffffff == 0x7f800000 }

// exactOrNaN is the bit-exact rule: equal bits, or both NaN.
func exactOrNaN(got, want uint32) bool { return got == want || isNaN32(got) && isNaN32(want) }

// withinULP accepts got within n ULP of want; NaN and infinities must match.
func withinULP(got, want uint32, n uint64) bool {
	switch {
	case isNaN32(want) || isNaN32(got):
		return isNaN32(want) && isNaN32(got)
	case isInf32(want):
		return got == want
	}
	return ulps(got, want) <= n
}

// unaryMatch returns the comparison rule of a unary f32 operation with inputs xs.
func unaryMatch(op ir.UnaryOp, xs []uint32) func(out, i int, got, want uint32) bool {
	switch op {
	case ir.OpSqrt:
		return func(_, _ int, got, want uint32) bool { return withinULP(got, want, 3) }
	case ir.OpExp:
		return func(_, i int, got, want uint32) bool {
			x := math.Abs(float64(math.Float32frombits(xs[i])))
			return withinULP(got, want, uint64(3+2*min(x, 1e9)))
		}
	case ir.OpLog:
		return func(_, i int, got, want uint32) bool {
			x := float64(math.Float32frombits(xs[i]))
			if xs[i] != 0 && xs[i]&0x7f800000 == 0 && x > 0 {
				// A positive denormal may be flushed (log 0 = -inf) or taken
				// loosely (lavapipe reads it as 2^-127): anything from -inf to
				// log of the smallest normal is accepted.
				return !isNaN32(got) && float64(math.Float32frombits(got)) <= math.Log(0x1p-126)
			}
			if x >= 0.5 && x <= 2 && !isNaN32(got) {
				return math.Abs(float64(math.Float32frombits(got))-float64(math.Float32frombits(want))) < 0x1p-21
			}
			return withinULP(got, want, 3)
		}
	case ir.OpSin, ir.OpCos:
		return func(_, i int, got, want uint32) bool {
			x := float64(math.Float32frombits(xs[i]))
			g, w := float64(math.Float32frombits(got)), float64(math.Float32frombits(want))
			switch {
			case isNaN32(want):
				return isNaN32(got)
			case math.Abs(x) <= math.Pi:
				return math.Abs(g-w) <= 0x1p-11
			}
			// Vulkan bounds nothing outside [-π, π]; a sine is still a sine.
			return math.Abs(g) <= 1
		}
	}
	return nil
}

// edgeTable builds the whole table.
func edgeTable() []edge {
	var table []edge
	// Unary operations on every type they accept.
	unary := map[ir.UnaryOp][]ir.Type{
		ir.OpNeg: {ir.I32, ir.U32, ir.F32}, ir.OpNot: {ir.I32, ir.U32}, ir.OpAbs: {ir.I32, ir.F32},
		ir.OpSqrt: {ir.F32}, ir.OpExp: {ir.F32}, ir.OpLog: {ir.F32}, ir.OpSin: {ir.F32}, ir.OpCos: {ir.F32},
		ir.OpFloor: {ir.F32}, ir.OpCeil: {ir.F32},
	}
	for _, op := range ir.UnaryOps() {
		for _, t := range unary[op] {
			xs := edgesOf(t)
			name := fmt.Sprintf("%s.%s", op, t)
			e := edge{name: name, prog: elementwise(name, t, t, [][]uint32{xs}, func(a []ir.Expr) ir.Expr { return ir.UnaryExpr{Op: op, X: a[0]} })}
			if t == ir.F32 {
				e.match = unaryMatch(op, xs)
			}
			table = append(table, launch(e, [][]uint32{xs}))
		}
	}
	// Logical not on bool, from a comparison.
	table = append(table, launch(edge{name: "not.bool", prog: elementwise("not.bool", ir.I32, ir.Bool, [][]uint32{i32Edges},
		func(a []ir.Expr) ir.Expr { return ir.Not(ir.Lt(a[0], ir.LitI32(0))) })}, [][]uint32{i32Edges}))
	// Binary operations on every pair of edge values of every type they accept.
	arith := []ir.Type{ir.I32, ir.U32, ir.F32}
	ints := []ir.Type{ir.I32, ir.U32}
	binary := map[ir.BinaryOp][]ir.Type{
		ir.OpAdd: arith, ir.OpSub: arith, ir.OpMul: arith, ir.OpDiv: arith, ir.OpMin: arith, ir.OpMax: arith,
		ir.OpRem: ints, ir.OpAnd: ints, ir.OpOr: ints, ir.OpXor: ints, ir.OpShl: ints, ir.OpShr: ints,
		ir.OpEq: arith, ir.OpNe: arith, ir.OpLt: arith, ir.OpLe: arith, ir.OpGt: arith, ir.OpGe: arith,
	}
	for _, op := range ir.BinaryOps() {
		for _, t := range binary[op] {
			a, b := pairs(edgesOf(t))
			name := fmt.Sprintf("%s.%s", op, t)
			out := t
			if op.IsComparison() {
				out = ir.Bool
			}
			e := edge{name: name, prog: elementwise(name, t, out, [][]uint32{a, b}, func(x []ir.Expr) ir.Expr { return ir.BinaryExpr{Op: op, X: x[0], Y: x[1]} })}
			if op == ir.OpDiv && t == ir.F32 {
				e.match = func(_, _ int, got, want uint32) bool { return withinULP(got, want, 3) }
			}
			table = append(table, launch(e, [][]uint32{a, b}))
		}
	}
	// Bool operands: eq, ne, land, lor and select over every pair of truth values.
	for _, op := range []ir.BinaryOp{ir.OpEq, ir.OpNe, ir.OpLAnd, ir.OpLOr} {
		a, b := pairs([]uint32{0, 1})
		name := fmt.Sprintf("%s.bool", op)
		table = append(table, launch(edge{name: name, prog: elementwise(name, ir.U32, ir.Bool, [][]uint32{a, b}, func(x []ir.Expr) ir.Expr {
			return ir.BinaryExpr{Op: op, X: ir.Cast(ir.Bool, x[0]), Y: ir.Cast(ir.Bool, x[1])}
		})}, [][]uint32{a, b}))
	}
	// select picks by a comparison of the operands themselves.
	for _, t := range arith {
		a, b := pairs(edgesOf(t))
		name := fmt.Sprintf("select.%s", t)
		table = append(table, launch(edge{name: name, prog: elementwise(name, t, t, [][]uint32{a, b}, func(x []ir.Expr) ir.Expr {
			return ir.Select(ir.Lt(x[0], x[1]), x[0], x[1])
		})}, [][]uint32{a, b}))
	}
	// Casts between every pair of numeric types, and through bool.
	for _, from := range arith {
		for _, to := range []ir.Type{ir.I32, ir.U32, ir.F32, ir.Bool} {
			if from == ir.F32 && to == ir.Bool {
				continue
			}
			xs := edgesOf(from)
			name := fmt.Sprintf("cast.%s.%s", from, to)
			table = append(table, launch(edge{name: name, prog: elementwise(name, from, to, [][]uint32{xs}, func(x []ir.Expr) ir.Expr { return ir.Cast(to, x[0]) })}, [][]uint32{xs}))
		}
	}
	for _, to := range []ir.Type{ir.I32, ir.U32} {
		name := fmt.Sprintf("cast.bool.%s", to)
		table = append(table, launch(edge{name: name, prog: elementwise(name, ir.I32, to, [][]uint32{i32Edges}, func(x []ir.Expr) ir.Expr {
			return ir.Cast(to, ir.Ge(x[0], ir.LitI32(0)))
		})}, [][]uint32{i32Edges}))
	}
	table = append(table, fmaEdge())
	return append(table, statementEdges()...)
}

// fmaEdge runs fma over triples of f32 edge values; the unfused form is accepted.
func fmaEdge() edge {
	xs := f32Bits(0, negZero(), 1, -1, 0.1, 3, 1e-10, 16777217, 0x1.000002p0, -0x1.fffffep-1, math.MaxFloat32, 0x1p-126, float32(math.Inf(1)), float32(math.Inf(-1)))
	var a, b, c []uint32
	for _, x := range xs {
		for _, y := range xs {
			for _, z := range xs {
				a, b, c = append(a, x), append(b, y), append(c, z)
			}
		}
	}
	cols := [][]uint32{a, b, c}
	e := edge{
		name:    "fma.f32",
		prog:    elementwise("fma.f32", ir.F32, ir.F32, cols, func(x []ir.Expr) ir.Expr { return ir.Fma(x[0], x[1], x[2]) }),
		unfused: elementwise("fma.f32", ir.F32, ir.F32, cols, func(x []ir.Expr) ir.Expr { return ir.Add(ir.Mul(x[0], x[1]), x[2]) }),
	}
	return launch(e, cols)
}

// flushDenormals returns bufs with every denormal f32 element of the buffers whose
// type is f32 replaced by a zero of the same sign.
func flushDenormals(decls []ir.BufferDecl, bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for k, buf := range bufs {
		if buf == nil || k >= len(decls) || decls[k].Type != ir.F32 {
			out[k] = buf
			continue
		}
		ws := wordsOf(buf)
		for i, w := range ws {
			if w&0x7f800000 == 0 {
				ws[i] = w & 0x80000000
			}
		}
		out[k] = words(ws)
	}
	return out
}

// outputDecls returns the declarations of p's output buffers, in binding order.
func outputDecls(p *ir.Program) []ir.BufferDecl {
	var out []ir.BufferDecl
	for _, b := range p.Outputs() {
		out = append(out, p.Buffers[b])
	}
	return out
}

// references returns every accepted reference output of e: the CPU reference's,
// with denormal inputs flushed, with denormal results flushed, and the same for the
// unfused form of an fma.
func references(t *testing.T, e edge) [][][]byte {
	t.Helper()
	ctx := context.Background()
	var refs [][][]byte
	for _, p := range []*ir.Program{e.prog, e.unfused} {
		if p == nil {
			continue
		}
		for _, inputs := range [][][]byte{e.inputs, flushDenormals(p.Buffers, e.inputs)} {
			want, err := interp.Run(ctx, p, interp.Options{WorkgroupSize: e.wg, Spec: e.spec},
				interp.Launch{Grid: e.grid, Inputs: inputs, OutputCounts: e.counts})
			if err != nil {
				t.Fatalf("interp: %v", err)
			}
			refs = append(refs, want, flushDenormals(outputDecls(p), want))
		}
	}
	return refs
}

// compareEdge checks every output element of got against the references under e's
// rule and returns a description of the first mismatches.
func compareEdge(e edge, got [][]byte, refs [][][]byte) []string {
	rule := e.match
	if rule == nil {
		rule = func(_, _ int, g, w uint32) bool { return exactOrNaN(g, w) }
	}
	decls := outputDecls(e.prog)
	match := func(out, i int, g, w uint32) bool {
		// A device that flushes denormals may flush a result that is tiny before
		// rounding, even when it rounds to the smallest normal.
		if decls[out].Type == ir.F32 && g&0x7f800000 == 0 && w&0x7fffffff <= 0x00800000 {
			return true
		}
		return rule(out, i, g, w)
	}
	var bad []string
	if len(got) != len(refs[0]) {
		return []string{fmt.Sprintf("%d outputs, want %d", len(got), len(refs[0]))}
	}
	for k := range got {
		if len(got[k]) != len(refs[0][k]) {
			bad = append(bad, fmt.Sprintf("output %s: %d bytes, want %d", decls[k].Name, len(got[k]), len(refs[0][k])))
			continue
		}
		g := wordsOf(got[k])
		for i := range g {
			ok := false
			for _, ref := range refs {
				ok = ok || match(k, i, g[i], binary.LittleEndian.Uint32(ref[k][4*i:]))
			}
			if !ok && len(bad) < 8 {
				var ins []string
				for _, in := range e.inputs {
					if 4*i+4 <= len(in) {
						ins = append(ins, fmt.Sprintf("%#08x", binary.LittleEndian.Uint32(in[4*i:])))
					}
				}
				bad = append(bad, fmt.Sprintf("%s[%d]: got %#08x, want %#08x (inputs %v)", decls[k].Name, i, g[i], binary.LittleEndian.Uint32(refs[0][k][4*i:]), ins))
			}
		}
	}
	return bad
}

// TestEdgeTableMatchesReference runs the semantic edge table on the Vulkan backend
// under the validation layer, with buffers mapped directly and staged.
func TestEdgeTableMatchesReference(t *testing.T) {
	b := newTestBackend(t)
	table := edgeTable()
	bothMemoryPaths(t, b, func(t *testing.T) { edges(t, b, table) })
}

func edges(t *testing.T, b *Backend, table []edge) {
	for _, e := range table {
		t.Run(e.name, func(t *testing.T) {
			if err := ir.Validate(e.prog); err != nil {
				t.Fatalf("edge program is invalid: %v", err)
			}
			refs := references(t, e)
			got, err := run(t, b, e.prog, e.spec, e.wg, e.grid, e.inputs, e.counts)
			if err != nil {
				t.Fatalf("vulkan: %v", err)
			}
			for _, msg := range compareEdge(e, got.Outputs, refs) {
				t.Error(msg)
			}
		})
	}
}
