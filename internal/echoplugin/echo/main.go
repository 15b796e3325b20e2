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
