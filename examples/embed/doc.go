// Command embed is a minimal application that embeds kiln's host package: it
// opens the host on a plugins directory, lists the backends it found, runs a
// saxpy (y = a*x + y) on the CPU reference backend and prints the result.
//
//	go run ./examples/embed -plugins bin/plugins
package main
