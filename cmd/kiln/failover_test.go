package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRunFallbackMovesANamedBackendsRunOn(t *testing.T) {
	dir := plugins(t, "fx-device", "fx-zeros")
	args := []string{"--plugins", dir, "--json", "run", "--kernel", "vector_add", "--size", "16", "--backend", "fx-device"}
	if code, _, errOut := kiln(t, args...); code == 0 || !strings.Contains(errOut, "device lost") {
		t.Fatalf("without --fallback: exit %d, stderr %q; want the device error", code, errOut)
	}
	code, out, errOut := kiln(t, append(args, "--fallback")...)
	if code != 0 {
		t.Fatalf("with --fallback: exit %d: %s", code, errOut)
	}
	var j runJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if j.Backend != "fx-zeros:0" || !strings.HasPrefix(j.Selection, "fallback: fx-device:0 failed (device)") {
		t.Fatalf("ran on %s because %q", j.Backend, j.Selection)
	}
	if len(j.Failover) != 1 || j.Failover[0].Backend != "fx-device:0" || !strings.Contains(j.Failover[0].Error, "device lost") {
		t.Fatalf("failover = %+v", j.Failover)
	}
}

func TestRunFallbackRefusesAll(t *testing.T) {
	dir := plugins(t, "cpuref")
	code, _, errOut := kiln(t, "--plugins", dir, "run", "--all", "--fallback")
	if code == 0 || !strings.Contains(errOut, "--fallback applies to one run") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
