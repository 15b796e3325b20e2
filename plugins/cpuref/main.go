package main

import (
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/cpuref/backend"
)

func main() { pluginapi.Serve(backend.New()) }
