package xdg

import (
	"path/filepath"
	"strings"
	"testing"
)

func envOf(goos string, vars map[string]string) Env {
	return Env{Getenv: func(k string) string { return vars[k] }, GOOS: goos}
}

func TestBaseDirectories(t *testing.T) {
	j := filepath.Join
	cases := []struct {
		name                string
		goos                string
		vars                map[string]string
		cache, config, data string
	}{
		{"xdg variables win", "linux",
			map[string]string{"XDG_CACHE_HOME": "/xc", "XDG_CONFIG_HOME": "/xf", "XDG_DATA_HOME": "/xd", "HOME": "/home/u"},
			"/xc", "/xf", "/xd"},
		{"xdg variables win on macOS too", "darwin",
			map[string]string{"XDG_CACHE_HOME": "/xc", "XDG_CONFIG_HOME": "/xf", "XDG_DATA_HOME": "/xd", "HOME": "/Users/u"},
			"/xc", "/xf", "/xd"},
		{"linux home", "linux", map[string]string{"HOME": "/home/u"},
			j("/home/u", ".cache"), j("/home/u", ".config"), j("/home/u", ".local", "share")},
		{"relative xdg ignored", "linux", map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "rel", "XDG_CONFIG_HOME": "./c", "XDG_DATA_HOME": "d"},
			j("/home/u", ".cache"), j("/home/u", ".config"), j("/home/u", ".local", "share")},
		{"macOS home", "darwin", map[string]string{"HOME": "/Users/u"},
			j("/Users/u", "Library", "Caches"), j("/Users/u", "Library", "Application Support"), j("/Users/u", "Library", "Application Support")},
		{"windows variables before home", "windows",
			map[string]string{"LOCALAPPDATA": `C:\Users\u\AppData\Local`, "APPDATA": `C:\Users\u\AppData\Roaming`, "HOME": "/c/Users/u"},
			`C:\Users\u\AppData\Local`, `C:\Users\u\AppData\Roaming`, `C:\Users\u\AppData\Local`},
		{"windows without its variables uses home", "windows", map[string]string{"HOME": "/home/u"},
			j("/home/u", ".cache"), j("/home/u", ".config"), j("/home/u", ".local", "share")},
		{"no home falls back to windows variables", "linux",
			map[string]string{"LOCALAPPDATA": "/lad", "APPDATA": "/ad"},
			"/lad", "/ad", "/lad"},
	}
	for _, c := range cases {
		env := envOf(c.goos, c.vars)
		for _, got := range []struct {
			what string
			fn   func(Env) (string, error)
			want string
		}{{"cache", CacheHome, c.cache}, {"config", ConfigHome, c.config}, {"data", DataHome, c.data}} {
			dir, err := got.fn(env)
			if err != nil || dir != got.want {
				t.Errorf("%s: %s = %q, %v; want %q", c.name, got.what, dir, err, got.want)
			}
		}
	}
}

func TestNothingSetIsAnErrorWithFix(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		env := envOf(goos, map[string]string{"HOME": "relative/home"})
		for _, fn := range []func(Env) (string, error){CacheHome, ConfigHome, DataHome} {
			dir, err := fn(env)
			if err == nil || !strings.Contains(err.Error(), "Fix:") {
				t.Errorf("%s: got %q, %v; want an error with a Fix", goos, dir, err)
			}
		}
	}
}

func TestWindowsAbsolutePaths(t *testing.T) {
	for v, want := range map[string]bool{`C:\x`: true, `c:/x`: true, `\\srv\share`: true, `C:x`: false, `x\y`: false, "": false} {
		if got := isWindowsAbs(v, "windows"); got != want {
			t.Errorf("isWindowsAbs(%q) = %v, want %v", v, got, want)
		}
	}
	if isWindowsAbs(`C:\x`, "linux") {
		t.Error("a Windows path counted as absolute for Linux")
	}
}

func TestProcessReadsTheProcess(t *testing.T) {
	env := Process()
	if env.Getenv == nil || env.GOOS == "" {
		t.Fatalf("Process() = %+v", env)
	}
}

func TestJoinPutsTheElementsUnderTheBase(t *testing.T) {
	env := envOf("linux", map[string]string{"XDG_CONFIG_HOME": "/cfg"})
	if got, err := Join(ConfigHome, env, "kiln", "pgo.toml"); err != nil || got != filepath.Join("/cfg", "kiln", "pgo.toml") {
		t.Errorf("Join = %q, %v; want /cfg/kiln/pgo.toml", got, err)
	}
	env = envOf("linux", map[string]string{"HOME": "relative/home"})
	if got, err := Join(CacheHome, env, "kiln"); err == nil || got != "" {
		t.Errorf("Join without a base = %q, %v; want the base's error", got, err)
	}
}
