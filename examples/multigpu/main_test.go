package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/internal/testbuild"
)

// pluginDir builds the CPU reference plugin and the example plugin, and the
// extra plugins of the kiln module named ("vulkan"), into a fresh plugins
// directory.
func pluginDir(t *testing.T, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	pkgs := map[string]string{
		"kiln-backend-cpuref":      "github.com/kiln-dev/kiln/plugins/cpuref",
		"kiln-backend-example-cpu": "github.com/kiln-dev/kiln/examples/plugin",
	}
	for _, id := range extra {
		pkgs["kiln-backend-"+id] = "github.com/kiln-dev/kiln/plugins/" + id
	}
	var build testbuild.Env // go's own build cache: this test moves no home
	for _, err := range build.Build(dir, pkgs) {
		t.Fatal(err)
	}
	return dir
}

// Every adapter of the named backends runs alone and then together, verified.
func TestThroughputRunsEveryAdapterAloneAndTogether(t *testing.T) {
	var out bytes.Buffer
	cfg := config{plugins: pluginDir(t), backends: "cpu-ref,example-cpu", mib: 1, reps: 2}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"cpu-ref:0 (", "example-cpu:0 (", "alone", "all 2 adapters at once", "medians of 5 rounds (at once: ", "verified: every adapter's out = x + y"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// A SIGKILLed plugin loses only its own adapters' work.
func TestKillingOnePluginLosesOnlyItsAdapters(t *testing.T) {
	var out bytes.Buffer
	cfg := config{plugins: pluginDir(t), backends: "cpu-ref,example-cpu", mib: 1, reps: 1, kill: "cpu-ref", window: 1500 * time.Millisecond}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"SIGKILLed backend cpu-ref's plugin", "cpu-ref:0: lost its work after", "example-cpu:0: ", "unaffected, verified"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// -copy copies between plugins through the host, verified, both ways: the CPU
// reference's resident buffers and the example plugin's host-kept ones.
func TestCopyBetweenBackends(t *testing.T) {
	var out bytes.Buffer
	cfg := config{plugins: pluginDir(t), copy: "cpu-ref:0,example-cpu:0", mib: 3, reps: 2}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"copy cpu-ref:0 -> example-cpu:0: 3 MiB, verified", "copy example-cpu:0 -> cpu-ref:0: 3 MiB, verified", "GB/s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// -copy between the CPU reference and Vulkan (lavapipe here): resident buffers
// of two plugins, byte for byte both ways. It skips without a Vulkan adapter,
// unless KILN_REQUIRE_VULKAN=1.
func TestCopyBetweenCPURefAndVulkan(t *testing.T) {
	dir := pluginDir(t, "vulkan")
	ctx := context.Background()
	h, err := host.Open(ctx, host.Options{PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Description("vulkan")
	h.Close()
	if err != nil || len(d.Adapters) == 0 || !d.Adapters[0].Available {
		msg := fmt.Sprintf("no available Vulkan adapter (%v); install mesa-vulkan-drivers for lavapipe", err)
		if os.Getenv("KILN_REQUIRE_VULKAN") == "1" {
			t.Fatal(msg + " (KILN_REQUIRE_VULKAN=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	var res bytes.Buffer
	cfg := config{plugins: dir, copy: "cpu-ref:0,vulkan:0", mib: 40, reps: 1}
	if err := run(ctx, cfg, &res); err != nil {
		t.Fatalf("%v\n%s", err, res.String())
	}
	for _, want := range []string{"copy cpu-ref:0 -> vulkan:0: 40 MiB, verified", "copy vulkan:0 -> cpu-ref:0: 40 MiB, verified"} {
		if !strings.Contains(res.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, res.String())
		}
	}
}

// -adapters limits each backend to its first adapters; a negative count is
// refused before anything runs.
func TestAdaptersLimit(t *testing.T) {
	dir := pluginDir(t)
	var out bytes.Buffer
	if err := run(context.Background(), config{plugins: dir, backends: "cpu-ref", mib: 1, reps: 1, adapters: -1}, &out); err == nil || !strings.Contains(err.Error(), "-adapters") {
		t.Fatalf("adapters -1: err %v, want a refusal naming -adapters", err)
	}
	out.Reset()
	if err := run(context.Background(), config{plugins: dir, backends: "cpu-ref,example-cpu", mib: 1, reps: 1, adapters: 1}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "all 2 adapters at once") {
		t.Errorf("adapters 1 over two one-adapter backends:\n%s", out.String())
	}
}
