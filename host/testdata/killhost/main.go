package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kiln-dev/kiln/host"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: killhost PLUGINDIR")
		os.Exit(2)
	}
	h, err := host.Open(context.Background(), host.Options{PluginDir: os.Args[1], NoCache: true, NoAutotune: true, NoPGO: true, NoPinning: true, NoMTLS: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h.Report() // starts every plugin
	fmt.Println("started")
	select {}
}
