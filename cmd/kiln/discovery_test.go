package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kilnBare runs the CLI in-process like kiln, without the --timeout that
// helper adds: for the tests of what bounds a command when the user gives none.
// The test fails (instead of hanging) when the command outlives limit.
func kilnBare(t *testing.T, limit time.Duration, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		var out, errOut bytes.Buffer
		code := execute(context.Background(), args, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err, time.Since(began)
	case <-time.After(limit):
		t.Fatalf("kiln %s did not return within %v", strings.Join(args, " "), limit)
		return 0, "", "", 0
	}
}

// TestDoctorProbeHasADefaultDeadline pins issue 23 item 5: without --timeout,
// kiln doctor's probe of a plugin whose Dispatch ignores cancellation ends at
// the default probe timeout, reports the hang, and the doctor goes on.
func TestDoctorProbeHasADefaultDeadline(t *testing.T) {
	dir := plugins(t, "cpuref", "fx-hang")
	code, out, errOut, took := kilnBare(t, defaultProbeTimeout+time.Minute, "doctor", "--plugins", dir)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (cpu-ref passes its probe)\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "fx-hang:0: failed") || !strings.Contains(out, "probe timeout of "+defaultProbeTimeout.String()) || !strings.Contains(out, "--probe-timeout") {
		t.Fatalf("the hung probe is not reported with its timeout and Fix:\n%s", out)
	}
	t.Logf("kiln doctor with a plugin that ignores cancellation took %v", took.Round(time.Millisecond))
}

// TestTwinsAreShadowedInBackendsAndDoctor pins issue 22 item 6 at the CLI:
// kiln backends and kiln doctor say which plugin was shadowed, and by which.
func TestTwinsAreShadowedInBackendsAndDoctor(t *testing.T) {
	dir := plugins(t, "fx-aa-twin", "fx-zeros")
	code, out, errOut := kiln(t, "backends", "--plugins", dir)
	if code != 0 || !strings.Contains(out, "fx-aa-twin (shadowed): plugin ") || !strings.Contains(out, "the higher version wins") {
		t.Fatalf("kiln backends: exit %d, want fx-aa-twin shadowed\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = kiln(t, "doctor", "--plugins", dir)
	if code != 0 || !strings.Contains(out, "kiln-backend-fx-aa-twin  shadowed by kiln-backend-fx-zeros") {
		t.Fatalf("kiln doctor: exit %d, want fx-aa-twin shadowed by fx-zeros\n%s\n%s", code, out, errOut)
	}
}

// TestNotFoundNamesTheDiscoveryProblem pins issue 23 item 9 at the CLI: kiln
// run --backend names the plugins directory's or the plugin file's problem.
func TestNotFoundNamesTheDiscoveryProblem(t *testing.T) {
	dir := plugins(t, "cpuref")
	exe := filepath.Join(dir, "kiln-backend-cpuref")
	for _, c := range []struct {
		dir  string
		says string
	}{
		{filepath.Join(dir, "missing"), "missing does not exist. Fix: create it"},
		{exe, exe + " is a file, not a directory. Fix: name the directory that holds it: --plugins " + dir},
	} {
		code, _, errOut := kiln(t, "run", "--plugins", c.dir, "--backend", "cpu-ref", "--kernel", "saxpy", "--size", "64")
		if code == 0 || !strings.Contains(errOut, c.says) || strings.Contains(errOut, "known: none") {
			t.Errorf("--plugins %s: exit %d, want an error saying %q\n%s", c.dir, code, c.says, errOut)
		}
	}
}
