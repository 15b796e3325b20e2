package testbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Env is a test binary's own XDG homes and the Go build cache that was the
// user's before they moved. The zero Env moves nothing and builds with go's
// own cache.
type Env struct {
	homes   string
	goCache string // `go env GOCACHE`, "" when go could not say (go's default)
}

// Isolate asks go for its build cache, then points XDG_CACHE_HOME and
// XDG_CONFIG_HOME at a fresh directory named after prefix and unsets
// KILN_REMOTE (never the user's fleet tier). Without the cache found first,
// every build would start from an empty one under the moved cache home.
func Isolate(prefix string) (*Env, error) {
	e := &Env{}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		e.goCache = string(bytes.TrimSpace(out))
	}
	homes, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	e.homes = homes
	os.Setenv("XDG_CACHE_HOME", filepath.Join(homes, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(homes, "config"))
	os.Unsetenv("KILN_REMOTE")
	return e, nil
}

// Remove removes the homes.
func (e *Env) Remove() {
	if e.homes != "" {
		os.RemoveAll(e.homes)
	}
}

// Build builds the packages of pkgs (import paths, by executable name) into
// dir, all at once, and returns the failures by name, each with go's output.
func (e *Env) Build(dir string, pkgs map[string]string) map[string]error {
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			build := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
			if e.goCache != "" {
				build.Env = append(os.Environ(), "GOCACHE="+e.goCache)
			}
			if out, err := build.CombinedOutput(); err != nil {
				mu.Lock()
				errs[name] = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}
