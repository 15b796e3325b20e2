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

// statusOf runs kiln backends --json on dir and returns the status of id.
func statusOf(t *testing.T, dir, id string) string {
	t.Helper()
	var rows []backendJSON
	kilnJSON(t, &rows, "--plugins", dir, "backends", "--json")
	for _, r := range rows {
		if r.ID == id {
			return r.Status
		}
	}
	t.Fatalf("no %s in kiln backends of %s: %+v", id, dir, rows)
	return ""
}

// TestPinningIsPerDirectory pins issue 22 item 4 at the CLI: pinning one
// plugins directory leaves another alone; a refusal says the exact command to
// run, and running it works; unpin --all and pin --off turn the directory's
// pinning off.
func TestPinningIsPerDirectory(t *testing.T) {
	freshHomes(t)
	a, b := plugins(t, "cpuref", "fx-zeros"), plugins(t, "cpuref")
	if code, out, errOut := kiln(t, "--plugins", a, "plugins", "pin", "cpuref"); code != 0 {
		t.Fatalf("pin: exit %d\n%s\n%s", code, out, errOut)
	}
	if s := statusOf(t, b, "cpu-ref"); s != "ready" {
		t.Fatalf("cpu-ref of another directory is %s, want ready: pins of one directory do not pin another", s)
	}
	code, _, errOut := kiln(t, "--plugins", a, "run", "--kernel", "saxpy", "--size", "8", "--backend", "fx-zeros")
	fix := "run `kiln plugins pin --plugins " + a + " kiln-backend-fx-zeros`"
	if code == 0 || !strings.Contains(errOut, fix) {
		t.Fatalf("an unpinned plugin of the pinned directory: exit %d, want the Fix %q\n%s", code, fix, errOut)
	}
	if code, out, errOut := kiln(t, "plugins", "pin", "--plugins", a, "kiln-backend-fx-zeros"); code != 0 {
		t.Fatalf("the Fix's command: exit %d\n%s\n%s", code, out, errOut)
	}
	if s := statusOf(t, a, "fx-zeros"); s != "ready" {
		t.Fatalf("fx-zeros after running the Fix: %s", s)
	}
	for _, off := range [][]string{{"plugins", "unpin", "--all"}, {"plugins", "pin", "--off"}} {
		if code, out, errOut := kiln(t, "--plugins", a, "plugins", "pin"); code != 0 {
			t.Fatalf("pin: exit %d\n%s\n%s", code, out, errOut)
		}
		code, out, errOut := kiln(t, append([]string{"--plugins", a}, off...)...)
		if code != 0 || !strings.Contains(out, "pinning is off for "+a) {
			t.Fatalf("%v: exit %d\n%s\n%s", off, code, out, errOut)
		}
		var st pinsJSON
		kilnJSON(t, &st, "--plugins", a, "plugins", "--json")
		if st.Pinning {
			t.Fatalf("%v left pinning on: %+v", off, st)
		}
	}
}
