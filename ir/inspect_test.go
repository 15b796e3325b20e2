package ir_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// label names a node for the walk's transcript.
func label(n any) string {
	switch n := n.(type) {
	case ir.LoadExpr:
		return "load " + n.Target
	case ir.StoreStmt:
		return "store " + n.Target
	case ir.AtomicStmt:
		return "atomic " + n.Target
	case ir.LocalRef:
		return n.Name
	case ir.Literal:
		return fmt.Sprint(n.Bits)
	}
	return fmt.Sprintf("%T", n)[len("ir."):]
}

// TestInspectVisitsInProgramOrder: statements, then their expressions in field
// order and their nested blocks, depth first; nil expressions are skipped.
func TestInspectVisitsInProgramOrder(t *testing.T) {
	b := ir.NewBuilder("t.inspect", 64, 1, 1)
	x := b.Buffer("x", ir.U32, ir.ReadWrite)
	i := b.Let("i", ir.GlobalID(0))
	b.If(ir.Lt(i, ir.Len(x)), func(then *ir.Block) {
		then.Store(x, i, ir.Add(ir.Load(x, i), ir.LitU32(1)))
	})
	b.For("j", ir.U32, ir.LitU32(0), ir.LitU32(2), ir.LitU32(1), func(loop *ir.Block, j ir.Expr) {
		loop.Atomic(ir.AtomicAdd, x, ir.LitU32(0), j)
	})
	p := b.MustBuild()
	var got []string
	ir.Inspect(p.Body, func(n any) bool {
		got = append(got, label(n))
		return true
	})
	want := []string{"LetStmt", "BuiltinRef",
		"IfStmt", "BinaryExpr", "i", "LenExpr", "store x", "i", "BinaryExpr", "load x", "i", "1",
		"ForStmt", "0", "2", "1", "atomic x", "0", "j"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("walk\n%v\nwant\n%v", got, want)
	}
	// A false answer skips the node's expressions and blocks, not its siblings.
	got = got[:0]
	ir.Inspect(p.Body, func(n any) bool {
		got = append(got, label(n))
		_, isIf := n.(ir.IfStmt)
		return !isIf
	})
	if want := []string{"LetStmt", "BuiltinRef", "IfStmt", "ForStmt", "0", "2", "1", "atomic x", "0", "j"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pruned walk\n%v\nwant\n%v", got, want)
	}
}

// TestInspectVisitsMatrixStatements: a matrix statement's expressions, in field
// order (IR v1.2); a nil bound is skipped.
func TestInspectVisitsMatrixStatements(t *testing.T) {
	b := ir.NewBuilder("t.inspect.v12", 64, 1, 1)
	b.Buffer("x", ir.F16, ir.ReadWrite)
	b.Matrix("m", ir.F16, 16, 16)
	b.Matrix("acc", ir.F32, 16, 16)
	b.MatrixFill("m", ir.LitF16(0))
	b.MatrixLoadBounded("m", "x", ir.LitU32(1), ir.LitU32(2), ir.RowMajor, ir.LitU32(3), ir.LitU32(4))
	b.MatrixStore("m", "x", ir.LitU32(5), ir.LitU32(6), ir.ColMajor)
	b.MatrixMMA("acc", "m", "m")
	b.MatrixConvert("m", "acc")
	p := b.MustBuild()
	var got []string
	ir.Inspect(p.Body, func(n any) bool {
		got = append(got, label(n))
		return true
	})
	want := []string{"MatrixFillStmt", "0", "MatrixLoadStmt", "1", "2", "3", "4", "MatrixStoreStmt", "5", "6",
		"MatrixMMAStmt", "MatrixConvertStmt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("walk\n%v\nwant\n%v", got, want)
	}
}

// Inspect finds what a program reads: here, the buffers it loads from.
func ExampleInspect() {
	b := ir.NewBuilder("example.inspect", 64, 1, 1)
	a := b.Buffer("a", ir.F32, ir.Read)
	c := b.Buffer("c", ir.F32, ir.Write)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(c, i, ir.Mul(ir.Load(a, i), ir.Load(a, ir.Add(i, ir.LitU32(1)))))
	loads := map[string]int{}
	ir.Inspect(b.MustBuild().Body, func(n any) bool {
		if l, ok := n.(ir.LoadExpr); ok {
			loads[l.Target]++
		}
		return true
	})
	fmt.Println(loads)
	// Output: map[a:2]
}
