package host

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// The 2-D program of issue 22's first item: 16×16 workgroups over a
// gridW×gridH image, every pixel (x, y) storing y*gridW+x+1.
const (
	gridW, gridH = 112, 80
)

// fixtureWorkByInvocations is fixtureWork launched by invocation count, the
// launch an autotune record may tune.
func fixtureWorkByInvocations() Work {
	w := fixtureWork()
	w.Grid, w.Invocations = [3]uint32{}, [3]uint32{1, 1, 1}
	return w
}

func image2D(t *testing.T) *ir.Program {
	t.Helper()
	b := ir.NewBuilder("test.image2d", 16, 16, 1)
	out := b.FixedBuffer("out", ir.U32, ir.Write, gridW*gridH)
	x := b.Let("x", ir.GlobalID(0))
	y := b.Let("y", ir.GlobalID(1))
	b.If(ir.LAnd(ir.Lt(x, ir.LitU32(gridW)), ir.Lt(y, ir.LitU32(gridH))), func(k *ir.Block) {
		i := k.Let("i", ir.Add(ir.Mul(y, ir.LitU32(gridW)), x))
		k.Store(out, i, ir.Add(i, ir.LitU32(1)))
	})
	p, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkImage fails unless every pixel of out holds its index plus one.
func checkImage(t *testing.T, how string, out []byte) {
	t.Helper()
	if len(out) != gridW*gridH*4 {
		t.Fatalf("%s: output is %d bytes, want %d", how, len(out), gridW*gridH*4)
	}
	wrong, first := 0, -1
	for i := range gridW * gridH {
		if binary.LittleEndian.Uint32(out[4*i:]) != uint32(i+1) {
			if first < 0 {
				first = i
			}
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("%s: %d of %d pixels wrong, the first at row %d", how, wrong, gridW*gridH, first/gridW)
	}
}

// An autotune record changes only launches by Invocations: a launch by Grid
// was sized for the program's 16×16 workgroups and must run with them, untuned,
// on every path (Host.Dispatch, Backend.Dispatch, a resident batch).
func TestTuneRecordNeverChangesALaunchByGrid(t *testing.T) {
	ctx := context.Background()
	store, err := autotune.Load(filepath.Join(t.TempDir(), "autotune.toml"))
	if err != nil {
		t.Fatal(err)
	}
	h := openWith(t, Options{Autotune: store, NoCache: true, NoPGO: true}, "cpuref")
	b := acquire(t, h, "cpu-ref")
	prog := image2D(t)
	tuned := [3]uint32{64, 8, 1}
	adapter := autotune.DeviceAdapter(b.ID(), b.Adapter().Identity.Fingerprint())
	if err := store.Put(autotune.KeyFor(prog, ir.SpecMap{}, adapter), autotune.Record{WorkgroupSize: tuned}); err != nil {
		t.Fatal(err)
	}
	byGrid := Work{Grid: [3]uint32{gridW / 16, gridH / 16, 1}}
	byInvocations := Work{Invocations: [3]uint32{gridW, gridH, 1}}

	res, err := h.Dispatch(ctx, prog, Launch{Backend: "cpu-ref", Work: byGrid})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tuned || res.WorkgroupSize != prog.WorkgroupSize {
		t.Fatalf("Host.Dispatch by Grid: tuned %v, workgroup %v; want untuned %v", res.Tuned, res.WorkgroupSize, prog.WorkgroupSize)
	}
	checkImage(t, "Host.Dispatch by Grid", res.Outputs[0])
	if res, err = h.Dispatch(ctx, prog, Launch{Backend: "cpu-ref", Work: byInvocations}); err != nil {
		t.Fatal(err)
	}
	if !res.Tuned || res.WorkgroupSize != tuned {
		t.Fatalf("Host.Dispatch by Invocations: tuned %v, workgroup %v; want the record's %v", res.Tuned, res.WorkgroupSize, tuned)
	}
	checkImage(t, "Host.Dispatch by Invocations", res.Outputs[0])

	pl, err := b.Compile(ctx, prog, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx, pl)
	if !pl.Tuned() || pl.WorkgroupSize() != tuned {
		t.Fatalf("pipeline: tuned %v, workgroup %v; want the record's", pl.Tuned(), pl.WorkgroupSize())
	}
	for range 2 { // the untuned pipeline is compiled once, then reused
		if res, err = b.Dispatch(ctx, pl, byGrid); err != nil {
			t.Fatal(err)
		}
		if res.Tuned || res.WorkgroupSize != prog.WorkgroupSize {
			t.Fatalf("Backend.Dispatch by Grid: tuned %v, workgroup %v", res.Tuned, res.WorkgroupSize)
		}
		checkImage(t, "Backend.Dispatch by Grid", res.Outputs[0])
	}
	if res, err = b.Dispatch(ctx, pl, byInvocations); err != nil {
		t.Fatal(err)
	}
	if !res.Tuned || res.WorkgroupSize != tuned {
		t.Fatalf("Backend.Dispatch by Invocations: tuned %v, workgroup %v", res.Tuned, res.WorkgroupSize)
	}
	checkImage(t, "Backend.Dispatch by Invocations", res.Outputs[0])

	// A resident batch: the same rule for BoundWork.
	for _, w := range []BoundWork{{Grid: byGrid.Grid}, {Invocations: byInvocations.Invocations}} {
		buf := alloc(t, b, gridW*gridH*4, UsageStorage)
		w.Bindings = []Binding{Bind(buf)}
		var bt Batch
		if _, err := b.Submit(ctx, bt.Dispatch(pl, w)); err != nil {
			t.Fatal(err)
		}
		out := make([]byte, buf.Size())
		if err := buf.Read(ctx, 0, out); err != nil {
			t.Fatal(err)
		}
		checkImage(t, "Submit", out)
	}
	if err := b.Release(ctx, pl); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dispatch(ctx, pl, byGrid); ErrorKind(err) != KindLaunch {
		t.Fatalf("dispatch by Grid of a released tuned pipeline: %v, want a launch error", err)
	}
}
