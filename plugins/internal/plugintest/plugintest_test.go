package plugintest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// TestBuildAndStart builds the CPU reference's plugin, starts it as the host
// does and describes it, then removes the build.
func TestBuildAndStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	t.Chdir(filepath.Join("..", "..", "cpuref"))
	b := Build("kiln-backend-cpuref", "")
	be, logs, stop := b.Start(t)
	defer stop()
	ctx := context.Background()
	if d := Usable(t, ctx, be, "cpu-ref", "KILN_PLUGINTEST_REQUIRE"); len(d.Adapters) != 1 {
		t.Errorf("cpu-ref has %d adapters, want 1", len(d.Adapters))
	}
	blobs := 0
	res := VectorAdd(t, ctx, be, func([]byte) error { blobs++; return nil })
	if blobs != 1 || len(res.Outputs) != 1 {
		t.Errorf("blob checked %d times, %d outputs; want 1 and 1", blobs, len(res.Outputs))
	}
	stop()
	if logs.String() == "" {
		t.Error("the plugin's log is empty")
	}
	path, _ := b.Path()
	b.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the built plugin is still there after Remove: %v", err)
	}
}

type unavailableBackend struct{ pluginapi.Backend }

func (unavailableBackend) Describe(context.Context) (*pluginapi.Description, error) {
	return &pluginapi.Description{ID: "gpu", Adapters: []pluginapi.Adapter{{Name: "GPU", Reason: "no driver. Fix: install one"}}}, nil
}

// TestUsableSkipsWithoutADevice: an unavailable adapter 0 skips the test,
// unless the require variable is 1.
func TestUsableSkipsWithoutADevice(t *testing.T) {
	var skipped bool
	t.Run("unavailable", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Usable(t, context.Background(), unavailableBackend{}, "gpu", "KILN_PLUGINTEST_REQUIRE")
	})
	if !skipped {
		t.Error("Usable did not skip a backend without a usable adapter")
	}
}

// TestPrebuiltBinary: a path in the environment variable is used as is and
// never removed.
func TestPrebuiltBinary(t *testing.T) {
	prebuilt := filepath.Join(t.TempDir(), "kiln-backend-x")
	if err := os.WriteFile(prebuilt, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KILN_PLUGINTEST_PREBUILT", prebuilt)
	b := Build("kiln-backend-x", "KILN_PLUGINTEST_PREBUILT")
	if path, err := b.Path(); path != prebuilt || err != nil {
		t.Fatalf("Path = %q, %v; want the prebuilt %q", path, err, prebuilt)
	}
	b.Remove()
	if _, err := os.Stat(prebuilt); err != nil {
		t.Errorf("Remove removed the prebuilt plugin: %v", err)
	}
}
