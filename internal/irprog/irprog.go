package irprog

import "github.com/kiln-dev/kiln/ir"

// Saxpy returns y = a*x + y over f32, named name, with workgroup invocations a
// workgroup: buffer x (read), buffer y (read_write) and a the f32
// specialization parameter, 2 by default. Invocations past the end of y do
// nothing.
func Saxpy(name string, workgroup uint32) *ir.Program {
	b := ir.NewBuilder(name, workgroup, 1, 1)
	a := b.Param("a", ir.F32, ir.LitF32(2))
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
	})
	return b.MustBuild()
}
