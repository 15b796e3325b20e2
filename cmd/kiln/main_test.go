package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/echoplugin"
	"github.com/kiln-dev/kiln/internal/testbuild"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// built holds the plugin executables, built once per test binary.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	echoplugin.ServeIfAsked() // kiln bench starts this binary as its bare go-plugin plugin
	// Commands use the default stores: keep them out of the user's cache and
	// config. Tests that look at a store point these at their own directory.
	var err error
	if env, err = testbuild.Isolate("kiln-cli-test-xdg-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if emitters.dir != "" {
		os.RemoveAll(emitters.dir)
	}
	env.Remove()
	os.Exit(code)
}

// plugins returns a fresh plugins directory with the named plugins: "cpuref" or a
// fixture mode of host/testdata/fixture ("fx-zeros").
func plugins(t *testing.T, names ...string) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "kiln-cli-test-"); built.err != nil {
			return
		}
		built.err = joinBuildErrors(env.Build(built.dir, map[string]string{
			"cpuref":  "github.com/kiln-dev/kiln/plugins/cpuref",
			"fixture": "github.com/kiln-dev/kiln/host/testdata/fixture",
		}))
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	dir := t.TempDir()
	for _, n := range names {
		target := filepath.Join(built.dir, "fixture")
		if n == "cpuref" {
			target = filepath.Join(built.dir, "cpuref")
		}
		if err := os.Symlink(target, filepath.Join(dir, "kiln-backend-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// kiln runs the CLI in-process and returns its exit status, stdout and stderr.
func kiln(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	// A hung plugin must fail the test with a timeout, not hang it.
	code := execute(context.Background(), append([]string{"--timeout", "2m"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBackendsJSONHasTheDocumentedKeys(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-zeros")
	code, out, errOut := kiln(t, "--plugins", dir, "backends", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	keys := []string{"id", "adapter", "status", "reason", "reference_oracle", "dispatches", "precedence",
		"capability_score", "timing_quality", "mem_bw_gbps", "acquisition_ns", "preferred"}
	for _, r := range rows {
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks key %q", r["id"], k)
			}
		}
		if r["id"] == "cpu-ref" && (r["reference_oracle"] != true || r["preferred"] != false || r["status"] != "ready") {
			t.Errorf("cpu-ref row %v", r)
		}
		if r["id"] == "fx-zeros" && r["preferred"] != true {
			t.Errorf("fx-zeros must be preferred: %v", r)
		}
	}
	code, out, _ = kiln(t, "--plugins", dir, "backends")
	if code != 0 || !strings.Contains(out, "PREFERRED") || !strings.Contains(out, "cpu-ref") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
}

func TestDoctor(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-badcookie")
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := kiln(t, "--plugins", dir, "doctor")
	if code != 0 {
		t.Fatalf("exit %d with cpu-ref installed: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{dir, "notes.txt", "rejected", "kiln-backend-cpuref", "handshake ok", "handshake failed", "cpu-ref:0", "pipeline cache", "autotune", "pgo"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = kiln(t, "--plugins", dir, "doctor", "--json")
	var d map[string]any
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 || d["ok"] != true {
		t.Fatalf("doctor --json: exit %d, %v\n%s", code, err, out)
	}
	code, _, errOut = kiln(t, "--plugins", filepath.Join(dir, "missing"), "doctor")
	if code == 0 || !strings.Contains(errOut, "nothing usable") || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("empty installation: exit %d, %s", code, errOut)
	}
	code, _, _ = kiln(t, "--plugins", plugins(t, "fx-badcookie"), "doctor")
	if code == 0 {
		t.Fatal("only a broken plugin: doctor must exit non-zero")
	}
}

func TestRunKernelVerified(t *testing.T) {
	dir := plugins(t, "cpuref")
	code, out, errOut := kiln(t, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "300", "--backend", "cpu-ref", "--verify", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"backend", "program", "verified", "max_ulp", "compile_ns", "dispatch_ns"} {
		if _, ok := r[k]; !ok {
			t.Errorf("run --json lacks %q: %s", k, out)
		}
	}
	if r["backend"] != "cpu-ref:0" || r["verified"] != true {
		t.Fatalf("run result %v", r)
	}
	code, out, _ = kiln(t, "--plugins", dir, "run", "--kernel", "histogram", "--size", "1000", "--backend", "cpu-ref", "--verify")
	if code != 0 || !strings.Contains(out, "verified") || !strings.Contains(out, "dispatch") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

func TestRunWithoutBackendExplainsTheOracleRule(t *testing.T) {
	code, _, errOut := kiln(t, "--plugins", plugins(t, "cpuref"), "run", "--kernel", "saxpy", "--size", "10")
	if code == 0 || !strings.Contains(errOut, "--backend cpu-ref") || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestRunBadArguments(t *testing.T) {
	dir := plugins(t, "cpuref")
	for _, args := range [][]string{
		{"run"},
		{"run", "--kernel", "nope", "--size", "1"},
		{"run", "--kernel", "saxpy"},
		{"run", "--kernel", "saxpy", "--size", "x"},
		{"run", "--all", "--kernel", "saxpy"},
		{"--log-level", "loud", "backends"},
	} {
		code, _, errOut := kiln(t, append([]string{"--plugins", dir}, args...)...)
		if code == 0 || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%v: exit %d, %q; want a failure with a Fix", args, code, errOut)
		}
	}
}

func TestRunProgramFileWritesOutputs(t *testing.T) {
	dir := plugins(t, "cpuref")
	work := t.TempDir()
	prog := filepath.Join(work, "saxpy.json")
	src := `{"kiln": 1, "name": "example.saxpy.f32", "workgroup_size": [64, 1, 1],
  "params": [{"name": "a", "type": "f32", "default": 2.0}],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "y", "binding": 1, "type": "f32", "access": "read_write"}],
  "shared": [],
  "body": [{"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"if": {"lt": [{"local": "i"}, {"len": "y"}]}, "then": [
      {"store": "y", "index": {"local": "i"},
       "value": {"add": [{"mul": [{"param": "a"}, {"load": "x", "index": {"local": "i"}}]},
                         {"load": "y", "index": {"local": "i"}}]}}]}]}`
	x := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40} // 1.0, 2.0
	y := []byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f}
	for name, data := range map[string][]byte{"saxpy.json": []byte(src), "x.bin": x, "y.bin": y} {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outDir := filepath.Join(work, "out")
	code, out, errOut := kiln(t, "--plugins", dir, "run", prog, "--input", "x=@"+filepath.Join(work, "x.bin"),
		"--input", "y=@"+filepath.Join(work, "y.bin"), "--grid", "1,1,1", "--spec", "a=3", "--backend", "cpu-ref", "--verify", "--out", outDir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	got, err := os.ReadFile(filepath.Join(outDir, "y.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// 3*1+1 = 4.0 (0x40800000), 3*2+1 = 7.0 (0x40e00000)
	if want := []byte{0, 0, 0x80, 0x40, 0, 0, 0xe0, 0x40}; !bytes.Equal(got, want) {
		t.Fatalf("y.bin = % x, want % x", got, want)
	}
	if !strings.Contains(out, "verified") || !strings.Contains(out, "y.bin") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestRunAllTable(t *testing.T) {
	code, out, errOut := kiln(t, "--plugins", plugins(t, "cpuref", "fx-reject"), "run", "--all", "--size", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"KERNEL", "VERIFIED", "saxpy", "matmul", "cpu-ref:0", "unsupported"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("a run failed:\n%s", out)
	}
	code, _, _ = kiln(t, "--plugins", plugins(t, "cpuref", "fx-zeros"), "run", "--all", "--size", "64")
	if code == 0 {
		t.Fatal("a backend returning zeros must fail verification and make run --all exit non-zero")
	}
}

// kiln bench --load runs each count of goroutines and reports a rate and
// latencies per row, in JSON and as a table.
func TestBenchLoad(t *testing.T) {
	dir := plugins(t, "cpuref")
	code, out, errOut := kiln(t, "--plugins", dir, "bench", "--json", "--load=1,3", "--load-duration", "300ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		Backend string `json:"backend"`
		Rows    []struct {
			Goroutines int     `json:"goroutines"`
			Dispatches int     `json:"dispatches"`
			PerSecond  float64 `json:"dispatches_per_second"`
			P50, P99   int64
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Backend != "cpu-ref:0" || len(r.Rows) != 2 || r.Rows[0].Goroutines != 1 || r.Rows[1].Goroutines != 3 {
		t.Fatalf("report %+v, want rows for 1 and 3 goroutines on cpu-ref:0", r)
	}
	for _, row := range r.Rows {
		if row.Dispatches <= 0 || row.PerSecond <= 0 {
			t.Errorf("row %+v: want dispatches and a rate", row)
		}
	}
	code, out, errOut = kiln(t, "--plugins", dir, "bench", "--load=2", "--load-duration", "100ms")
	if code != 0 || !strings.Contains(out, "dispatches/s") || !strings.Contains(out, "p99") {
		t.Fatalf("exit %d, table:\n%s\n%s", code, out, errOut)
	}
}

func TestBenchJSON(t *testing.T) {
	code, out, errOut := kiln(t, "--plugins", plugins(t, "cpuref"), "bench", "--json", "--mib", "1", "--round-trips", "5", "--starts", "1", "--repeats", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	figure := func(path ...string) any {
		var v any = r
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
		return v
	}
	for _, path := range [][]string{{"start_median_ns"}, {"bare_start_median_ns"}, {"round_trip", "median_ns"}, {"round_trip_submit", "plugin_median_ns"}, {"bulk", "gbps"}, {"in_process_gbps"}} {
		if v, ok := figure(path...).(float64); !ok || v <= 0 {
			t.Errorf("%v = %v, want a positive figure", path, figure(path...))
		}
	}
}

// env is this test binary's own XDG homes; it builds the plugins.
var env *testbuild.Env

// joinBuildErrors joins the build failures of testbuild.Env.Build, in name
// order.
func joinBuildErrors(errs map[string]error) error {
	var all []error
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		all = append(all, errs[name])
	}
	return errors.Join(all...)
}

// emitters holds the vulkan and cuda plugin executables, built once per test
// binary for the compile tests.
var emitters struct {
	once sync.Once
	dir  string
	err  error
}

// emitterPlugins returns a fresh plugins directory with the real vulkan and cuda
// plugins and the fx-zeros fixture (a plugin without pluginapi.Artifacts).
func emitterPlugins(t *testing.T) string {
	t.Helper()
	dir := plugins(t, "fx-zeros")
	emitters.once.Do(func() {
		if emitters.dir, emitters.err = os.MkdirTemp("", "kiln-cli-test-emitters-"); emitters.err != nil {
			return
		}
		emitters.err = joinBuildErrors(env.Build(emitters.dir, map[string]string{
			"vulkan": "github.com/kiln-dev/kiln/plugins/vulkan",
			"cuda":   "github.com/kiln-dev/kiln/plugins/cuda",
		}))
	})
	if emitters.err != nil {
		t.Fatal(emitters.err)
	}
	for _, id := range []string{"vulkan", "cuda"} {
		if err := os.Symlink(filepath.Join(emitters.dir, id), filepath.Join(dir, "kiln-backend-"+id)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCompileEmitsSPIRV(t *testing.T) {
	dir := emitterPlugins(t)
	work := t.TempDir()
	spv := filepath.Join(work, "saxpy.spv")
	var j compileJSON
	kilnJSON(t, &j, "--plugins", dir, "compile", "--kernel", "saxpy", "--backend", "vulkan", "--emit", "spirv", "-o", spv, "--json")
	code, err := os.ReadFile(spv)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 20 || binary.LittleEndian.Uint32(code) != 0x07230203 || j.Bytes != len(code) || j.Program != "kiln.vector.saxpy.f32" ||
		j.Backend != "vulkan:0" || j.Emit != "spirv" || j.EntryPoint != "main" || j.Info["push_constant_bytes"] != "32" { // 2 counts, 6 grid words
		t.Fatalf("compile wrote %d bytes (magic %#x), reported %+v", len(code), binary.LittleEndian.Uint32(code), j)
	}
	if val, err := exec.LookPath("spirv-val"); err == nil {
		if out, err := exec.Command(val, "--target-env", "vulkan1.1", spv).CombinedOutput(); err != nil {
			t.Fatalf("spirv-val rejects the module: %v\n%s", err, out)
		}
	} else {
		t.Log("spirv-val is not installed; the module was not validated")
	}

	// The defaults are --backend vulkan --emit spirv, and a program file gives
	// the same module as the corpus kernel it holds.
	src, ok := kernels.JSON("saxpy")
	if !ok {
		t.Fatal("no JSON for saxpy")
	}
	file := filepath.Join(work, "saxpy.json")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := kiln(t, "--plugins", dir, "compile", file, "-o", "-")
	if status != 0 || out != string(code) {
		t.Fatalf("compile FILE -o -: exit %d, %d bytes: %s", status, len(out), errOut)
	}
	status, out, errOut = kiln(t, "--plugins", dir, "compile", "--kernel", "saxpy", "-o", spv)
	if status != 0 || !strings.Contains(out, "bytes of spirv for kiln.vector.saxpy.f32 from vulkan:0") || !strings.Contains(out, "entry_point main") {
		t.Fatalf("compile -o FILE: exit %d: %s\n%s", status, errOut, out)
	}

	status, out, errOut = kiln(t, "--plugins", dir, "compile", "--kernel", "saxpy", "--dis")
	if _, err := exec.LookPath("spirv-dis"); err == nil {
		if status != 0 || !strings.Contains(out, "OpEntryPoint GLCompute") {
			t.Fatalf("--dis: exit %d: %s\n%s", status, errOut, out)
		}
	} else if status == 0 || !strings.Contains(errOut, "spirv-dis is not installed") {
		t.Fatalf("--dis without spirv-dis: exit %d: %s", status, errOut)
	}
	t.Setenv("PATH", t.TempDir())
	status, _, errOut = kiln(t, "--plugins", dir, "compile", "--kernel", "saxpy", "--dis")
	if status == 0 || !strings.Contains(errOut, "spirv-dis is not installed") || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("--dis with no spirv-dis on PATH: exit %d: %s", status, errOut)
	}
}

// TestCompileSpecializes: --spec and --wg reach the plugin, whose module is
// then folded for them (vector_add at epi 4 differs from the default and
// reports the workgroup size asked for), and a parameter the program lacks is
// an error with a Fix.
func TestCompileSpecializes(t *testing.T) {
	dir := emitterPlugins(t)
	compile := func(args ...string) (string, compileJSON) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "m.spv")
		var j compileJSON
		kilnJSON(t, &j, append([]string{"--plugins", dir, "compile", "--kernel", "vector_add", "-o", out, "--json"}, args...)...)
		code, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(code), j
	}
	plain, pj := compile()
	four, fj := compile("--spec", "epi=4", "--wg", "64")
	if plain == four {
		t.Error("--spec epi=4 --wg 64 gave the default module")
	}
	if pj.Info["workgroup_size"] != "256,1,1" || fj.Info["workgroup_size"] != "64,1,1" {
		t.Errorf("workgroup sizes %q and %q, want 256,1,1 and 64,1,1", pj.Info["workgroup_size"], fj.Info["workgroup_size"])
	}
	status, _, errOut := kiln(t, "--plugins", dir, "compile", "--kernel", "vector_add", "--spec", "nope=1", "-o", "-")
	if status == 0 || !strings.Contains(errOut, `no parameter "nope"`) || !strings.Contains(errOut, "Fix:") {
		t.Errorf("--spec nope=1: exit %d, %q", status, errOut)
	}
}

// A kind the plugin does not emit, and a plugin that emits nothing, are errors
// that end in a Fix.
func TestCompileRejectsWhatThePluginCannotEmit(t *testing.T) {
	dir := emitterPlugins(t)
	spv := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--emit", "ptx"}, `vulkan emits spirv, not "ptx"`},
		{[]string{"--emit", "nope"}, `vulkan emits spirv, not "nope"`},
		{[]string{"--backend", "fx-zeros"}, "does not implement pluginapi.Artifacts"},
		{[]string{"--emit", "ptx", "--dis"}, "--dis disassembles SPIR-V"},
	} {
		args := append([]string{"--plugins", dir, "compile", "--kernel", "saxpy", "-o", spv}, c.args...)
		status, _, errOut := kiln(t, args...)
		if status == 0 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%v: exit %d, %q; want a failure saying %q with a Fix", c.args, status, errOut, c.want)
		}
	}
	for _, args := range [][]string{
		{"compile", "--kernel", "saxpy"},
		{"compile", "--kernel", "saxpy", "-o", "-", "--dis"},
		{"compile", "-o", spv},
		{"compile", "--kernel", "nope", "-o", spv},
		{"compile", filepath.Join(t.TempDir(), "missing.json"), "-o", spv},
		{"compile", "--kernel", "saxpy", "--backend", "absent", "-o", spv},
	} {
		status, _, errOut := kiln(t, append([]string{"--plugins", dir}, args...)...)
		if status == 0 || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%v: exit %d, %q; want a failure with a Fix", args, status, errOut)
		}
	}
}
