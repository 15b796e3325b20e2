// Command echo is internal/echoplugin's bare go-plugin plugin as a binary of
// its own, the smallest a go-plugin gRPC plugin gets: BenchmarkStart (package
// host) builds it as the yardstick for a kiln plugin's start.
package main

import (
	"fmt"
	"os"

	"github.com/kiln-dev/kiln/internal/echoplugin"
)

func main() {
	echoplugin.ServeIfAsked()
	fmt.Fprintln(os.Stderr, "echo: a bare go-plugin plugin for kiln's start benchmarks; started by hand it does nothing")
	os.Exit(1)
}
