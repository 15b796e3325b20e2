package main

import (
	"bytes"
	"context"
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
