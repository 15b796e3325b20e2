package client

import (
	"testing"

	"github.com/kiln-dev/kiln/pluginapi"
)

// TestPluginSetsAndConfig pins the host's go-plugin configuration: a plugin
// set for each protocol it speaks under pluginapi's name, the plugins'
// handshake, and gRPC only.
func TestPluginSetsAndConfig(t *testing.T) {
	sets := PluginSets()
	for _, v := range []int{pluginapi.ProtocolV1, pluginapi.ProtocolV2} {
		if _, ok := sets[v][pluginapi.PluginName]; !ok {
			t.Fatalf("plugin sets %v: no set for protocol %d with %q", sets, v, pluginapi.PluginName)
		}
	}
	if len(sets) != 2 || pluginapi.ProtocolVersion != pluginapi.ProtocolV2 {
		t.Fatalf("plugin sets %v, want protocols 1 and 2 (newest %d)", sets, pluginapi.ProtocolVersion)
	}
	cfg := Config(nil, nil)
	if len(cfg.AllowedProtocols) != 1 || cfg.AllowedProtocols[0] != "grpc" {
		t.Errorf("allowed protocols %v, want grpc only", cfg.AllowedProtocols)
	}
	if cfg.HandshakeConfig != pluginapi.Handshake() {
		t.Errorf("handshake %+v, want the plugins' %+v", cfg.HandshakeConfig, pluginapi.Handshake())
	}
}
