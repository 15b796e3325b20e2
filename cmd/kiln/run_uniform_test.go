package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunUniformAndStrict runs a program file with --uniform on cpu-ref, and
// --strict on a racy program, through the real plugin.
func TestRunUniformAndStrict(t *testing.T) {
	dir := plugins(t, "cpuref")
	work := t.TempDir()
	prog := `{"kiln": 1, "name": "example.fill", "workgroup_size": [64, 1, 1],
  "uniforms": [{"name": "v", "type": "u32"}],
  "buffers": [{"name": "out", "binding": 0, "type": "u32", "access": "write"}],
  "shared": [{"name": "tile", "type": "u32", "count": 64}],
  "body": [{"let": "i", "value": {"builtin": "global_id", "axis": 0}},
    {"let": "l", "value": {"builtin": "local_id", "axis": 0}},
    {"store": "tile", "index": {"local": "l"}, "value": {"uniform": "v"}},
    {"barrier": true},
    {"if": {"lt": [{"local": "i"}, {"len": "out"}]}, "then": [
      {"store": "out", "index": {"local": "i"},
       "value": {"load": "tile", "index": {"rem": [{"add": [{"local": "l"}, {"u32": 1}]}, {"u32": 64}]}}}]}]}`
	path := filepath.Join(work, "fill.json")
	if err := os.WriteFile(path, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(work, "out")
	code, out, errOut := kiln(t, "--plugins", dir, "run", path, "--uniform", "v=7", "--size", "out=2",
		"--invocations", "2", "--backend", "cpu-ref", "--strict", "--out", outDir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	got, err := os.ReadFile(filepath.Join(outDir, "out.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{7, 0, 0, 0, 7, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Fatalf("out.bin = % x, want % x", got, want)
	}

	racy := strings.Replace(prog, `{"barrier": true},`, "", 1)
	if err := os.WriteFile(path, []byte(racy), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = kiln(t, "--plugins", dir, "run", path, "--uniform", "v=7", "--size", "out=2",
		"--invocations", "2", "--backend", "cpu-ref", "--strict")
	if code == 0 {
		t.Fatalf("--strict accepted a program that reads its neighbour's shared slot before a barrier:\n%s", out)
	}
	for _, want := range []string{"read after write", "workgroup (0,0,0)", "invocation (0,0,0)", "invocation (1,0,0)", "body[3].then[0]", "body[2]", "Fix:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// Without --strict the lockstep oracle returns an answer.
	if code, _, errOut = kiln(t, "--plugins", dir, "run", path, "--uniform", "v=7", "--size", "out=2",
		"--invocations", "2", "--backend", "cpu-ref"); code != 0 {
		t.Fatalf("without --strict: exit %d: %s", code, errOut)
	}
	if code, _, errOut = kiln(t, "--plugins", dir, "run", path, "--size", "out=2", "--invocations", "2", "--backend", "cpu-ref"); code == 0 ||
		!strings.Contains(errOut, "--uniform v=<u32>") {
		t.Fatalf("a missing uniform: exit %d, %s", code, errOut)
	}
}
