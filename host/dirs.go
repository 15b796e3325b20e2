package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kiln-dev/kiln/autotune"
	"github.com/kiln-dev/kiln/cache"
	"github.com/kiln-dev/kiln/internal/xdg"
	"github.com/kiln-dev/kiln/pgo"
)

// PluginDirEnv is the environment variable that names the plugins directory when
// Options.PluginDir is empty.
const PluginDirEnv = "KILN_PLUGIN_DIR"

// PluginPrefix starts the file name of every backend plugin executable.
const PluginPrefix = "kiln-backend-"

// DirSource says where the plugins directory came from.
type DirSource string

// The places the plugins directory is taken from, in the order they are tried.
const (
	DirFromOptions     DirSource = "Options.PluginDir"
	DirFromEnv         DirSource = PluginDirEnv
	DirBesideExe       DirSource = "plugins/ beside the executable"
	DirFromXDGDataHome DirSource = "$XDG_DATA_HOME/kiln/plugins"
)

// environment is what directory resolution reads from the process; tests replace it.
type environment struct {
	xdg        xdg.Env
	executable func() (string, error)
}

func processEnvironment() environment {
	return environment{xdg: xdg.Process(), executable: os.Executable}
}

// resolvePluginDir picks the plugins directory: the option, else KILN_PLUGIN_DIR,
// else a plugins directory beside the executable when one exists, else
// $XDG_DATA_HOME/kiln/plugins.
func resolvePluginDir(option string, env environment) (string, DirSource, error) {
	if option != "" {
		return option, DirFromOptions, nil
	}
	if dir := env.xdg.Getenv(PluginDirEnv); dir != "" {
		return dir, DirFromEnv, nil
	}
	if exe, err := env.executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		dir := filepath.Join(filepath.Dir(exe), "plugins")
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir, DirBesideExe, nil
		}
	}
	data, err := xdg.DataHome(env.xdg)
	if err != nil {
		return "", "", fmt.Errorf("no plugins directory: %w (or set %s to a plugins directory)", err, PluginDirEnv)
	}
	return filepath.Join(data, "kiln", "plugins"), DirFromXDGDataHome, nil
}

// StorePaths are where kiln's persistent stores live: the pipeline cache under
// $XDG_CACHE_HOME and the autotune and PGO tables under $XDG_CONFIG_HOME.
type StorePaths struct {
	PipelineCache string
	Autotune      string
	PGO           string
}

// DefaultStorePaths returns the store paths for this process's environment:
// cache.DefaultRoot, autotune.DefaultPath and pgo.DefaultPath, which Open uses
// for the stores its Options leave nil.
func DefaultStorePaths() (StorePaths, error) {
	root, errCache := cache.DefaultRoot()
	tune, errTune := autotune.DefaultPath()
	routes, errPGO := pgo.DefaultPath()
	if err := errors.Join(errCache, errTune, errPGO); err != nil {
		return StorePaths{}, err
	}
	return StorePaths{PipelineCache: root, Autotune: tune, PGO: routes}, nil
}
