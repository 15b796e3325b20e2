package main

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/backend"
)

// exitDeviceLost is the exit status after a lost device; lostReplyGrace is how
// long the plugin keeps serving first, so that the call that saw the loss can
// answer with its DeviceError.
const (
	exitDeviceLost = 3
	lostReplyGrace = 250 * time.Millisecond
)

func main() {
	cfg := backend.ConfigFromEnv()
	level := hclog.LevelFromString(os.Getenv(pluginapi.LogLevelEnv))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	log := hclog.New(&hclog.LoggerOptions{Name: backend.ID, Level: level, Output: os.Stderr, JSONFormat: true})
	cfg.Logger = log
	// A lost device takes its pipelines and buffers with it: exit, and the host
	// relaunches the plugin on its next use and compiles again.
	cfg.OnDeviceLost = func(err error) {
		log.Error("Vulkan device lost; exiting so that the host relaunches the plugin", "error", err)
		time.Sleep(lostReplyGrace)
		os.Exit(exitDeviceLost)
	}
	be := backend.New(cfg)
	// Start Vulkan while the plugin handshake runs: the first Describe then
	// waits only for what is left of it.
	go be.Prestart()
	pluginapi.Serve(be)
}
