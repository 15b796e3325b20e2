//go:build unix

package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wrapperPlugin writes a plugin that is a shell script running sleep without
// exec: the script is the plugin's process, and its child keeps the plugin's
// stdout and stderr open. The script records its child's pid in the returned
// file.
func wrapperPlugin(t *testing.T, dir, name string) (pidFile string) {
	t.Helper()
	pidFile = filepath.Join(t.TempDir(), "sleep.pid")
	script := "#!/bin/sh\nsleep 60 &\necho $! > " + pidFile + "\nwait\n"
	if err := os.WriteFile(filepath.Join(dir, PluginPrefix+name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return pidFile
}

// TestHungWrapperScriptCostsOnlyTheStartTimeout pins issue 22 item 5: a
// wrapper script whose child keeps its pipes open is stopped with its child at
// the start timeout, the host waits no longer, and the failure is remembered
// for the host's lifetime: asking for it by name again returns the same
// StartError at once, without a second launch.
func TestHungWrapperScriptCostsOnlyTheStartTimeout(t *testing.T) {
	const startTimeout = time.Second
	dir := pluginDir(t, "cpuref")
	pidFile := wrapperPlugin(t, dir, "wrap")
	h, err := Open(context.Background(), Options{PluginDir: dir, StartTimeout: startTimeout, NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	began := time.Now()
	rows, err := h.Survey(context.Background())
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	// The start timeout, the kill and the pipes' grace, with slack for a loaded machine.
	if limit := startTimeout + 8*time.Second; took > limit {
		t.Fatalf("Survey took %v with a hung wrapper script, want at most %v", took, limit)
	}
	t.Logf("Survey with a hung wrapper script took %v (start timeout %v)", took.Round(time.Millisecond), startTimeout)
	var se *StartError
	failed := false
	for _, r := range rows {
		if r.ID == "wrap" {
			failed = r.Status == StatusFailed && strings.Contains(r.Reason, "no handshake within the start timeout")
		}
	}
	if !failed {
		t.Fatalf("survey rows %+v: want wrap failed, hung before its handshake", rows)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the wrapper script's sleep (pid %d) survived its plugin", pid)
		}
	}

	if err := os.Remove(pidFile); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	_, err = h.Acquire(context.Background(), "wrap")
	if !errors.As(err, &se) || se.Stage != StartHung {
		t.Fatalf("Acquire(wrap): %v, want the remembered StartError", err)
	}
	if took := time.Since(began); took > startTimeout/2 {
		t.Fatalf("Acquire of a plugin that failed to start took %v, want the remembered error at once", took)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed plugin was launched again (%v)", err)
	}
}

// TestDetachedChildDoesNotHoldTheHost: a wrapper script whose child left the
// plugin's process group (setsid) keeps the plugin's pipes open where the
// host cannot kill it; the host still gives up on the plugin within its start
// timeout and a grace, instead of waiting for the child.
func TestDetachedChildDoesNotHoldTheHost(t *testing.T) {
	const startTimeout = time.Second
	dir := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	script := "#!/bin/sh\nsetsid sleep 60 &\necho $! > " + pidFile + "\nwait\n"
	if err := os.WriteFile(filepath.Join(dir, PluginPrefix+"detach"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if data, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	h, err := Open(context.Background(), Options{PluginDir: dir, StartTimeout: startTimeout, NoCache: true, NoAutotune: true, NoPGO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	began := time.Now()
	_, err = h.Acquire(context.Background(), "detach")
	took := time.Since(began)
	var se *StartError
	if !errors.As(err, &se) || se.Stage != StartHung {
		t.Fatalf("Acquire: %v, want a StartError for a hang before the handshake", err)
	}
	if limit := startTimeout + pipeGrace + 8*time.Second; took > limit {
		t.Fatalf("Acquire took %v, want at most %v", took, limit)
	}
	t.Logf("Acquire with a detached child holding the pipes took %v (start timeout %v)", took.Round(time.Millisecond), startTimeout)
}
