package xdg

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Env is what the lookups read: environment variables through Getenv (an unset
// variable reads as "") and the operating system as a GOOS value.
type Env struct {
	Getenv func(string) string
	GOOS   string
}

// Process returns the Env of the running process.
func Process() Env { return Env{Getenv: os.Getenv, GOOS: runtime.GOOS} }

// base describes one base directory: its XDG variable, its directory under $HOME
// on macOS and elsewhere, and its Windows variable.
type base struct {
	variable, darwin, unix, windows string
}

var (
	cacheBase  = base{"XDG_CACHE_HOME", "Library/Caches", ".cache", "LOCALAPPDATA"}
	configBase = base{"XDG_CONFIG_HOME", "Library/Application Support", ".config", "APPDATA"}
	dataBase   = base{"XDG_DATA_HOME", "Library/Application Support", ".local/share", "LOCALAPPDATA"}
)

// CacheHome returns $XDG_CACHE_HOME; else, on Windows, %LocalAppData%; else
// ~/Library/Caches on macOS and ~/.cache elsewhere; else %LocalAppData%.
func CacheHome(env Env) (string, error) { return cacheBase.resolve(env) }

// ConfigHome returns $XDG_CONFIG_HOME; else, on Windows, %AppData%; else
// ~/Library/Application Support on macOS and ~/.config elsewhere; else %AppData%.
func ConfigHome(env Env) (string, error) { return configBase.resolve(env) }

// DataHome returns $XDG_DATA_HOME; else, on Windows, %LocalAppData%; else
// ~/Library/Application Support on macOS and ~/.local/share elsewhere; else
// %LocalAppData%.
func DataHome(env Env) (string, error) { return dataBase.resolve(env) }

// Join returns elem joined under the base directory home gives for env, e.g.
// Join(ConfigHome, env, "kiln", "pgo.toml").
func Join(home func(Env) (string, error), env Env, elem ...string) (string, error) {
	dir, err := home(env)
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{dir}, elem...)...), nil
}

// resolve applies the order the functions above document. As the XDG
// specification says, a relative value of an XDG variable is ignored; so is a
// relative HOME or Windows variable, since a store must not move with the
// working directory.
func (b base) resolve(env Env) (string, error) {
	get := func(name string) string {
		if v := env.Getenv(name); filepath.IsAbs(v) || isWindowsAbs(v, env.GOOS) {
			return v
		}
		return ""
	}
	if dir := get(b.variable); dir != "" {
		return dir, nil
	}
	if env.GOOS == "windows" {
		if dir := get(b.windows); dir != "" {
			return dir, nil
		}
	}
	if home := get("HOME"); home != "" {
		if env.GOOS == "darwin" || env.GOOS == "ios" {
			return filepath.Join(home, filepath.FromSlash(b.darwin)), nil
		}
		return filepath.Join(home, filepath.FromSlash(b.unix)), nil
	}
	if dir := get(b.windows); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("cannot locate the %s directory: $%s, $HOME and %%%s%% are all unset or relative. Fix: set %s or HOME to an absolute path", b.variable, b.variable, b.windows, b.variable)
}

// isWindowsAbs reports whether v is an absolute Windows path ("C:\x", `\\server\x`)
// when the Env is for Windows, whatever the OS the code runs on.
func isWindowsAbs(v, goos string) bool {
	if goos != "windows" {
		return false
	}
	if len(v) >= 3 && v[1] == ':' && (v[2] == '\\' || v[2] == '/') {
		c := v[0] | 0x20
		return c >= 'a' && c <= 'z'
	}
	return len(v) >= 2 && (v[:2] == `\\` || v[:2] == "//")
}
