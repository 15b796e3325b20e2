package interp

import (
	"context"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// vectorAddProgram is the corpus's vector add: out[i] = a[i] + b[i].
func vectorAddProgram() *ir.Program {
	b := ir.NewBuilder("bench.vector.add.f32", 256, 1, 1)
	x := b.Buffer("a", ir.F32, ir.Read)
	y := b.Buffer("b", ir.F32, ir.Read)
	out := b.Buffer("out", ir.F32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(out)), func(then *ir.Block) {
		then.Store(out, i, ir.Add(ir.Load(x, i), ir.Load(y, i)))
	})
	return b.Program()
}

// matmulProgram is a naive row-major C[m][n] = sum_k A[m][k] * B[k][n], one output
// element per invocation, on 16x16 workgroups.
func matmulProgram() *ir.Program {
	b := ir.NewBuilder("bench.matmul.f32", 16, 16, 1)
	m := b.Param("m", ir.U32, ir.LitU32(1))
	n := b.Param("n", ir.U32, ir.LitU32(1))
	k := b.Param("k", ir.U32, ir.LitU32(1))
	a := b.Buffer("a", ir.F32, ir.Read)
	bb := b.Buffer("b", ir.F32, ir.Read)
	c := b.Buffer("c", ir.F32, ir.Write)
	col := b.Let("col", ir.GlobalID(0))
	row := b.Let("row", ir.GlobalID(1))
	b.If(ir.LAnd(ir.Lt(col, n), ir.Lt(row, m)), func(then *ir.Block) {
		acc := then.Var("acc", ir.F32, ir.LitF32(0))
		then.For("j", ir.U32, ir.LitU32(0), k, ir.LitU32(1), func(body *ir.Block, j ir.Expr) {
			prod := ir.Mul(ir.Load(a, ir.Add(ir.Mul(row, k), j)), ir.Load(bb, ir.Add(ir.Mul(j, n), col)))
			body.Assign("acc", ir.Add(acc, prod))
		})
		then.Store(c, ir.Add(ir.Mul(row, n), col), acc)
	})
	return b.Program()
}

func f32Input(n int) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%1000) * 0.25
	}
	return f32Bytes(v...)
}

func BenchmarkInterpVectorAdd(b *testing.B) { benchVectorAdd(b, false) }

// BenchmarkInterpVectorAddStrict is vector add in strict mode: it has no shared
// memory, so strict mode checks nothing and costs nothing here.
func BenchmarkInterpVectorAddStrict(b *testing.B) { benchVectorAdd(b, true) }

func benchVectorAdd(b *testing.B, strict bool) {
	const n = 16 << 20
	k, err := Compile(vectorAddProgram(), Options{Strict: strict})
	if err != nil {
		b.Fatal(err)
	}
	l := Launch{
		Grid:         [3]uint32{n / 256, 1, 1},
		Inputs:       [][]byte{f32Input(n), f32Input(n), nil},
		OutputCounts: []uint32{0, 0, n},
	}
	b.ResetTimer()
	for range b.N {
		if _, err := k.Run(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
}

func BenchmarkInterpReduction(b *testing.B) { benchReduction(b, false) }

// BenchmarkInterpReductionStrict is a shared-memory tree reduction in strict mode,
// where every shared access is checked against the shadow memory.
func BenchmarkInterpReductionStrict(b *testing.B) { benchReduction(b, true) }

func benchReduction(b *testing.B, strict bool) {
	k, ok := kernels.Lookup("reduce_sum")
	if !ok {
		b.Fatal("no reduce_sum kernel")
	}
	const n = 4 << 20
	kern, err := Compile(k.Program(), Options{Strict: strict})
	if err != nil {
		b.Fatal(err)
	}
	l := Launch{Grid: [3]uint32{n / 256, 1, 1}, Inputs: [][]byte{f32Input(n), nil}, OutputCounts: []uint32{0, n / 256}}
	b.ResetTimer()
	for range b.N {
		if _, err := kern.Run(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "elements/s")
}

func BenchmarkInterpMatmul(b *testing.B) {
	const size = 256
	var spec ir.SpecMap
	spec.Set("m", ir.SpecU32(size))
	spec.Set("n", ir.SpecU32(size))
	spec.Set("k", ir.SpecU32(size))
	k, err := Compile(matmulProgram(), Options{Spec: spec})
	if err != nil {
		b.Fatal(err)
	}
	l := Launch{
		Grid:         [3]uint32{size / 16, size / 16, 1},
		Inputs:       [][]byte{f32Input(size * size), f32Input(size * size), nil},
		OutputCounts: []uint32{0, 0, size * size},
	}
	b.ResetTimer()
	for range b.N {
		if _, err := k.Run(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(size*size)*float64(b.N)/sec, "elements/s")
	b.ReportMetric(float64(size*size*size)*float64(b.N)/sec, "MAC/s")
}
