package pluginapi

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestWatchParentCallsGoneWhenParentChanges(t *testing.T) {
	var calls atomic.Int32
	getppid := func() int {
		if calls.Add(1) < 3 {
			return 100
		}
		return 1
	}
	done := make(chan struct{})
	go watchParent(100, time.Millisecond, getppid, func() { close(done) })
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("gone was not called after the parent id changed")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("polled %d times, want 3 (gone on the first change)", n)
	}
}

func TestLogLevel(t *testing.T) {
	for name, want := range map[string]hclog.Level{"": hclog.Info, "bogus": hclog.Info, "debug": hclog.Debug, "TRACE": hclog.Trace, "error": hclog.Error} {
		if got := logLevel(name); got != want {
			t.Errorf("logLevel(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestHandshakeAndPluginSets(t *testing.T) {
	h := Handshake()
	if h.ProtocolVersion != ProtocolV1 || h.MagicCookieKey == "" || h.MagicCookieValue == "" {
		t.Fatalf("handshake %+v", h)
	}
	sets := pluginSets(&fakeBackend{}, nil)
	for _, v := range []int{ProtocolV1, ProtocolV2} {
		if _, ok := sets[v][PluginName]; !ok {
			t.Fatalf("plugin sets %v: no set for protocol %d with %q", sets, v, PluginName)
		}
	}
	if len(sets) != 2 || ProtocolVersion != ProtocolV2 {
		t.Fatalf("plugin sets %v, want protocols 1 and 2 (newest %d)", sets, ProtocolVersion)
	}
	if only := pluginSets(&fakeBackend{}, []int{ProtocolV1}); len(only) != 1 || only[ProtocolV1] == nil {
		t.Errorf("plugin sets of protocol 1 alone: %v", only)
	}
}
