package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/testbuild"
	"github.com/kiln-dev/kiln/ir"
)

func TestMain(m *testing.M) {
	if arg := os.Getenv(peerDialEnv); arg != "" {
		os.Exit(peerDial(arg)) // TestPluginRefusesUnauthenticatedConnections's other process
	}
	// Hosts opened with default stores must not touch the user's cache and
	// config: point the XDG homes at a directory of this test binary's own.
	var err error
	if env, err = testbuild.Isolate("kiln-host-test-xdg-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := examplePluginDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(PluginDirEnv, dir) // the runnable examples open their host on it
	code := m.Run()
	binaries.cleanup()
	env.Remove()
	os.Exit(code)
}

// pluginBuilds builds the real plugin executables once per test binary: the CPU
// reference and the fixture (which plays every misbehaving plugin by file name),
// the minimal host the orphan test kills, and the bare go-plugin plugin
// BenchmarkStart compares with.
type pluginBuilds struct {
	once sync.Once
	dir  string
	err  error            // creating dir failed
	errs map[string]error // by binary: "cpuref", "fixture", "killhost", "echo"
}

var binaries pluginBuilds

func (b *pluginBuilds) cleanup() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

func (b *pluginBuilds) build() {
	b.dir, b.err = os.MkdirTemp("", "kiln-host-test-plugins-")
	if b.err != nil {
		return
	}
	pkgs := map[string]string{
		"cpuref":   "github.com/kiln-dev/kiln/plugins/cpuref",
		"fixture":  "github.com/kiln-dev/kiln/host/testdata/fixture",
		"killhost": "github.com/kiln-dev/kiln/host/testdata/killhost",
		"echo":     "github.com/kiln-dev/kiln/internal/echoplugin/echo",
	}
	b.errs = env.Build(b.dir, pkgs)
}

// pluginDir returns a fresh plugins directory holding the named plugins: "cpuref"
// or a fixture mode ("fx-panic"), each linked as kiln-backend-<name>.
func pluginDir(t testing.TB, names ...string) string {
	t.Helper()
	binaries.once.Do(binaries.build)
	if binaries.err != nil {
		t.Fatal(binaries.err)
	}
	dir := t.TempDir()
	for _, name := range names {
		binary := "fixture"
		if name == "cpuref" {
			binary = "cpuref"
		}
		if err := binaries.errs[binary]; err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(binaries.dir, binary)
		if err := os.Symlink(target, filepath.Join(dir, PluginPrefix+name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// openHost opens a host on a plugins directory with the named plugins and closes
// it when the test ends.
func openHost(t *testing.T, names ...string) *Host {
	t.Helper()
	h, err := Open(context.Background(), Options{PluginDir: pluginDir(t, names...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// preferred returns the name of the backend h prefers now.
func preferred(t *testing.T, h *Host) string {
	t.Helper()
	b, err := h.AcquirePreferred(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b.Name()
}

// compileOn acquires backend name of h and compiles prog on it, failing the
// test on an error.
func compileOn(t *testing.T, h *Host, name string, prog *ir.Program) (*Backend, *Pipeline) {
	t.Helper()
	b, err := h.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := b.Compile(context.Background(), prog, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b, pl
}

// killHostBinary returns the path of the minimal host built for the orphan test.
func killHostBinary(t *testing.T) string {
	t.Helper()
	binaries.once.Do(binaries.build)
	if binaries.err != nil {
		t.Fatal(binaries.err)
	}
	if err := binaries.errs["killhost"]; err != nil {
		t.Fatal(err)
	}
	return filepath.Join(binaries.dir, "killhost")
}

// env is this test binary's own XDG homes; it builds the plugins.
var env *testbuild.Env
