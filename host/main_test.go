package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

func TestMain(m *testing.M) {
	if arg := os.Getenv(peerDialEnv); arg != "" {
		os.Exit(peerDial(arg)) // TestPluginRefusesUnauthenticatedConnections's other process
	}
	// Hosts opened with default stores must not touch the user's cache and
	// config: point the XDG homes at a directory of this test binary's own.
	// The go builds below keep using the user's build cache, not one under the
	// XDG cache home pointed away next.
	goCache = userGoCache()
	homes, err := os.MkdirTemp("", "kiln-host-test-xdg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(homes, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(homes, "config"))
	os.Unsetenv("KILN_REMOTE") // never the user's fleet tier
	dir, err := examplePluginDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(PluginDirEnv, dir) // the runnable examples open their host on it
	code := m.Run()
	binaries.cleanup()
	os.RemoveAll(homes)
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
	b.errs = map[string]error{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			build := exec.Command("go", "build", "-o", filepath.Join(b.dir, name), pkg)
			build.Env = append(os.Environ(), "GOCACHE="+goCache)
			out, err := build.CombinedOutput()
			if err != nil {
				mu.Lock()
				b.errs[name] = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
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

// goCache is the Go build cache the test binary found before TestMain moved
// the XDG homes: without it, every plugin build would start from an empty cache.
var goCache string

// userGoCache returns `go env GOCACHE` ("" when go cannot say, leaving the default).
func userGoCache() string {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
