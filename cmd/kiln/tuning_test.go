package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// kiln run applies a whole autotune record to a corpus kernel on a named
// backend: its tunables as well as its workgroup size, with the launch sized
// for them. matmul_reg with bm=1 needs four times the rows of invocations of
// its default bm=4, so a run that kept the default launch would be wrong.
func TestRunAppliesTheRecordsTunables(t *testing.T) {
	dir := plugins(t, "cpuref")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	code, out, errOut := kiln(t, "--plugins", dir, "backends", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []backendJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	path, err := autotune.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	store, err := autotune.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.Lookup("matmul_reg")
	key := autotune.KeyFor(k.Program(), ir.SpecMap{}, autotune.DeviceAdapter("cpu-ref", rows[0].Fingerprint))
	if err := store.Put(key, autotune.Record{WorkgroupSize: [3]uint32{8, 4, 1}, Params: "bm=1 bn=2 tk=4"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveIfDirty(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = kiln(t, "--plugins", dir, "--json", "run", "--kernel", "matmul_reg", "--size", "17", "--backend", "cpu-ref", "--verify")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var j runJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !j.Verified || !j.Tuned || j.WorkgroupSize != [3]uint32{8, 4, 1} || j.Params != "bm=1 bn=2 tk=4" {
		t.Fatalf("verified %v, tuned %v, workgroup %v, params %q; want the record's 8,4,1 and bm=1 bn=2 tk=4, verified", j.Verified, j.Tuned, j.WorkgroupSize, j.Params)
	}
}
