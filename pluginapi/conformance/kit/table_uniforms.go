package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// uniformCases is the uniform table (IR v1.1): uniforms of every type reach the
// program with every bit (NaN payloads, -0, denormals, extremes), shape a loop
// the way a matrix size does, sit next to parameters, and fill the whole
// uniform-and-buffer budget (ir.MaxBuffers of them together).
func uniformCases() []semantic {
	var out []semantic
	for k, set := range []struct{ a, b, c uint32 }{
		{7, i(-3), f(2.5)},
		{0xFFFFFFFF, minI32Bits, negZero},
		{0, maxI32Bits, 0x7FC00001},
		{0x80000000, 0, f(0x1p-140)},
		{1, 1, infBits},
	} {
		out = append(out, uniformTypes(k, set.a, set.b, set.c))
	}
	for _, mn := range [][2]uint32{{0, 0}, {1, 1}, {3, 5}, {7, 2}, {2, 33}} {
		out = append(out, uniformShape(mn[0], mn[1]))
	}
	return append(out, uniformsAndParams(), uniformsFillTheBudget())
}

// withUniforms sets the launch's uniform block from values by name.
func withUniforms(s semantic, values map[string]ir.Literal) semantic {
	s.c.Uniforms, s.err = ir.EncodeUniforms(s.prog, values)
	return s
}

// uniformTypes stores uniforms of each type and values computed from them.
func uniformTypes(k int, a, b, c uint32) semantic {
	bl := ir.NewBuilder("kiln.semantics.uniform.types", 4, 1, 1)
	ou := bl.Buffer("out_u32", ir.U32, ir.Write)
	oi := bl.Buffer("out_i32", ir.I32, ir.Write)
	of := bl.Buffer("out_f32", ir.F32, ir.Write)
	ua := bl.Uniform("a", ir.U32)
	ub := bl.Uniform("b", ir.I32)
	uc := bl.Uniform("c", ir.F32)
	g := bl.Let("g", ir.GlobalID(0))
	bl.Store(ou, g, ir.Add(ua, g))
	bl.Store(oi, g, ir.Sub(ub, ir.Cast(ir.I32, g)))
	bl.Store(of, g, ir.Select(ir.Eq(g, ir.LitU32(0)), uc, ir.Mul(uc, ir.Cast(ir.F32, g))))
	s := semantic{name: fmt.Sprintf("types.%d", k), prog: bl.Program(),
		c:      launch1(1, [][]byte{nil, nil, nil}, []uint32{4, 4, 4}),
		pinned: [][]uint32{{a}, {b}, {c}}}
	return withUniforms(s, map[string]ir.Literal{
		"a": {Type: ir.U32, Bits: a}, "b": {Type: ir.I32, Bits: b}, "c": {Type: ir.F32, Bits: c}})
}

// uniformShape sums rows of an m×n matrix whose shape comes from uniforms: the
// same compiled program serves every shape.
func uniformShape(m, n uint32) semantic {
	b, in, out := inOut("kiln.semantics.uniform.shape", 8, ir.U32, ir.U32)
	um := b.Uniform("m", ir.U32)
	un := b.Uniform("n", ir.U32)
	row := b.Let("row", ir.GlobalID(0))
	b.If(ir.Lt(row, um), func(then *ir.Block) {
		sum := then.Var("sum", ir.U32, ir.LitU32(0))
		then.For("k", ir.U32, ir.LitU32(0), un, ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
			body.Assign("sum", ir.Add(sum, ir.Load(in, ir.Add(ir.Mul(row, un), k))))
		})
		then.Store(out, row, sum)
	})
	data := u32s(int(m*n), func(k int) uint32 { return uint32(k*k + 1) })
	want := make([]uint32, m)
	for r := range m {
		for k := range n {
			want[r] += data[r*n+k]
		}
	}
	s := semantic{name: fmt.Sprintf("shape.%dx%d", m, n), prog: b.Program(),
		c: launch1(1, [][]byte{words(data), nil}, []uint32{0, m}), pinned: [][]uint32{want}}
	return withUniforms(s, map[string]ir.Literal{"m": ir.LitU32(m), "n": ir.LitU32(n)})
}

// uniformsAndParams mixes specialized parameters and uniforms of the same types.
func uniformsAndParams() semantic {
	b := ir.NewBuilder("kiln.semantics.uniform.params", 2, 1, 1)
	x := b.Buffer("x", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	scale := b.Param("scale", ir.F32, ir.LitF32(1))
	shift := b.Uniform("shift", ir.F32)
	offset := b.Param("offset", ir.U32, ir.LitU32(0))
	stride := b.Uniform("stride", ir.U32)
	g := b.Let("g", ir.GlobalID(0))
	b.Store(out, ir.Add(ir.Mul(g, stride), offset), ir.Add(ir.Mul(ir.Load(x, g), scale), shift))
	s := semantic{name: "params", prog: b.Program(),
		c:      launch1(2, [][]byte{words(f32Bits(1, 2, -3, 0.5)), nil}, []uint32{0, 12}),
		pinned: [][]uint32{{0, f(3.5), 0, 0, f(6.5), 0, 0, f(-8.5), 0, 0, f(2), 0}}}
	s.c.Spec.Set("scale", ir.SpecF32(3))
	s.c.Spec.Set("offset", ir.SpecU32(1))
	return withUniforms(s, map[string]ir.Literal{"shift": ir.LitF32(0.5), "stride": ir.LitU32(3)})
}

// uniformsFillTheBudget uses ir.MaxBuffers buffers and uniforms together: 28
// buffers and 4 uniforms.
func uniformsFillTheBudget() semantic {
	const uniforms = 4
	b := ir.NewBuilder("kiln.semantics.uniform.budget", 1, 1, 1)
	var names []string
	for k := range ir.MaxBuffers - uniforms {
		names = append(names, b.Buffer(fmt.Sprintf("b%d", k), ir.U32, ir.Write))
	}
	var us []ir.Expr
	values := map[string]ir.Literal{}
	for k := range uniforms {
		name := fmt.Sprintf("u%d", k)
		us = append(us, b.Uniform(name, ir.U32))
		values[name] = ir.LitU32(uint32(1000*k + 1))
	}
	var inputs [][]byte
	var counts []uint32
	var pins [][]uint32
	for k, name := range names {
		b.Store(name, ir.LitU32(0), ir.Add(ir.Len(name), us[k%uniforms]))
		inputs = append(inputs, nil)
		counts = append(counts, uint32(k%3+1))
		pins = append(pins, []uint32{uint32(k%3+1) + uint32(1000*(k%uniforms)+1)})
	}
	s := semantic{name: "budget", prog: b.Program(), c: launch1(1, inputs, counts), pinned: pins}
	return withUniforms(s, values)
}
