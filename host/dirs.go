package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	getenv     func(string) string
	executable func() (string, error)
}

func processEnvironment() environment {
	return environment{getenv: os.Getenv, executable: os.Executable}
}

// resolvePluginDir picks the plugins directory: the option, else KILN_PLUGIN_DIR,
// else a plugins directory beside the executable when one exists, else
// $XDG_DATA_HOME/kiln/plugins.
func resolvePluginDir(option string, env environment) (string, DirSource, error) {
	if option != "" {
		return option, DirFromOptions, nil
	}
	if dir := env.getenv(PluginDirEnv); dir != "" {
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
	data, err := xdgDir(env, "XDG_DATA_HOME", filepath.Join(".local", "share"))
	if err != nil {
		return "", "", err
	}
	return filepath.Join(data, "kiln", "plugins"), DirFromXDGDataHome, nil
}

// xdgDir returns the XDG base directory named by variable, or fallback under $HOME.
// The XDG specification ignores relative values.
func xdgDir(env environment, variable, fallback string) (string, error) {
	if dir := env.getenv(variable); filepath.IsAbs(dir) {
		return dir, nil
	}
	home := env.getenv("HOME")
	if home == "" {
		return "", fmt.Errorf("cannot locate $%s: neither it nor $HOME is set. Fix: set %s (or %s to a plugins directory)", variable, variable, PluginDirEnv)
	}
	return filepath.Join(home, fallback), nil
}

// StorePaths are where kiln's persistent stores live: the pipeline cache under
// $XDG_CACHE_HOME and the autotune and PGO tables under $XDG_CONFIG_HOME.
type StorePaths struct {
	PipelineCache string
	Autotune      string
	PGO           string
}

// DefaultStorePaths returns the store paths for this process's environment.
func DefaultStorePaths() (StorePaths, error) {
	return storePaths(processEnvironment())
}

func storePaths(env environment) (StorePaths, error) {
	cache, errCache := xdgDir(env, "XDG_CACHE_HOME", ".cache")
	config, errConfig := xdgDir(env, "XDG_CONFIG_HOME", ".config")
	if err := errors.Join(errCache, errConfig); err != nil {
		return StorePaths{}, err
	}
	return StorePaths{
		PipelineCache: filepath.Join(cache, "kiln", "pipelines"),
		Autotune:      filepath.Join(config, "kiln", "autotune.toml"),
		PGO:           filepath.Join(config, "kiln", "pgo.toml"),
	}, nil
}
