package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pluginDir builds the CPU reference plugin and the example plugin into a
// fresh plugins directory.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range [][2]string{{"cpuref", "plugins/cpuref"}, {"example-cpu", "examples/plugin"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "kiln-backend-"+p[0]), "github.com/kiln-dev/kiln/"+p[1]).CombinedOutput()
			if err != nil {
				errs[i] = err
				t.Logf("go build %s: %s", p[1], out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
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
	for _, want := range []string{"cpu-ref:0 (", "example-cpu:0 (", "alone", "all 2 adapters at once", "verified: every adapter's out = x + y"} {
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
