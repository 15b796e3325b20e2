package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testbuild"
)

// TestEmbedRunsSaxpyOnCPURef builds the CPU reference plugin into a fresh plugins
// directory and runs the application against it.
func TestEmbedRunsSaxpyOnCPURef(t *testing.T) {
	dir := t.TempDir()
	var build testbuild.Env // go's own build cache: this test moves no home
	for _, err := range build.Build(dir, map[string]string{"kiln-backend-cpuref": "github.com/kiln-dev/kiln/plugins/cpuref"}) {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), dir, "cpu-ref", 4, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"backend cpu-ref:0: ready", "on cpu-ref:0", "y[0] = 1\n", "y[1] = 4\n", "y[3] = 10\n",
		"11 commands in one submit", "y[1] = 21\n", "y[3] = 61\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), dir, "", 4, &out); err == nil || !strings.Contains(err.Error(), "cpu-ref") {
		t.Fatalf("without a backend name and only cpu-ref installed: got %v, want an error naming cpu-ref", err)
	}
}
