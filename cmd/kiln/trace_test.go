package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/host/trace"
)

// checkRunTrace parses a trace the CLI wrote, checks it against the
// trace-event format, and checks that every flow goes from a host slice
// through the plugin's run and the device's slice back to the host, each on
// a named process, and that there are at least flows of them.
func checkRunTrace(t *testing.T, path string, flows int) *trace.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := trace.ParseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("%s breaks the trace-event format:\n%v", path, err)
	}
	names := f.ProcessNames()
	got := f.Flows()
	if len(got) < flows {
		t.Fatalf("%d flows, want at least %d", len(got), flows)
	}
	for _, fl := range got {
		var cats []string
		for _, s := range fl.Slices {
			if s == nil {
				t.Fatalf("flow %d has a point in no slice", fl.ID)
			}
			if names[s.Pid] == "" {
				t.Errorf("flow %d passes unnamed pid %d", fl.ID, s.Pid)
			}
			cats = append(cats, s.Cat)
		}
		if c := strings.Join(cats, ","); c != "host,plugin,device,host" {
			t.Errorf("flow %d runs through %s, want host,plugin,device,host", fl.ID, c)
		}
	}
	return f
}

// TestRunTraceOnCPURefAndLavapipe pins `kiln run --trace`: the file opens as
// trace-event JSON whose dispatch is one flow from the host through the
// plugin process to the adapter's device track, on cpu-ref and on Vulkan
// (lavapipe), whose device span is the device's own time.
func TestRunTraceOnCPURefAndLavapipe(t *testing.T) {
	vulkan := emitterPlugins(t)
	requireVulkanBackend(t, vulkan)
	for _, c := range []struct{ dir, backend string }{{plugins(t, "cpuref"), "cpu-ref"}, {vulkan, "vulkan:0"}} {
		t.Run(c.backend, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.json")
			code, out, errOut := kiln(t, "--plugins", c.dir, "run", "--kernel", "saxpy", "--size", "1000", "--backend", c.backend, "--trace", path)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut, out)
			}
			f := checkRunTrace(t, path, 1)
			device := false
			for pid, name := range f.ProcessNames() {
				device = device || (pid >= 1<<30 && strings.HasPrefix(name, "device "+c.backend))
			}
			if !device {
				t.Errorf("no device track named for %s: %v", c.backend, f.ProcessNames())
			}
		})
	}
}

// TestTraceFlagOnBenchTuneCertify pins --trace on the other commands that
// run work: each writes a valid trace with its submits' and dispatches' flows.
func TestTraceFlagOnBenchTuneCertify(t *testing.T) {
	dir := plugins(t, "cpuref")
	for name, args := range map[string][]string{
		"bench": {"bench", "--mib", "1", "--round-trips", "3", "--starts", "1", "--repeats", "1", "--chain", "2"},
		"tune":  {"tune", "--kernel", "vector_add", "--size", "256", "--backend", "cpu-ref", "--dry-run", "--runs", "1", "--wg", "32,1,1"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".json")
			code, out, errOut := kiln(t, append(append([]string{"--plugins", dir}, args...), "--trace", path)...)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut, out)
			}
			checkRunTrace(t, path, 1)
		})
	}
	_, help, _ := kiln(t, "certify", "--help")
	if !strings.Contains(help, "--trace") {
		t.Error("certify has no --trace flag")
	}
}

// TestTraceSummarySVGAndCheck pins `kiln trace summary|svg|check` on a trace
// of a run: per-track totals with the plugin and device tracks, the longest
// slices, an SVG with one label per process, and a refusal of a broken file.
func TestTraceSummarySVGAndCheck(t *testing.T) {
	dir := plugins(t, "cpuref")
	path := filepath.Join(t.TempDir(), "run.json")
	if code, _, errOut := kiln(t, "--plugins", dir, "run", "--kernel", "saxpy", "--size", "100", "--backend", "cpu-ref", "--trace", path); code != 0 {
		t.Fatalf("run: %s", errOut)
	}
	code, out, errOut := kiln(t, "trace", "summary", path)
	if code != 0 {
		t.Fatalf("summary: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"kiln host", "kiln-backend-cpuref", "device cpu-ref:0", "dispatch", "compile", "run", "LONGEST SLICES", "1 flows"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = kiln(t, "--json", "trace", "summary", "--top", "2", path)
	var s trace.Summary
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || len(s.Longest) != 2 || s.Flows != 1 || len(s.Totals) == 0 {
		t.Errorf("summary --json: exit %d, %+v\n%s", code, s, out)
	}
	svg := filepath.Join(t.TempDir(), "run.svg")
	if code, _, errOut := kiln(t, "trace", "svg", path, "-o", svg); code != 0 {
		t.Fatalf("svg: %s", errOut)
	}
	pic, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pic), "<svg") || strings.Count(string(pic), "<rect") < 5 || !strings.Contains(string(pic), "device cpu-ref:0") || !strings.Contains(string(pic), "<line") {
		t.Errorf("svg:\n%.2000s", pic)
	}
	if code, out, _ := kiln(t, "trace", "check", path); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("check: exit %d: %s", code, out)
	}
	broken := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(broken, []byte(`{"traceEvents":[{"name":"x","ph":"X","ts":-1,"pid":1,"tid":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := kiln(t, "trace", "check", broken); code == 0 || !strings.Contains(errOut, "Fix:") {
		t.Errorf("check of a broken trace: exit %d: %s", code, errOut)
	}
	if code, _, errOut := kiln(t, "trace", "summary", filepath.Join(t.TempDir(), "missing.json")); code == 0 || !strings.Contains(errOut, "Fix:") {
		t.Errorf("summary of a missing file: exit %d: %s", code, errOut)
	}
}
