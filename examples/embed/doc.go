// Command embed is a minimal application that embeds kiln's host package: it
// opens the host on a plugins directory, lists the backends it found, runs a
// saxpy (y = a*x + y) on the CPU reference backend with its inputs and output
// by buffer name as []float32 (host.Input, host.OutputAs) and prints the
// result, then runs ten dependent saxpy dispatches in one batch over buffers
// that stay in the plugin (host.Backend.Alloc, host.Upload, host.Batch,
// host.Backend.Submit, host.Download).
//
//	go run ./examples/embed -plugins bin/plugins
package main
