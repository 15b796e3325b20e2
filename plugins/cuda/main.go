package main

import (
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cuda/backend"
)

func main() {
	cfg := backend.ConfigFromEnv()
	level := hclog.LevelFromString(os.Getenv(pluginapi.LogLevelEnv))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: backend.ID, Level: level, Output: os.Stderr, JSONFormat: true})
	b := backend.New(cfg)
	// cuInit and the device attributes, while the host connects.
	b.Start()
	pluginapi.Serve(b)
}
