package gputest

import (
	"fmt"

	"github.com/kiln-dev/kiln/ir"
)

// AddOne is out[i] = in[i] + 1 over u32, 64 invocations per workgroup.
func AddOne() *ir.Program {
	b := ir.NewBuilder("test.add_one", 64, 1, 1)
	in := b.Buffer("in", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(in)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(ir.Load(in, i), ir.LitU32(1)))
	})
	return b.MustBuild()
}

// Spin is a kernel whose running time grows with its parameter n, the number of
// loop iterations of each invocation; every invocation xors its result into
// out[0].
func Spin() *ir.Program {
	return spin("test.spin", func(b *ir.Builder) ir.Expr { return b.Param("n", ir.U32, ir.LitU32(1)) })
}

// SpinUniform is [Spin] with its loop count the uniform n, so that no compiler
// knows the trip count.
func SpinUniform() *ir.Program {
	return spin("test.spin_uniform", func(b *ir.Builder) ir.Expr { return b.Uniform("n", ir.U32) })
}

// spin builds Spin's kernel with the loop count count declares.
func spin(name string, count func(b *ir.Builder) ir.Expr) *ir.Program {
	b := ir.NewBuilder(name, 64, 1, 1)
	out := b.Buffer("out", ir.U32, ir.Write)
	n := count(b)
	x := b.Var("x", ir.U32, ir.Add(ir.GlobalID(0), ir.Mul(ir.GlobalID(1), ir.LitU32(1<<20))))
	b.For("k", ir.U32, ir.LitU32(0), n, ir.LitU32(1), func(body *ir.Block, k ir.Expr) {
		body.Assign("x", ir.Xor(x, ir.Shl(x, ir.LitU32(13))))
		body.Assign("x", ir.Xor(x, ir.Shr(x, ir.LitU32(17))))
		body.Assign("x", ir.Add(ir.Xor(x, ir.Shl(x, ir.LitU32(5))), k))
	})
	b.Atomic(ir.AtomicXor, out, ir.LitU32(0), x)
	return b.MustBuild()
}

// WideCopy copies n 16-bit elements of type ty per invocation, from
// src[i·n + k] to dst[i·n + k + off], 32 invocations per workgroup: its loads
// are lets and its stores a run, the shapes the emitters' wide 16-bit
// accesses take (plugins/internal/wide).
func WideCopy(ty ir.Type, n, off int) *ir.Program {
	b := ir.NewBuilder("wide_copy", 32, 1, 1)
	src := b.Buffer("src", ty, ir.Read)
	dst := b.Buffer("dst", ty, ir.ReadWrite)
	at := b.Let("at", ir.Mul(ir.GlobalID(0), ir.LitU32(uint32(n))))
	to := b.Let("to", ir.Add(at, ir.LitU32(uint32(off))))
	for k := range n {
		b.Let(fmt.Sprintf("v%d", k), ir.Load(src, ir.Add(at, ir.LitU32(uint32(k)))))
	}
	for k := range n {
		b.Store(dst, ir.Add(to, ir.LitU32(uint32(k))), ir.Local(fmt.Sprintf("v%d", k)))
	}
	return b.MustBuild()
}
