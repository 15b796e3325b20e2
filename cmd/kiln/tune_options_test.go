package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// bf16Fixed is matmul_tc's fixed options at type=bf16, what its tile records
// are keyed by.
func bf16Fixed() ir.SpecMap {
	var m ir.SpecMap
	m.Set("type", ir.SpecDType(ir.BF16))
	m.Set("tf32", ir.SpecBool(false))
	return m
}

// kiln tune searches matmul_tc's tile (tm, tn, tk), not only workgroup sizes:
// it records the winning tile under the kernel and its fixed options (and the
// winning program's workgroup size under the program), and the next kiln run
// builds that tile. A tile over the matrix bytes and one whose workgroup is
// over --max-invocations are skipped with their reasons, not fatal.
func TestTuneSearchesMatmulTCTilesAndRunUsesTheWinner(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	var j tuneJSON
	kilnJSON(t, &j, "--plugins", dir, "tune", "--kernel", "matmul_tc", "--spec", "type=bf16", "--spec", "tn=256", "--spec", "tk=16",
		"--backend", "cpu-ref", "--size", "17", "--budget", "0", "--runs", "1", "--noise-guard=false", "--max-invocations", "128", "--json")
	r := j.Results[0]
	// tm 32 and 64 at tn=256 tk=16, and the untuned baseline (64×128×32);
	// tm=128 needs 256 invocations, tm=256 with tn=256 is over ir.MaxMatrixBytes.
	if r.Candidates != 3 || r.Measured != 3 || r.Winner == "" || r.Key == "" || r.ProgramKey == "" {
		t.Fatalf("result = %+v", r)
	}
	if len(r.SkippedBuilds) != 2 || !strings.Contains(strings.Join(r.SkippedBuilds, "\n"), "tm=256") ||
		!strings.Contains(strings.Join(r.SkippedBuilds, "\n"), "tm=128") {
		t.Fatalf("skipped builds = %q", r.SkippedBuilds)
	}
	var baseline string
	for _, tr := range r.Trials {
		if tr.Baseline {
			baseline = tr.Candidate
		}
	}
	if baseline != "wg 128×1×1 tk=32 tm=64 tn=128" {
		t.Fatalf("baseline %q, want the untuned tile", baseline)
	}
	st, err := autotune.Load(paths.Autotune)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := st.Get(autotune.OptionsKey("matmul_tc", bf16Fixed(), j.Adapter))
	if !ok || !strings.HasSuffix(r.Winner, " "+rec.Params) || !strings.HasPrefix(rec.Params, "tk=") {
		t.Fatalf("options record %+v (found %v), winner %s", rec, ok, r.Winner)
	}

	var list struct {
		Records []autotuneRecordJSON `json:"records"`
	}
	kilnJSON(t, &list, "autotune", "list", "--json")
	if len(list.Records) != 2 {
		t.Fatalf("autotune list = %+v", list)
	}
	for _, l := range list.Records {
		if l.Key == r.Key && (l.Kernel != "matmul_tc" || l.Params != rec.Params) {
			t.Fatalf("the tile record lists as %+v", l)
		}
	}

	// The next run (with or without type=bf16, its default) builds the
	// recorded tile and says so.
	for _, args := range [][]string{{"--spec", "type=bf16"}, nil} {
		var run runJSON
		kilnJSON(t, &run, append([]string{"--plugins", dir, "run", "--kernel", "matmul_tc", "--size", "17", "--backend", "cpu-ref", "--verify", "--json"}, args...)...)
		if run.Options != rec.Params || !run.Verified || run.WorkgroupSize != rec.WorkgroupSize {
			t.Fatalf("run %v after tune: options %q, verified %v, workgroup %v; want the record's %q at %v", args, run.Options, run.Verified, run.WorkgroupSize, rec.Params, rec.WorkgroupSize)
		}
	}
	code, out, errOut := kiln(t, "--plugins", dir, "run", "--kernel", "matmul_tc", "--size", "17", "--backend", "cpu-ref")
	if code != 0 || !strings.Contains(out, "options   "+rec.Params+" (autotune record)") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	// A record of f16 is another record: none here.
	var f16 runJSON
	kilnJSON(t, &f16, "--plugins", dir, "run", "--kernel", "matmul_tc", "--spec", "type=f16", "--size", "17", "--backend", "cpu-ref", "--json")
	if f16.Options != "" {
		t.Fatalf("type=f16 took the bf16 record: %q", f16.Options)
	}
}

