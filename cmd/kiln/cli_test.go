package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/bench"
	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/pgo"
)

func TestUnknownSubcommandFails(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"cache", "bogus"}, {"autotune", "bogus"}, {"routes", "bogus"}, {"completion", "bogus"}} {
		code, out, errOut := kiln(t, args...)
		if code == 0 || !strings.Contains(errOut, `unknown command "bogus"`) || !strings.Contains(errOut, "Fix:") {
			t.Errorf("kiln %v: exit %d, stdout %q, stderr %q; want a non-zero exit naming the command", args, code, out, errOut)
		}
	}
	if code, out, _ := kiln(t, "cache"); code != 0 || !strings.Contains(out, "Usage:") {
		t.Errorf("kiln cache alone: exit %d, %q; want its help", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, errOut := kiln(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "kiln ") || !strings.Contains(out, "go1.") {
		t.Fatalf("kiln --version: exit %d, %q %s", code, out, errOut)
	}
	code, long, _ := kiln(t, "version")
	if code != 0 || !strings.HasPrefix(long, out) || !strings.Contains(long, "plugin protocols 1, 2") {
		t.Fatalf("kiln version: exit %d, %q (--version said %q)", code, long, out)
	}
	var v versionJSON
	kilnJSON(t, &v, "version", "--json")
	if v.Version == "" || v.Go == "" || !reflect.DeepEqual(v.Protocols, []int{1, 2}) {
		t.Fatalf("kiln version --json = %+v", v)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := kiln(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "kiln") {
			t.Errorf("kiln completion %s: exit %d, %d bytes, %s", shell, code, len(out), errOut)
		}
	}
	code, out, _ := kiln(t, "__complete", "rou")
	if code != 0 || !strings.Contains(out, "routes") {
		t.Errorf("completing rou: exit %d, %q", code, out)
	}
}

func TestTimeoutFlag(t *testing.T) {
	for _, flag := range []string{"--timeout", "--start-timeout"} {
		code, _, errOut := kiln(t, flag, "-1s", "backends")
		if code == 0 || !strings.Contains(errOut, flag+" -1s is negative") || !strings.Contains(errOut, "Fix:") {
			t.Errorf("%s -1s: exit %d, %s", flag, code, errOut)
		}
	}

	dir := plugins(t, "fx-hang")
	var out, errOut bytes.Buffer
	start := time.Now()
	code := execute(context.Background(), []string{"--plugins", dir, "--timeout", "1500ms",
		"run", "--kernel", "saxpy", "--size", "16", "--backend", "fx-hang"}, &out, &errOut)
	took := time.Since(start)
	if took > 30*time.Second {
		t.Fatalf("returned after %v on a 1.5s --timeout", took)
	}
	msg := errOut.String()
	m := regexp.MustCompile(`timed out after (\d+\.\d)s \(--timeout 1.5s\)`).FindStringSubmatch(msg)
	if code == 0 || m == nil || !strings.Contains(msg, "Fix: raise --timeout") || strings.Contains(msg, "give the context") {
		t.Fatalf("exit %d after %v: %s", code, took, msg)
	}
	if elapsed, _ := strconv.ParseFloat(m[1], 64); elapsed < 1.5 || elapsed > took.Seconds()+0.1 {
		t.Fatalf("said %ss, the deadline was 1.5s and the command took %v", m[1], took)
	}
}

func TestRunRefusesADuplicateInput(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.json")
	program := `{"kiln": 1, "name": "dup", "workgroup_size": [1, 1, 1], "params": [], "shared": [],
  "buffers": [{"name": "x", "binding": 0, "type": "f32", "access": "read"},
              {"name": "out", "binding": 1, "type": "f32", "access": "write"}],
  "body": [{"store": "out", "index": {"builtin": "global_id", "axis": 0}, "value": {"load": "x", "index": {"builtin": "global_id", "axis": 0}}}]}`
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin")
	for path, data := range map[string]string{prog: program, a: "\x00\x00\x80\x3f", b: "\x00\x00\x00\x40"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := kiln(t, "--plugins", plugins(t, "cpuref"), "run", prog, "--backend", "cpu-ref",
		"--input", "x=@"+a, "--input", "x=@"+b, "--grid", "1")
	if code == 0 || !strings.Contains(errOut, `buffer "x" already has --input x=@`+a) {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

func TestRoutesListAndForget(t *testing.T) {
	paths := freshHomes(t)
	table := pgo.New(paths.PGO)
	route := func(backend string, classes ...pgo.ClassRoute) pgo.Route {
		return pgo.Route{Backend: backend, AdapterFingerprint: "fp", PluginVersion: "1.0.0",
			Observations: []pgo.Observation{{Backend: backend, MedianNs: 2000}}, MeasuredAt: time.Now(), Classes: classes}
	}
	for op, r := range map[string]pgo.Route{
		"kiln.vector.saxpy.f32": route("example-cpu:0"),
		"kiln.vector.add.f32":   route("vulkan:0", pgo.ClassRoute{Bytes: 4096, Backend: "example-cpu:0"}, pgo.ClassRoute{Bytes: 1 << 20, Backend: "vulkan:0"}),
		"kiln.reduce.sum.f32":   route("vulkan:0"),
		"my.program":            route("cuda:0"),
	} {
		if err := table.Set(op, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := table.Save(context.Background()); err != nil {
		t.Fatal(err)
	}

	var list struct {
		Table  string      `json:"table"`
		Routes []routeJSON `json:"routes"`
	}
	kilnJSON(t, &list, "routes", "list", "--json")
	if list.Table != paths.PGO || len(list.Routes) != 4 || list.Routes[1].Op != "kiln.vector.add.f32" || len(list.Routes[1].Classes) != 2 {
		t.Fatalf("routes list = %+v", list)
	}
	if code, out, _ := kiln(t, "routes", "list"); code != 0 || !strings.Contains(out, "4 route(s)") || !strings.Contains(out, "saxpy") || !strings.Contains(out, "4 KiB→example-cpu:0") {
		t.Fatalf("routes list: exit %d\n%s", code, out)
	}

	type forgotJSON struct {
		Forgotten []string `json:"forgotten"`
	}
	var f forgotJSON
	kilnJSON(t, &f, "routes", "forget", "--backend", "example-cpu", "--json")
	if want := []string{"kiln.vector.add.f32", "kiln.vector.saxpy.f32"}; !reflect.DeepEqual(f.Forgotten, want) {
		t.Fatalf("forget --backend example-cpu forgot %v, want %v (a size class counts)", f.Forgotten, want)
	}
	prog := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(prog, []byte(`{"kiln": 1, "name": "my.program", "workgroup_size": [1, 1, 1], "params": [], "shared": [],
  "buffers": [{"name": "out", "binding": 0, "type": "u32", "access": "write"}],
  "body": [{"store": "out", "index": {"builtin": "global_id", "axis": 0}, "value": {"builtin": "global_id", "axis": 0}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f = forgotJSON{}
	kilnJSON(t, &f, "routes", "forget", "reduce_sum", prog, "--json")
	if want := []string{"kiln.reduce.sum.f32", "my.program"}; !reflect.DeepEqual(f.Forgotten, want) {
		t.Fatalf("forget by kernel and program file forgot %v, want %v", f.Forgotten, want)
	}
	if got, err := pgo.Load(paths.PGO); err != nil || got.Len() != 0 {
		t.Fatalf("table after forgetting: %v routes, %v", got.Ops(), err)
	}
	for _, args := range [][]string{{"routes", "forget"}, {"routes", "forget", "--all", "saxpy"}} {
		if code, _, errOut := kiln(t, args...); code == 0 || !strings.Contains(errOut, "Fix:") {
			t.Errorf("kiln %v: exit %d, %s", args, code, errOut)
		}
	}
	if code, out, errOut := kiln(t, "routes", "forget", "--all"); code != 0 || !strings.Contains(out, "forgot 0 route(s)") {
		t.Errorf("forget --all on an empty table: exit %d, %s%s", code, out, errOut)
	}
}

// TestMakeBuildInstallsNoExamplePlugin pins that make build installs only the
// plugins under plugins/: an installed example plugin competes with the real
// backends for selection and for kiln certify's routes.
func TestMakeBuildInstallsNoExamplePlugin(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-n", "build")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "plugins/cpuref") {
		t.Fatalf("make -n build installs no cpuref plugin:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "go build") && strings.Contains(line, "examples/plugin") {
			t.Errorf("make build builds the example plugin into the plugins directory: %s", line)
		}
	}
}

// TestPluginBinaryVersion runs a real plugin executable with --version.
func TestPluginBinaryVersion(t *testing.T) {
	plugins(t) // builds the cpuref plugin
	out, err := exec.Command(filepath.Join(built.dir, "cpuref"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "cpu-ref ") || !strings.Contains(string(out), "(kiln plugin cpuref, protocols 1, 2") {
		t.Fatalf("kiln-backend-cpuref --version: %v, %q", err, out)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progressBar{w: &buf} // as newProgressBar makes it on a terminal
	p.update(3, 10, "saxpy on vulkan:0")
	p.update(4, 10, "saxpy on cpu-ref:0")
	if got := buf.String(); !strings.Contains(got, "saxpy on vulkan:0") || !strings.Contains(got, "(3/10)") || !strings.Contains(got, "|") {
		t.Fatalf("bar = %q", got)
	}
	buf.Reset()
	p.finish()
	if got := buf.String(); !strings.HasPrefix(got, "\r") || strings.Contains(got, "saxpy") {
		t.Fatalf("finish must erase the bar, wrote %q", got)
	}

	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	for name, w := range map[string]io.Writer{"a buffer": &buf, "/dev/null": devNull} {
		if newProgressBar(w).w != nil {
			t.Errorf("a bar on %s, which is no terminal, must draw nothing", name)
		}
	}
	var zero progressBar
	zero.update(1, 2, "x")
	zero.finish()
	if (&app{json: true, errOut: os.Stderr}).progressBar().w != nil {
		t.Error("--json must draw no bar")
	}
}

// TestLongOperationsReportProgress pins that run --all, stats and bench tell
// their bar every step, from 0 of total up to total-1.
func TestLongOperationsReportProgress(t *testing.T) {
	dir := plugins(t, "cpuref")
	ctx := context.Background()
	h, err := host.Open(ctx, host.Options{PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	check := func(name string) (func(done, total int, what string), func()) {
		var steps []int
		last := 0
		return func(done, total int, what string) {
				if what == "" {
					t.Errorf("%s: step %d without a description", name, done)
				}
				steps, last = append(steps, done), total
			}, func() {
				if len(steps) == 0 || len(steps) != last {
					t.Errorf("%s: %d steps reported, of a total of %d", name, len(steps), last)
				}
				for i, d := range steps {
					if d != i {
						t.Errorf("%s: steps %v, want 0, 1, 2, …", name, steps)
						break
					}
				}
			}
	}
	progress, verify := check("runs.All")
	if _, err := runs.All(ctx, h, 16, 1, "cpu-ref", runs.Limits{}, progress); err != nil {
		t.Fatal(err)
	}
	verify()
	progress, verify = check("bench.Run")
	if _, err := bench.Run(ctx, h, bench.Options{Starts: 1, RoundTrips: 2, Bytes: 1 << 12, Repeats: 1, Chain: 2, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	verify()
}
