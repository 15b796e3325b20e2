// Command multigpu dispatches on every GPU of a machine at once, as a server
// application would: one goroutine per adapter, each with its own resident
// buffers (host.Backend.Alloc) and a batch of back-to-back vector adds
// (host.Batch, host.Backend.Submit). It prints each adapter's bandwidth alone,
// then all of them together as a share of the sum alone, and verifies every
// adapter's output.
//
// With -kill ID it also shows fault isolation: every adapter of every backend
// in -backend runs vector adds in a loop while the plugin of backend ID is
// SIGKILLed; that backend's adapters report their lost buffers and every other
// adapter finishes its work, verified.
//
//	go run ./examples/multigpu -plugins bin/plugins -backend cuda -mib 1024
//	go run ./examples/multigpu -plugins bin/plugins -backend cuda,vulkan -kill cuda
//
// See docs/design.md, "Several GPUs".
package main
