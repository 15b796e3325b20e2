// Command killhost is a minimal kiln host for the host package's orphan test:
// it opens a host on the plugins directory named by its argument, starts every
// plugin, prints "started" and waits to be killed. It runs without mTLS: a
// plugin's mTLS log line on a dead host's stderr pipe would kill it by SIGPIPE
// and hide whether the orphan guards work.
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
