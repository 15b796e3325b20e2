package kit

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// The subgroup table (IR v1.1). Each program runs two workgroups of 64
// invocations, with any subgroup size ("any": the reference tries every size the
// workgroup allows and the outputs must match one of them) or a required one
// ("size8", "size32"). A backend may reject a subgroup program at compile time
// with a pluginapi.RejectedError, and the case is then skipped with its reason,
// unless the adapter's profile claims what the program needs: subgroup
// operations (and shuffles, for shuffle and broadcast) at the size it requires.

const subgroupWG = 64

// subgroupSizes are the sizes the table runs programs with; 0 is any.
var subgroupSizes = []uint32{0, 8, 32}

func sizeName(size uint32) string {
	if size == 0 {
		return "any"
	}
	return fmt.Sprintf("size%d", size)
}

// subgroupCases is the subgroup table: the builtins at every size, every
// reduction on every type, and shuffles and broadcasts with computed, literal,
// uniform and out-of-range lanes.
func subgroupCases() []semantic {
	var out []semantic
	for _, size := range []uint32{0, 1, 4, 8, 16, 32, 64} {
		out = append(out, subgroupBuiltins(size))
	}
	for _, size := range subgroupSizes {
		for _, op := range []ir.SubgroupOp{ir.SubgroupOpAdd, ir.SubgroupOpMin, ir.SubgroupOpMax} {
			for _, t := range []ir.Type{ir.I32, ir.U32, ir.F32} {
				out = append(out, subgroupReduce(op, t, size))
			}
		}
	}
	for _, t := range []ir.Type{ir.Bool, ir.I32, ir.U32, ir.F32} {
		for _, size := range subgroupSizes {
			out = append(out, subgroupShuffle(t, size))
		}
		out = append(out, subgroupBroadcast(t))
	}
	return append(out, subgroupInLoop())
}

