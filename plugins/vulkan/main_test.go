package main

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/backend"
)

// pluginBinary builds kiln-backend-vulkan once per test binary.
var pluginBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "kiln-vulkan-plugin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kiln-backend-vulkan")
	out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput()
	if err != nil {
		return "", errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	return path, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if path, err := pluginBinary(); err == nil {
		os.RemoveAll(filepath.Dir(path))
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for the plugin client's concurrent log writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startPlugin starts the plugin binary with extra environment variables and returns
// its Backend and its log.
func startPlugin(t *testing.T, env ...string) (pluginapi.Backend, *syncBuffer) {
	t.Helper()
	path, err := pluginBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "host", Output: logs, Level: hclog.Debug})
	client := plugin.NewClient(pluginapi.ClientConfig(cmd, logger))
	t.Cleanup(client.Kill)
	b, err := pluginapi.Dispense(client)
	if err != nil {
		t.Fatalf("start %s: %v\nlog:\n%s", path, err, logs)
	}
	return b, logs
}

// TestPluginProcess starts kiln-backend-vulkan with the validation layer on and runs
// vector_add through it: Describe, Open, Compile, Dispatch, Release, Close. The
// plugin logs validation messages, so its log must not mention any.
func TestPluginProcess(t *testing.T) {
	b, logs := startPlugin(t, backend.ValidationEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "vulkan" || len(d.Adapters) == 0 {
		t.Fatalf("description %+v", d)
	}
	if a := d.Adapters[0]; !a.Available {
		if os.Getenv("KILN_REQUIRE_VULKAN") == "1" {
			t.Fatalf("KILN_REQUIRE_VULKAN=1 but adapter 0 is unavailable: %s", a.Reason)
		}
		t.Skipf("no usable Vulkan device (%s); set KILN_REQUIRE_VULKAN=1 to fail instead", a.Reason)
	}
	if err := b.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.Lookup("vector_add")
	c := k.NewCase(rand.New(rand.NewPCG(1, 2)), 100_000)
	comp, err := b.Compile(ctx, &pluginapi.CompileRequest{Program: k.Program()})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Blob) < 32 {
		t.Errorf("compile returned a %d-byte blob, want pipeline-cache data with its header", len(comp.Blob))
	}
	res, err := b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid, Inputs: c.Inputs, OutputCounts: c.OutputCounts, Uniforms: c.Uniforms})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Check(res.Outputs, k.Reference(c)); err != nil {
		t.Error(err)
	}
	if res.HostNanos <= 0 {
		t.Errorf("host time %d", res.HostNanos)
	}
	if err := b.Release(ctx, comp.Pipeline); err != nil {
		t.Error(err)
	}
	_, err = b.Dispatch(ctx, &pluginapi.DispatchRequest{Pipeline: comp.Pipeline, Grid: c.Grid})
	var rejected *pluginapi.RejectedError
	if !errors.As(err, &rejected) {
		t.Errorf("dispatch of a released pipeline through the wire = %v, want a RejectedError", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Error(err)
	}
	log := logs.String()
	if !strings.Contains(log, "validation=true") {
		t.Errorf("the plugin did not log that it runs with validation:\n%s", log)
	}
	if strings.Contains(log, "validation layer reported") {
		t.Errorf("the plugin logged validation messages:\n%s", log)
	}
}

// TestPluginProcessWithoutLoader starts the plugin pointed at a loader library that
// does not exist: it must start and report why Vulkan is unavailable.
func TestPluginProcessWithoutLoader(t *testing.T) {
	b, _ := startPlugin(t, backend.LoaderEnv+"=libkiln-no-such-vulkan.so.1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := b.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "Vulkan loader libkiln-no-such-vulkan.so.1 not found. Fix: install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers provides a CPU one)"
	if len(d.Adapters) != 1 || d.Adapters[0].Available || d.Adapters[0].Reason != want {
		t.Fatalf("adapters %+v, want one unavailable adapter with reason %q", d.Adapters, want)
	}
	var unavailable *pluginapi.UnavailableError
	if err := b.Open(ctx, 0); !errors.As(err, &unavailable) {
		t.Errorf("Open through the wire = %v, want an UnavailableError", err)
	}
}
