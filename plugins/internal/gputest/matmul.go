package gputest

import (
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// TCProgram is matmul_tc's shape (ir/kernels) written with builder calls:
// workgroup (x, y) computes the tm×tn tile of c = a·b (m×k times k×n,
// row-major) in K steps of tk, every load and the store bounded by the
// matrices' edges; a and b of type typ, multiplied at tf32 precision when tf32
// is set.
func TCProgram(typ ir.Type, tf32 bool, tm, tn, tk, invocations uint32) *ir.Program {
	b := ir.NewBuilder("matmul_tc", invocations, 1, 1)
	m := b.Uniform("m", ir.U32)
	n := b.Uniform("n", ir.U32)
	k := b.Uniform("k", ir.U32)
	a := b.Buffer("a", typ, ir.Read)
	bm := b.Buffer("b", typ, ir.Read)
	c := b.Buffer("c", ir.F32, ir.Write)
	acc := b.Matrix("acc", ir.F32, tm, tn)
	at := b.Matrix("a_tile", typ, tm, tk)
	bt := b.Matrix("b_tile", typ, tk, tn)
	row0 := b.Let("row0", ir.Mul(ir.WorkgroupID(1), ir.LitU32(tm)))
	col0 := b.Let("col0", ir.Mul(ir.WorkgroupID(0), ir.LitU32(tn)))
	rows := b.Let("rows", ir.Sub(m, row0))
	cols := b.Let("cols", ir.Sub(n, col0))
	b.MatrixFill(acc, ir.LitF32(0))
	b.For("k0", ir.U32, ir.LitU32(0), k, ir.LitU32(tk), func(loop *ir.Block, k0 ir.Expr) {
		depth := loop.Let("depth", ir.Sub(k, k0))
		loop.MatrixLoadBounded(at, a, ir.Add(ir.Mul(row0, k), k0), k, ir.RowMajor, rows, depth)
		loop.MatrixLoadBounded(bt, bm, ir.Add(ir.Mul(k0, n), col0), n, ir.RowMajor, depth, cols)
		if tf32 {
			loop.MatrixMMATF32(acc, at, bt)
		} else {
			loop.MatrixMMA(acc, at, bt)
		}
	})
	b.MatrixStoreBounded(acc, c, ir.Add(ir.Mul(row0, n), col0), n, ir.RowMajor, rows, cols)
	return b.MustBuild()
}

// CorpusTC is the corpus kernel matmul_tc's program (ir/kernels) configured
// for operands of type op (f32 at tf32 precision) and a tm×tn tile in k steps
// of tk.
func CorpusTC(t testing.TB, op ir.Type, tm, tn, tk uint32) *ir.Program {
	t.Helper()
	k, ok := kernels.Lookup("matmul_tc")
	if !ok {
		t.Fatal("no matmul_tc in the corpus")
	}
	var o ir.SpecMap
	o.Set("type", ir.SpecDType(op))
	o.Set("tf32", ir.SpecBool(op == ir.F32))
	o.Set("tm", ir.SpecU32(tm))
	o.Set("tn", ir.SpecU32(tn))
	o.Set("tk", ir.SpecU32(tk))
	built, _, err := k.Configure(o)
	if err != nil {
		t.Fatal(err)
	}
	return built.Program()
}
