package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/remote"
)

// testApp is the app of one kiln invocation with plugins from dir and the
// default global flags, for calling a command's run function directly; out
// and errOut are its streams.
func testApp(dir string, asJSON bool) (a *app, out, errOut *bytes.Buffer) {
	out, errOut = &bytes.Buffer{}, &bytes.Buffer{}
	return &app{out: out, errOut: errOut, pluginDir: dir, logLevel: "off", startTimeout: 10 * time.Second, json: asJSON}, out, errOut
}

// decode decodes what a run function printed with --json into v.
func decode(t *testing.T, out *bytes.Buffer, v any) {
	t.Helper()
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// callJSON calls run with the options opts makes of a --json app over the
// plugins in dir, requires success and decodes what it printed into v.
func callJSON[O any](t *testing.T, dir string, opts func(*app) O, run func(context.Context, O) error, v any) {
	t.Helper()
	a, out, _ := testApp(dir, true)
	if err := run(context.Background(), opts(a)); err != nil {
		t.Fatal(err)
	}
	decode(t, out, v)
}

// TestRunTuneWithOptions calls kiln tune's run function with an options
// struct: it refuses what cannot tune before starting a plugin, and a dry run
// on cpu-ref reports a winner and records nothing.
func TestRunTuneWithOptions(t *testing.T) {
	paths := freshHomes(t)
	ctx := context.Background()
	a, _, _ := testApp(t.TempDir(), false)
	for _, tc := range []struct {
		o    tuneOptions
		want string
	}{
		{tuneOptions{Backend: "cpu-ref", Runs: 1}, "no --kernel"},
		{tuneOptions{Targets: []string{"vector_add"}, Runs: 1}, "no --backend"},
		{tuneOptions{Targets: []string{"vector_add"}, Backend: "cpu-ref"}, "--runs must be at least 1"},
		{tuneOptions{Targets: []string{"vector_add"}, Backend: "cpu-ref", Runs: 1, Workgroups: []string{"0"}}, "not a positive count"},
	} {
		tc.o.app = a
		if err := runTune(ctx, &tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runTune(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}

	a, out, _ := testApp(plugins(t, "cpuref"), true)
	o := &tuneOptions{app: a, Targets: []string{"vector_add"}, Sizes: []string{"1021"}, Backend: "cpu-ref", Seed: 1,
		Runs: 1, DryRun: true, Workgroups: []string{"64", "128"}}
	if err := runTune(ctx, o); err != nil {
		t.Fatal(err)
	}
	var j tuneJSON
	decode(t, out, &j)
	if !j.DryRun || j.Store != paths.Autotune || len(j.Results) != 1 || j.Results[0].Winner == "" || j.Results[0].Key != "" {
		t.Fatalf("dry run = %+v", j)
	}
	// The program's own workgroup (256) is always tried: 3 sizes × epi 1, 2, 4, 8.
	if r := j.Results[0]; r.Candidates != 12 || r.Measured != 12 {
		t.Fatalf("result = %+v", r)
	}
	if _, err := os.Stat(paths.Autotune); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dry run wrote %s (%v)", paths.Autotune, err)
	}
}

// TestRunRunWithOptions calls kiln run's run function with an options
// struct: a corpus kernel verified on cpu-ref, the kernel list, and the
// refusals of what does not say one thing to run.
func TestRunRunWithOptions(t *testing.T) {
	freshHomes(t)
	ctx := context.Background()
	dir := plugins(t, "cpuref")
	for _, tc := range []struct {
		o    runOptions
		want string
	}{
		{runOptions{}, "say what to run"},
		{runOptions{Kernel: "saxpy", All: true}, "say what to run"},
		{runOptions{All: true, Fallback: true}, "--fallback applies to one run"},
		{runOptions{All: true, Repeat: 2}, "--repeat times one run"},
		{runOptions{Kernel: "nope", Sizes: []string{"4"}}, `no corpus kernel "nope"`},
		{runOptions{Kernel: "saxpy"}, "--kernel needs one --size N"},
	} {
		a, _, _ := testApp(dir, false)
		tc.o.app = a
		if err := runRun(ctx, &tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runRun(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}

	a, out, _ := testApp(dir, true)
	if err := runRun(ctx, &runOptions{app: a, Kernel: "saxpy", Sizes: []string{"64"}, Seed: 1, Verify: true, File: runs.FileArgs{Backend: "cpu-ref"}}); err != nil {
		t.Fatal(err)
	}
	var j runJSON
	decode(t, out, &j)
	if !strings.HasPrefix(j.Backend, "cpu-ref") || j.Kernel != "saxpy" || j.Size != 64 || !j.Verified || j.Selection != "explicit" {
		t.Fatalf("run = %+v", j)
	}

	a, out, _ = testApp(dir, false)
	if err := runRun(ctx, &runOptions{app: a, List: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "KERNEL") || !strings.Contains(out.String(), "saxpy") {
		t.Fatalf("run --list:\n%s", out)
	}
}

// TestCacheRunFunctionsWithOptions calls the kiln cache subcommands' run
// functions directly: stats, trim (and its --max refusal), clear, verify, and
// push and pull through a file:// fleet tier named by --remote.
func TestCacheRunFunctionsWithOptions(t *testing.T) {
	paths := freshHomes(t)
	t.Setenv(remote.Env, "")
	ctx := context.Background()
	c, err := cache.Open(paths.PipelineCache)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Write(cache.Key{BackendID: "test", SpecHash: uint64(i)}, bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
			t.Fatal(err)
		}
	}
	var stats cacheStatsJSON
	callJSON(t, t.TempDir(), func(a *app) *cacheStatsOptions { return &cacheStatsOptions{app: a, Zero: true} }, runCacheStats, &stats)
	if stats.Root != paths.PipelineCache || stats.Entries != 2 || !stats.UsageZeroed {
		t.Fatalf("stats = %+v", stats)
	}

	a, out, _ := testApp(t.TempDir(), false)
	if err := runCacheTrim(ctx, &cacheTrimOptions{app: a, Max: "lots"}); err == nil || !strings.Contains(err.Error(), "--max \"lots\"") {
		t.Fatalf("trim --max lots = %v", err)
	}
	if err := runCacheVerify(ctx, a); err != nil || !strings.Contains(out.String(), "2 entries checked, 2 valid") {
		t.Fatalf("verify = %v:\n%s", err, out)
	}

	fleet := "file://" + t.TempDir()
	if err := runCachePush(ctx, &fleetOptions{app: a}); err == nil || !strings.Contains(err.Error(), remote.Env) {
		t.Fatalf("push without a fleet tier = %v", err)
	}
	fleetOpts := func(a *app) *fleetOptions { return &fleetOptions{app: a, Remote: fleet} }
	var push cachePushJSON
	callJSON(t, t.TempDir(), fleetOpts, runCachePush, &push)
	if push.Remote != fleet || push.Pipelines != 2 {
		t.Fatalf("push = %+v", push)
	}
	var clear cacheClearJSON
	callJSON(t, t.TempDir(), func(a *app) *app { return a }, runCacheClear, &clear)
	if clear.Removed != 2 {
		t.Fatalf("clear = %+v", clear)
	}
	var pull cachePullJSON
	callJSON(t, t.TempDir(), fleetOpts, runCachePull, &pull)
	if pull.Pipelines != 2 || pull.PipelinesBad != 0 {
		t.Fatalf("pull = %+v", pull)
	}
}

// TestRunDevicesAndBackendsWithOptions calls kiln devices' and kiln backends'
// run functions directly, as JSON and as text, and on an empty plugins
// directory (an empty JSON list, never null).
func TestRunDevicesAndBackendsWithOptions(t *testing.T) {
	ctx := context.Background()
	dir := plugins(t, "cpuref")
	survey := func(a *app) *surveyOptions { return &surveyOptions{app: a} }
	var devs []deviceJSON
	callJSON(t, dir, survey, runDevices, &devs)
	if len(devs) != 1 || devs[0].ID != "cpu-ref" || !devs[0].ReferenceOracle || devs[0].Profile.MaxInvocationsPerWorkgroup != 1024 {
		t.Fatalf("devices = %+v", devs)
	}
	a, out, _ := testApp(dir, false)
	if err := runDevices(ctx, &surveyOptions{app: a}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "oracle        yes: used only when named") {
		t.Fatalf("devices:\n%s", out)
	}
	a, out, _ = testApp(dir, false)
	if err := runBackends(ctx, &surveyOptions{app: a}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "BACKEND") || !strings.Contains(out.String(), "cpu-ref") {
		t.Fatalf("backends:\n%s", out)
	}
	for _, run := range []func(context.Context, *surveyOptions) error{runDevices, runBackends} {
		var rows []json.RawMessage
		callJSON(t, t.TempDir(), survey, run, &rows)
		if rows == nil || len(rows) != 0 {
			t.Fatalf("no plugins: %v, want []", rows)
		}
	}
}

// TestRunCompileWithOptions calls kiln compile's run function directly: the
// refusals of what does not say what to compile or where it goes, then a
// corpus kernel's SPIR-V written to a file, described as JSON and as text.
func TestRunCompileWithOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		o    compileOptions
		want string
	}{
		{compileOptions{Output: "-"}, "say what to compile"},
		{compileOptions{Kernel: "saxpy", programArg: programArg{"p.json"}, Output: "-"}, "say what to compile"},
		{compileOptions{Kernel: "saxpy"}, "no output"},
		{compileOptions{Kernel: "saxpy", Output: "-", Dis: true, Emit: "spirv"}, "both write to stdout"},
		{compileOptions{Kernel: "saxpy", Dis: true, Emit: "ptx"}, "--dis disassembles SPIR-V, not ptx"},
		{compileOptions{Kernel: "nope", Output: "-"}, `no corpus kernel "nope"`},
		{compileOptions{Kernel: "saxpy", Output: "-", WG: "1,2,3,4"}, "1,2,3,4"},
	} {
		a, _, _ := testApp(t.TempDir(), false)
		tc.o.app = a
		if err := runCompile(ctx, &tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runCompile(%+v) = %v, want %q", tc.o, err, tc.want)
		}
	}

	dir := emitterPlugins(t)
	spv := filepath.Join(t.TempDir(), "saxpy.spv")
	a, out, _ := testApp(dir, true)
	o := &compileOptions{app: a, Kernel: "saxpy", Backend: "vulkan", Emit: "spirv", Output: spv}
	if err := runCompile(ctx, o); err != nil {
		t.Fatal(err)
	}
	var j compileJSON
	decode(t, out, &j)
	code, err := os.ReadFile(spv)
	if err != nil || j.Bytes != len(code) || j.Output != spv || j.Backend != "vulkan:0" || j.EntryPoint != "main" {
		t.Fatalf("compile = %+v (%d bytes, %v)", j, len(code), err)
	}
	a, out, _ = testApp(dir, false)
	o.app = a
	if err := runCompile(ctx, o); err != nil {
		t.Fatal(err)
	}
	if want := "wrote " + spv + ": " + strconv.Itoa(len(code)) + " bytes of spirv for kiln.vector.saxpy.f32 from vulkan:0 ("; !strings.HasPrefix(out.String(), want) {
		t.Fatalf("compile printed %q, want the prefix %q", out, want)
	}
}

// TestRunVersionAndPluginsWithOptions calls kiln version's and kiln plugins'
// run functions directly: the version as JSON and as text, and the plugins
// list of a directory holding cpu-ref, unpinned, as JSON and as text.
func TestRunVersionAndPluginsWithOptions(t *testing.T) {
	ctx := context.Background()
	var v versionJSON
	callJSON(t, t.TempDir(), func(a *app) *versionOptions { return &versionOptions{app: a} }, runVersion, &v)
	if v.Version == "" || !strings.HasPrefix(v.Go, "go") || len(v.Protocols) == 0 {
		t.Fatalf("version = %+v", v)
	}
	a, out, _ := testApp(t.TempDir(), false)
	if err := runVersion(ctx, &versionOptions{app: a}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "kiln ") || !strings.Contains(out.String(), "\nplugin protocols ") {
		t.Fatalf("version:\n%s", out)
	}

	freshHomes(t)
	dir := plugins(t, "cpuref")
	var st pinsJSON
	callJSON(t, dir, func(a *app) *pluginsOptions { return &pluginsOptions{app: a} }, runPlugins, &st)
	if st.Pinning || len(st.Plugins) != 1 || st.Plugins[0].Status != "not pinned" || len(st.Plugins[0].SHA256) != 64 {
		t.Fatalf("plugins = %+v", st)
	}
	a, out, _ = testApp(dir, false)
	if err := runPlugins(ctx, &pluginsOptions{app: a}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pinning:  off") || !strings.Contains(out.String(), "kiln-backend-cpuref  not pinned") {
		t.Fatalf("plugins:\n%s", out)
	}
}
