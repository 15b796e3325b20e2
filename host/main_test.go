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
)

// helperDirEnv makes the test binary act as a helper host process: it opens a
// host on the named plugins directory, prints its plugins' pids and waits to be
// killed (see TestKilledHostLeavesNoOrphans).
const helperDirEnv = "KILN_HOST_TEST_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		os.Exit(helperHost(dir))
	}
	// Hosts opened with default stores must not touch the user's cache and
	// config: point the XDG homes at a directory of this test binary's own.
	homes, err := os.MkdirTemp("", "kiln-host-test-xdg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(homes, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(homes, "config"))
	os.Unsetenv("KILN_REMOTE") // never the user's fleet tier
	code := m.Run()
	binaries.cleanup()
	os.RemoveAll(homes)
	os.Exit(code)
}

func helperHost(dir string) int {
	h, err := Open(context.Background(), Options{PluginDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var pids []string
	for _, p := range h.Report().Plugins {
		pids = append(pids, fmt.Sprint(p.Pid))
	}
	fmt.Println("PIDS " + strings.Join(pids, " "))
	select {}
}

// pluginBuilds builds the real plugin executables once per test binary: the CPU
// reference and the fixture (which plays every misbehaving plugin by file name).
type pluginBuilds struct {
	once sync.Once
	dir  string
	err  error            // creating dir failed
	errs map[string]error // by binary: "cpuref", "fixture"
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
		"cpuref":  "github.com/kiln-dev/kiln/plugins/cpuref",
		"fixture": "github.com/kiln-dev/kiln/host/testdata/fixture",
	}
	b.errs = map[string]error{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("go", "build", "-o", filepath.Join(b.dir, name), pkg).CombinedOutput()
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
func pluginDir(t *testing.T, names ...string) string {
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
