package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// fourBuffers has a read, a read_write, a sized-by-dispatch write and a fixed
// write buffer, so outputs are bindings 1, 2 and 3.
func fourBuffers(t *testing.T) *ir.Program {
	t.Helper()
	b := ir.NewBuilder("test.four", 64, 1, 1)
	x := b.Buffer("x", ir.F32, ir.Read)
	y := b.Buffer("y", ir.F32, ir.ReadWrite)
	out := b.Buffer("out", ir.U32, ir.Write)
	fixed := b.FixedBuffer("fixed", ir.U32, ir.Write, 3)
	i := b.Let("i", ir.GlobalID(0))
	b.Store(y, i, ir.Load(x, i))
	b.Store(out, i, i)
	b.Store(fixed, i, i)
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlanSizesAndGrid(t *testing.T) {
	p := fourBuffers(t)
	w := Work{
		Invocations:  [3]uint32{130, 1, 1},
		Inputs:       [][]byte{make([]byte, 16), make([]byte, 8)},
		OutputCounts: []uint32{0, 0, 5},
	}
	req, sizes, err := plan(p, [3]uint32{}, w)
	if err != nil {
		t.Fatal(err)
	}
	if req.Grid != [3]uint32{3, 1, 1} {
		t.Errorf("grid %v, want ceil(130/64)=3", req.Grid)
	}
	if want := []int{8, 20, 12}; len(sizes) != 3 || sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] {
		t.Errorf("output sizes %v, want %v", sizes, want)
	}
	if len(req.Inputs) != 4 || len(req.OutputCounts) != 4 || req.OutputCounts[3] != 3 {
		t.Errorf("request not normalized per binding: %d inputs, counts %v", len(req.Inputs), req.OutputCounts)
	}
	req, _, err = plan(p, [3]uint32{32, 1, 1}, w)
	if err != nil || req.Grid != [3]uint32{5, 1, 1} {
		t.Fatalf("with workgroup override 32: grid %v, %v; want 5", req.Grid, err)
	}
	w.Invocations, w.Grid = [3]uint32{}, [3]uint32{7, 2, 1}
	if req, _, err = plan(p, [3]uint32{}, w); err != nil || req.Grid != [3]uint32{7, 2, 1} {
		t.Fatalf("explicit grid: %v, %v", req.Grid, err)
	}
}

func TestPlanRejectsBadLaunches(t *testing.T) {
	p := fourBuffers(t)
	ok := Work{Inputs: [][]byte{nil, nil}, OutputCounts: []uint32{0, 0, 1}}
	for name, tc := range map[string]struct {
		mutate func(w *Work)
		want   string
	}{
		"too many inputs":     {func(w *Work) { w.Inputs = make([][]byte, 5) }, "5 inputs for 4 buffers"},
		"too many counts":     {func(w *Work) { w.OutputCounts = make([]uint32, 5) }, "5 output counts"},
		"ragged input":        {func(w *Work) { w.Inputs[0] = make([]byte, 3) }, "not a whole number"},
		"input to write":      {func(w *Work) { w.Inputs = [][]byte{nil, nil, {1, 2, 3, 4}} }, "write-only"},
		"missing count":       {func(w *Work) { w.OutputCounts = []uint32{0, 0} }, "OutputCounts[2]"},
		"fixed count clash":   {func(w *Work) { w.OutputCounts = []uint32{0, 0, 1, 9} }, "fixed count of 3"},
		"grid and invocation": {func(w *Work) { w.Grid, w.Invocations = [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1} }, "set one of them"},
	} {
		w := ok
		w.Inputs = append([][]byte(nil), ok.Inputs...)
		tc.mutate(&w)
		_, _, err := plan(p, [3]uint32{}, w)
		var le *LaunchError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s: got %v, want a LaunchError saying %q with a Fix", name, err, tc.want)
		}
	}
	if _, _, err := plan(p, [3]uint32{}, ok); err != nil {
		t.Fatalf("the base launch must pass: %v", err)
	}
}

func TestPlanFixedReadWriteCount(t *testing.T) {
	b := ir.NewBuilder("test.fixedrw", 1, 1, 1)
	acc := b.FixedBuffer("acc", ir.U32, ir.ReadWrite, 2)
	b.Store(acc, ir.LitU32(0), ir.LitU32(1))
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := plan(p, [3]uint32{}, Work{Inputs: [][]byte{make([]byte, 4)}}); err == nil {
		t.Fatal("a fixed-count read_write buffer with the wrong input size must be rejected")
	}
	if _, sizes, err := plan(p, [3]uint32{}, Work{Inputs: [][]byte{make([]byte, 8)}}); err != nil || sizes[0] != 8 {
		t.Fatalf("sizes %v, %v", sizes, err)
	}
}

func TestCheckOutputs(t *testing.T) {
	p := fourBuffers(t)
	sizes := []int{8, 20, 12}
	good := [][]byte{make([]byte, 8), make([]byte, 20), make([]byte, 12)}
	if err := checkOutputs("x:0", p, sizes, good); err != nil {
		t.Fatal(err)
	}
	var bad *BadResultError
	err := checkOutputs("x:0", p, sizes, good[:2])
	if !errors.As(err, &bad) || bad.Backend != "x:0" || !strings.Contains(err.Error(), "2 outputs") {
		t.Fatalf("too few outputs: %v", err)
	}
	err = checkOutputs("x:0", p, sizes, append(good, nil))
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "4 outputs") {
		t.Fatalf("too many outputs: %v", err)
	}
	short := [][]byte{make([]byte, 8), make([]byte, 16), make([]byte, 12)}
	err = checkOutputs("x:0", p, sizes, short)
	if !errors.As(err, &bad) || !strings.Contains(err.Error(), "(buffer out) is 16 bytes") {
		t.Fatalf("wrong size: %v", err)
	}
}
