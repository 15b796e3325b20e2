package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/ir"
)

// A record kiln tune makes of a program file carries the program's name:
// kiln autotune list shows it where it showed "-", and kiln autotune forget
// --kernel takes the file's path or the program's name, which it refused.
func TestTuneRecordsCarryTheProgramName(t *testing.T) {
	paths := freshHomes(t)
	dir := plugins(t, "cpuref")
	file := tunableFile(t, t.TempDir(), "t.tune.named")
	tune := func() {
		t.Helper()
		var j tuneJSON
		kilnJSON(t, &j, "--plugins", dir, "tune", "--kernel", file, "--backend", "cpu-ref", "--zero", "a=300", "--size", "out=300",
			"--invocations", "300", "--budget", "0", "--runs", "1", "--max-invocations", "128", "--noise-guard=false", "--json")
		if len(j.Results) != 1 || j.Results[0].Key == "" {
			t.Fatalf("tune recorded nothing: %+v", j)
		}
	}
	tune()
	st, err := autotune.Load(paths.Autotune)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range st.Records() {
		if r.Program != "t.tune.named" {
			t.Fatalf("record %s carries program %q, want t.tune.named", k, r.Program)
		}
	}
	var list struct {
		Records []autotuneRecordJSON `json:"records"`
	}
	kilnJSON(t, &list, "autotune", "list", "--json")
	if len(list.Records) != 1 || list.Records[0].Program != "t.tune.named" || list.Records[0].Kernel != "" {
		t.Fatalf("autotune list = %+v", list)
	}
	code, out, errOut := kiln(t, "autotune", "list")
	if code != 0 || !strings.Contains(out, " t.tune.named ") {
		t.Fatalf("autotune list: exit %d, want the program's name in the table: %s\n%s", code, errOut, out)
	}

	var forgot struct {
		Forgotten []string `json:"forgotten"`
	}
	kilnJSON(t, &forgot, "autotune", "forget", "--kernel", file, "--json")
	if len(forgot.Forgotten) != 1 {
		t.Fatalf("forget --kernel %s = %v, want its record", file, forgot.Forgotten)
	}
	tune()
	kilnJSON(t, &forgot, "autotune", "forget", "--kernel", "t.tune.named", "--json")
	if len(forgot.Forgotten) != 1 {
		t.Fatalf("forget --kernel t.tune.named = %v, want its record", forgot.Forgotten)
	}
	if st, _ := autotune.Load(paths.Autotune); st.Len() != 0 {
		t.Fatalf("%d records left", st.Len())
	}
	code, _, errOut = kiln(t, "autotune", "forget", "--kernel", "t.tune.named")
	if code == 0 || !strings.Contains(errOut, "unknown kernel") || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("forget a name no record carries: exit %d, %q", code, errOut)
	}
}

// noisyRunner times every candidate as 1 ms plus uniform noise of ±100 µs,
// except fast, which takes half as long under the same noise.
type noisyRunner struct {
	rng  *rand.Rand
	fast string
}

func (r *noisyRunner) Run(_ context.Context, c autotune.Candidate, outputs bool) (autotune.Sample, error) {
	d := time.Millisecond
	if c.String() == r.fast {
		d /= 2
	}
	d += time.Duration(r.rng.Int64N(int64(200*time.Microsecond))) - 100*time.Microsecond
	s := autotune.Sample{Time: d, Device: true}
	if outputs {
		s.Outputs = [][]byte{{1}}
	}
	return s, nil
}

// kiln tune's noise guard: a search whose timings are pure noise records
// nothing, and the report says the default stands and why; a clear winner is
// recorded with the program's name; --noise-guard=false records the fastest
// of pure noise all the same.
func TestTuneNoiseGuard(t *testing.T) {
	path := tunableFile(t, t.TempDir(), "t.tune.noise")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ir.ParseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	target := tuneTarget{name: filepath.Base(path), prog: prog, search: prog}
	cands := autotune.Space(prog, [][3]uint32{{32, 1, 1}, {128, 1, 1}, {256, 1, 1}, {512, 1, 1}})
	check := func([][]byte) error { return nil }
	search := func(seed uint64, fast string) *autotune.Result {
		t.Helper()
		res, err := autotune.Tune(context.Background(), &noisyRunner{rng: rand.New(rand.NewPCG(seed, 1)), fast: fast}, cands,
			autotune.Config{Warmup: 1, Runs: 5, Check: check})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	crowned := 0
	for seed := range uint64(20) {
		res := search(seed, "")
		if res.Best != 0 {
			crowned++
		}
		j, rec := tuneReport(target, res, true, now)
		if rec != nil || j.Winner == "" || j.Key != "" || !strings.Contains(j.DefaultStands, "baseline") {
			t.Fatalf("seed %d, pure noise: record %+v, report %+v; want nothing recorded and why the default stands", seed, rec, j)
		}
		var out bytes.Buffer
		(&app{out: &out}).printTune(tuneJSON{Backend: "fake:0", Adapter: "fake/fp", Results: []tuneResultJSON{j}})
		if !strings.Contains(out.String(), "the default stands, nothing recorded: ") || strings.Contains(out.String(), "recorded wg") {
			t.Fatalf("seed %d, pure noise: the table ends\n%s", seed, out.String())
		}
		if _, rec := tuneReport(target, res, false, now); rec == nil {
			t.Fatalf("seed %d: --noise-guard=false recorded nothing", seed)
		}
	}
	if crowned < 15 {
		t.Fatalf("noise made a candidate other than the baseline the fastest in only %d of 20 searches; the guard was not put to the test", crowned)
	}

	fast := cands[7]
	for seed := range uint64(20) {
		j, rec := tuneReport(target, search(seed, fast.String()), true, now)
		want := fast.Record(now.Format(time.RFC3339))
		want.Program = "t.tune.noise"
		if rec == nil || *rec != want || j.DefaultStands != "" || j.Winner != fast.String() {
			t.Fatalf("seed %d, a clear winner: record %+v, report %+v; want %+v", seed, rec, j, want)
		}
	}
}
