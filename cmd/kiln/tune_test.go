package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

func TestTuneRecordsTheWinnerThatRunThenUses(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	var j tuneJSON
	kilnJSON(t, &j, "--plugins", dir, "tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--size", "1021",
		"--budget", "0", "--runs", "1", "--noise-guard=false", "--json")
	if len(j.Results) != 1 || j.Store != paths.Autotune || !strings.HasPrefix(j.Adapter, "cpu-ref/") {
		t.Fatalf("tune = %+v", j)
	}
	r := j.Results[0]
	// 1-D sizes 32..1024 (cpu-ref's limit) times epi 1, 2, 4, 8; 256 repeats the
	// program's own size.
	if r.Candidates != 24 || r.Measured != 24 || r.Rejected != 0 || r.Winner == "" || r.Key == "" || len(r.Trials) != 24 {
		t.Fatalf("result = %+v", r)
	}
	if !r.Trials[0].Winner || r.Trials[0].Candidate != r.Winner {
		t.Fatalf("the table is not fastest first: %+v", r.Trials[0])
	}
	st, err := autotune.Load(paths.Autotune)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.Lookup("vector_add")
	rec, ok := st.Get(autotune.KeyFor(k.Program(), ir.SpecMap{}, j.Adapter))
	if !ok || fmt.Sprintf("wg %d×%d×%d %s", rec.WorkgroupSize[0], rec.WorkgroupSize[1], rec.WorkgroupSize[2], rec.Params) != r.Winner ||
		rec.Program != k.Program().Name {
		t.Fatalf("record %+v (found %v), winner %s", rec, ok, r.Winner)
	}

	// kiln run takes the recorded workgroup size and still verifies.
	var run map[string]any
	kilnJSON(t, &run, "--plugins", dir, "run", "--kernel", "vector_add", "--size", "1021", "--backend", "cpu-ref", "--verify", "--json")
	if run["tuned"] != true || run["verified"] != true {
		t.Fatalf("run after tune: %v", run)
	}

	var list struct {
		Records []autotuneRecordJSON `json:"records"`
	}
	kilnJSON(t, &list, "autotune", "list", "--json")
	if len(list.Records) != 1 || list.Records[0].Kernel != "vector_add" || list.Records[0].Key != r.Key {
		t.Fatalf("autotune list = %+v", list)
	}
	code, out, errOut := kiln(t, "autotune", "list")
	if code != 0 || !strings.Contains(out, "vector_add") || !strings.Contains(out, "epi=") {
		t.Fatalf("autotune list: exit %d: %s\n%s", code, errOut, out)
	}
	var forgot struct {
		Forgotten []string `json:"forgotten"`
	}
	kilnJSON(t, &forgot, "autotune", "forget", "--kernel", "matmul", "--json")
	if len(forgot.Forgotten) != 0 {
		t.Fatalf("forget --kernel matmul removed %v", forgot.Forgotten)
	}
	kilnJSON(t, &forgot, "autotune", "forget", "--kernel", "vector_add", "--json")
	if len(forgot.Forgotten) != 1 || forgot.Forgotten[0] != r.Key+"@"+j.Adapter {
		t.Fatalf("forget --kernel vector_add = %v", forgot.Forgotten)
	}
	if st, _ := autotune.Load(paths.Autotune); st.Len() != 0 {
		t.Fatalf("%d records left", st.Len())
	}
}

func TestTuneDryRunAndTable(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	code, out, errOut := kiln(t, "--plugins", dir, "tune", "--kernel", "matmul_reg", "--backend", "cpu-ref", "--size", "17",
		"--budget", "0", "--runs", "1", "--max-invocations", "64", "--dry-run")
	if code != 0 || !strings.Contains(out, "RANK") || !strings.Contains(out, "baseline") || !strings.Contains(out, "dry run: not recorded") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	// Not a terminal: one plain progress line per candidate.
	if !strings.Contains(errOut, "tune matmul_reg: 1/") {
		t.Fatalf("no plain progress lines on stderr:\n%s", errOut)
	}
	if _, err := os.Stat(paths.Autotune); !os.IsNotExist(err) {
		t.Fatalf("a dry run wrote the store: %v", err)
	}
}

// --wg and --spec narrow the search; the untuned program stays the baseline.
func TestTuneNarrowedSearch(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "cpuref")
	var j tuneJSON
	kilnJSON(t, &j, "--plugins", dir, "tune", "--kernel", "matmul_reg", "--backend", "cpu-ref", "--size", "9",
		"--wg", "8,8", "--spec", "bm=2", "--spec", "bn=2", "--budget", "0", "--runs", "1", "--dry-run", "--json")
	r := j.Results[0]
	if r.Candidates != 1+2*4*2*2 || r.Measured != r.Candidates {
		t.Fatalf("%d candidates (%d measured), want the baseline and 2 sizes × 4 depths × 2 stages × 2 column groupings", r.Candidates, r.Measured)
	}
	for _, tr := range r.Trials {
		if !tr.Baseline && !strings.HasPrefix(tr.Params, "bm=2 bn=2 ") {
			t.Errorf("searched %s, which --spec excludes", tr.Candidate)
		}
		if tr.Baseline && tr.Candidate != "wg 16×16×1 bm=4 bn=4 stages=1 tk=16 vec=1" {
			t.Errorf("baseline %s, want the untuned program", tr.Candidate)
		}
	}
}

