package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// imageFile writes issue 22's 2-D program to dir/image.json: 16×16 workgroups
// over a w×h image (w a uniform), every pixel (x, y) storing y*w+x+1.
func imageFile(t *testing.T, dir string, w, h uint32) (string, *ir.Program) {
	t.Helper()
	b := ir.NewBuilder("test.image2d", 16, 16, 1)
	width := b.Uniform("w", ir.U32)
	out := b.FixedBuffer("out", ir.U32, ir.Write, w*h)
	x := b.Let("x", ir.GlobalID(0))
	y := b.Let("y", ir.GlobalID(1))
	b.If(ir.LAnd(ir.Lt(x, width), ir.Lt(y, ir.LitU32(h))), func(k *ir.Block) {
		i := k.Let("i", ir.Add(ir.Mul(y, width), x))
		k.Store(out, i, ir.Add(i, ir.LitU32(1)))
	})
	data, err := ir.MarshalJSON(b.MustBuild())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "image.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	prog, err := ir.ParseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return path, prog
}

// An operator's autotune record (64×8 for a 16×16 program) must not change
// `kiln run --grid`: the grid was sized for 16×16 workgroups, so the run is
// untuned and every row is written. `--invocations` follows the record.
func TestRunByGridIgnoresTheTuneRecord(t *testing.T) {
	dir := plugins(t, "cpuref")
	freshHomes(t)
	const w, h = 112, 80
	work := t.TempDir()
	path, prog := imageFile(t, work, w, h)
	var rows []backendJSON
	code, out, errOut := kiln(t, "--plugins", dir, "backends", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	storePath, err := autotune.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	store, err := autotune.Load(storePath)
	if err != nil {
		t.Fatal(err)
	}
	tuned := [3]uint32{64, 8, 1}
	key := autotune.KeyFor(prog, ir.SpecMap{}, autotune.DeviceAdapter("cpu-ref", rows[0].Fingerprint))
	if err := store.Put(key, autotune.Record{WorkgroupSize: tuned}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		launch []string
		tuned  bool
		wg     [3]uint32
	}{
		{[]string{"--grid", "7,5,1"}, false, prog.WorkgroupSize},
		{[]string{"--invocations", "112,80,1"}, true, tuned},
	} {
		outDir := filepath.Join(work, c.launch[0][2:])
		args := append([]string{"--plugins", dir, "--json", "run", path, "--uniform", "w=112", "--backend", "cpu-ref", "--out", outDir}, c.launch...)
		code, out, errOut := kiln(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s\n%s", c.launch, code, errOut, out)
		}
		var j runJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if j.Tuned != c.tuned || j.WorkgroupSize != c.wg {
			t.Fatalf("%v: tuned %v, workgroup %v; want tuned %v, %v", c.launch, j.Tuned, j.WorkgroupSize, c.tuned, c.wg)
		}
		got, err := os.ReadFile(filepath.Join(outDir, "out.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != w*h*4 {
			t.Fatalf("%v: out.bin is %d bytes, want %d", c.launch, len(got), w*h*4)
		}
		for i := range w * h {
			if v := binary.LittleEndian.Uint32(got[4*i:]); v != uint32(i+1) {
				t.Fatalf("%v: pixel %d (row %d) is %d, the reference makes it %d", c.launch, i, i/w, v, i+1)
			}
		}
	}
}
