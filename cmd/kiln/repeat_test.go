package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunRepeat pins `kiln run --repeat`: N timed submits after a warm-up, with
// the median and minimum submit time (and device time where the backend has
// device timestamps: lavapipe) and the throughput, in the table and in --json.
func TestRunRepeat(t *testing.T) {
	vulkan := emitterPlugins(t)
	requireVulkanBackend(t, vulkan)
	for _, c := range []struct {
		dir, backend string
		device       bool
	}{{plugins(t, "cpuref"), "cpu-ref", false}, {vulkan, "vulkan:0", true}} {
		t.Run(c.backend, func(t *testing.T) {
			code, out, errOut := kiln(t, "--plugins", c.dir, "--json", "run", "--kernel", "vector_add", "--size", "4096", "--backend", c.backend, "--repeat", "5", "--warmup", "1ms")
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut, out)
			}
			var j runJSON
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatal(err)
			}
			if j.Runs != 5 || j.WarmupRuns < 3 || j.SubmitNs <= 0 || j.SubmitMinNs <= 0 || j.SubmitMinNs > j.SubmitNs || j.Gbps <= 0 || j.Gflops <= 0 {
				t.Errorf("--repeat figures %+v", j)
			}
			if c.device != (j.DeviceNs > 0) || j.DeviceMinNs > j.DeviceNs {
				t.Errorf("device figures %d (min %d) on %s", j.DeviceNs, j.DeviceMinNs, c.backend)
			}
			best := j.SubmitNs
			if j.DeviceNs > 0 {
				best = j.DeviceNs
			}
			want := (4096*4*2 + 4096*4) / float64(best)
			if diff := j.Gbps/want - 1; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("gbps %v, want %v (x and y read, out written, at the median)", j.Gbps, want)
			}
		})
	}
	dir := plugins(t, "cpuref")
	// 16-bit buffers count 2 bytes an element: the output binding is 2n bytes
	// (a 4n-byte one would double len(out) and the bytes moved).
	code, out, errOut := kiln(t, "--plugins", dir, "--json", "run", "--kernel", "vector_add_f16", "--size", "1001", "--backend", "cpu-ref", "--repeat", "3", "--warmup", "1ms")
	var j16 runJSON
	if code != 0 || json.Unmarshal([]byte(out), &j16) != nil {
		t.Fatalf("vector_add_f16: exit %d: %s\n%s", code, errOut, out)
	}
	if want := 1001 * 2 * 3 / float64(j16.SubmitNs); j16.Gbps/want-1 > 1e-9 || j16.Gbps/want-1 < -1e-9 {
		t.Errorf("vector_add_f16 gbps %v, want %v (6 bytes an element)", j16.Gbps, want)
	}
	code, out, errOut = kiln(t, "--plugins", dir, "run", "--kernel", "vector_add", "--size", "1000", "--backend", "cpu-ref", "--repeat", "3", "--warmup", "1ms")
	if code != 0 || !strings.Contains(out, "3 runs after") || !strings.Contains(out, "GB/s") || !strings.Contains(out, "no device timestamps") {
		t.Errorf("exit %d: %s\n%s", code, errOut, out)
	}
	for _, args := range [][]string{{"--all", "--repeat", "3"}, {"--kernel", "saxpy", "--size", "8", "--backend", "cpu-ref", "--repeat", "-1"}} {
		if code, _, errOut := kiln(t, append([]string{"--plugins", dir, "run"}, args...)...); code == 0 || !strings.Contains(errOut, "Fix:") {
			t.Errorf("run %v: exit %d: %s", args, code, errOut)
		}
	}
}

// TestBenchKernelSideBySide pins `kiln bench --kernel`: each backend named
// with --on is verified and timed, one row each.
func TestBenchKernelSideBySide(t *testing.T) {
	dir := plugins(t, "cpuref")
	code, out, errOut := kiln(t, "--plugins", dir, "--json", "bench", "--kernel", "vector_add", "--size", "1000", "--on", "cpu-ref", "--repeat", "2", "--warmup", "1ms")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var rows []benchKernelJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Backend != "cpu-ref:0" || rows[0].Runs != 2 || rows[0].SubmitNs <= 0 || !rows[0].Verified || rows[0].Kernel != "vector_add" {
		t.Errorf("rows %+v", rows)
	}
	code, out, _ = kiln(t, "--plugins", dir, "bench", "--kernel", "vector_add", "--size", "1000", "--on", "cpu-ref", "--repeat", "2", "--warmup", "1ms")
	if code != 0 || !strings.Contains(out, "BACKEND") || !strings.Contains(out, "cpu-ref:0") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "bench", "--kernel", "nope"); code == 0 || !strings.Contains(errOut, "Fix:") {
		t.Errorf("unknown kernel: exit %d: %s", code, errOut)
	}
	if code, _, errOut := kiln(t, "--plugins", dir, "bench", "--kernel", "vector_add", "--size", "100"); code == 0 || !strings.Contains(errOut, "--on cpu-ref") {
		t.Errorf("no backend but the oracle: exit %d: %s", code, errOut)
	}
}
