package pluginapi

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// pluginEnv is the environment of a plugin started by the host with pid hostPID.
func pluginEnv(hostPID string) func(string) string {
	h := Handshake()
	return func(k string) string {
		switch k {
		case h.MagicCookieKey:
			return h.MagicCookieValue
		case wire.HostPIDEnv:
			return hostPID
		}
		return ""
	}
}

func TestWatchHostFromStartNeedsTheCookieAndAPid(t *testing.T) {
	never := func() { t.Error("gone called") }
	ppid := func() int { return 42 }
	if watchHostFromStart(func(string) string { return "" }, ppid, never) {
		t.Error("a process without the magic cookie is no plugin: no watch")
	}
	for _, pid := range []string{"", "x", "0", "-3"} {
		if watchHostFromStart(pluginEnv(pid), ppid, never) {
			t.Errorf("%s=%q started a watch", wire.HostPIDEnv, pid)
		}
	}
}

func TestWatchHostFromStartExitsAtOnceWhenTheHostIsAlreadyGone(t *testing.T) {
	var gone atomic.Int32
	// The host (pid 42) died before the plugin's init ran: the plugin was
	// re-parented to init (pid 1).
	if !watchHostFromStart(pluginEnv("42"), func() int { return 1 }, func() { gone.Add(1) }) {
		t.Fatal("no watch")
	}
	if gone.Load() != 1 {
		t.Fatalf("gone called %d times, want once, before returning", gone.Load())
	}
}

func TestWatchHostFromStartWatchesTheHostPid(t *testing.T) {
	var parent atomic.Int32
	parent.Store(42)
	done := make(chan struct{})
	if !watchHostFromStart(pluginEnv("42"), func() int { return int(parent.Load()) }, func() { close(done) }) {
		t.Fatal("no watch")
	}
	select {
	case <-done:
		t.Fatal("gone called while the host lives")
	case <-time.After(3 * parentPollInterval):
	}
	parent.Store(1)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("gone was not called after the host died")
	}
}
