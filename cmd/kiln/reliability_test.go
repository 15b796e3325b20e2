package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saxpyFileJSON is a program with a read, a read_write and a write buffer.
const saxpyFileJSON = `{"kiln": 1, "name": "example.saxpy3.f32", "workgroup_size": [64, 1, 1],
  "params": [{"name": "a", "type": "f32", "default": 2.0}],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "y", "binding": 1, "type": "f32", "access": "read_write"},
              {"name": "out", "binding": 2, "type": "u32", "access": "write"}],
  "shared": [],
  "body": [{"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"if": {"lt": [{"local": "i"}, {"len": "y"}]}, "then": [
      {"store": "y", "index": {"local": "i"},
       "value": {"add": [{"mul": [{"param": "a"}, {"load": "x", "index": {"local": "i"}}]},
                         {"load": "y", "index": {"local": "i"}}]}},
      {"store": "out", "index": {"local": "i"}, "value": {"local": "i"}}]}]}`

// TestMalformedInvocationsAreRefused: every malformed invocation exits non-zero
// with a message (a Fix where the user can act), never a Go runtime trace, and
// sizes that cannot be allocated are refused before anything is allocated.
func TestMalformedInvocationsAreRefused(t *testing.T) {
	dir := plugins(t, "cpuref")
	work := t.TempDir()
	prog := filepath.Join(work, "prog.json")
	bad := filepath.Join(work, "bad.json")
	x := filepath.Join(work, "x.bin")
	odd := filepath.Join(work, "odd.bin")
	for path, data := range map[string][]byte{prog: []byte(saxpyFileJSON), bad: []byte(`{"kiln": 1, "name": `), x: make([]byte, 16), odd: make([]byte, 7)} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := func(extra ...string) []string {
		return append([]string{"run", prog, "--backend", "cpu-ref", "--grid", "1"}, extra...)
	}
	ok := []string{"--input", "x=@" + x, "--input", "y=@" + x, "--size", "out=4"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "say what to run"},
		{[]string{"run", "--kernel", "nope", "--size", "1"}, "no corpus kernel"},
		{[]string{"run", "--kernel", "saxpy"}, "needs one --size"},
		{[]string{"run", "--kernel", "saxpy", "--size", "x"}, "not a non-negative integer"},
		{[]string{"run", "--kernel", "saxpy", "--size", "-1"}, "not a non-negative integer"},
		{[]string{"run", "--kernel", "saxpy", "--size", "99999999999999999999"}, "not a non-negative integer"},
		{[]string{"run", "--kernel", "saxpy", "--size", "1000000000000", "--backend", "cpu-ref"}, "the most elements a u32 length counts"},
		{[]string{"run", "--kernel", "saxpy", "--size", "4000000000", "--backend", "cpu-ref"}, "storage binding limit"},
		{[]string{"run", "--kernel", "saxpy", "--size", "300000000", "--backend", "cpu-ref"}, "cpu-ref:0's storage binding limit"},
		{[]string{"run", "--kernel", "matmul", "--size", "100000", "--backend", "cpu-ref"}, "storage binding limit"},
		{[]string{"run", "--kernel", "saxpy", "--size", "10", "--backend", "nope"}, `backend "nope" not found`},
		{[]string{"run", "--kernel", "saxpy", "--size", "10", "--backend", "cpu-ref:x"}, "not a non-negative integer"},
		{[]string{"run", "--kernel", "saxpy", "--size", "10", "--backend", "cpu-ref:7"}, "not found"},
		{[]string{"run", "--all", "--kernel", "saxpy"}, "say what to run"},
		{[]string{"run", "--all", "--size", "x"}, "--all takes one --size N"},
		{[]string{"run", "--all", "--size", "1000000000000"}, "the most elements a u32 length counts"},
		{[]string{"run", "--all", "--backend", "nope"}, `backend "nope" not found`},
		{[]string{"run", filepath.Join(work, "missing.json"), "--grid", "1"}, "reading program"},
		{[]string{"run", bad, "--grid", "1"}, "bad.json"},
		{[]string{"run", prog, "--backend", "cpu-ref", "--input", "x=@" + x, "--input", "y=@" + x, "--size", "out=4"}, "no grid"},
		{file("--input", "y=@"+x, "--size", "out=4"), `read buffer "x" has no --input`},
		{file("--size", "out=4"), "--zero x"},
		{file("--input", "x="+x, "--input", "y=@"+x, "--size", "out=4"), "@FILE"},
		{file("--input", "nope=@"+x, "--input", "y=@"+x, "--size", "out=4"), "no read or read_write buffer"},
		{file("--input", "x=@"+filepath.Join(work, "none.bin"), "--input", "y=@"+x, "--size", "out=4"), "existing file"},
		{file(append(ok, "--zero", "out")...), `no read or read_write buffer "out"`},
		{file(append(ok, "--zero", "x")...), "also has an --input"},
		{file("--input", "x=@"+x, "--zero", "y=abc", "--size", "out=4"), "not an element count"},
		{file("--input", "x=@"+x, "--zero", "y=4000000000", "--size", "out=4"), "storage binding limit"},
		{file("--input", "x=@"+x, "--input", "y=@"+x, "--size", "out=x"), "not an element count"},
		{file("--input", "x=@"+x, "--input", "y=@"+x, "--size", "nope=4", "--size", "out=4"), "no write buffer"},
		{file("--input", "x=@"+x, "--input", "y=@"+x), "--size out=<elements>"},
		{file("--input", "x=@"+x, "--input", "y=@"+x, "--size", "out=4294967295"), "storage binding limit"},
		{file(append(ok, "--spec", "a=fast")...), "not a f32"},
		{file(append(ok, "--spec", "b=1")...), "no parameter"},
		{file(append(ok, "--wg", "1,x")...), "axis 1"},
		{[]string{"run", prog, "--backend", "cpu-ref", "--grid", "1,2,3,4", "--input", "x=@" + x, "--input", "y=@" + x, "--size", "out=4"}, "more than 3 axes"},
		{file("--input", "x=@"+odd, "--input", "y=@"+x, "--size", "out=4"), "not a whole number of 4-byte elements"},
		{[]string{"--log-level", "loud", "backends"}, "unknown --log-level"},
		{[]string{"backends", "extra"}, "unknown command"},
		{[]string{"doctor", "extra"}, "unknown command"},
		{[]string{"plugins", "pin", "nope"}, "no accepted plugin"},
		{[]string{"plugins", "unpin"}, "say what to unpin"},
		{[]string{"stats", "--backend", "nope"}, `backend "nope" not found`},
		{[]string{"stats", "--size", "1000000000000"}, "the most elements a u32 length counts"},
	}
	if len(cases) < 30 {
		t.Fatalf("%d cases; the table must hold at least 30", len(cases))
	}
	freshHomes(t)
	for _, tc := range cases {
		code, out, errOut := kiln(t, append([]string{"--plugins", dir}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("kiln %s: exit %d, stderr %q; want a failure saying %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
		for _, trace := range []string{"goroutine ", "panic:", "runtime."} {
			if strings.Contains(errOut+out, trace) {
				t.Errorf("kiln %s: output has %q:\n%s%s", strings.Join(tc.args, " "), trace, out, errOut)
			}
		}
		if !strings.Contains(errOut, "Fix:") && !strings.Contains(errOut, "unknown command") {
			t.Errorf("kiln %s: %q has no Fix", strings.Join(tc.args, " "), errOut)
		}
	}
}

func TestRunZeroMeansZeroElements(t *testing.T) {
	dir := plugins(t, "cpuref")
	work := t.TempDir()
	prog := filepath.Join(work, "prog.json")
	if err := os.WriteFile(prog, []byte(saxpyFileJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out")
	code, stdout, errOut := kiln(t, "--plugins", dir, "run", prog, "--backend", "cpu-ref", "--grid", "1", "--zero", "x=4", "--zero", "y=4", "--size", "out=4", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, stdout)
	}
	if y, err := os.ReadFile(filepath.Join(out, "y.bin")); err != nil || len(y) != 16 {
		t.Fatalf("y.bin: %d bytes, %v", len(y), err)
	}
}

func TestRunAllHonoursBackend(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-zeros")
	var rows []map[string]any
	kilnJSON(t, &rows, "--plugins", dir, "run", "--all", "--backend", "cpu-ref", "--size", "16", "--json")
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
	for _, r := range rows {
		if r["backend"] != "cpu-ref:0" {
			t.Fatalf("run --all --backend cpu-ref ran on %v", r["backend"])
		}
	}
}

func TestPluginsPin(t *testing.T) {
	freshHomes(t)
	dir := plugins(t, "cpuref", "fx-zeros")
	var st pinsJSON
	kilnJSON(t, &st, "--plugins", dir, "plugins", "--json")
	if st.Pinning || len(st.Plugins) != 2 || st.Plugins[0].Status != "not pinned" {
		t.Fatalf("before pinning: %+v", st)
	}
	code, out, errOut := kiln(t, "--plugins", dir, "plugins", "pin", "fx-zeros")
	if code != 0 || !strings.Contains(out, "pinning is on") {
		t.Fatalf("pin: exit %d: %s\n%s", code, errOut, out)
	}
	kilnJSON(t, &st, "--plugins", dir, "plugins", "--json")
	if !st.Pinning || st.Plugins[0].Status != "not pinned" || st.Plugins[1].Status != "pinned" || len(st.Plugins[1].SHA256) != 64 {
		t.Fatalf("after pinning fx-zeros: %+v", st)
	}
	// Only the pinned plugin runs; doctor says why the other does not.
	code, out, _ = kiln(t, "--plugins", dir, "doctor")
	if code != 0 || !strings.Contains(out, "handshake failed (refused)") || !strings.Contains(out, "not pinned") || !strings.Contains(out, "pinning: on") {
		t.Fatalf("doctor with pinning: exit %d\n%s", code, out)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "8", "--backend", "cpu-ref"); code == 0 || !strings.Contains(errOut, "not pinned") {
		t.Fatalf("an unpinned plugin ran: exit %d, %s", code, errOut)
	}
	kilnJSON(t, &[]pinJSON{}, "--plugins", dir, "plugins", "pin", "--json")
	if code, _, errOut := kiln(t, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "8", "--backend", "cpu-ref"); code != 0 {
		t.Fatalf("pinned cpu-ref: exit %d, %s", code, errOut)
	}
	if code, out, _ := kiln(t, "--plugins", dir, "plugins", "unpin", "--all"); code != 0 || !strings.Contains(out, "removed 2 pin(s)") {
		t.Fatalf("unpin --all: exit %d, %s", code, out)
	}
}

func TestStatsJSON(t *testing.T) {
	var st statsJSON
	kilnJSON(t, &st, "--plugins", plugins(t, "cpuref", "fx-zeros"), "stats", "--backend", "cpu-ref", "--size", "16", "--json")
	if st.Runs == 0 || st.Failed != 0 {
		t.Fatalf("runs %d, failed %d", st.Runs, st.Failed)
	}
	var ref *backendStatsJSON
	for i, b := range st.Backends {
		if b.ID == "cpu-ref" {
			ref = &st.Backends[i]
		}
		if b.ID == "fx-zeros" && (b.State != "not started" || b.Dispatches != 0) {
			t.Errorf("fx-zeros was not asked for: %+v", b)
		}
	}
	if ref == nil || ref.State != "ready" || ref.Dispatches < uint64(st.Runs) || ref.Latency.Count != ref.Dispatches ||
		len(ref.Latency.Counts) != len(ref.Latency.BoundsNs)+1 || ref.BytesOut == 0 || ref.Compiles == 0 {
		t.Fatalf("cpu-ref stats %+v", ref)
	}
	code, out, _ := kiln(t, "--plugins", plugins(t, "cpuref"), "stats", "--backend", "cpu-ref", "--size", "4")
	if code != 0 || !strings.Contains(out, "DISPATCHES") || !strings.Contains(out, "cpu-ref") {
		t.Fatalf("stats table: exit %d\n%s", code, out)
	}
}

// TestDoctorDiagnosesEachFailure: each start failure has its own stage and
// Fix, a plugin crashing on every call is failing with its last exit and
// stderr, and untrusted files are refused with the reason.
func TestDoctorDiagnosesEachFailure(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-describe-hang", "fx-exit-early", "fx-flaky", "fx-badversion")
	shared := filepath.Join(dir, "kiln-backend-fx-open")
	data, err := os.ReadFile(filepath.Join(built.dir, "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shared, data, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := kiln(t, "--plugins", dir, "--start-timeout", "3s", "doctor")
	if code != 0 {
		t.Fatalf("exit %d with cpu-ref installed: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"hung in describe", "did not answer Describe",
		"exited before handshake", "giving up before the handshake",
		"wrong protocol version", "kiln protocol version 99",
		"fx-flaky:0: failing: crashed 3 times", "exit status 3", "flaky dispatch gives up",
		"cpu-ref:0: ok",
		"writable by every user",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	var d doctorJSON
	kilnJSON(t, &d, "--plugins", dir, "--start-timeout", "3s", "doctor", "--json")
	stages := map[string]string{}
	for _, p := range d.Plugins {
		stages[filepath.Base(p.Path)] = p.Stage
	}
	if stages["kiln-backend-fx-describe-hang"] != "hung in describe" || stages["kiln-backend-fx-exit-early"] != "exited before handshake" {
		t.Errorf("stages %v", stages)
	}
	raw, _ := json.Marshal(d.Probes)
	if !strings.Contains(string(raw), `"failing":"crashed 3 times`) {
		t.Errorf("probes %s", raw)
	}
}

// TestNamedBackendIgnoresAHangingPlugin: a plugin hanging in Describe does not
// hold up a command that names another backend (before, every command waited
// out the start timeout, here far beyond --timeout).
func TestNamedBackendIgnoresAHangingPlugin(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-describe-hang")
	var out, errOut strings.Builder
	code := execute(context.Background(), []string{"--timeout", "30s", "--start-timeout", "10m", "--plugins", dir,
		"run", "--kernel", "saxpy", "--size", "64", "--backend", "cpu-ref", "--verify"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
}
