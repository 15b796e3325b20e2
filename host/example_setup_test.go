package host

import (
	"os"
	"path/filepath"
)

// examplePluginDir builds the plugins (once per test binary) and returns a
// directory holding the CPU reference alone, for the runnable examples, which
// find it through $KILN_PLUGIN_DIR.
func examplePluginDir() (string, error) {
	binaries.once.Do(binaries.build)
	if binaries.err != nil {
		return "", binaries.err
	}
	if err := binaries.errs["cpuref"]; err != nil {
		return "", err
	}
	dir := filepath.Join(binaries.dir, "examples")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	link := filepath.Join(dir, PluginPrefix+"cpu-ref")
	if _, err := os.Lstat(link); err == nil {
		return dir, nil
	}
	return dir, os.Symlink(filepath.Join(binaries.dir, "cpuref"), link)
}