// subgroupProgram starts a subgroup program: a read buffer x of type t (u32 for
// bool, cast), a write buffer out, and the index g; body returns the value each
// invocation stores.
func subgroupProgram(name string, t ir.Type, size uint32, body func(b *ir.Builder, x ir.Expr) ir.Expr) *ir.Program {
	b := ir.NewBuilder("kiln.semantics.subgroup."+name, subgroupWG, 1, 1)
	b.RequireSubgroupSize(size)
	xs := b.Buffer("x", storage(t), ir.Read)
	out := b.Buffer("out", storage(t), ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	var x ir.Expr = ir.Load(xs, g)
	if t == ir.Bool {
		x = ir.Cast(ir.Bool, x)
	}
	v := body(b, x)
	if t == ir.Bool {
		v = ir.Cast(ir.U32, v)
	}
	b.Store(out, g, v)
	return b.Program()
}

// subgroupLaunch is the launch of a subgroup program over the values xs.
func subgroupLaunch(xs []uint32) launch {
	return launch1(uint32(len(xs)/subgroupWG), [][]byte{words(xs), nil}, []uint32{0, uint32(len(xs))})
}

// subgroupValues are 128 values of type t: edge values, and for f32 sums and
// all-NaN runs that no order of addition or comparison can change.
func subgroupValues(t ir.Type, op ir.SubgroupOp) []uint32 {
	n := 2 * subgroupWG
	switch {
	case t == ir.Bool:
		return u32s(n, func(k int) uint32 { return uint32(k*k/3) & 1 })
	case t == ir.F32 && op == ir.SubgroupOpAdd:
		// Halves up to ±64: every partial sum is exact in f32.
		return u32s(n, func(k int) uint32 { return f(float32(k*37%257-128) / 2) })
	case t == ir.F32:
		// The first 32 lanes of workgroup 0 are NaN, so subgroups of up to 32
		// lanes reduce all-NaN; the rest mixes NaN, zeros of both signs,
		// infinities and denormals with ordinary values.
		edges := f32Edges
		return u32s(n, func(k int) uint32 {
			if k < 32 {
				return nanBits
			}
			return edges[(k*7)%len(edges)]
		})
	}
	edges := edgesOf(t)
	return u32s(n, func(k int) uint32 { return edges[(k*5)%len(edges)] ^ uint32(k/len(edges))*0x01010101 })
}

func subgroupCase(name string, p *ir.Program, xs []uint32, uniforms map[string]ir.Literal) semantic {
	s := semantic{name: name, prog: p, c: subgroupLaunch(xs)}
	if uniforms != nil {
		s = withUniforms(s, uniforms)
	}
	return s
}

// subgroupBuiltins stores subgroup_size and subgroup_invocation_id, and the
// invocation's subgroup index: (local index - lane) / size.
func subgroupBuiltins(size uint32) semantic {
	p := subgroupProgram("builtins."+sizeName(size), ir.U32, size, func(b *ir.Builder, x ir.Expr) ir.Expr {
		s := b.Let("s", ir.SubgroupSize())
		lane := b.Let("lane", ir.SubgroupInvocationID())
		index := b.Let("index", ir.Div(ir.Sub(ir.LocalID(0), lane), s))
		return ir.Add(ir.Mul(s, ir.LitU32(1<<20)), ir.Add(ir.Mul(index, ir.LitU32(1<<10)), ir.Add(lane, ir.Mul(x, ir.LitU32(0)))))
	})
	return subgroupCase("builtins."+sizeName(size), p, make([]uint32, 2*subgroupWG), nil)
}

// subgroupReduce reduces x over the subgroup with op.
func subgroupReduce(op ir.SubgroupOp, t ir.Type, size uint32) semantic {
	name := fmt.Sprintf("%s.%s.%s", op, t, sizeName(size))
	p := subgroupProgram(name, t, size, func(_ *ir.Builder, x ir.Expr) ir.Expr {
		return ir.SubgroupExpr{Op: op, X: x}
	})
	return subgroupCase(name, p, subgroupValues(t, op), nil)
}

// subgroupShuffle reads other lanes' values: the next lane (wrapping), the
// neighbour by xor 1, the mirror lane and lane 1000, which is past any subgroup
// (0 or false); the four results are combined into one value per invocation.
func subgroupShuffle(t ir.Type, size uint32) semantic {
	name := fmt.Sprintf("shuffle.%s.%s", t, sizeName(size))
	p := subgroupProgram(name, t, size, func(b *ir.Builder, x ir.Expr) ir.Expr {
		s := b.Let("s", ir.SubgroupSize())
		lane := b.Let("lane", ir.SubgroupInvocationID())
		next := b.Let("next", ir.SubgroupShuffle(x, ir.Rem(ir.Add(lane, ir.LitU32(1)), s)))
		pair := b.Let("pair", ir.SubgroupShuffle(x, ir.Xor(lane, ir.LitU32(1))))
		mirror := b.Let("mirror", ir.SubgroupShuffle(x, ir.Sub(ir.Sub(s, ir.LitU32(1)), lane)))
		far := b.Let("far", ir.SubgroupShuffle(x, ir.LitU32(1000)))
		pick := ir.Rem(ir.GlobalID(0), ir.LitU32(4))
		return ir.Select(ir.Eq(pick, ir.LitU32(0)), next,
			ir.Select(ir.Eq(pick, ir.LitU32(1)), pair,
				ir.Select(ir.Eq(pick, ir.LitU32(2)), mirror, far)))
	})
	return subgroupCase(name, p, subgroupValues(t, ir.SubgroupOpShuffle), nil)
}

// subgroupBroadcast reads one lane for the whole subgroup: literal lanes 0 and 3,
// a lane from a uniform, and lane 200, past any subgroup (0 or false).
func subgroupBroadcast(t ir.Type) semantic {
	name := fmt.Sprintf("broadcast.%s.any", t)
	p := subgroupProgram(name, t, 0, func(b *ir.Builder, x ir.Expr) ir.Expr {
		u := b.Uniform("lane", ir.U32)
		first := b.Let("first", ir.SubgroupBroadcast(x, ir.LitU32(0)))
		third := b.Let("third", ir.SubgroupBroadcast(x, ir.LitU32(3)))
		chosen := b.Let("chosen", ir.SubgroupBroadcast(x, u))
		far := b.Let("far", ir.SubgroupBroadcast(x, ir.LitU32(200)))
		pick := ir.Rem(ir.GlobalID(0), ir.LitU32(4))
		return ir.Select(ir.Eq(pick, ir.LitU32(0)), first,
			ir.Select(ir.Eq(pick, ir.LitU32(1)), third,
				ir.Select(ir.Eq(pick, ir.LitU32(2)), chosen, far)))
	})
	return subgroupCase(name, p, subgroupValues(t, ir.SubgroupOpBroadcast), map[string]ir.Literal{"lane": ir.LitU32(1)})
}

// subgroupInLoop runs a reduction in a uniform loop and under a uniform branch,
// and a shuffle after a divergent branch has joined again.
func subgroupInLoop() semantic {
	p := subgroupProgram("control.any", ir.U32, 0, func(b *ir.Builder, x ir.Expr) ir.Expr {
		acc := b.Var("acc", ir.U32, ir.LitU32(0))
		b.For("k", ir.U32, ir.LitU32(0), ir.LitU32(3), ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
			body.Assign("acc", ir.Add(acc, ir.SubgroupMax(ir.Add(x, k))))
			body.If(ir.Eq(ir.WorkgroupID(0), ir.LitU32(1)), func(then *ir.Block) {
				then.Assign("acc", ir.Add(acc, ir.SubgroupAdd(x)))
			})
		})
		odd := b.Var("odd", ir.U32, x)
		b.If(ir.Eq(ir.And(ir.LocalID(0), ir.LitU32(1)), ir.LitU32(1)), func(then *ir.Block) {
			then.Assign("odd", ir.Mul(x, ir.LitU32(3)))
		})
		return ir.Add(acc, ir.SubgroupShuffle(odd, ir.Xor(ir.SubgroupInvocationID(), ir.LitU32(1))))
	})
	return subgroupCase("control.any", p, subgroupValues(ir.U32, ir.SubgroupOpAdd), nil)
}