// An explicit --spec of a searched option wins over the record; a record that
// does not fit the kernel (stale or edited) is ignored with a note.
func TestRunMatmulTCRecordedTileAndOverrides(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "cpuref")
	var rows []backendJSON
	kilnJSON(t, &rows, "--plugins", dir, "backends", "--json")
	adapter := autotune.DeviceAdapter("cpu-ref", rows[0].Fingerprint)
	put := func(params string) {
		t.Helper()
		path, err := autotune.DefaultPath()
		if err != nil {
			t.Fatal(err)
		}
		st, err := autotune.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(autotune.OptionsKey("matmul_tc", bf16Fixed(), adapter), autotune.Record{WorkgroupSize: [3]uint32{64, 1, 1}, Params: params}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.SaveIfDirty(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	put("tk=16 tm=32 tn=64")
	var run runJSON
	kilnJSON(t, &run, "--plugins", dir, "run", "--kernel", "matmul_tc", "--size", "33", "--backend", "cpu-ref", "--verify", "--json")
	// tm=32 builds a workgroup of 64 invocations (the default tile's is 128).
	if run.Options != "tk=16 tm=32 tn=64" || run.WorkgroupSize != [3]uint32{64, 1, 1} || !run.Verified {
		t.Fatalf("run with a record: options %q, workgroup %v, verified %v", run.Options, run.WorkgroupSize, run.Verified)
	}
	run = runJSON{}
	kilnJSON(t, &run, "--plugins", dir, "run", "--kernel", "matmul_tc", "--spec", "tm=128", "--size", "33", "--backend", "cpu-ref", "--verify", "--json")
	if run.Options != "" || run.WorkgroupSize != [3]uint32{256, 1, 1} || !run.Verified {
		t.Fatalf("run with --spec tm=128: options %q, workgroup %v, verified %v; want no record, tm=128's 256 invocations", run.Options, run.WorkgroupSize, run.Verified)
	}
	put("tk=16 tm=40 tn=64")
	code, out, errOut := kiln(t, "--plugins", dir, "--json", "run", "--kernel", "matmul_tc", "--size", "33", "--backend", "cpu-ref")
	if code != 0 || !strings.Contains(errOut, "ignoring the autotune record of matmul_tc's options") || strings.Contains(out, `"options"`) {
		t.Fatalf("stale record: exit %d: %s\n%s", code, errOut, out)
	}
}

// failingRunner fails every candidate whose params contain fail, as a
// backend does a tile it cannot compile, and times the others by their tm.
type failingRunner struct{ fail string }

func (f failingRunner) Run(_ context.Context, c autotune.Candidate, _ bool) (autotune.Sample, error) {
	if strings.Contains(c.String(), f.fail) {
		return autotune.Sample{}, errors.New("compile: the tile's operands are over the device's shared memory")
	}
	tm, _ := c.Spec.Get("tm")
	return autotune.Sample{Time: time.Duration(1000 - tm.Bits()), Device: true}, nil
}

// A tile the backend fails to compile is a rejected trial, never the winner,
// and the search goes on; the winner's records are the options' and the
// program's.
func TestTuneSkipsATileThatFailsToCompile(t *testing.T) {
	tt, err := newTuneTarget("matmul_tc", 1, []string{"17"}, 1, runs.FileArgs{Spec: []string{"type=bf16", "tn=64", "tk=16"}})
	if err != nil {
		t.Fatal(err)
	}
	space, skipped := tt.space(nil, 1024)
	if len(space) != 5 || len(skipped) != 0 {
		t.Fatalf("space %v, skipped %v; want the baseline and tm 32, 64, 128, 256", space, skipped)
	}
	res, err := autotune.Tune(context.Background(), failingRunner{fail: "tm=256"}, space, autotune.Config{Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, failed, _ := res.Counted(); failed != 1 {
		t.Fatalf("%d failed, want tm=256's", failed)
	}
	w, ok := res.Winner()
	if !ok || !strings.Contains(w.Candidate.String(), "tm=128") {
		t.Fatalf("winner %v, want tm=128 (the fastest that compiles)", w.Candidate)
	}
	j, rec := tuneReport(tt, res, false, time.Unix(0, 0))
	if rec == nil || j.Rejected != 1 {
		t.Fatalf("report %+v, record %v", j, rec)
	}
	recs := tt.records(*rec, w.Candidate, "cpu-ref/x")
	k, _ := kernels.Lookup("matmul_tc")
	var opts ir.SpecMap
	opts.Set("tm", ir.SpecU32(128))
	opts.Set("tn", ir.SpecU32(64))
	opts.Set("tk", ir.SpecU32(16))
	built, _, err := k.Configure(opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].key != autotune.OptionsKey("matmul_tc", bf16Fixed(), "cpu-ref/x") || recs[0].rec.Params != "tk=16 tm=128 tn=64" ||
		recs[1].key != autotune.KeyFor(built.Program(), ir.SpecMap{}, "cpu-ref/x") || recs[1].rec.Params != "" || recs[1].rec.WorkgroupSize != [3]uint32{256, 1, 1} {
		t.Fatalf("records %+v", recs)
	}
}
