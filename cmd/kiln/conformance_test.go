package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// conformanceRun decodes `kiln conformance --json` with args.
func conformanceRun(t *testing.T, args ...string) (int, conformanceJSON, string) {
	t.Helper()
	code, out, errOut := kiln(t, append([]string{"conformance", "--json"}, args...)...)
	var j conformanceJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	return code, j, errOut
}

// TestConformancePassesCPURef runs the whole kit (corpus sizes up to 4096)
// over the wire against the built cpu-ref plugin: every table is reported and
// nothing fails.
func TestConformancePassesCPURef(t *testing.T) {
	dir := plugins(t, "cpuref")
	code, j, errOut := conformanceRun(t, "--plugins", dir, "--backend", "cpu-ref", "--short")
	if code != 0 || !j.Passed || len(j.Backends) != 1 {
		t.Fatalf("exit %d, passed %v: %s\n%+v", code, j.Passed, errOut, j)
	}
	b := j.Backends[0]
	if b.Name != "cpu-ref:0" || b.Version == "" || len(b.Failures) != 0 {
		t.Errorf("backend %+v", b)
	}
	tables := map[string]conformanceTableJSON{}
	for _, tab := range b.Tables {
		tables[tab.Name] = tab
	}
	for _, name := range []string{"describe", "contract", "semantics/operator", "semantics/cast", "semantics/memory",
		"semantics/control", "semantics/atomic", "semantics/uniform", "semantics/subgroup", "vector_add", "matmul", "softmax"} {
		if tab, ok := tables[name]; !ok || tab.Pass == 0 || tab.Fail != 0 {
			t.Errorf("table %q: %+v (present %v)", name, tab, ok)
		}
	}
	if len(b.Cases) < 400 {
		t.Errorf("%d cases, want the whole kit (over 400)", len(b.Cases))
	}
}

// TestConformanceFailsABrokenPlugin pins that a plugin whose outputs are all
// zero fails: the failures are listed with their detail and the exit status is
// 1. Without --backend it is checked as the only non-oracle backend.
func TestConformanceFailsABrokenPlugin(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-zeros")
	code, out, errOut := kiln(t, "--plugins", dir, "conformance", "--run", "semantics/cast")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"fx-zeros:0 (fixture device", "semantics/cast ", "FAIL semantics/cast/i32.f32\n",
		"differ from the CPU reference", "fx-zeros:0: FAIL:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cpu-ref") || !strings.Contains(errOut, "conformance failed on fx-zeros:0") {
		t.Errorf("cpu-ref was checked without being named, or the error is wrong:\n%s\n%s", out, errOut)
	}

	code, j, _ := conformanceRun(t, "--plugins", dir, "--backend", "fx-zeros", "--run", "contract|^vector_add$/cached|size=7$")
	if code != 1 || j.Passed || len(j.Backends) != 1 {
		t.Fatalf("exit %d: %+v", code, j)
	}
	failed := map[string]bool{}
	for _, f := range j.Backends[0].Failures {
		failed[f.Name] = len(f.Messages) > 0
	}
	if !failed["vector_add/size=7"] || !failed["contract/unusable_cached_blob"] || len(failed) != 2 {
		t.Errorf("failures %v, want vector_add/size=7 and contract/unusable_cached_blob with detail", failed)
	}
}

// TestConformanceRefusesToCheckNothing pins that a --run matching no case, a
// backend that is not installed, and a plugins directory with only the oracle
// are failures, not passes.
func TestConformanceRefusesToCheckNothing(t *testing.T) {
	dir := plugins(t, "cpuref")
	if code, out, _ := kiln(t, "--plugins", dir, "conformance", "--backend", "cpu-ref", "--run", "no-such-table"); code != 1 || !strings.Contains(out, "NOTHING CHECKED") {
		t.Errorf("--run matching nothing: exit %d\n%s", code, out)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "conformance", "--backend", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown backend: exit %d: %s", code, errOut)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "conformance"); code != 1 || !strings.Contains(errOut, "Fix: name one with --backend") {
		t.Errorf("only the oracle: exit %d: %s", code, errOut)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "conformance", "--backend", "cpu-ref", "--run", "semantics/("); code != 1 || !strings.Contains(errOut, "Fix:") {
		t.Errorf("bad --run: exit %d: %s", code, errOut)
	}
}

// TestConformanceOnVulkan runs two semantics tables and one kernel over the
// wire against the Vulkan plugin (lavapipe in CI); the whole kit there is
// minutes under -race. It skips when Vulkan is unusable, unless
// KILN_REQUIRE_VULKAN=1.
func TestConformanceOnVulkan(t *testing.T) {
	dir := emitterPlugins(t)
	requireVulkanBackend(t, dir)
	code, j, errOut := conformanceRun(t, "--plugins", dir, "--backend", "vulkan:0", "--short", "--run", "semantics|^vector_add$/control|memory|size=1021")
	if code != 0 || !j.Passed {
		t.Fatalf("exit %d: %s\n%+v", code, errOut, j)
	}
	got := map[string]int{}
	for _, tab := range j.Backends[0].Tables {
		got[tab.Name] = tab.Pass
	}
	if got["semantics/control"] == 0 || got["semantics/memory"] == 0 || got["vector_add"] == 0 || len(got) != 3 {
		t.Errorf("tables %v, want semantics/control, semantics/memory and vector_add, each with passes", got)
	}
}

// requireVulkanBackend skips the test unless the vulkan plugin in dir has a
// ready adapter; KILN_REQUIRE_VULKAN=1 makes that a failure.
func requireVulkanBackend(t *testing.T, dir string) {
	t.Helper()
	var rows []backendJSON
	kilnJSON(t, &rows, "--plugins", dir, "backends", "--json")
	for _, r := range rows {
		if r.ID == "vulkan" && r.Status == "ready" {
			return
		}
	}
	msg := "no ready Vulkan adapter (install mesa-vulkan-drivers for lavapipe)"
	if os.Getenv("KILN_REQUIRE_VULKAN") == "1" {
		t.Fatal(msg + " (KILN_REQUIRE_VULKAN=1 makes this a failure)")
	}
	t.Skip(msg)
}