func TestTuneBadArguments(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "cpuref")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tune", "--backend", "cpu-ref"}, "no --kernel"},
		{[]string{"tune", "--kernel", "vector_add"}, "no --backend"},
		{[]string{"tune", "--kernel", "histogram", "--backend", "cpu-ref"}, "cannot be tuned"},
		{[]string{"tune", "--kernel", "nope.json", "--backend", "cpu-ref"}, "neither a corpus kernel nor a program file"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--size", "x"}, "not a problem size"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--runs", "0"}, "--runs"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "nope"}, "nope"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--wg", "0,1"}, "positive"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--wg", "64,64"}, "over 1024"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--spec", "nope=1"}, "no tunable"},
		{[]string{"tune", "--kernel", "vector_add", "--backend", "cpu-ref", "--spec", "epi=x"}, "not a u32"},
		{[]string{"autotune", "forget"}, "nothing to forget"},
		{[]string{"autotune", "forget", "--kernel", "nope"}, "unknown kernel"},
	} {
		code, _, errOut := kiln(t, append([]string{"--plugins", dir}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%v: exit %d, %s; want %q and a Fix", tc.args, code, errOut, tc.want)
		}
	}
}

// tunableFile writes a program named name with an elements-per-invocation
// tunable to dir and returns its path.
func tunableFile(t *testing.T, dir, name string) string {
	t.Helper()
	return programFile(t, dir, name, nil)
}

// programFile writes tunableFile's program, whose stores of element i also
// need keep(epi, i) when keep is set, to dir/name.json.
func programFile(t *testing.T, dir, name string, keep func(epi, i ir.Expr) ir.Expr) string {
	t.Helper()
	b := ir.NewBuilder(name, 64, 1, 1)
	epi := b.Tunable("epi", ir.U32, ir.LitU32(1), ir.LitU32(1), ir.LitU32(2))
	a := b.Buffer("a", ir.U32, ir.Read)
	out := b.Buffer("out", ir.U32, ir.Write)
	g := b.Let("g", ir.GlobalID(0))
	total := b.Let("total", ir.Mul(ir.NumWorkgroups(0), ir.WorkgroupSize(0)))
	b.For("j", ir.U32, ir.LitU32(0), epi, ir.LitU32(1), func(loop *ir.Block, j ir.Expr) {
		i := loop.Let("i", ir.Add(g, ir.Mul(j, total)))
		cond := ir.Lt(i, ir.Len(out))
		if keep != nil {
			cond = ir.LAnd(cond, keep(epi, i))
		}
		loop.If(cond, func(then *ir.Block) {
			then.Store(out, i, ir.Add(ir.Load(a, i), i))
		})
	})
	data, err := ir.MarshalJSON(b.MustBuild())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTuneRejectsOutputsLeftUnwritten: the tuner's runs share their buffers,
// so a candidate that stores only part of the output (epi = 2 here skips the
// odd elements) would find the baseline's results in the rest; the checked
// runs refill the output first, and it is rejected.
func TestTuneRejectsOutputsLeftUnwritten(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "cpuref")
	// epi = 2 skips the odd elements.
	file := programFile(t, t.TempDir(), "t.tune.partial", func(epi, i ir.Expr) ir.Expr {
		return ir.LOr(ir.Eq(epi, ir.LitU32(1)), ir.Not(ir.Eq(ir.Rem(i, ir.LitU32(2)), ir.LitU32(1))))
	})
	var j tuneJSON
	kilnJSON(t, &j, "--plugins", dir, "tune", "--kernel", file, "--backend", "cpu-ref", "--zero", "a=300", "--size", "out=300",
		"--invocations", "300", "--wg", "64", "--budget", "0", "--runs", "2", "--dry-run", "--json")
	for _, tr := range j.Results[0].Trials {
		wrong := strings.Contains(tr.Error, "wrong result")
		if strings.Contains(tr.Params, "epi=2") != wrong {
			t.Errorf("%s: error %q", tr.Candidate, tr.Error)
		}
	}
	if w := j.Results[0].Winner; !strings.Contains(w, "epi=1") {
		t.Errorf("winner %q, want an epi=1 candidate", w)
	}
}

// buildKiln builds the kiln executable once per test.
func buildKiln(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := env.Build(dir, map[string]string{"kiln": "github.com/kiln-dev/kiln/cmd/kiln"})["kiln"]; err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kiln")
}

// Eight kiln tune processes, each tuning its own program file on cpu-ref and
// saving to one store at the same time, lose no record.
func TestEightConcurrentTuneProcessesLoseNoRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kiln and starts 8 processes")
	}
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	bin := buildKiln(t)
	work := t.TempDir()
	const procs = 8
	files := make([]string, procs)
	for i := range files {
		files[i] = tunableFile(t, work, fmt.Sprintf("t.tune.p%d", i))
	}
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(context.Background(), bin, "--plugins", dir, "--timeout", "2m", "tune", "--kernel", files[i],
				"--backend", "cpu-ref", "--zero", "a=300", "--size", "out=300", "--invocations", "300", "--budget", "0",
				"--runs", "1", "--max-invocations", "128", "--noise-guard=false")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if out, err := cmd.Output(); err != nil {
				errs[i] = fmt.Errorf("process %d: %v\n%s\n%s", i, err, stderr.String(), out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := autotune.Load(paths.Autotune)
	if err != nil {
		t.Fatal(err)
	}
	if st.Len() != procs {
		t.Fatalf("%d records after %d concurrent tunes, want %d", st.Len(), procs, procs)
	}
	adapter := ""
	for k := range st.Records() {
		adapter = k.Adapter()
	}
	for i, f := range files {
		data, _ := os.ReadFile(f)
		p, err := ir.ParseJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		rec, ok := st.Get(autotune.KeyFor(p, ir.SpecMap{}, adapter))
		if !ok || !strings.HasPrefix(rec.Params, "epi=") {
			t.Errorf("program %d: record %+v, found %v", i, rec, ok)
		}
	}
}
